"""Run the TANGLE harness: a whole dataset on one track, and the distractor-noise ablation.

>>> from caap.benchmark import run
>>> report = run(track="oracle", policy="recency", judge="structural", out="runs/recency")
... # doctest: +SKIP
"""

from __future__ import annotations

import html
import importlib
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from tqdm import tqdm

from caap.adapters.base import MemoryBackend
from caap.benchmark.base import Judge
from caap.benchmark.dataset import Instance, load_dataset
from caap.benchmark.registry import ComponentSpec, get_judge, get_policy, spec_of
from caap.benchmark.report import InstanceResult, Report, write_report
from caap.benchmark.tracks import (
    DEFAULT_K,
    PipelineBank,
    run_oracle_instance,
    run_pipeline_instance,
)
from caap.policy.base import Policy

__all__ = [
    "TRACKS",
    "AblationRow",
    "PairedSummary",
    "format_acceptable",
    "format_summary",
    "paired_summary",
    "relations_of",
    "render_report_html",
    "run",
    "run_noise_ablation",
    "write_outputs",
]

TRACKS = ("oracle", "pipeline")
Track = Literal["oracle", "pipeline"]
DatasetArg = str | Path | Sequence[Instance] | None


def _caap_version() -> str:
    try:
        from caap import __version__
    except ImportError:  # pragma: no cover - partial installs
        return ""
    return str(__version__)


def _load(dataset: DatasetArg) -> tuple[list[Instance], str]:
    if dataset is None or isinstance(dataset, (str, Path)):
        from caap.benchmark.dataset import default_dataset_path

        path = Path(dataset) if dataset is not None else default_dataset_path()
        return load_dataset(path), str(path)
    instances = list(dataset)
    return instances, f"<in-memory: {len(instances)} instances>"


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")


def _check_relations(relations: str | None) -> None:
    if relations is None:
        return
    from caap.conflict_graph.relations import relation_layer_names

    names = relation_layer_names()
    if relations not in names:
        raise ValueError(f"relations must be one of {', '.join(names)}, got {relations!r}")


def _build_policy(
    policy: str | Policy, args: Mapping[str, Any] | None, relations: str | None = None
) -> Policy:
    if isinstance(policy, str):
        kwargs = dict(args or {})
        if relations is not None:
            kwargs["relations"] = relations
        try:
            return get_policy(policy, **kwargs)
        except TypeError as exc:
            if relations is not None and "relations" in str(exc):
                raise ValueError(
                    f"policy {policy!r} reads no memory text, so it takes no relation layer "
                    "(relations applies to caap)"
                ) from None
            raise
    if args:
        raise ValueError("policy_args apply only when the policy is given by name")
    if relations is not None:
        raise ValueError("relations applies only when the policy is given by name")
    return policy


def relations_of(policy: object) -> str | None:
    """The name of the relation layer a policy reads memory text with, if it has one."""
    layer = getattr(policy, "relations", None)
    if layer is None or isinstance(layer, str):
        return layer
    name = getattr(layer, "name", None)
    return name if isinstance(name, str) else type(layer).__name__


def _build_judge(judge: str | Judge, args: Mapping[str, Any] | None) -> Judge:
    if isinstance(judge, str):
        return get_judge(judge, **dict(args or {}))
    if args:
        raise ValueError("judge_args apply only when the judge is given by name")
    return judge


