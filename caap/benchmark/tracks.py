"""The two tracks of the TANGLE harness, one instance at a time.

- **Oracle**: the curated memories (:func:`caap.benchmark.presentation.present`) go straight to
  the policy.
- **Pipeline**: every user turn of the persona's dated sessions is stored through a memory
  backend (:class:`PipelineBank`); the query retrieves a bank; the bank goes to the policy.
  The bank's conflict observability is measured with and without the conflict-graph expansion.

Both tracks judge the response the same way, and neither lets an exception escape: a failing
policy, judge or backend becomes :attr:`InstanceResult.error` with zero scores.
"""

from __future__ import annotations

import re
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from caap.adapters.base import MemoryBackend
from caap.benchmark.base import Judge, JudgeInput, Scores
from caap.benchmark.dataset import Instance, Session
from caap.benchmark.observability import CachingEncoder, Encoder, Observability, observe
from caap.benchmark.presentation import present, shown_id, user_id_for
from caap.benchmark.report import BudgetLevels, InstanceResult, ObservabilityResult, ScoreRow
from caap.models import Memory, Response
from caap.policy.base import Policy

__all__ = [
    "DEFAULT_K",
    "ERROR_ACTION",
    "PipelineBank",
    "RetrievedBanks",
    "run_oracle_instance",
    "run_pipeline_instance",
    "score_row",
]

#: How many memories the backend search returns on the pipeline track.
DEFAULT_K = 10
#: ``InstanceResult.action`` when the policy failed before deciding.
ERROR_ACTION = "error"

_ZERO = ScoreRow(d1=0, d2=0, d3=0, d4=0, d5=0, total=0)


def score_row(scores: Scores) -> ScoreRow:
    """The report row of a judge's scores."""
    return ScoreRow(
        d1=scores.d1, d2=scores.d2, d3=scores.d3, d4=scores.d4, d5=scores.d5, total=scores.total
    )


def _describe(exc: BaseException) -> str:
    # One line for the report, plus the innermost frame so the failure can be found.
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _base(instance: Instance, distractors: int | None) -> dict[str, Any]:
    return {
        "id": instance.id,
        "conflict_type": instance.conflict_type,
        "high_risk": instance.high_risk,
        "domain": instance.domain,
        "style": instance.style,
        "distractors": distractors,
    }


def _failed(
    fields: dict[str, Any], exc: Exception, started: float, response: Response | None = None
) -> InstanceResult:
    """The result of an instance that failed: zero scores, the error, what was answered."""
    return InstanceResult(
        **fields,
        action=response.decision.action.value if response is not None else ERROR_ACTION,
        scores=_ZERO,
        response=response.text if response is not None else "",
        decision=response.decision if response is not None else None,
        error=_describe(exc),
        seconds=time.perf_counter() - started,
    )


def _respond_and_judge(
    instance: Instance,
    policy: Policy,
    judge: Judge,
    memories: Sequence[Memory],
    shown_ids: dict[str, str],
    shown_texts: dict[str, str],
    fields: dict[str, Any],
    started: float,
) -> InstanceResult:
    response: Response | None = None
    try:
        response = policy.respond(list(memories), instance.query)
        if not isinstance(response, Response):
            raise TypeError(
                f"policy {getattr(policy, 'name', policy)!r} returned "
                f"{type(response).__name__}, not a Response"
            )
        scores = judge.score(
            JudgeInput(
                instance=instance, response=response, shown_ids=shown_ids, shown_texts=shown_texts
            )
        )
    except Exception as exc:
        got = response if isinstance(response, Response) else None
        return _failed(fields, exc, started, got)
    return InstanceResult(
        **fields,
        action=response.decision.action.value,
        scores=score_row(scores),
        d6=scores.d6,
        response=response.text,
        decision=response.decision,
        judge_rationale=dict(scores.rationale),
        seconds=time.perf_counter() - started,
    )


def run_oracle_instance(
    instance: Instance,
    policy: Policy,
    judge: Judge,
    *,
    distractors: int | None = None,
    seed: int = 0,
) -> InstanceResult:
    """Present the curated memories, ask the policy, judge the response.

    Never raises for a failing policy or judge: the failure is recorded in ``error`` with zero
    scores. A ``distractors`` value out of range is a caller error and also lands in ``error``.
    """
    started = time.perf_counter()
    fields = _base(instance, distractors)
    try:
        shown = present(instance, distractors=distractors, seed=seed)
    except Exception as exc:
        return _failed(fields, exc, started)
    fields["shown_memory_ids"] = shown.instance_ids
    return _respond_and_judge(
        instance,
        policy,
        judge,
        shown.memories,
        shown.shown_ids,
        shown.shown_texts,
        fields,
        started,
    )


