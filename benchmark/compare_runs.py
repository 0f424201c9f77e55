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
    # what fails in one `dev_sets.sh` run, by class; with a second run, what it lost, by class
    python benchmark/compare_runs.py classes HEAD_DIR [CANDIDATE_DIR]

Both print aggregates first, with the exact paired p-value of what moved (McNemar's exact
test on the probes or instances gained and lost: a net change of two on a few moves is noise).
By default they then list what moved, by scenario or instance id;
``--aggregate-only`` leaves the ids out, as a look at the frozen test split must
(``shared/EVALUATION.md``).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import Counter
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


def citing_more_updates(a: StaleReport, b: StaleReport, keys: Sequence[str]) -> int:
    """How many of ``keys`` (``scenario/probe_type``, as :func:`stale_moves` gives them) cite
    more update turns in ``b`` than in ``a``. The scorer's checks that an answer marks the old
    state as changed pass on a correction phrase anywhere in it, so a probe can be gained by a
    phrase about another turn; a gain that cites a further update turn is not that."""
    cited_a = {f"{r.scenario_id}/{r.probe_type}": r.cited_tags.count("update") for r in a.results}
    cited_b = {f"{r.scenario_id}/{r.probe_type}": r.cited_tags.count("update") for r in b.results}
    return sum(cited_b[k] > cited_a[k] for k in keys)


def paired_p(gained: int, lost: int) -> float:
    """Exact two-sided p-value of the sign test on the items that moved (McNemar's exact test):
    how often, if the change did nothing but reshuffle outcomes, a split of ``gained +
    lost`` moves at least this uneven would come up. With 7 gained and 0 lost it is 0.016; with
    2 gained and 4 lost, 0.69 (a net loss of 2 is no evidence of a loss).

    >>> round(paired_p(7, 0), 3), round(paired_p(2, 4), 2), paired_p(0, 0)
    (0.016, 0.69, 1.0)
    """
    n = gained + lost
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(gained, lost) + 1)) / 2**n
    return min(1.0, 2 * tail)


def _paired(gained: int, lost: int) -> str:
    return f"exact paired p {paired_p(gained, lost):.2f}"


def _gains(gained: Sequence[str], citing: int) -> str:
    return f"gained {len(gained)} ({citing} citing a further update turn)"


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
    counts = f"{_gains(gained, citing_more_updates(a, b, gained))}, lost {len(lost)}"
    return f"{counts} ({_paired(len(gained), len(lost))})", moved


def _tangle_lines(a: Report, b: Report) -> tuple[str, list[str]]:
    actions, reworded = tangle_moves(a, b)
    moved = [f"action {x}" for x in actions] + [f"reworded {x}" for x in reworded]
    gained, lost = acceptable_moves(a, b)
    return (
        f"actions changed {len(actions)}, responses reworded {len(reworded)}; acceptable "
        f"gained {gained}, lost {lost} ({_paired(gained, lost)})"
    ), moved


def acceptable_moves(a: Report, b: Report) -> tuple[int, int]:
    """How many instances became acceptable in ``b`` (gained) and how many stopped being
    (lost)."""
    before = {i.id: i.action_ok for i in a.instances}
    gained = sum(i.action_ok and not before[i.id] for i in b.instances)
    lost = sum(before[i.id] and not i.action_ok for i in b.instances)
    return gained, lost


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
    lines, gained, lost, citing = [], 0, 0, 0
    for name in names:
        if name.startswith("stale_"):
            sa, sb = read_stale_report(a_dir / name), read_stale_report(b_dir / name)
            g, x = stale_moves(sa, sb)
            gained, lost = gained + len(g), lost + len(x)
            c = citing_more_updates(sa, sb, g)
            citing += c
            (pa, n), (pb, _) = sa.accuracy(), sb.accuracy()
            lines.append(f"{name}: {pa} -> {pb}/{n} passed, {_gains(g, c)}, lost {len(x)}")
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
    lines.append(
        f"stale probes over these sets: gained {gained} ({citing} citing a further update "
        f"turn), lost {lost} ({_paired(gained, lost)})"
    )
    return lines


_SITUATION_PATH = re.compile(r"\w+ fits the likely readings best \(situation reading: (\w+)")


def decision_path(rationale: str) -> str:
    """Which reading decided, from a decision's rationale, without figures or memory text:
    the situation reading and the situation it put first, or the graph's own first clause
    (anything in brackets left out), and ``+ guard`` where the guard changed the action."""
    m = _SITUATION_PATH.match(rationale)
    if m:
        path = f"situation reading, {m.group(1)} first"
    else:
        clause = rationale.split("[guard]")[0].split(";")[0]
        path = re.sub(r"\s*\([^)]*\)", "", clause).strip() or "-"
    return path + (" + guard" if "[guard]" in rationale else "")