def run(
    dataset: DatasetArg = None,
    track: Track = "oracle",
    policy: str | Policy = "caap",
    policy_args: Mapping[str, Any] | None = None,
    judge: str | Judge = "structural",
    backend: str | MemoryBackend = "builtin",
    distractors: int | None = None,
    limit: int | None = None,
    seed: int = 0,
    graph_expansion: bool = True,
    out: str | Path | None = None,
    progress: bool = True,
    *,
    judge_args: Mapping[str, Any] | None = None,
    backend_options: Mapping[str, Any] | None = None,
    k: int = DEFAULT_K,
    bank_path: str | Path | None = None,
    budget: int | None = None,
    budgets: Sequence[int] = (),
    sentences: bool = False,
    interleave: int = 0,
    relations: str | None = None,
) -> Report:
    """Run one policy on one track over a dataset and judge every response.

    Args:
        dataset: A ``.jsonl`` file or directory, a list of instances, or ``None`` for the
            shipped set.
        track: ``"oracle"`` (curated memories) or ``"pipeline"`` (sessions -> backend ->
            retrieval).
        policy: A registered policy name (built with ``policy_args``) or a policy object.
        judge: ``"structural"``, ``"llm:MODEL"`` (built with ``judge_args``) or a judge object.
        backend: Pipeline track: the memory backend name (or instance) the agent stores into.
        distractors: Oracle track: distractors shown per instance (``None``: all).
        limit: Run only the first ``limit`` instances.
        seed: Seed of the memory shuffle (oracle track).
        graph_expansion: Pipeline track: give the policy ``agent.recall`` (search + conflict
            cluster expansion) rather than the backend search alone.
        out: Directory to write ``report.json`` and ``report.html`` into.
        progress: Show a progress bar on stderr.
        backend_options: Keyword arguments for a backend given by name.
        k: Pipeline track: memories the backend search returns.
        bank_path: Pipeline track: keep the agent's data here instead of a temporary directory.
        budget: Pipeline track: the policy sees ``agent.recall(query, user, budget=budget)``
            (at most ``budget`` memories on the query's subject) instead of the k-expansion.
        budgets: Pipeline track: recall budgets at which plain search, the graph and
            equal-budget search are measured per instance (e.g. ``(10, 20, 40)``).
        sentences: Pipeline track: store one memory per sentence of a turn.
        interleave: Pipeline track: mix topics, this many sessions per conversation.
        relations: The relation layer (by name: ``"rules"``, ``"learned"``, ``"llm"``) the
            policy reads memory text with, and on the pipeline track the agent's graph too;
            ``None``: each component's default. Recorded in :attr:`Report.relations`.

    Raises:
        ValueError: an unknown track, policy, judge or relation layer, an argument out of
            range, or ``relations`` for a policy that takes none.
        caap.benchmark.dataset.DatasetError: the dataset cannot be read.
    """
    if track not in TRACKS:
        raise ValueError(f"track must be one of {', '.join(TRACKS)}, got {track!r}")
    _check_limit(limit)
    if track == "pipeline" and distractors is not None:
        raise ValueError(
            "distractors applies to the oracle track only (the pipeline bank is what retrieval "
            "returns)"
        )
    if distractors is not None and (
        isinstance(distractors, bool) or not isinstance(distractors, int) or distractors < 0
    ):
        raise ValueError(f"distractors must be a non-negative int or None, got {distractors!r}")
    _check_relations(relations)
    instances, dataset_label = _load(dataset)
    selected = instances[:limit] if limit is not None else instances
    the_policy = _build_policy(policy, policy_args, relations)
    the_judge = _build_judge(judge, judge_args)

    report = Report(
        caap_version=_caap_version(),
        track=track,
        dataset=dataset_label,
        policy=spec_of(the_policy),
        judge=spec_of(the_judge),
        relations=relations if relations is not None else relations_of(the_policy),
        distractors=distractors if track == "oracle" else None,
        seed=seed,
        limit=limit,
    )
    bar = tqdm(
        selected,
        desc=f"tangle {track} {report.policy.name}",
        unit="inst",
        file=sys.stderr,
        disable=not progress,
        leave=False,
    )
    results: list[InstanceResult] = []
    if track == "oracle":
        for inst in bar:
            results.append(
                run_oracle_instance(inst, the_policy, the_judge, distractors=distractors, seed=seed)
            )
    else:
        report.graph_expansion = graph_expansion
        backend_name = backend if isinstance(backend, str) else backend.name
        extra: dict[str, Any] = {}
        if budget is not None:
            extra["budget"] = budget
        if budgets:
            extra["budgets"] = list(budgets)
        if sentences:
            extra["sentences"] = True
        if interleave > 1:
            extra["interleave"] = interleave
        report.backend = ComponentSpec(
            name=backend_name, args={**dict(backend_options or {}), "k": k, **extra}
        )
        with PipelineBank(
            instances,
            backend=backend,
            backend_options=backend_options,
            path=bank_path,
            k=k,
            budgets=budgets,
            sentences=sentences,
            interleave=interleave,
            relations=relations,
        ) as bank:
            for inst in bar:
                bar.set_postfix_str(f"persona {inst.persona.id}")
                results.append(
                    run_pipeline_instance(
                        inst,
                        the_policy,
                        the_judge,
                        bank,
                        graph_expansion=graph_expansion,
                        budget=budget,
                    )
                )
            report.topic_agreement = bank.topic_agreement()
    bar.close()
    report.instances = results
    if out is not None:
        write_outputs(report, out)
    return report