# -- pipeline track --------------------------------------------------------------------------


@dataclass
class RetrievedBanks:
    """What one query retrieved, with and without the conflict-graph expansion."""

    without_graph: list[Memory]
    with_graph: list[Memory] | None = None
    """``None`` when the expansion was not asked for."""
    same_size_search: list[Memory] | None = None
    """Backend search with ``k`` = the expanded bank's size: the equal-budget peer."""
    budgets: dict[int, tuple[list[Memory], list[Memory], list[Memory]]] = field(
        default_factory=dict
    )
    """Budget -> (search with k = budget, ``recall(budget=...)``, search as large as it)."""


@dataclass
class _PersonaState:
    memories: int = 0
    seconds: float = 0.0
    error: BaseException | None = None
    sessions: list[str] = field(default_factory=list)


class PipelineBank:
    """The pipeline track's memory: every persona's dialogue stored through a backend.

    A persona is ingested the first time one of its instances is retrieved for: all sessions of
    all its instances in ``instances`` (not only the ones being evaluated, so the other aspects
    of the persona are realistic noise), sorted by ``(date, session id)``, one
    ``Agent.remember_many`` batch per session, each user turn one memory with
    ``observed_at=session.date`` and ``provenance={"session": session.id, "turn": str(i)}``
    (``i`` is the turn's index in the session). One :class:`~caap.Agent` holds every persona,
    each under its own user id ``tangle:<persona id>``.

    Args:
        instances: The whole dataset (the bank of a persona is built from all of its instances).
        backend: ``"builtin"``, another registered backend name, or a backend instance.
        backend_options: Keyword arguments for a backend given by name.
        path: Data directory for the agent; a temporary directory (removed on :meth:`close`)
            when ``None``.
        k: How many memories the backend search returns.
        agent_factory: Builds the agent from ``(path, backend, backend_options)``; for tests.
        sentences: Store one memory per sentence of a user turn instead of one per turn
            (provenance ``turn`` is then ``"<turn>.<sentence>"``).
        interleave: When above 1, mix topics: the persona's sessions, in date order, are put
            this many at a time (from different instances where possible) into one
            conversation dated like its first session, each session's turns in order, one
            ``remember_many`` batch per conversation. Provenance keeps each turn's own session
            (for scoring only; the agent never reads it).
        budgets: Recall budgets measured per instance (plain search with ``k`` = budget, the
            graph's ``recall(budget=...)`` and a search as large as the graph's bank).
        relations: The relation layer the agent's conflict graph reads text with (a name, see
            :func:`caap.conflict_graph.relations.get_relation_layer`); ``None``: the default.
    """

    def __init__(
        self,
        instances: Sequence[Instance],
        *,
        backend: str | MemoryBackend = "builtin",
        backend_options: Mapping[str, Any] | None = None,
        path: str | Path | None = None,
        k: int = DEFAULT_K,
        agent_factory: Callable[..., Any] | None = None,
        sentences: bool = False,
        interleave: int = 0,
        budgets: Sequence[int] = (),
        relations: str | None = None,
    ) -> None:
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        if not isinstance(interleave, int) or interleave < 0:
            raise ValueError(f"interleave must be a non-negative int, got {interleave!r}")
        if any(not isinstance(b, int) or b < 1 for b in budgets):
            raise ValueError(f"budgets must be positive ints, got {list(budgets)!r}")
        self.k = k
        self.sentences = sentences
        self.interleave = interleave
        self.budgets = tuple(budgets)
        self.backend_name = backend if isinstance(backend, str) else backend.name
        self._instances = list(instances)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="caap-tangle-")
            path = self._tmp.name
        self.path = Path(path)
        if agent_factory is None:
            from caap.agent import Agent

            agent_factory = Agent
        extra: dict[str, Any] = {} if relations is None else {"relations": relations}
        self.agent = agent_factory(
            self.path, backend=backend, backend_options=dict(backend_options or {}), **extra
        )
        self._personas: dict[str, _PersonaState] = {}
        self._encoder: CachingEncoder | None = None

    # -- building ----------------------------------------------------------------------------
    def sessions(self, persona_id: str) -> list[Session]:
        """Every session of the persona's instances, sorted by ``(date, session id)``."""
        seen: dict[str, Session] = {}
        for inst in self._instances:
            if inst.persona.id == persona_id:
                for s in inst.sessions:
                    seen.setdefault(s.id, s)
        return sorted(seen.values(), key=lambda s: (s.date, s.id))

    def ingest(self, persona_id: str) -> int:
        """Store the persona's dialogue once; returns how many memories were stored.

        Raises the ingestion error (again, on every later call) if storing failed.
        """
        state = self._personas.get(persona_id)
        if state is None:
            state = self._personas[persona_id] = _PersonaState()
            started = time.perf_counter()
            user = f"tangle:{persona_id}"
            try:
                for conversation in self.conversations(persona_id):
                    items = [item for s in conversation for item in self._items(s, conversation[0])]
                    if items:
                        state.memories += len(self.agent.remember_many(items, user))
                    state.sessions += [s.id for s in conversation]
            except Exception as exc:
                state.error = exc
            state.seconds = time.perf_counter() - started
        if state.error is not None:
            raise state.error
        return state.memories

    def conversations(self, persona_id: str) -> list[list[Session]]:
        """The persona's sessions grouped into the conversations they are stored as.

        One session each, or with ``interleave`` > 1, that many consecutive sessions (by date)
        per conversation, taken from different instances where possible.
        """
        sessions = self.sessions(persona_id)
        if self.interleave <= 1:
            return [[s] for s in sessions]
        owner = {s.id: i.id for i in self._instances for s in i.sessions}
        pending = list(sessions)
        out: list[list[Session]] = []
        while pending:
            group = [pending.pop(0)]
            # Look only a little ahead: a conversation keeps (near) date order.
            for s in pending[: 4 * self.interleave]:
                if len(group) == self.interleave:
                    break
                if all(owner.get(s.id) != owner.get(g.id) for g in group):
                    group.append(s)
            pending = [s for s in pending if s not in group]
            out.append(group)
        return out

    def _items(self, s: Session, first: Session) -> list[dict[str, Any]]:
        items = []
        for i, t in enumerate(s.turns):
            if t.role != "user":
                continue
            parts = _sentences(t.content) if self.sentences else [t.content]
            for j, text in enumerate(parts):
                turn = f"{i}.{j}" if self.sentences else str(i)
                items.append(
                    {
                        "text": text,
                        "observed_at": first.date,
                        "provenance": {"session": s.id, "turn": turn},
                    }
                )
        return items

    def all_memories(self, instance: Instance) -> list[Memory]:
        """Every memory stored for the instance's persona (the observability ceiling's bank)."""
        self.ingest(instance.persona.id)
        memories = getattr(self.agent, "memories", None)
        return list(memories(user_id_for(instance))) if memories is not None else []

    def topic_agreement(self) -> dict[str, float]:
        """Persona id -> adjusted Rand index of the stored memories' aspects against the
        instances their sessions belong to (personas ingested so far, whose memories carry
        session provenance)."""
        from caap.conflict_graph.topics import topic_agreement

        owner = {s.id: i.id for i in self._instances for s in i.sessions}
        memories = getattr(self.agent, "memories", None)
        out: dict[str, float] = {}
        if memories is None:
            return out
        for persona, state in self._personas.items():
            if state.error is not None:
                continue
            rows = [
                (m.aspect or "", owner[m.provenance["session"]])
                for m in memories(f"tangle:{persona}")
                if m.provenance.get("session") in owner
            ]
            if rows:
                out[persona] = topic_agreement([a for a, _ in rows], [t for _, t in rows])
        return out

    def ingest_seconds(self) -> dict[str, float]:
        """Persona id -> seconds its ingestion took."""
        return {p: s.seconds for p, s in self._personas.items()}

    def memory_counts(self) -> dict[str, int]:
        """Persona id -> memories stored."""
        return {p: s.memories for p, s in self._personas.items()}

    # -- reading -----------------------------------------------------------------------------
    def retrieve(
        self, instance: Instance, *, graph_expansion: bool = True, budget: int | None = None
    ) -> RetrievedBanks:
        """The bank for ``instance.query``: backend search, and the agent's recall if asked
        (``recall(budget=budget)`` when a budget is given), plus the banks of every measured
        budget."""
        self.ingest(instance.persona.id)
        user = user_id_for(instance)
        query = instance.query
        search = self.agent.backend.search
        hits = search(query, user, k=self.k)
        banks = RetrievedBanks(without_graph=[h.memory for h in hits])
        for b in self.budgets:
            graph_bank = list(self.agent.recall(query, user, budget=b).memories)
            banks.budgets[b] = (
                [h.memory for h in search(query, user, k=b)],
                graph_bank,
                [h.memory for h in search(query, user, k=max(len(graph_bank), 1))],
            )
        if graph_expansion:
            if budget is not None:
                banks.with_graph = list(self.agent.recall(query, user, budget=budget).memories)
            else:
                banks.with_graph = list(self.agent.recall(query, user, k=self.k).memories)
            # The fair peer of an expanded bank is a search that may return as many memories.
            size = max(len(banks.with_graph), 1)
            banks.same_size_search = [
                h.memory for h in self.agent.backend.search(instance.query, user, k=size)
            ]
        return banks

    @property
    def encoder(self) -> Encoder | None:
        """The agent's embedder behind a cache, reused for observability matching."""
        if self._encoder is None:
            enc = getattr(self.agent, "embedder", None)
            if enc is None or not hasattr(enc, "encode"):
                return None
            self._encoder = CachingEncoder(enc)
        return self._encoder

    def close(self) -> None:
        """Close the agent and remove a temporary directory. Safe to call twice."""
        try:
            close = getattr(self.agent, "close", None)
            if close is not None:
                close()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None

    def __enter__(self) -> PipelineBank:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _sentences(text: str) -> list[str]:
    """A turn's sentences (split after ``.``, ``!`` or ``?`` and a space); the text if one."""
    parts = [p.strip() for p in re.split(r"(?<=[.!?])\s+", text) if p.strip()]
    return parts or [text]


