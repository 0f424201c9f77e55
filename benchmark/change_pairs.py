"""Which earlier memories a life change puts out of date, read by a relation layer.

``pairs_changes/`` (the blind corpus) holds, per person, one life change against earlier
memories it rules out (``invalidates``) or replaces (``supersedes``) and others it does not
touch (``unrelated``, ``agree``). Each pair is read with the change as the later memory. The
score is P(supersedes) + P(invalidates); "out of date" is what the graph reads at its threshold
(the verdict is one of the two with confidence at least ``GraphConfig.relation_min``, the
condition for a stale edge). Printed: the area under the curve (changed against untouched),
overall and per style, and the counts read as out of date. ``--reader`` measures the pair
reader alone (its probabilities, argmax).

    PYTHONPATH=$PWD python benchmark/change_pairs.py \\
        [--data caap/benchmark/data/blind/pairs_changes/test] [--relations learned|rules] \\
        [--weights W.npz] [--reader [R.npz]]
"""

from __future__ import annotations

import argparse

import numpy as np
from _labelled import auc, jsonl_rows

from caap.conflict_graph.relations import RELATIONS, MemoryView, get_relation_layer
from caap.conflict_graph.rules import GraphConfig

_OUT_OF_DATE = ("supersedes", "invalidates")
_STYLES = ("dated", "narrative", "implicit", "chatty")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", action="append", help="labelled pair files or folders (repeats)")
    ap.add_argument("--relations", default="learned", choices=("rules", "learned"))
    ap.add_argument("--weights", help="learned-layer weights (.npz; default: the shipped ones)")
    ap.add_argument(
        "--reader", nargs="?", const="", help="the pair reader alone (optionally its .npz)"
    )
    args = ap.parse_args()
    default = ["caap/benchmark/data/blind/pairs_changes/test"]
    rows = jsonl_rows(args.data or default, "labelled pairs")
    changed = np.array([r["relation"] in _OUT_OF_DATE for r in rows])
    if args.reader is not None:
        from caap.conflict_graph._pair_reader import PairReader

        probs = PairReader(args.reader or None).probabilities([(r["a"], r["b"]) for r in rows])
        score = probs[:, [RELATIONS.index(k) for k in _OUT_OF_DATE]].sum(axis=1)
        read = np.isin(probs.argmax(axis=1), [RELATIONS.index(k) for k in _OUT_OF_DATE])
        what = f"pair reader {args.reader or '(shipped)'}"
    else:
        kwargs = {"weights": args.weights} if args.weights else {}
        layer = get_relation_layer(args.relations, **kwargs)
        verdicts = layer.relate(
            [(MemoryView("a", r["a"], order=2.0), MemoryView("b", r["b"], order=1.0)) for r in rows]
        )
        minimum = GraphConfig().relation_min
        score = np.array([sum(v.probs.get(k, 0.0) for k in _OUT_OF_DATE) for v in verdicts])
        read = np.array([v.relation in _OUT_OF_DATE and v.confidence >= minimum for v in verdicts])
        what = f"relations={args.relations}" + (f" weights={args.weights}" if args.weights else "")
    styles = np.array([r.get("style", "") for r in rows])
    print(f"{what}: {len(rows)} pairs, {int(changed.sum())} changed")
    print(
        f"area under the curve: all {auc(score, changed):.3f}; "
        + "; ".join(f"{s} {auc(score[styles == s], changed[styles == s]):.3f}" for s in _STYLES)
    )
    print(
        f"read as out of date: changed {int(read[changed].sum())}/{int(changed.sum())}, "
        f"untouched {int(read[~changed].sum())}/{int((~changed).sum())}"
    )
    for label in sorted({r["relation"] for r in rows}):
        m = np.array([r["relation"] == label for r in rows])
        print(f"  {label:12s} {int(read[m].sum()):3d}/{int(m.sum())}")


if __name__ == "__main__":
    main()