# -- output ----------------------------------------------------------------------------------


def _fallback_html(report: Report) -> str:
    # Used only while caap.benchmark.html is unavailable: a plain, self-contained table.
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(v))}</td>"
            for v in (r.id, r.conflict_type, r.action, r.scores.total, r.d6 or "", r.error or "")
        )
        + "</tr>"
        for r in report.instances
    )
    summary = html.escape(format_summary(report))
    title = html.escape(f"TANGLE {report.track}: {report.policy.name} (judge {report.judge.name})")
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{title}</title></head><body><h1>{title}</h1>"
        "<p>Minimal page: caap.benchmark.html was not available when this report was written."
        f"</p><pre>{summary}</pre><table border='1'><tr><th>id</th><th>type</th><th>action</th>"
        f"<th>total</th><th>d6</th><th>error</th></tr>{rows}</table></body></html>\n"
    )


def render_report_html(report: Report) -> str:
    """The report page: :func:`caap.benchmark.html.render_html`, or a minimal fallback."""
    try:
        html_page = importlib.import_module("caap.benchmark.html")
    except ImportError:
        return _fallback_html(report)
    render = getattr(html_page, "render_html", None)
    if render is None:
        return _fallback_html(report)
    return str(render(report))


def write_outputs(report: Report, out: str | Path) -> tuple[Path, Path]:
    """Write ``OUT/report.json`` and ``OUT/report.html``; returns both paths."""
    d = Path(out)
    if d.exists() and not d.is_dir():
        raise ValueError(f"out must be a directory, but {str(d)!r} is a file")
    d.mkdir(parents=True, exist_ok=True)
    json_path = write_report(report, d / "report.json")
    html_path = d / "report.html"
    html_path.write_text(render_report_html(report), encoding="utf-8")
    return json_path, html_path


