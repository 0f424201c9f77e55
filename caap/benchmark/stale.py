"""Stale-state probes: does a memory + policy act on the current state?

Modelled on the three published probes for stale memories:

- **state resolution** — "do I still ...?": the answer must give the current state;
- **premise resistance** — a query that presupposes the old state: the answer must say the
  premise is out of date and answer for the current state;
- **implicit policy adaptation** — a neutral request whose safe answer depends on the update:
  the answer must build on the update, not on the old state.

Each scenario (JSON Lines, :class:`StaleScenario`) is a persona's dated multi-session history
with distractor sessions; user turns carry a judge-only ``tag`` (``old`` / ``update`` /
``background`` / ``distractor``). The runner stores every user turn through a memory backend
with the session date as ``observed_at``, recalls for each probe query, gives the policy the
recalled memories (re-identified, without provenance or tags) and scores the response with
:func:`score_probe`, a deterministic rule set.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from caap.benchmark.dataset import Persona, _parsed_lines, _strict
from caap.models import Action, Memory, Response

__all__ = [
    "PROBE_TYPES",
    "ProbeResult",
    "ProbeScore",
    "ProbeTurn",
    "StaleLine",
    "StaleProbe",
    "StaleReport",
    "StaleScenario",
    "StaleSession",
    "default_stale_path",
    "iter_stale_lines",
    "load_stale_scenarios",
    "run_stale_probes",
    "score_probe",
]

ProbeType = Literal["state_resolution", "premise_resistance", "implicit_adaptation"]
#: The three probe types, in report order.
PROBE_TYPES: tuple[ProbeType, ...] = (
    "state_resolution",
    "premise_resistance",
    "implicit_adaptation",
)
#: Version of the JSON report layout.
REPORT_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProbeTurn(_Strict):
    """One dialogue turn; user turns may carry a judge-only tag."""

    role: Literal["user", "assistant"]
    content: str = Field(min_length=1)
    tag: Literal["old", "update", "background", "distractor"] | None = Field(
        default=None, description="Judge-only: what the turn is to the scenario."
    )

    @model_validator(mode="after")
    def _tag_on_user_turns(self) -> ProbeTurn:
        if self.tag is not None and self.role != "user":
            raise ValueError("only user turns carry a tag")
        return self


class StaleSession(_Strict):
    """One dated conversation."""

    id: str = Field(min_length=1)
    date: date
    turns: list[ProbeTurn] = Field(min_length=1)


class StaleProbe(_Strict):
    """One query of one probe type."""

    type: ProbeType
    query: str = Field(min_length=1)


class StaleScenario(_Strict):
    """A persona's history in which a later observation makes an earlier one stale."""

    id: str = Field(min_length=1)
    kind: Literal["direct", "propagated"] = Field(
        description="direct: the same aspect changes (Type I); propagated: an aspect it "
        "depends on changes (Type II)."
    )
    persona: Persona
    domain: str = Field(min_length=1)
    change: str = Field(min_length=1, description="Judge-only: the change, in words.")
    sessions: list[StaleSession] = Field(min_length=3)
    probes: list[StaleProbe] = Field(min_length=3, max_length=3)
    current_terms: list[str] = Field(
        min_length=1, description="Judge-only: words that name the current state (any one)."
    )
    stale_terms: list[str] = Field(
        default_factory=list, description="Judge-only: words that name the old state."
    )
    acceptable_actions: list[Action] = Field(
        min_length=1, description="Judge-only: actions that act on the current state."
    )
    held_out: bool = Field(
        default=False, description="Written after the policy's rules were frozen."
    )
    style: Literal["dated", "narrative", "implicit", "chatty"] | None = Field(
        default=None, description="Judge-only: the writing style of the scenario."
    )

    @model_validator(mode="after")
    def _consistent(self) -> StaleScenario:
        types = sorted(p.type for p in self.probes)
        if types != sorted(PROBE_TYPES):
            raise ValueError(f"probes must be one of each type {list(PROBE_TYPES)}, got {types}")
        ids = [s.id for s in self.sessions]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate session ids: {dupes}")
        dates: dict[str, list[date]] = {}
        for s in self.sessions:
            for t in s.turns:
                if t.tag is not None:
                    dates.setdefault(t.tag, []).append(s.date)
        for need in ("old", "update", "distractor"):
            if need not in dates:
                raise ValueError(f"no user turn is tagged {need!r}")
        if min(dates["update"]) <= max(dates["old"]):
            raise ValueError(
                "every 'update' turn must come in a session dated after the 'old' ones"
            )
        return self

    def probe(self, probe_type: ProbeType) -> StaleProbe:
        """The probe of one type."""
        return next(p for p in self.probes if p.type == probe_type)


