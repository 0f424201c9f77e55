"""Two-label readers on the pair reader's architecture, read at the pair level.

The pair reader (``caap/conflict_graph/_pair_reader.py``) is the packaged MiniLM read as a
cross-encoder; its trainer takes any label set. This script trains one of three readers from
the blind corpus and reads it on splits it never saw, next to what the shipped code reads:

- ``query``: a probe's query against each tagged user turn of its scenario, relevant (old and
  update turns; core and background memories of TANGLE instances) or not (distractors).
  Reported per split: the area under the curve of update turns against distractor turns, and
  the probes whose best update turn scores above every distractor, next to plain cosine.
- ``reach``: an (old, update) user-turn pair, direct (the update states a new value of the
  old state) or propagated (a change elsewhere that bears on it), by the scenario's kind.
  Reported per split: the area under the curve against the kind, next to the learned layer's
  reading (invalidates minus supersedes and temporal change).
- ``agree``: two accounts labelled agreeing (same) or as a source contradiction (differ), from
  the labelled pairs of a split (its ``tangle/`` folder's when it has one, for reading).
  Reported per split: the area under the curve of agreeing against contradicting pairs, next
  to the learned layer's reading (agree minus source contradiction).

None of them is used by caap; the figures and the keep rules they were checked against are
in ``benchmark/PREREG.md`` ("QR", "RC", "AR") and ``docs/benchmark.md``. Training runs on the
CPU (on 2 cores about 11 minutes for ``query``, under 2 for ``reach``, about 4 for ``agree`` at
2 epochs) or ``--device cuda``.

    PYTHONPATH=$PWD python benchmark/two_label_readers.py query --out runs/qr.npz \\
        --train train --train train2 --train stale2 --train stale3 --read stale4 --read dev2
    PYTHONPATH=$PWD python benchmark/two_label_readers.py reach --out runs/rc.npz \\
        --train train --train stale2 --train stale3 --read stale4 --read dev2 --read dev
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
from _labelled import auc as _auc

os.environ.setdefault("HF_HUB_OFFLINE", "1")

BLIND = Path(__file__).resolve().parents[1] / "caap" / "benchmark" / "data" / "blind"
QUERY_LABELS = ("relevant", "not_relevant")
REACH_LABELS = ("direct", "propagated")
AGREE_LABELS = ("same", "differ")


def _user_turns(sc: object, tags: tuple[str, ...]) -> list[tuple[str, str]]:
    """(tag, what the turn states) for the scenario's user turns with one of ``tags``, in the
    order they were said."""
    from caap.policy._speech import stated_part

    sessions = sorted(sc.sessions, key=lambda s: (s.date, s.id))  # type: ignore[attr-defined]
    return [
        (t.tag, stated_part(t.content) or t.content)
        for s in sessions
        for t in s.turns
        if t.role == "user" and t.tag in tags
    ]


def _scenarios(split: str) -> list[object]:
    from caap.benchmark.stale import load_stale_scenarios

    folder = BLIND / split / "stale"
    return list(load_stale_scenarios(folder)) if folder.exists() else []


def query_probes(split: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """Per stale probe of ``split``: its query and its scenario's old, update and distractor
    user turns (tag, text)."""
    out = []
    for sc in _scenarios(split):
        turns = _user_turns(sc, ("old", "update", "distractor"))
        out += [(p.query, turns) for p in sc.probes]  # type: ignore[attr-defined]
    return out


def query_pairs(split: str) -> list[tuple[str, str, str]]:
    """``(query, text, label)`` training pairs of ``split``: its stale probes against their
    turns and its TANGLE queries against their memories (see the module doc)."""
    from caap.benchmark.dataset import load_dataset

    pairs = [
        (q, text, QUERY_LABELS[tag == "distractor"])
        for q, turns in query_probes(split)
        for tag, text in turns
    ]
    tangle = BLIND / split / "tangle"
    if tangle.exists():
        pairs += [
            (inst.query, m.text, QUERY_LABELS[m.role == "distractor"])
            for inst in load_dataset(tangle)
            for m in inst.memories
        ]
    return list(dict.fromkeys(pairs))


def reach_pairs(split: str) -> list[tuple[str, str, str]]:
    """``(old, update, kind)`` pairs of ``split``'s stale scenarios, each old turn against
    every later update turn."""
    out = []
    for sc in _scenarios(split):
        said = _user_turns(sc, ("old", "update"))
        kind = sc.kind  # type: ignore[attr-defined]
        for i, (first, a) in enumerate(said):
            later = said[i + 1 :]
            out += [(a, b, kind) for then, b in later if (first, then) == ("old", "update")]
    return list(dict.fromkeys(out))


def agree_pairs(split: str, *, tangle_only: bool = False) -> list[tuple[str, str, str]]:
    """``(a, b, same|differ)`` for the pairs of ``split`` labelled agree or
    source_contradiction (all of the split's labelled pairs, or only its ``tangle/`` folder's
    when ``tangle_only`` and it has one)."""
    from caap.conflict_graph._relations_train import load_corpus

    folder = BLIND / split
    if tangle_only and (folder / "tangle").exists():
        folder = folder / "tangle"
    label = {"agree": "same", "source_contradiction": "differ"}
    pairs = [
        (e.a, e.b, label[e.relation]) for e in load_corpus(folder).pairs if e.relation in label
    ]
    return list(dict.fromkeys(pairs))


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve (``benchmark/_labelled.py``), refusing a set with one class
    only rather than reporting nan."""
    if not positive.any() or positive.all():
        raise ValueError("both classes are needed")
    return _auc(scores, positive)


