"""How well a risk reading tells high-stakes questions from everyday ones, on risk items.

``risk/`` (the blind corpus) holds questions a person asks, each beside two to five things
remembered about them, labelled by whether acting on a wrong answer could cause serious harm
(``high_risk``). Each item is read three ways:

- ``fitted``: the ``learned`` layer's risk model (its probability, and HIGH at its threshold);
- ``cues``: the ``rules`` layer's keyword cues (HIGH or not);
- ``guard``: what the commit guard holds a commit to, the highest of the two readings, as
  under ``rules`` (under ``learned`` the cues are overruled where the model is sure the matter
  is low, so its guard reading flags no more than this).

Printed per style and per writer: high-stakes questions caught (HIGH) and everyday ones
flagged HIGH, and the fitted model's area under the curve.

    PYTHONPATH=$PWD python benchmark/risk_items.py \\
        [--data caap/benchmark/data/blind/risk/test] [--weights W.npz] [--json]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from _labelled import auc, jsonl_rows

from caap.conflict_graph._relations_learned import LearnedRelations
from caap.conflict_graph.relations import get_relation_layer
from caap.models import RiskTier


def load_items(paths: Sequence[str]) -> list[dict[str, Any]]:
    """Every risk item under ``paths`` (files or folders), in file order."""
    return jsonl_rows(paths, "risk items")


def read_items(rows: Sequence[dict[str, Any]], weights: str | None = None) -> dict[str, Any]:
    """The three readings of every item, and their counts by style and by writer."""
    fitted = LearnedRelations(weights=weights) if weights else LearnedRelations()
    cues = get_relation_layer("rules")
    high = np.array([bool(r["high_risk"]) for r in rows])
    prob, by_fit, by_cue = [], [], []
    for r in rows:
        prob.append(fitted.high_risk_probability(r["query"], r["memories"]))
        by_fit.append(fitted.risk(r["query"], r["memories"]).tier is RiskTier.HIGH)
        by_cue.append(cues.risk(r["query"], r["memories"]).tier is RiskTier.HIGH)
    score, fit, cue = np.array(prob), np.array(by_fit), np.array(by_cue)
    guard = fit | cue

    def counts(mask: np.ndarray) -> dict[str, Any]:
        h, lo = mask & high, mask & ~high
        out: dict[str, Any] = {"items": int(mask.sum()), "high": int(h.sum())}
        for name, read in (("fitted", fit), ("cues", cue), ("guard", guard)):
            out[name] = {"caught": int((read & h).sum()), "flagged": int((read & lo).sum())}
        out["fitted"]["auc"] = auc(score[mask], high[mask])
        return out

    styles = np.array([r.get("style", "") for r in rows])
    writers = np.array([str(r.get("id", "")).split("_")[0] for r in rows])
    return {
        "all": counts(np.ones(len(rows), dtype=bool)),
        "style": {s: counts(styles == s) for s in sorted(set(styles))},
        "writer": {w: counts(writers == w) for w in sorted(set(writers))},
    }


def _line(name: str, c: dict[str, Any]) -> str:
    low = c["items"] - c["high"]
    parts = [f"{name:<10} {c['items']:>4} items"]
    for k in ("fitted", "cues", "guard"):
        parts.append(
            f"{k} {c[k]['caught']:>3}/{c['high']:<3} caught, {c[k]['flagged']:>3}/{low:<3} flagged"
        )
    parts.append(f"AUC {c['fitted']['auc']:.3f}")
    return " | ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", action="append", help="risk item files or folders (repeats)")
    ap.add_argument("--weights", help="learned-layer weights (.npz; default: the shipped ones)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args()
    rows = load_items(args.data or ["caap/benchmark/data/blind/risk/test"])
    report = read_items(rows, args.weights)
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print(
        f"weights: {args.weights or '(shipped)'}; HIGH caught of high-stakes, flagged of everyday"
    )
    print(_line("all", report["all"]))
    for part in ("style", "writer"):
        for name, c in report[part].items():
            print(_line(name, c))


if __name__ == "__main__":
    main()
