"""How a relation layer reads the tagged turns of stale conversations, pair by pair.

The blind stale scenarios tag the user's turns: ``old`` (the earlier state, often said more
than once), ``update`` (the change) and ``distractor``. Every pair of tagged turns in the order
they were said is read as the policy's successor reading reads it
(:func:`caap.policy._analysis._successor`: each turn as what it states, the earlier one first),
and counted as read as replacing when the share of supersedes, invalidates and temporal change
is larger than any other relation. Three kinds of pair: an old turn then an update (should read
as replacing), two old turns (should not), and an old or update turn with a distractor, in either
order (should not). Printed per split and style: the counts read as replacing, and the area under
the curve of the replacing share (updates against distractor pairs). ``--reader`` reads with a
pair reader alone (its own probabilities), for example one fitted with ``caap relations
train-reader`` on change pairs only.

    PYTHONPATH=$PWD python benchmark/stale_turn_pairs.py [--split stale3 --split dev] \\
        [--weights W.npz] [--reader R.npz]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np
from _labelled import auc

from caap.benchmark.stale import load_stale_scenarios
from caap.conflict_graph.relations import RELATIONS, MemoryView, get_relation_layer
from caap.policy._analysis import _REPLACING
from caap.policy._speech import stated_part

_KINDS = ("update", "old again", "distractor")


def _pairs(split: str) -> list[tuple[str, str, str, str]]:
    """(style, kind, earlier text, later text) for every pair of tagged user turns."""
    out = []
    for sc in load_stale_scenarios(f"caap/benchmark/data/blind/{split}/stale"):
        said = [
            (t.tag, stated_part(t.content) or t.content)
            for s in sorted(sc.sessions, key=lambda s: (s.date, s.id))
            for t in s.turns
            if t.role == "user" and t.tag in ("old", "update", "distractor")
        ]
        for i, (first, a) in enumerate(said):
            for then, b in said[i + 1 :]:
                if (first, then) == ("old", "update"):
                    kind = "update"
                elif (first, then) == ("old", "old"):
                    kind = "old again"
                elif "distractor" in (first, then) and first != then:
                    kind = "distractor"
                else:
                    continue
                out.append((sc.style, kind, a, b))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", action="append", help="a blind split with stale/ (repeats)")
    ap.add_argument("--weights", help="learned-layer weights (.npz; default: the shipped ones)")
    ap.add_argument("--reader", help="read with this pair reader (.npz) alone")
    args = ap.parse_args()
    if args.reader:
        from caap.conflict_graph._pair_reader import PairReader

        reader = PairReader(args.reader)

        def read(pairs: list[tuple[str, str]]) -> np.ndarray:
            return reader.probabilities(pairs)

        what = f"pair reader {args.reader}"
    else:
        layer = get_relation_layer("learned", **({"weights": args.weights} if args.weights else {}))

        def read(pairs: list[tuple[str, str]]) -> np.ndarray:
            views = [
                (MemoryView("a", a, order=1.0), MemoryView("b", b, order=2.0)) for a, b in pairs
            ]
            return np.array([[v.probs[r] for r in RELATIONS] for v in layer.relate(views)])

        what = "learned layer" + (f" ({args.weights})" if args.weights else "")
    replacing = [RELATIONS.index(r) for r in _REPLACING]
    others = [i for i in range(len(RELATIONS)) if i not in replacing]
    print(f"{what}: tagged turn pairs read as replacing (share > any other relation)")
    print(f"{'split':8} {'style':10} " + " ".join(f"{k:>14}" for k in _KINDS) + "    AUC")
    for split in args.split or ["stale3", "dev"]:
        rows = _pairs(split)
        probs = read([(a, b) for *_, a, b in rows])
        share = probs[:, replacing].sum(axis=1)
        read_as = share > probs[:, others].max(axis=1)
        by: dict[str, list[int]] = defaultdict(list)
        for k, (style, *_) in enumerate(rows):
            by[style].append(k)
            by["all"].append(k)
        for style in sorted(by, key=lambda s: (s == "all", s)):
            idx = np.array(by[style])
            kinds = np.array([rows[k][1] for k in idx])
            cells = []
            for kind in _KINDS:
                pick = idx[kinds == kind]
                cells.append(f"{int(read_as[pick].sum()):>6} / {len(pick):<5}")
            scored = idx[np.isin(kinds, ("update", "distractor"))]
            area = auc(share[scored], kinds[np.isin(kinds, ("update", "distractor"))] == "update")
            print(f"{split:8} {style:10} " + " ".join(f"{c:>14}" for c in cells) + f"  {area:.3f}")


if __name__ == "__main__":
    main()
