"""One markdown table of TANGLE and stale-probe runs: acceptable action per type and style,
unsafe commits, structural totals against the best fixed baselines, and stale-probe accuracy
per style with premise resistance.

This is what ``benchmark/blind_eval.sh`` writes and what ``docs/benchmark.md`` and
``docs/stale.md`` quote. Only aggregate numbers appear: no instance text, no per-item rows.

>>> from caap.benchmark.summary import summary_markdown
>>> print(summary_markdown(tangle_reports, stale_reports))  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from caap.benchmark.report import STYLE_ORDER, Report
from caap.benchmark.stale import StaleReport

__all__ = [
    "FIXED_BASELINES",
    "best_baselines",
    "read_stale_report",
    "summary_markdown",
]

#: The fixed baseline policies of :mod:`caap.benchmark.baselines`.
FIXED_BASELINES: tuple[str, ...] = (
    "direct",
    "recency",
    "majority",
    "source_priority",
    "always_ask",
    "always_conditionalize",
    "lexical",
)


def read_stale_report(path: str | Path) -> StaleReport:
    """Read a ``stale_report.json`` (a directory is taken to hold one).

    Raises:
        FileNotFoundError: there is no report at ``path``.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "stale_report.json"
    if not p.exists():
        raise FileNotFoundError(f"no stale report at {p}")
    raw = json.loads(p.read_text(encoding="utf-8"))
    raw.pop("summary", None)  # derived; written next to the results for readers
    return StaleReport.model_validate(raw)


def _score(report: Report) -> tuple[float, float]:
    ok, n = report.acceptable()
    return (ok / n if n else 0.0), report.mean_total()


def best_baselines(reports: Sequence[Report]) -> list[Report]:
    """The fixed baselines with the best structural total and the best acceptable-action
    share (one report when both are the same run)."""
    fixed = [r for r in reports if r.policy.name in FIXED_BASELINES]
    if not fixed:
        return []
    by_total = max(fixed, key=lambda r: (r.mean_total(), _score(r)[0]))
    by_action = max(fixed, key=lambda r: (_score(r)[0], r.mean_total()))
    return [by_total] if by_total is by_action else [by_total, by_action]


def _cell(ok: int, n: int) -> str:
    return f"{ok}/{n} ({ok / n:.0%})" if n else "–"


def _label(report: Report) -> str:
    name = report.policy.name
    return f"{name} ({report.relations})" if report.relations else name


def _stale_for(report: Report, stale: Sequence[StaleReport]) -> StaleReport | None:
    for s in stale:
        if s.policy.get("name") == report.policy.name and s.relations == report.relations:
            return s
    return None


def summary_markdown(
    tangle: Sequence[Report],
    stale: Sequence[StaleReport] = (),
    *,
    baselines: bool = True,
) -> str:
    """A markdown table with one column per non-baseline run (and, with ``baselines``, the best
    fixed baselines among ``tangle``), rows for every aggregate figure.

    Stale rows are filled for a run when a stale report with the same policy name and relation
    layer is given. Failed instances count against the acceptable share.
    """
    runs = [r for r in tangle if r.policy.name not in FIXED_BASELINES]
    if baselines:
        runs += best_baselines(tangle)
    if not runs:
        raise ValueError("no TANGLE reports to summarise")
    probes = [_stale_for(r, stale) for r in runs]
    types = [t for t in ("CPC", "BOC", "SCC", "NONE") if any(t in r.conflict_types() for r in runs)]
    styles = [s for s in STYLE_ORDER if any(s in r.styles() for r in runs)]
    rows: list[tuple[str, list[str]]] = [
        ("acceptable action, all", [_cell(*r.acceptable()) for r in runs])
    ]
    for t in types:
        name = "controls committed (NONE)" if t == "NONE" else f"acceptable {t}"
        rows.append((name, [_cell(*r.acceptable(t)) for r in runs]))
    for s in styles:
        rows.append((f"acceptable, style {s}", [_cell(*r.acceptable(style=s)) for r in runs]))
    if any(r.acceptable(high_risk=True)[1] for r in runs):
        rows.append(("acceptable, high-risk", [_cell(*r.acceptable(high_risk=True)) for r in runs]))
    rows.append(
        (
            "unsafe commits (high-risk conflicts)",
            [f"{u}/{n}" if n else "–" for u, n in (r.unsafe_commits() for r in runs)],
        )
    )
    rows.append(("structural total, all (0–20)", [f"{r.mean_total():.2f}" for r in runs]))
    for t in types:
        rows.append((f"structural total {t}", [f"{r.mean_total(t):.2f}" for r in runs]))
    if any(p is not None for p in probes):
        stale_styles = [s for s in STYLE_ORDER if any(p and s in p.styles() for p in probes)]
        rows.append(("stale probes, all", [_cell(*p.accuracy()) if p else "–" for p in probes]))
        rows.append(
            (
                "stale premise resistance",
                [_cell(*p.accuracy("premise_resistance")) if p else "–" for p in probes],
            )
        )
        for kind in ("direct", "propagated"):
            rows.append(
                (f"stale {kind}", [_cell(*p.accuracy(kind=kind)) if p else "–" for p in probes])
            )
        for s in stale_styles:
            rows.append(
                (f"stale, style {s}", [_cell(*p.accuracy(style=s)) if p else "–" for p in probes])
            )
            rows.append(
                (
                    f"stale premise resistance, style {s}",
                    [
                        _cell(*p.accuracy("premise_resistance", style=s)) if p else "–"
                        for p in probes
                    ],
                )
            )
    judges = sorted({r.judge.name for r in runs})
    datasets = sorted({r.dataset for r in runs} | {p.dataset for p in probes if p})
    head = "| | " + " | ".join(_label(r) for r in runs) + " |"
    lines = [
        head,
        "|---|" + "---:|" * len(runs),
        *(f"| {name} | " + " | ".join(vals) + " |" for name, vals in rows),
        "",
        f"Judge: {', '.join(judges)}; stale scorer: "
        + (", ".join(sorted({p.scorer for p in probes if p})) or "–")
        + f"; data: {', '.join(f'`{d}`' for d in datasets)}.",
    ]
    return "\n".join(lines)
