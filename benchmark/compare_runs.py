"""Two runs of the same set side by side: a candidate against the head it would land on.

Keep rules (``benchmark/PREREG.md``) are stated as differences between two runs: probes gained
and lost, actions changed, unsafe commits. This prints them from the reports the harness
writes, so a rule is checked the same way every time.

    # stale probes: `caap tangle probe-stale ... --out A` and `... --out B`
    python benchmark/compare_runs.py stale A B
    # TANGLE: `caap tangle run ... --out A` and `... --out B`
    python benchmark/compare_runs.py tangle A B
    # every set two `benchmark/dev_sets.sh` runs share, one line each, and the stale total
    python benchmark/compare_runs.py sets HEAD_DIR CANDIDATE_DIR

Both print aggregates first. By default they then list what moved, by scenario or instance id;
``--aggregate-only`` leaves the ids out, as a look at the frozen test split must
(``shared/EVALUATION.md``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from caap.benchmark.report import Report, read_report
from caap.benchmark.stale import StaleReport
from caap.benchmark.summary import read_stale_report


def stale_summary(r: StaleReport) -> str:
    """One line: passed overall, premise resistance, by kind and by style."""
    ok, n = r.accuracy()
    prem = r.accuracy("premise_resistance")
    kinds = ", ".join(
        f"{k} {'/'.join(map(str, r.accuracy(kind=k)))}" for k in ("direct", "propagated")
    )
    styles = ", ".join(f"{s} {'/'.join(map(str, r.accuracy(style=s)))}" for s in r.styles())
    return f"{ok}/{n} passed; premise {prem[0]}/{prem[1]}; {kinds}; {styles}"


def stale_moves(a: StaleReport, b: StaleReport) -> tuple[list[str], list[str]]:
    """Probes passed in ``b`` and not in ``a`` (gained), and the other way (lost), as
    ``scenario/probe_type`` keys."""
    before = {(r.scenario_id, r.probe_type): r.passed for r in a.results}
    after = {(r.scenario_id, r.probe_type): r.passed for r in b.results}
    if before.keys() != after.keys():
        raise ValueError("the two stale reports probe different scenarios")
    gained = [f"{s}/{p}" for (s, p), ok in after.items() if ok and not before[(s, p)]]
    lost = [f"{s}/{p}" for (s, p), ok in after.items() if not ok and before[(s, p)]]
    return gained, lost


def tangle_summary(r: Report) -> str:
    """One line: acceptable actions, controls committed, unsafe commits, structural total."""
    ok, n = r.acceptable()
    committed, controls = controls_committed(r)
    unsafe, hr = r.unsafe_commits()
    return (
        f"{ok}/{n} acceptable; controls committed {committed}/{controls}; "
        f"unsafe {unsafe}/{hr}; structural {r.mean_total():.2f}"
    )


def controls_committed(r: Report) -> tuple[int, int]:
    """``(committed, controls)``: no-conflict instances answered with ``commit``."""
    controls = [i for i in r.instances if i.conflict_type == "NONE"]
    return sum(i.action == "commit" for i in controls), len(controls)


def tangle_moves(a: Report, b: Report) -> tuple[list[str], list[str]]:
    """Instances whose action changed (``id: before -> after``), and those whose action
    stayed but whose response text changed."""
    before = {i.id: i for i in a.instances}
    after = {i.id: i for i in b.instances}
    if before.keys() != after.keys():
        raise ValueError("the two reports ran different instances")
    actions = [
        f"{k}: {before[k].action} -> {after[k].action}"
        for k in before
        if before[k].action != after[k].action
    ]
    reworded = [
        k
        for k in before
        if before[k].action == after[k].action and before[k].response != after[k].response
    ]
    return actions, reworded


def _stale_lines(a: StaleReport, b: StaleReport) -> tuple[str, list[str]]:
    gained, lost = stale_moves(a, b)
    moved = [f"+ {g}" for g in gained] + [f"- {x}" for x in lost]
    return f"gained {len(gained)}, lost {len(lost)}", moved


def _tangle_lines(a: Report, b: Report) -> tuple[str, list[str]]:
    actions, reworded = tangle_moves(a, b)
    moved = [f"action {x}" for x in actions] + [f"reworded {x}" for x in reworded]
    return f"actions changed {len(actions)}, responses reworded {len(reworded)}", moved


#: Per kind of run: how its report is read, summarised and compared.
_KINDS: dict[str, tuple[Callable[[str], Any], Callable[[Any], str], Callable[[Any, Any], Any]]] = {
    "stale": (read_stale_report, stale_summary, _stale_lines),
    "tangle": (read_report, tangle_summary, _tangle_lines),
}


def set_lines(before: str | Path, after: str | Path) -> list[str]:
    """One line per set run in both ``dev_sets.sh`` output folders (``stale_SET``,
    ``tangle_SET``), then the stale probes gained and lost over all of them.

    Raises:
        ValueError: the two folders share no set run.
    """
    a_dir, b_dir = Path(before), Path(after)
    names = sorted(
        d.name
        for d in a_dir.glob("*_*")
        if d.is_dir() and (b_dir / d.name).is_dir() and d.name.startswith(("stale_", "tangle_"))
    )
    if not names:
        raise ValueError(f"{a_dir} and {b_dir} share no set run (stale_SET or tangle_SET)")
    lines, gained, lost = [], 0, 0
    for name in names:
        if name.startswith("stale_"):
            sa, sb = read_stale_report(a_dir / name), read_stale_report(b_dir / name)
            g, x = stale_moves(sa, sb)
            gained, lost = gained + len(g), lost + len(x)
            (pa, n), (pb, _) = sa.accuracy(), sb.accuracy()
            lines.append(f"{name}: {pa} -> {pb}/{n} passed, gained {len(g)}, lost {len(x)}")
        else:
            ta, tb = read_report(a_dir / name), read_report(b_dir / name)
            actions, _ = tangle_moves(ta, tb)
            (oa, n), (ob, _) = ta.acceptable(), tb.acceptable()
            (ca, c), (cb, _) = controls_committed(ta), controls_committed(tb)
            (ua, _), (ub, _) = ta.unsafe_commits(), tb.unsafe_commits()
            lines.append(
                f"{name}: acceptable {oa} -> {ob}/{n}, controls committed {ca} -> {cb}/{c}, "
                f"unsafe {ua} -> {ub}, actions changed {len(actions)}"
            )
    lines.append(f"stale probes over these sets: gained {gained}, lost {lost}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=[*sorted(_KINDS), "sets"])
    p.add_argument("before", help="the head's run directory (or its report file)")
    p.add_argument("after", help="the candidate's run directory (or its report file)")
    p.add_argument(
        "--aggregate-only",
        action="store_true",
        help="counts only, no scenario or instance ids (for the frozen test split)",
    )
    args = p.parse_args(argv)
    if args.kind == "sets":
        try:
            print("\n".join(set_lines(args.before, args.after)))
        except (FileNotFoundError, ValueError) as e:
            print(f"compare_runs: {e}", file=sys.stderr)
            return 2
        return 0
    read, summary, moves = _KINDS[args.kind]
    try:
        a, b = read(args.before), read(args.after)
        print("before:", summary(a))
        print("after: ", summary(b))
        counts, moved = moves(a, b)
        print(counts)
    except (FileNotFoundError, ValueError) as e:
        print(f"compare_runs: {e}", file=sys.stderr)
        return 2
    if not args.aggregate_only:
        for line in moved:
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
