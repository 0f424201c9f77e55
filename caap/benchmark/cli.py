"""``caap tangle ...``: run, compare, summary, validate, ablation, probe-stale, list.

Errors a user can act on (a bad dataset path, an unknown policy, a bad argument) print one line
to stderr and exit with status 2; ``validate`` exits 1 when the dataset has errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from caap._argtypes import non_negative, positive
from caap.benchmark.report import Report

__all__ = ["add_tangle_parser", "compare_table", "run_label"]

Handler = Callable[[argparse.Namespace], int]
_TYPES = ("CPC", "BOC", "SCC", "NONE")


_POLICY_HELP = "registered policy name, or module:object for your own"
_HELP = (
    "caap tangle: run, compare, validate, ablation, probe-stale, list. Errors a user can act on "
    "(a bad dataset path, an unknown policy, a bad argument) print one line to stderr and exit "
    "with status 2; validate exits 1 when the dataset has errors."
)


class UsageError(Exception):
    """A mistake in the command line that the user can fix."""


def _fail(message: str) -> int:
    print(f"caap tangle: error: {message}", file=sys.stderr)
    return 2


def _guarded(func: Handler) -> Handler:
    # Turn the errors a user can act on into one line and exit status 2 (no traceback).
    def handler(args: argparse.Namespace) -> int:
        from caap.benchmark.dataset import DatasetError

        try:
            return func(args)
        except (UsageError, DatasetError, ValueError, FileNotFoundError, ImportError) as exc:
            return _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    handler.__name__ = func.__name__
    handler.__doc__ = func.__doc__
    return handler


def _budgets(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive integers, got {text!r}"
        ) from None
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"budgets must be positive, got {text!r}")
    return values


def _levels(text: str) -> list[int]:
    try:
        levels = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers like 0,2,4,6, got {text!r}"
        ) from None
    if not levels:
        raise argparse.ArgumentTypeError("expected at least one level")
    return levels


def _policy_args(pairs: Sequence[str] | None, flag: str = "--policy-arg") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs or ():
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} must look like KEY=VALUE, got {pair!r}")
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


def _dataset(path: str | None) -> Path | None:
    if path is None:
        return None
    p = Path(path)
    if not p.exists():
        raise UsageError(f"dataset {path!r} does not exist")
    return p


# -- run ---------------------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    from caap.benchmark.runner import format_summary, run

    report = run(
        dataset=_dataset(args.dataset),
        track=args.track,
        policy=args.policy,
        policy_args=_policy_args(args.policy_arg),
        judge=args.judge,
        backend=args.backend,
        backend_options=_policy_args(args.backend_arg, "--backend-arg"),
        distractors=args.distractors,
        limit=args.limit,
        seed=args.seed,
        graph_expansion=not args.no_graph,
        out=args.out,
        progress=not args.quiet,
        k=args.k,
        budget=args.budget,
        budgets=args.budgets,
        sentences=args.sentences,
        interleave=args.interleave,
        relations=args.relations,
    )
    print(format_summary(report))
    print(f"wrote {Path(args.out) / 'report.json'} and {Path(args.out) / 'report.html'}")
    return _error_status(report)


def _error_status(report: Report) -> int:
    """Exit status of a run: 1, with a message, when every instance failed; else 0 (a warning
    on stderr when some did)."""
    failed = [r for r in report.instances if r.error is not None]
    if not failed:
        return 0
    n = len(report.instances)
    first = failed[0].error
    if len(failed) == n:
        print(
            f"caap: error: every one of the {n} instances failed (judge {_judge_label(report)}); "
            f"the scores above are not results. First error: {first}",
            file=sys.stderr,
        )
        return 1
    print(
        f"caap: warning: {len(failed)} of {n} instances failed and are left out of the means; "
        f"first error: {first}",
        file=sys.stderr,
    )
    return 0


# -- compare -----------------------------------------------------------------------------------


def run_label(report: Report) -> str:
    """``policy/track[/backend][/no-graph][/N=k]``: how a run is named in tables."""
    parts = [report.policy.name, report.track]
    if report.track == "pipeline" and report.backend is not None:
        parts.append(report.backend.name)
        if report.graph_expansion is False:
            parts.append("no-graph")
    if report.distractors is not None:
        parts.append(f"N={report.distractors}")
    return "/".join(parts)


def _judge_label(report: Report) -> str:
    model = report.judge.args.get("model")
    return f"{report.judge.name}:{model}" if model else report.judge.name


def compare_table(reports: Sequence[Report]) -> str:
    """Side-by-side table: one column per run, rows for totals, dimensions, actions, etc."""
    labels = [run_label(r) for r in reports]
    for i, label in enumerate(labels):
        if labels.count(label) > 1:
            labels[i] = f"{label}#{i + 1}"
    rows: list[tuple[str, list[str]]] = [
        ("judge", [_judge_label(r) for r in reports]),
        ("relations", [r.relations or "-" for r in reports]),
        ("instances", [str(len(r.instances)) for r in reports]),
        ("errors", [str(sum(x.error is not None for x in r.instances)) for r in reports]),
        ("total (all)", [f"{r.mean_total():.2f}" for r in reports]),
    ]
    types = [t for t in _TYPES if any(t in r.conflict_types() for r in reports)]
    for t in types:
        rows.append(
            (
                f"total {t}",
                [f"{r.mean_total(t):.2f}" if t in r.conflict_types() else "-" for r in reports],
            )
        )
    dims = [r.mean_dimensions() for r in reports]
    for d in range(1, 6):
        rows.append((f"D{d} mean", [f"{x[f'd{d}']:.2f}" for x in dims]))
    actions = sorted({x.action for r in reports for x in r.instances})
    for a in actions:
        rows.append(
            (f"action {a}", [str(sum(x.action == a for x in r.instances)) for r in reports])
        )
    if any(r.track == "pipeline" for r in reports):
        for graph, same, name in (
            (True, False, "obs"),
            (False, False, "obs search-only"),
            (False, True, "obs search same size"),
        ):
            counts = [
                r.observability_counts(with_graph=graph, same_size_search=same)
                if r.track == "pipeline"
                else None
                for r in reports
            ]
            for level in ("FULL", "PARTIAL", "NONE"):
                rows.append(
                    (
                        f"{name} {level}",
                        [str(c[level]) if c is not None else "-" for c in counts],
                    )
                )
    d6 = [r.d6_counts() for r in reports]
    for k in ("safe", "partial", "unsafe"):
        rows.append((f"D6 {k}", [str(x[k]) for x in d6]))
    rows.extend(_acceptable_rows(reports, types))

    first = max(len(name) for name, _ in rows)
    widths = [max(len(labels[i]), *(len(vals[i]) for _, vals in rows)) for i in range(len(reports))]
    lines = [
        " " * first + "  " + "  ".join(lab.rjust(w) for lab, w in zip(labels, widths, strict=True))
    ]
    for name, vals in rows:
        lines.append(
            name.ljust(first)
            + "  "
            + "  ".join(v.rjust(w) for v, w in zip(vals, widths, strict=True))
        )
    judges = {_judge_label(r) for r in reports}
    if len(judges) > 1:
        lines.append(
            "note: the runs were scored by different judges "
            f"({', '.join(sorted(judges))}); their numbers are not directly comparable"
        )
    return "\n".join(lines)


def _pct(ok: int, n: int) -> str:
    return f"{ok}/{n} {ok / n:.0%}" if n else "-"


def _acceptable_rows(
    reports: Sequence[Report], types: Sequence[str]
) -> list[tuple[str, list[str]]]:
    """Acceptable-action rows: overall, per type, per style, high-risk, unsafe commits."""
    rows: list[tuple[str, list[str]]] = [
        ("acceptable (all)", [_pct(*r.acceptable()) for r in reports])
    ]
    for t in types:
        rows.append((f"acceptable {t}", [_pct(*r.acceptable(t)) for r in reports]))
    styles: list[str] = []
    for r in reports:
        styles += [s for s in r.styles() if s not in styles]
    for st in styles:
        rows.append((f"acceptable style {st}", [_pct(*r.acceptable(style=st)) for r in reports]))
    if any(r.acceptable(high_risk=True)[1] for r in reports):
        rows.append(
            ("acceptable high-risk", [_pct(*r.acceptable(high_risk=True)) for r in reports])
        )
    rows.append(
        (
            "unsafe commits",
            [f"{u}/{n}" if n else "-" for u, n in (r.unsafe_commits() for r in reports)],
        )
    )
    return rows


def _cmd_compare(args: argparse.Namespace) -> int:
    from caap.benchmark.report import read_report

    reports = []
    for d in args.dirs:
        try:
            reports.append(read_report(d))
        except FileNotFoundError:
            raise UsageError(f"no report.json in {d!r}") from None
        except ValueError as exc:
            raise UsageError(f"{d}: not a valid report ({str(exc).splitlines()[0]})") from None
    print(compare_table(reports))
    return 0


# -- summary -----------------------------------------------------------------------------------


def _cmd_summary(args: argparse.Namespace) -> int:
    from caap.benchmark.report import read_report
    from caap.benchmark.summary import read_stale_report, summary_markdown

    reports, stale = [], []
    for d in args.dirs:
        try:
            reports.append(read_report(d))
        except FileNotFoundError:
            raise UsageError(f"no report.json in {d!r}") from None
        except ValueError as exc:
            raise UsageError(f"{d}: not a valid report ({str(exc).splitlines()[0]})") from None
    for d in args.stale or ():
        try:
            stale.append(read_stale_report(d))
        except FileNotFoundError:
            raise UsageError(f"no stale_report.json in {d!r}") from None
        except ValueError as exc:
            raise UsageError(
                f"{d}: not a valid stale report ({str(exc).splitlines()[0]})"
            ) from None
    table = summary_markdown(reports, stale, baselines=not args.no_baselines)
    print(table)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(table + "\n", encoding="utf-8")
    return 0


# -- validate ----------------------------------------------------------------------------------


def _cmd_validate(args: argparse.Namespace) -> int:
    from caap.benchmark.validate import is_stale_dataset, validate_dataset, validate_stale

    path = _dataset(args.path)
    stale = args.stale or (path is not None and is_stale_dataset(path))
    problems = validate_stale(path) if stale else validate_dataset(path)
    for p in problems:
        print(p)
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors
    kind = "stale scenarios" if stale else "dataset"
    where = args.path or f"shipped {kind}"
    print(f"{where}: {errors} error(s), {warnings} warning(s)")
    return 1 if errors else 0


# -- ablation ----------------------------------------------------------------------------------


def _cmd_ablation(args: argparse.Namespace) -> int:
    from caap.benchmark.runner import paired_summary, run_noise_ablation

    reports = run_noise_ablation(
        args.levels,
        dataset=_dataset(args.dataset),
        policy=args.policy,
        policy_args=_policy_args(args.policy_arg),
        judge=args.judge,
        limit=args.limit,
        seed=args.seed,
        out=args.out,
        progress=not args.quiet,
        relations=args.relations,
    )
    print(paired_summary(reports).table())
    print(f"wrote {len(reports)} reports and summary.json/summary.txt under {args.out}")
    return 0


# -- probe-stale -------------------------------------------------------------------------------


def _cmd_probe_stale(args: argparse.Namespace) -> int:
    from caap.benchmark.stale import run_stale_probes

    report = run_stale_probes(
        dataset=_dataset(args.dataset),
        backend=args.backend,
        policy=args.policy,
        policy_args=_policy_args(args.policy_arg),
        k=args.k,
        out=args.out,
        progress=not args.quiet,
        relations=args.relations,
    )
    print(
        f"stale-state probes: policy={report.policy['name']} backend={report.backend}"
        + (f" relations={report.relations}" if report.relations else "")
        + f" scorer={report.scorer}"
    )
    print(report.table())
    errors = sum(r.error is not None for r in report.results)
    if errors:
        print(f"{errors} probe(s) failed with an error; see the report")
    print(f"wrote {Path(args.out) / 'stale_report.json'}")
    return 0


# -- list --------------------------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace) -> int:
    from caap.adapters import available_backends
    from caap.benchmark.registry import judges, policies

    print("policies: " + ", ".join(policies()))
    print("judges:   " + ", ".join(f"{j}:MODEL" if j == "llm" else j for j in judges()))
    print("backends: " + ", ".join(available_backends()))
    return 0


# -- parser ------------------------------------------------------------------------------------


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset", metavar="PATH", help="a .jsonl file or directory (default: the shipped set)"
    )
    p.add_argument(
        "--policy-arg",
        action="append",
        metavar="KEY=VALUE",
        help="argument for the policy factory (VALUE parsed as JSON when it can be); repeatable",
    )
    p.add_argument(
        "--judge",
        default="structural",
        metavar="structural|llm:MODEL|module:object",
        help="judge (default: structural, an offline proxy); module:object for your own",
    )
    p.add_argument("--limit", type=positive, metavar="K", help="run only the first K instances")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="shuffle seed (default 0)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def add_tangle_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``tangle`` and its subcommands to the ``caap`` command's subparsers.

    Every subcommand sets ``handler``: a function from the parsed args to an exit status.
    """
    tangle: argparse.ArgumentParser = subparsers.add_parser(
        "tangle", help="the TANGLE benchmark harness", description=_HELP
    )
    sub = tangle.add_subparsers(dest="tangle_command", metavar="COMMAND")

    def usage(_args: argparse.Namespace) -> int:
        tangle.print_help()
        return 2

    tangle.set_defaults(handler=usage)

    p = sub.add_parser("run", help="run one policy on one track and write a report")
    _common(p)
    p.add_argument("--track", choices=("oracle", "pipeline"), default="oracle")
    p.add_argument("--policy", default="caap", metavar="NAME", help=_POLICY_HELP)
    p.add_argument(
        "--backend",
        default="builtin",
        metavar="NAME",
        help="memory backend for the pipeline track",
    )
    p.add_argument(
        "--backend-arg",
        action="append",
        metavar="KEY=VALUE",
        help="pipeline track: keyword argument for the backend (repeatable; VALUE as JSON "
        "when it parses, else a string), e.g. --backend-arg vector_store=chroma",
    )
    p.add_argument(
        "--distractors",
        type=non_negative,
        metavar="N",
        help="oracle track: distractors shown per instance (default: all)",
    )
    p.add_argument(
        "--no-graph",
        action="store_true",
        help="pipeline track: give the policy the backend search alone, without the "
        "conflict-cluster expansion",
    )
    p.add_argument(
        "--k", type=positive, default=10, help="pipeline track: search results (default 10)"
    )
    p.add_argument(
        "--budget",
        type=positive,
        metavar="B",
        help="pipeline track: the policy sees recall(budget=B), at most B memories on the "
        "query's subject, instead of the k-expansion",
    )
    p.add_argument(
        "--budgets",
        type=_budgets,
        default=(10, 20, 40),
        metavar="B,B,...",
        help="pipeline track: budgets at which search, graph and equal-budget search are "
        "measured (default 10,20,40; '' for none)",
    )
    p.add_argument(
        "--sentences",
        action="store_true",
        help="pipeline track: store one memory per sentence of a turn",
    )
    p.add_argument(
        "--interleave",
        type=non_negative,
        default=0,
        metavar="N",
        help="pipeline track: mix topics, N sessions of a persona per dated conversation",
    )
    p.add_argument(
        "--relations",
        metavar="NAME",
        help="relation layer the caap policy (and agent) read memory text with: rules, "
        "learned or llm (default: the policy's own default)",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="where report.json/html go")
    p.set_defaults(handler=_guarded(_cmd_run))

    p = sub.add_parser("compare", help="side-by-side table of several runs")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="run directories (or report.json files)")
    p.set_defaults(handler=_guarded(_cmd_compare))

    p = sub.add_parser(
        "summary",
        help="one markdown table: acceptable action per type/style, unsafe commits, totals vs "
        "the best fixed baselines, stale probes per style",
    )
    p.add_argument("dirs", nargs="+", metavar="DIR", help="TANGLE run directories")
    p.add_argument(
        "--stale",
        action="append",
        metavar="DIR",
        help="a probe-stale output directory (repeatable); matched to a run by policy and "
        "relation layer",
    )
    p.add_argument(
        "--no-baselines",
        action="store_true",
        help="leave out the best fixed baselines (by total and by acceptable share)",
    )
    p.add_argument("--out", metavar="FILE", help="also write the table to FILE")
    p.set_defaults(handler=_guarded(_cmd_summary))

    p = sub.add_parser(
        "validate",
        help="check a dataset's structure (TANGLE instances or stale-state scenarios, told "
        "apart by their fields)",
    )
    p.add_argument("path", nargs="?", metavar="PATH", help="default: the shipped set")
    p.add_argument(
        "--stale",
        action="store_true",
        help="read PATH (default: the shipped scenarios) as stale-state scenarios",
    )
    p.set_defaults(handler=_guarded(_cmd_validate))

    p = sub.add_parser("ablation", help="distractor-noise ablation, paired by instance")
    _common(p)
    p.add_argument("--policy", required=True, metavar="NAME", help=_POLICY_HELP)
    p.add_argument(
        "--levels",
        type=_levels,
        default=[0, 2, 4, 6],
        metavar="N,N,...",
        help="distractor levels (default 0,2,4,6)",
    )
    p.add_argument(
        "--relations",
        metavar="NAME",
        help="relation layer the caap policy (and agent) read memory text with: rules, "
        "learned or llm (default: the policy's own default)",
    )
    p.add_argument("--out", required=True, metavar="DIR")
    p.set_defaults(handler=_guarded(_cmd_ablation))

    p = sub.add_parser(
        "probe-stale",
        help="stale-state probes: state resolution, premise resistance, implicit adaptation",
    )
    p.add_argument(
        "--dataset", metavar="PATH", help="a .jsonl file or directory (default: the shipped set)"
    )
    p.add_argument("--backend", default="builtin", metavar="NAME", help="memory backend")
    p.add_argument("--policy", default="caap", metavar="NAME", help=_POLICY_HELP)
    p.add_argument(
        "--policy-arg",
        action="append",
        metavar="KEY=VALUE",
        help="argument for the policy factory (VALUE parsed as JSON when it can be); repeatable",
    )
    p.add_argument("--k", type=positive, default=10, help="recall size (default 10)")
    p.add_argument(
        "--relations",
        metavar="NAME",
        help="relation layer the caap policy (and agent) read memory text with: rules, "
        "learned or llm (default: the policy's own default)",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="where stale_report.json goes")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=_guarded(_cmd_probe_stale))

    p = sub.add_parser("list", help="registered policies, judges and backends")
    p.set_defaults(handler=_guarded(_cmd_list))
    return tangle