def read_query(reader: object, split: str) -> str:
    from caap._embeddings import get_embedder

    emb = get_embedder()
    scores: list[float] = []
    cosine: list[float] = []
    update: list[bool] = []
    best = best_cos = probes = 0
    for query, turns in query_probes(split):
        tags = np.array([t for t, _ in turns])
        texts = [text for _, text in turns]
        rel = reader.probabilities([(query, t) for t in texts])[:, 0]  # type: ignore[attr-defined]
        cos = emb.encode(texts) @ emb.encode([query])[0]
        keep = np.isin(tags, ("update", "distractor"))
        scores += list(rel[keep])
        cosine += list(cos[keep])
        update += list(tags[keep] == "update")
        if (tags == "update").any() and (tags == "distractor").any():
            probes += 1
            best += bool(rel[tags == "update"].max() > rel[tags == "distractor"].max())
            best_cos += bool(cos[tags == "update"].max() > cos[tags == "distractor"].max())
    y = np.array(update)
    return (
        f"{split}: AUC update vs distractor turns {auc(np.array(scores), y):.3f} (cosine "
        f"{auc(np.array(cosine), y):.3f}); best update above every distractor {best} "
        f"(cosine {best_cos}) of {probes} probes"
    )


def read_reach(reader: object, split: str) -> str:
    from caap.conflict_graph.relations import MemoryView, get_relation_layer

    pairs = reach_pairs(split)
    y = np.array([k == "propagated" for *_, k in pairs])
    p = reader.probabilities([(a, b) for a, b, _ in pairs])[:, 1]  # type: ignore[attr-defined]
    layer = get_relation_layer("learned")
    views = [(MemoryView("a", a, order=1.0), MemoryView("b", b, order=2.0)) for a, b, _ in pairs]
    v = [x.probs for x in layer.relate(views)]
    base = np.array([x["invalidates"] - x["supersedes"] - x["temporal_change"] for x in v])
    return (
        f"{split}: {len(pairs)} pairs, {int(y.sum())} propagated; AUC {auc(p, y):.3f} (the "
        f"learned layer {auc(base, y):.3f}); read propagated at 0.5: {int((p[y] > 0.5).sum())} "
        f"of {int(y.sum())} propagated, {int((p[~y] > 0.5).sum())} of {int((~y).sum())} direct"
    )


def read_agree(reader: object, split: str) -> str:
    from caap.conflict_graph.relations import MemoryView, get_relation_layer

    pairs = agree_pairs(split, tangle_only=True)
    y = np.array([k == "same" for *_, k in pairs])
    p = reader.probabilities([(a, b) for a, b, _ in pairs])[:, 0]  # type: ignore[attr-defined]
    layer = get_relation_layer("learned")
    views = [(MemoryView("a", a), MemoryView("b", b)) for a, b, _ in pairs]
    base = np.array(
        [v.probs["agree"] - v.probs["source_contradiction"] for v in layer.relate(views)]
    )
    return (
        f"{split}: {int(y.sum())} agreeing, {int((~y).sum())} contradicting pairs; AUC "
        f"{auc(p, y):.3f} (the learned layer {auc(base, y):.3f}); read as the same at 0.5: "
        f"{int((p[y] > 0.5).sum())} of the agreeing, {int((p[~y] > 0.5).sum())} of the others"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reader", choices=("query", "reach", "agree"))
    ap.add_argument("--out", required=True, help="weights to write (or read with --no-train)")
    ap.add_argument("--train", action="append", default=[], help="a blind split to train on")
    ap.add_argument("--read", action="append", default=[], help="a blind split to read")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--no-train", action="store_true", help="read the weights at --out")
    args = ap.parse_args()
    from caap.conflict_graph._pair_reader import PairReader, train_pair_reader

    labels = {"query": QUERY_LABELS, "reach": REACH_LABELS, "agree": AGREE_LABELS}[args.reader]
    build = {"query": query_pairs, "reach": reach_pairs, "agree": agree_pairs}[args.reader]
    read = {"query": read_query, "reach": read_reach, "agree": read_agree}[args.reader]
    if not args.no_train:
        if not args.train:
            ap.error("--train is needed unless --no-train")
        train = list(dict.fromkeys(p for s in args.train for p in build(s)))
        print(f"training on {len(train)} pairs of {', '.join(args.train)}", flush=True)
        train_pair_reader(
            train,
            args.out,
            epochs=args.epochs,
            seed=args.seed,
            labels=labels,
            device=args.device,
            progress=lambda m: print(m, flush=True),
        )
    reader = PairReader(args.out, labels=labels)
    for split in args.read:
        print(read(reader, split))


if __name__ == "__main__":
    main()