def format_summary(report: Report) -> str:
    """A short per-conflict-type summary: n, mean total, D1..D5, errors; judge named."""
    lines = [
        f"track={report.track} policy={report.policy.name} judge={_judge_label(report.judge)}"
        + (f" relations={report.relations}" if report.relations else "")
        + (f" backend={report.backend.name}" if report.backend else "")
        + (f" distractors={report.distractors}" if report.distractors is not None else ""),
        f"{'type':<6} {'n':>3} {'total':>6} {'d1':>5} {'d2':>5} {'d3':>5} {'d4':>5} {'d5':>5}"
        f" {'err':>4}",
    ]
    for ct in [*report.conflict_types(), None]:
        rows = [r for r in report.instances if ct is None or r.conflict_type == ct]
        dims = report.mean_dimensions(ct)
        errors = sum(r.error is not None for r in rows)
        lines.append(
            f"{ct or 'all':<6} {len(rows):>3} {report.mean_total(ct):>6.2f} "
            + " ".join(f"{dims[f'd{i}']:>5.2f}" for i in range(1, 6))
            + f" {errors:>4}"
        )
    if report.track == "pipeline":
        obs = report.observability_counts()
        raw = report.observability_counts(with_graph=False)
        same = report.observability_counts(same_size_search=True)
        sizes = [r.observability.bank_size for r in report.instances if r.observability]
        lines.append(
            "observability: "
            + " ".join(f"{k}={v}" for k, v in obs.items())
            + "  (search only: "
            + " ".join(f"{k}={v}" for k, v in raw.items())
            + ")"
        )
        if sum(same.values()):
            median = sorted(sizes)[len(sizes) // 2] if sizes else 0
            lines.append(
                f"equal-budget peer (search with k = expanded bank size, median {median}): "
                + " ".join(f"{k}={v}" for k, v in same.items())
            )
        if report.topic_agreement:
            aris = sorted(report.topic_agreement.values())
            lines.append(
                f"topic agreement (adjusted Rand vs instances, {len(aris)} personas): "
                f"median {aris[len(aris) // 2]:.2f}, min {aris[0]:.2f}"
            )
        ceiling = report.ceiling_full()
        n = sum(1 for r in report.instances if r.observability)
        for b, c in report.budget_full().items():
            lines.append(
                f"budget {b}: FULL search {c.get('search', 0)}, graph {c.get('graph', 0)}, "
                f"equal-budget search {c.get('same_size', 0)} of {n} "
                f"(all-memories ceiling {ceiling})"
            )
    d6 = report.d6_counts()
    if any(d6.values()):
        lines.append("d6: " + " ".join(f"{k}={v}" for k, v in d6.items()))
    lines.extend(format_acceptable(report))
    return "\n".join(lines)


def _frac(ok: int, n: int) -> str:
    return f"{ok}/{n} ({ok / n:.0%})" if n else "-"


def format_acceptable(report: Report) -> list[str]:
    """Lines of the acceptable-action metric: overall, per type, per style, high-risk, unsafe."""
    s = report.acceptable_summary()
    lines = [
        "acceptable action: "
        + "  ".join(
            f"{k}={_frac(v['ok'], v['n'])}"
            for k, v in s.items()
            if k == "all" or k in report.conflict_types()
        )
    ]
    styles = [k for k in s if k.startswith("style:")]
    if styles:
        lines.append(
            "acceptable by style: "
            + "  ".join(f"{k[6:]}={_frac(s[k]['ok'], s[k]['n'])}" for k in styles)
        )
    risk = [k for k in ("high-risk", "high-risk controls") if k in s]
    unsafe = s["unsafe"]
    lines.append(
        "high-risk: "
        + "  ".join(f"{k}={_frac(s[k]['ok'], s[k]['n'])}" for k in risk)
        + ("  " if risk else "")
        + f"unsafe commits={unsafe['unsafe']}/{unsafe['n']}"
    )
    return lines


def _judge_label(spec: ComponentSpec) -> str:
    model = spec.args.get("model")
    return f"{spec.name}:{model}" if model else spec.name


# -- noise ablation --------------------------------------------------------------------------


class AblationRow(BaseModel):
    """One noise level of a paired ablation."""

    model_config = ConfigDict(extra="forbid")

    distractors: int
    n: int = Field(description="Paired instances (no error at any level).")
    mean_total: float
    mean_by_type: dict[str, float] = Field(default_factory=dict)
    dimensions: dict[str, float] = Field(default_factory=dict)
    delta_vs_base: float = Field(description="Paired mean total difference vs the base level.")
    actions_changed: int = Field(description="Paired instances whose action differs from base.")
    acceptable: int = Field(
        default=0, description="Paired instances answered with an acceptable action."
    )
    errors: int = Field(default=0, description="Instances that failed at this level.")


class PairedSummary(BaseModel):
    """The distractor-noise ablation, paired by instance."""

    model_config = ConfigDict(extra="forbid")

    policy: ComponentSpec
    judge: ComponentSpec
    relations: str | None = None
    seed: int
    base_level: int
    instance_ids: list[str] = Field(description="Instances paired across every level.")
    rows: list[AblationRow]

    def table(self) -> str:
        """A plain-text table, one row per level."""
        types = sorted({t for r in self.rows for t in r.mean_by_type}, key=_type_order)
        head = (
            f"policy={self.policy.name} judge={_judge_label(self.judge)} "
            + (f"relations={self.relations} " if self.relations else "")
            + f"seed={self.seed} paired instances={len(self.instance_ids)}"
        )
        cols = (
            f"{'N':>3} {'n':>4} {'total':>6} {'delta':>6} "
            + " ".join(f"{t:>6}" for t in types)
            + f" {'act.ok':>6} {'act.chg':>7} {'err':>4}"
        )
        lines = [head, cols]
        for r in self.rows:
            lines.append(
                f"{r.distractors:>3} {r.n:>4} {r.mean_total:>6.2f} {r.delta_vs_base:>+6.2f} "
                + " ".join(f"{r.mean_by_type.get(t, 0.0):>6.2f}" for t in types)
                + f" {r.acceptable:>6} {r.actions_changed:>7} {r.errors:>4}"
            )
        return "\n".join(lines)


def _type_order(t: str) -> tuple[int, str]:
    order = ["CPC", "BOC", "SCC", "NONE"]
    return (order.index(t) if t in order else len(order), t)


def paired_summary(reports: Mapping[int, Report]) -> PairedSummary:
    """Compare ablation levels on the instances that ran without error at every level.

    The lowest level is the base: ``delta_vs_base`` is the paired mean difference of totals,
    ``actions_changed`` counts paired instances whose action moved.
    """
    if not reports:
        raise ValueError("reports must hold at least one level")
    levels = sorted(reports)
    by_level = {lv: {r.id: r for r in reports[lv].instances} for lv in levels}
    common = set.intersection(
        *({i for i, r in rows.items() if r.error is None} for rows in by_level.values())
    )
    first = reports[levels[0]]
    ids = [r.id for r in first.instances if r.id in common]
    base = by_level[levels[0]]
    rows: list[AblationRow] = []
    for lv in levels:
        cur = by_level[lv]
        paired = [cur[i] for i in ids]
        n = len(paired)
        by_type: dict[str, list[int]] = {}
        for r in paired:
            by_type.setdefault(r.conflict_type, []).append(r.scores.total)
        rows.append(
            AblationRow(
                distractors=lv,
                n=n,
                mean_total=sum(r.scores.total for r in paired) / n if n else 0.0,
                mean_by_type={t: sum(v) / len(v) for t, v in by_type.items()},
                dimensions={
                    f"d{d}": sum(getattr(r.scores, f"d{d}") for r in paired) / n if n else 0.0
                    for d in range(1, 6)
                },
                delta_vs_base=(
                    sum(cur[i].scores.total - base[i].scores.total for i in ids) / n if n else 0.0
                ),
                actions_changed=sum(cur[i].action != base[i].action for i in ids),
                acceptable=sum(r.action_ok for r in paired),
                errors=sum(r.error is not None for r in reports[lv].instances),
            )
        )
    return PairedSummary(
        policy=first.policy,
        judge=first.judge,
        relations=first.relations,
        seed=first.seed,
        base_level=levels[0],
        instance_ids=ids,
        rows=rows,
    )


def run_noise_ablation(
    levels: Sequence[int] = (0, 2, 4, 6),
    *,
    dataset: DatasetArg = None,
    policy: str | Policy = "caap",
    policy_args: Mapping[str, Any] | None = None,
    judge: str | Judge = "structural",
    judge_args: Mapping[str, Any] | None = None,
    limit: int | None = None,
    seed: int = 0,
    out: str | Path | None = None,
    progress: bool = True,
    relations: str | None = None,
) -> dict[int, Report]:
    """Run the oracle track at every distractor level on the same instances and seed.

    With ``out``, writes ``OUT/distractors-N/report.{json,html}`` per level and
    ``OUT/summary.json`` / ``OUT/summary.txt`` (the :func:`paired_summary`). ``relations``
    names the relation layer of a policy given by name (see :func:`run`).

    Raises:
        ValueError: no levels, repeated levels, or a level above the distractors some
            selected instance has.
    """
    levels = list(levels)
    if not levels:
        raise ValueError("levels must not be empty")
    if len(set(levels)) != len(levels):
        raise ValueError(f"levels must be distinct, got {levels}")
    _check_limit(limit)
    _check_relations(relations)
    instances, label = _load(dataset)
    selected = instances[:limit] if limit is not None else instances
    if not selected:
        raise ValueError("the dataset has no instances")
    most = min(len(i.by_role("distractor")) for i in selected)
    bad = [
        lv
        for lv in levels
        if isinstance(lv, bool) or not isinstance(lv, int) or not 0 <= lv <= most
    ]
    if bad:
        raise ValueError(
            f"levels must be ints between 0 and {most} (distractors per instance), got {bad}"
        )
    # One policy and one judge for every level, so the levels differ only in the noise.
    the_policy = _build_policy(policy, policy_args, relations)
    the_judge = _build_judge(judge, judge_args)
    layer = relations if relations is not None else relations_of(the_policy)
    reports: dict[int, Report] = {}
    for lv in levels:
        rep = run(
            selected,
            track="oracle",
            policy=the_policy,
            judge=the_judge,
            distractors=lv,
            seed=seed,
            progress=progress,
        )
        rep.dataset = label
        rep.limit = limit
        rep.relations = layer
        if out is not None:
            write_outputs(rep, Path(out) / f"distractors-{lv}")
        reports[lv] = rep
    if out is not None:
        summary = paired_summary(reports)
        Path(out, "summary.json").write_text(summary.model_dump_json(indent=2), encoding="utf-8")
        Path(out, "summary.txt").write_text(summary.table() + "\n", encoding="utf-8")
    return reports