def _update_seen(shown: Sequence[str | None], cited: Sequence[str | None]) -> str:
    if "update" in cited:
        return "update cited"
    return "update shown, not cited" if "update" in shown else "update not shown"


def _counted(counts: Counter[tuple[str, ...]]) -> list[str]:
    return [f"  {n:3d}  " + " | ".join(k) for k, n in counts.most_common()]


def stale_classes(r: StaleReport) -> list[str]:
    """The failed probes of one run: how many per style, then by class (the action, the
    checks failed, whether an update turn was shown and cited, the decision path)."""
    failed = [x for x in r.results if not x.passed]
    styles = Counter(x.style or "-" for x in failed)
    head = f"{len(failed)} failed; " + ", ".join(f"{k} {n}" for k, n in sorted(styles.items()))
    counts = Counter(
        (
            x.action,
            "failed " + "+".join(sorted(k for k, ok in x.checks.items() if not ok)),
            _update_seen(x.shown_tags, x.cited_tags),
            decision_path(x.rationale),
        )
        for x in failed
    )
    return [head, *_counted(counts)]


def control_classes(r: Report) -> list[str]:
    """The no-conflict instances of one run not committed on, by class (high stakes or
    not, the action, the decision path)."""
    held = [i for i in r.instances if i.conflict_type == "NONE" and i.action != "commit"]
    counts = Counter(
        (
            "high stakes" if i.high_risk else "ordinary stakes",
            i.action,
            decision_path(i.decision.rationale if i.decision else ""),
        )
        for i in held
    )
    committed, controls = controls_committed(r)
    return [f"{controls - committed} of {controls} controls not committed", *_counted(counts)]


def lost_classes(a: StaleReport, b: StaleReport) -> list[str]:
    """The probes passed in ``a`` and failed in ``b``, by class (the action before and
    after, the checks failed after)."""
    before = {(x.scenario_id, x.probe_type): x for x in a.results}
    lost = [
        (before[(x.scenario_id, x.probe_type)], x)
        for x in b.results
        if not x.passed and before[(x.scenario_id, x.probe_type)].passed
    ]
    counts = Counter(
        (
            f"{was.action} -> {now.action}",
            "failed " + "+".join(sorted(k for k, ok in now.checks.items() if not ok)),
        )
        for was, now in lost
    )
    return [f"{len(lost)} lost", *_counted(counts)]


def class_lines(run: str | Path, candidate: str | Path | None = None) -> list[str]:
    """Per set of a ``dev_sets.sh`` output folder: the failed stale probes and the controls
    not committed, by class (counts only, no ids). With ``candidate``, a second such folder,
    also the stale probes the candidate lost, by class, over the sets both ran.

    Raises:
        ValueError: the folder holds no set run, or the two share none.
    """
    a_dir = Path(run)
    names = sorted(
        d.name
        for d in a_dir.glob("*_*")
        if d.is_dir()
        and d.name.startswith(("stale_", "tangle_"))
        and (candidate is None or (Path(candidate) / d.name).is_dir())
    )
    if not names:
        raise ValueError(f"no set run (stale_SET or tangle_SET) in {a_dir} to read")
    lines: list[str] = []
    for name in names:
        if name.startswith("stale_"):
            sa = read_stale_report(a_dir / name)
            body = stale_classes(sa)
            if candidate is not None:
                lost = lost_classes(sa, read_stale_report(Path(candidate) / name))
                body += ["lost by the candidate: " + lost[0], *lost[1:]]
        else:
            body = control_classes(read_report(a_dir / name))
        lines += [f"{name}: {body[0]}", *body[1:]]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=[*sorted(_KINDS), "sets", "classes"])
    p.add_argument("before", help="the head's run directory (or its report file)")
    p.add_argument(
        "after",
        nargs="?",
        help="the candidate's run directory (or its report file); optional for classes",
    )
    p.add_argument(
        "--aggregate-only",
        action="store_true",
        help="counts only, no scenario or instance ids (for the frozen test split)",
    )
    args = p.parse_args(argv)
    if args.after is None and args.kind != "classes":
        p.error(f"{args.kind} compares two runs: give the candidate's run too")
    if args.kind in ("sets", "classes"):
        lines = set_lines if args.kind == "sets" else class_lines
        try:
            print("\n".join(lines(args.before, args.after)))
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