def default_stale_path() -> Path:
    """The stale-state scenarios shipped with caap (a directory of ``.jsonl`` files)."""
    return Path(str(resources.files("caap.benchmark") / "data" / "stale"))


@dataclass(frozen=True)
class StaleLine:
    """One non-blank line of a scenario file: where it is, and its scenario or its error."""

    where: str
    scenario: StaleScenario | None
    error: str | None
    raw_id: str | None


def iter_stale_lines(path: str | Path | None = None) -> Iterator[StaleLine]:
    """Every non-blank line of a file or directory (default: the shipped set), parsed and
    validated, without stopping at the first bad one (the validator reports them all).

    Raises:
        DatasetError: ``path`` does not exist or is a directory without ``.jsonl`` files.
    """
    root = Path(path) if path is not None else default_stale_path()
    for where, sc, error, ident in _parsed_lines(root, StaleScenario, "<scenario>"):
        yield StaleLine(where, sc, error, ident)


def iter_stale_scenarios(path: str | Path | None = None) -> Iterator[StaleScenario]:
    """Scenarios from a ``.jsonl`` file or a directory of them (default: the shipped set).

    Raises:
        DatasetError: at the first bad line, naming the file, the line and the field.
    """
    root = Path(path) if path is not None else default_stale_path()
    return _strict(_parsed_lines(root, StaleScenario, "<scenario>"), "scenario")


def load_stale_scenarios(path: str | Path | None = None) -> list[StaleScenario]:
    """All scenarios from a file or directory (default: the shipped set)."""
    return list(iter_stale_scenarios(path))


# -- scoring ---------------------------------------------------------------------------------

#: Words that mark a state as changed, out of date or history (any phrasing will do).
_CORRECTION = re.compile(
    r"\b(?:no longer|not current|out of date|outdated|out-of-date|has changed|have changed|"
    r"changed since|something changed|since changed|replaces?|replaced|superseded?|"
    r"used to|any ?more|as history|earlier note|previously|not the case|isn't the case|"
    r"on hold|may not (?:be|hold|apply)|might not (?:be|hold|apply)|assumes?|"
    r"before (?:the|your) (?:move|change))\b",
    re.I,
)


class ProbeScore(BaseModel):
    """The scorer's verdict on one response, with every check it made."""

    model_config = ConfigDict(extra="forbid")

    passed: bool
    checks: dict[str, bool] = Field(description="Check name -> whether it held.")
    reason: str = Field(description="The failed checks, or 'all checks hold'.")


def _has_any(text: str, terms: Sequence[str]) -> bool:
    low = text.lower()
    return any(t.lower() in low for t in terms)


def score_probe(
    scenario: StaleScenario,
    probe_type: ProbeType,
    response: Response,
    shown_tags: Mapping[str, str | None],
) -> ProbeScore:
    """Score one response deterministically.

    ``shown_tags`` maps each memory id the policy saw to the tag of the turn it came from.
    Checks (all must hold for its probe type):

    - ``cites_update``: the response cites a memory from an ``update`` turn;
    - ``names_current``: it names the current state (one of ``current_terms``);
    - ``action_ok``: its decision is one of the scenario's ``acceptable_actions``;
    - premise resistance: ``flags_change`` — it says the premise is out of date (a
      correction phrase);
    - state resolution and implicit adaptation: ``no_stale_assertion`` — if it names the old
      state (``stale_terms``) it marks it as changed (a correction phrase).
    """
    text = response.text
    flags = bool(_CORRECTION.search(text))
    checks = {
        "cites_update": any(shown_tags.get(i) == "update" for i in response.cited_memory_ids),
        "names_current": _has_any(text, scenario.current_terms),
        "action_ok": response.decision.action in scenario.acceptable_actions,
    }
    if probe_type == "premise_resistance":
        checks["flags_change"] = flags
    else:
        checks["no_stale_assertion"] = flags or not _has_any(text, scenario.stale_terms)
    failed = [k for k, v in checks.items() if not v]
    return ProbeScore(
        passed=not failed,
        checks=checks,
        reason="failed: " + ", ".join(failed) if failed else "all checks hold",
    )


