"""Pair readers trained over a grid of data, epochs and seeds, each read alone on pair sets.

Each reader is trained with caap's own trainer (``caap relations train-reader``'s function,
``--device`` included) and then read on its own, without the learned layer around it: its most
likely relation for every labelled pair of each ``--eval`` set, scored by macro F1 over the
relations present and the two confusions that decide actions (agreeing pairs read as a
conflict, conflicting pairs read as agreeing). Four beer notes written out with their
conditions (the suite's ``DRINKING`` example) are read too: how many of their six pairs read
as agreeing. It chooses nothing; the table is for choosing what to train and measure whole.

    B=caap/benchmark/data/blind
    PYTHONPATH=$PWD python benchmark/reader_sweep.py --out runs/sweep --device cuda \\
        --mix shipped=$B/pairs,$B/extra,$B/train,$B/pairs_changes/train \\
        --mix values=$B/pairs,$B/extra,$B/train,$B/pairs_changes/train,$B/pairs_values \\
        --epochs 4 6 --seeds 0 1 --eval dev=$B/dev/tangle --eval train2=$B/train2

Each reader's weights and card (with a ``reader_alone`` entry per eval set) go under ``--out``
as ``MIX_eEPOCHS_sSEED.npz`` / ``.json``; a reader whose card is already there is read, not
trained again, so several processes (one per mix, say) can share a GPU and one final run
prints the whole table.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path
from typing import Any

from caap.conflict_graph._pair_reader import PairReader
from caap.conflict_graph._relations_train import labelled_pairs, score_pair_readings, train_reader
from caap.conflict_graph.relations import RELATIONS
from tests.scenarios import DRINKING


def read_alone(reader: PairReader, path: str) -> dict[str, Any]:
    """The reader's most likely relation on every labelled pair under ``path``, scored as
    ``caap relations eval`` scores a layer's verdicts."""
    pairs = labelled_pairs([path])
    if not pairs:
        raise SystemExit(f"--eval {path}: no labelled pairs")
    probs = reader.probabilities([(e.a, e.b) for e in pairs])
    return score_pair_readings(
        [e.relation for e in pairs], [RELATIONS[i] for i in probs.argmax(axis=1)]
    )


def _named(values: list[str], flag: str) -> dict[str, str]:
    out = {}
    for v in values:
        name, sep, rest = v.partition("=")
        if not sep or not name or not rest:
            raise SystemExit(f"{flag} {v!r}: expected NAME=PATH")
        out[name] = rest
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for the readers and their cards")
    ap.add_argument("--mix", action="append", required=True, help="NAME=PATH[,PATH...] (repeats)")
    ap.add_argument("--epochs", type=int, nargs="+", default=[4])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--eval", action="append", required=True, help="NAME=PATH (repeats)")
    ap.add_argument("--device", default="cpu", help="cpu or a CUDA device (cuda, cuda:1)")
    args = ap.parse_args()
    mixes = {k: v.split(",") for k, v in _named(args.mix, "--mix").items()}
    evals = _named(args.eval, "--eval")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for (mix, paths), epochs, seed in itertools.product(mixes.items(), args.epochs, args.seeds):
        npz = out / f"{mix}_e{epochs}_s{seed}.npz"
        card_path = npz.with_suffix(".json")
        card = json.loads(card_path.read_text()) if card_path.exists() else {}
        if "reader_alone" not in card:
            print(f"training {npz.name} on {args.device}", flush=True)
            card = train_reader(paths, npz, epochs=epochs, seed=seed, device=args.device)
            reader = PairReader(npz)
            card["reader_alone"] = {name: read_alone(reader, p) for name, p in evals.items()}
            beers = reader.probabilities(list(itertools.combinations(DRINKING, 2)))
            card["beer_pairs_read_as_agree"] = int(
                (beers.argmax(axis=1) == RELATIONS.index("agree")).sum()
            )
            card_path.write_text(json.dumps(card, indent=2, sort_keys=True) + "\n")
        rows.append((mix, epochs, seed, card))
    head = ["mix", "epochs", "seed", "pairs"]
    for name in evals:
        head += [f"{name} F1", f"{name} agree→conflict", f"{name} conflict→agree"]
    print("| " + " | ".join([*head, "beer pairs read as agreeing"]) + " |")
    print("|" + "---|" * (len(head) + 1))
    for mix, epochs, seed, card in rows:
        cells = [mix, str(epochs), str(seed), str(card["train_pairs"])]
        for name in evals:
            r = card["reader_alone"].get(name)
            if r is None:
                cells += ["–"] * 3
                continue
            a, c = r["agree_read_as_conflict"], r["conflict_read_as_agree"]
            cells += [f"{r['macro_f1']:.3f}", f"{a[0]} of {a[1]}", f"{c[0]} of {c[1]}"]
        print("| " + " | ".join([*cells, f"{card['beer_pairs_read_as_agree']} of 6"]) + " |")


if __name__ == "__main__":
    main()