def _for_policy(bank: Sequence[Memory]) -> list[Memory]:
    # Re-id in bank order (retrieval order is information a real agent has) and drop
    # provenance and metadata: session ids name the instance's aspect. Facets the graph holds
    # (source, context, aspect, value, observed_at) stay.
    return [
        m.model_copy(update={"id": shown_id(pos), "provenance": {}, "metadata": {}})
        for pos, m in enumerate(bank)
    ]


def _observability(
    policy_view: Observability,
    without: Observability,
    *,
    graph_expansion: bool,
    same_size: Observability | None = None,
) -> ObservabilityResult:
    return ObservabilityResult(
        level=policy_view.level,
        level_without_graph=without.level,
        level_search_same_size=same_size.level if same_size is not None else None,
        matched_core=policy_view.matched_core,
        matched_core_without_graph=without.matched_core,
        core_total=policy_view.core_total,
        bank_size=policy_view.bank_size,
        bank_size_without_graph=without.bank_size,
        rule=policy_view.rule_summary()
        + ("" if graph_expansion else " (graph expansion off: level is the search-only bank)"),
    )


def run_pipeline_instance(
    instance: Instance,
    policy: Policy,
    judge: Judge,
    bank: PipelineBank,
    *,
    graph_expansion: bool = True,
    encoder: Encoder | None = None,
    budget: int | None = None,
) -> InstanceResult:
    """Retrieve the bank for ``instance``, measure observability, ask the policy, judge.

    The policy sees the expanded bank (``agent.recall``) or, with ``graph_expansion=False``,
    the backend search alone, re-identified ``mem-01``... in bank order. The judge's
    ``shown_ids`` map each shown id to the instance memory it represents under the
    observability matching rule (``""`` when it represents none). Failures of the backend,
    the policy or the judge land in ``error``; nothing raises.
    """
    fields = _base(instance, None)
    started = time.perf_counter()
    try:
        # Ingestion happens once per persona; keep it out of this instance's seconds.
        bank.ingest(instance.persona.id)
        started = time.perf_counter()
        banks = bank.retrieve(instance, graph_expansion=graph_expansion, budget=budget)
        enc = encoder if encoder is not None else bank.encoder
        levels = [
            BudgetLevels(
                budget=b,
                search=observe(instance, s, encoder=enc).level,
                graph=observe(instance, g, encoder=enc).level,
                same_size=observe(instance, same, encoder=enc).level,
                graph_bank=len(g),
            )
            for b, (s, g, same) in banks.budgets.items()
        ]
        ceiling = observe(instance, bank.all_memories(instance), encoder=enc).level
        without = observe(instance, banks.without_graph, encoder=enc)
        same_size = None
        if banks.with_graph is not None:
            seen, seen_obs = banks.with_graph, observe(instance, banks.with_graph, encoder=enc)
            if banks.same_size_search is not None:
                same_size = observe(instance, banks.same_size_search, encoder=enc)
        else:
            seen, seen_obs = banks.without_graph, without
    except Exception as exc:
        return _failed(fields, exc, started)
    mapping = seen_obs.mapping()
    memories = _for_policy(seen)
    shown_ids = {m.id: mapping.get(orig.id, "") for m, orig in zip(memories, seen, strict=True)}
    shown_texts = {m.id: m.text for m in memories}
    fields["observability"] = _observability(
        seen_obs, without, graph_expansion=graph_expansion, same_size=same_size
    ).model_copy(update={"ceiling": ceiling, "budgets": levels})
    fields["shown_memory_ids"] = [shown_ids[m.id] for m in memories]
    return _respond_and_judge(
        instance, policy, judge, memories, shown_ids, shown_texts, fields, started
    )