# -- running ---------------------------------------------------------------------------------


class ProbeResult(BaseModel):
    """One probe of one scenario: what was shown, answered and scored."""

    model_config = ConfigDict(extra="forbid")

    scenario_id: str
    kind: Literal["direct", "propagated"]
    held_out: bool
    style: str | None = Field(default=None, description="Judge-only writing style, if labelled.")
    probe_type: ProbeType
    query: str
    action: str
    passed: bool
    checks: dict[str, bool]
    reason: str
    shown_tags: list[str | None] = Field(description="Tag of each shown memory, in order.")
    cited_tags: list[str | None]
    response: str
    rationale: str = ""
    error: str | None = None
    seconds: float = 0.0


class StaleReport(BaseModel):
    """The JSON report of one probe run (field order is part of the file format)."""

    model_config = ConfigDict(extra="forbid")

    version: int = REPORT_VERSION
    policy: dict[str, Any]
    backend: str
    k: int
    dataset: str
    scorer: str = "caap.benchmark.stale.score_probe"
    relations: str | None = Field(
        default=None,
        description="The relation layer the agent and policy read memory text with (None: "
        "their defaults, or a policy with none).",
    )
    results: list[ProbeResult] = Field(default_factory=list)

    def accuracy(
        self,
        probe_type: ProbeType | None = None,
        *,
        kind: str | None = None,
        held_out: bool | None = None,
        style: str | None = None,
    ) -> tuple[int, int]:
        """``(passed, total)`` over the results that match the filters."""
        rows = [
            r
            for r in self.results
            if (probe_type is None or r.probe_type == probe_type)
            and (kind is None or r.kind == kind)
            and (held_out is None or r.held_out == held_out)
            and (style is None or r.style == style)
        ]
        return sum(r.passed for r in rows), len(rows)

    def styles(self) -> list[str]:
        """Writing styles present (judge-only labels), in a stable order."""
        order = ("dated", "narrative", "implicit", "chatty")
        present = {r.style for r in self.results if r.style is not None}
        return [s for s in order if s in present] + sorted(present - set(order))

    def summary(self) -> dict[str, Any]:
        """Accuracy per probe type (premise resistance among them), overall and split by
        kind, by held-out status and by writing style (``style:NAME``)."""
        out: dict[str, Any] = {}
        splits: list[tuple[str, dict[str, Any]]] = [
            ("all", {}),
            ("direct", {"kind": "direct"}),
            ("propagated", {"kind": "propagated"}),
            ("written_with_rules", {"held_out": False}),
            ("held_out", {"held_out": True}),
        ]
        splits += [(f"style:{st}", {"style": st}) for st in self.styles()]
        for split, filt in splits:
            row: dict[str, Any] = {}
            for t in (*PROBE_TYPES, None):
                p, n = self.accuracy(t, **filt)
                row[t or "overall"] = {"passed": p, "total": n, "accuracy": p / n if n else None}
            out[split] = row
        return out

    def table(self) -> str:
        """A plain-text table of :meth:`summary`."""
        s = self.summary()
        cols = [*PROBE_TYPES, "overall"]
        lines = ["split".ljust(20) + "".join(c.rjust(22) for c in cols)]
        for split, row in s.items():
            if not row["overall"]["total"]:
                continue
            cells = []
            for c in cols:
                cell = row[c]
                acc = cell["accuracy"]
                cells.append(
                    (
                        f"{cell['passed']}/{cell['total']} ({acc:.0%})" if acc is not None else "-"
                    ).rjust(22)
                )
            lines.append(split.ljust(20) + "".join(cells))
        return "\n".join(lines)


def _shown(position: int) -> str:
    return f"mem-{position + 1:02d}"


def run_stale_probes(
    *,
    dataset: str | Path | None = None,
    backend: str = "builtin",
    policy: str = "caap",
    policy_args: Mapping[str, Any] | None = None,
    k: int = 10,
    out: str | Path | None = None,
    progress: bool = True,
    agent_factory: Any = None,
    relations: str | None = None,
) -> StaleReport:
    """Run every probe of every scenario and return (and, with ``out``, write) the report.

    Each scenario's persona gets its own user id in one :class:`~caap.Agent` over ``backend``;
    every user turn becomes one memory with ``observed_at`` = the session date. Each probe
    query is answered from ``agent.recall(query, k)``. Failures of the backend or the policy
    are recorded per probe (``error``, not passed); nothing raises past a bad argument.
    ``relations`` names the relation layer both the agent and the policy read memory text
    with (see :func:`caap.benchmark.runner.run`); it is recorded in the report.
    """
    from tqdm import tqdm

    from caap.benchmark.registry import spec_of
    from caap.benchmark.runner import _build_policy, _check_relations, relations_of

    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    _check_relations(relations)
    scenarios = load_stale_scenarios(dataset)
    pol = _build_policy(policy, policy_args, relations)
    spec = spec_of(pol)
    report = StaleReport(
        policy={"name": spec.name, "args": spec.args},
        backend=backend,
        k=k,
        dataset=str(dataset) if dataset is not None else "shipped:stale",
        relations=relations if relations is not None else relations_of(pol),
    )
    if agent_factory is None:
        from caap.agent import Agent

        agent_factory = Agent
    with tempfile.TemporaryDirectory(prefix="caap-stale-") as tmp:
        extra: dict[str, Any] = {} if relations is None else {"relations": relations}
        agent = agent_factory(Path(tmp), backend=backend, **extra)
        try:
            bar = tqdm(
                total=3 * len(scenarios), desc="stale probes", unit="probe", disable=not progress
            )
            for sc in scenarios:
                report.results.extend(_run_scenario(agent, pol, sc, k))
                bar.update(3)
            bar.close()
        finally:
            agent.close()
    if out is not None:
        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        (d / "stale_report.json").write_text(
            json.dumps({**report.model_dump(mode="json"), "summary": report.summary()}, indent=2),
            encoding="utf-8",
        )
    return report


def _run_scenario(agent: Any, policy: Any, sc: StaleScenario, k: int) -> list[ProbeResult]:
    user = f"stale:{sc.persona.id}:{sc.id}"
    tags: dict[str, str | None] = {}
    base: dict[str, Any] = {
        "scenario_id": sc.id,
        "kind": sc.kind,
        "held_out": sc.held_out,
        "style": sc.style,
    }
    try:
        for s in sorted(sc.sessions, key=lambda s: (s.date, s.id)):
            items = [
                {"text": t.content, "observed_at": s.date, "provenance": {"session": s.id}}
                for t in s.turns
                if t.role == "user"
            ]
            stored = agent.remember_many(items, user) if items else []
            user_turns = [t for t in s.turns if t.role == "user"]
            for m, t in zip(stored, user_turns, strict=True):
                tags[m.id] = t.tag
    except Exception as exc:
        return [
            ProbeResult(
                **base,
                probe_type=p.type,
                query=p.query,
                action="error",
                passed=False,
                checks={},
                reason="ingestion failed",
                shown_tags=[],
                cited_tags=[],
                response="",
                error=f"{type(exc).__name__}: {exc}",
            )
            for p in sc.probes
        ]
    results = []
    for ptype in PROBE_TYPES:
        p = sc.probe(ptype)
        started = time.perf_counter()
        try:
            recalled = agent.recall(p.query, user, k=k).memories
            # The policy sees memories re-identified in recall order, without provenance or
            # metadata (session ids and tags are the scenario's, not the user's).
            shown: list[Memory] = [
                m.model_copy(update={"id": _shown(i), "provenance": {}, "metadata": {}})
                for i, m in enumerate(recalled)
            ]
            shown_tags = {_shown(i): tags.get(m.id) for i, m in enumerate(recalled)}
            response = policy.respond(shown, p.query)
            score = score_probe(sc, ptype, response, shown_tags)
            results.append(
                ProbeResult(
                    **base,
                    probe_type=ptype,
                    query=p.query,
                    action=response.decision.action.value,
                    passed=score.passed,
                    checks=score.checks,
                    reason=score.reason,
                    shown_tags=list(shown_tags.values()),
                    cited_tags=[shown_tags.get(i) for i in response.cited_memory_ids],
                    response=response.text,
                    rationale=response.decision.rationale,
                    seconds=time.perf_counter() - started,
                )
            )
        except Exception as exc:
            results.append(
                ProbeResult(
                    **base,
                    probe_type=ptype,
                    query=p.query,
                    action="error",
                    passed=False,
                    checks={},
                    reason="the backend or the policy failed",
                    shown_tags=[],
                    cited_tags=[],
                    response="",
                    error=f"{type(exc).__name__}: {exc}",
                    seconds=time.perf_counter() - started,
                )
            )
    return results
