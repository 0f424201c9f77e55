"""The CAAP policy: ``decide`` then ``realize``, with an offline or an LLM backbone.

The LLM backbone makes one structured call per stage. Any model failure (timeout, 5xx,
refusal, malformed or schema-invalid output) falls back to the offline backbone for that stage
and is written into the decision record; it never crashes the agent.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from caap._embeddings import Embedder, get_embedder
from caap.conflict_graph.extractor import Extraction
from caap.conflict_graph.relations import RelationLayer, resolve_relations
from caap.conflict_graph.reliability import ReliabilityModel
from caap.conflict_graph.rules import GraphConfig
from caap.conflict_graph.stale import DependencyMap
from caap.llm import ChatModel, LLMError, Message, infer_model, structured_call
from caap.models import Action, ConflictType, Decision, Memory, Response, RiskTier
from caap.policy._analysis import Analysis, analyze
from caap.policy.offline import decide_offline, realize_offline

__all__ = ["CaapPolicy", "DecisionDraft"]

logger = logging.getLogger(__name__)


class DecisionDraft(BaseModel):
    """What the LLM backbone's ``decide`` call must return (a :class:`Decision` without the
    bookkeeping fields)."""

    model_config = ConfigDict(extra="forbid")

    action: Action = Field(
        description="commit, conditionalize, clarify, verify, defer or reversible_trial."
    )
    conflict_type: ConflictType = Field(
        description="CPC (depends on context), BOC (behaviour keeps switching), SCC (sources "
        "disagree), STALE (a later fact replaced an earlier one), NONE."
    )
    unresolved: str | None = Field(default=None, description="The variable that would settle it.")
    missing_information: str | None = Field(default=None, description="What to ask or check.")
    evidence: dict[str, list[str]] = Field(
        default_factory=dict, description="Side label -> ids of the memories supporting it."
    )
    risk: RiskTier = Field(description="Cost of being wrong: low, medium or high.")
    rationale: str = Field(description="Why this action, in one or two sentences.")


_DECIDE_SYSTEM = """You decide how an assistant should act on a user's memories before it answers.
Memories may disagree without any being false: a preference can depend on context, a behaviour
can keep switching, sources can contradict each other, a later fact can replace an earlier one.
Choose the least cautious action the evidence justifies, and be more cautious as the cost of
being wrong grows (medical, legal, care authority, records, authorization, money).
Actions: commit (one answer), conditionalize (if/then per context or phase), clarify (ask the
question that settles it), verify (check the governing source first), defer (hold a
consequential action), reversible_trial (a small step that is easy to undo).
Never commit to a consequential action on a high-risk source conflict before verification.
Reply with one JSON object matching the schema."""

_REALIZE_SYSTEM = """You are a personal assistant answering from the user's memories.
A decision has already been made; write the answer it calls for.
Rules: use only facts in the memories (cite ids like [mem-01]); name the conflict with the
memories' own content; for conditionalize give if/then branches; for clarify or verify ask the
question that would change the recommendation and say how each answer changes it; for verify
give a short verification plan; for reversible_trial propose one small, easy-to-undo step;
for defer say what to hold and until what. Write for a person, briefly."""


def _memory_lines(memories: Sequence[Memory]) -> str:
    rows = []
    for m in memories:
        facets = {
            k: v
            for k, v in (
                ("source", m.source),
                ("context", m.context),
                ("when", m.observed_at.date().isoformat() if m.observed_at else None),
            )
            if v
        }
        extra = f" {json.dumps(facets)}" if facets else ""
        rows.append(f"[{m.id}] {m.text}{extra}")
    return "\n".join(rows)


class CaapPolicy:
    """Conflict-Aware Action Policy.

    Args:
        model: ``None`` for the offline backbone, or a model (``"openai:gpt-4o-mini"`` or a
            :class:`~caap.llm.ChatModel`) for the LLM backbone.
        embedder: Sentence embedder (default: the packaged all-MiniLM-L6-v2).
        config: Conflict-graph thresholds.
        dependencies: Facet dependency map for propagated invalidation (default: built in).
        relations: The relation layer that reads the memories and the query's risk: a name
            (``"rules"``, ``"learned"``, ``"llm"``) or an instance; default ``config``'s,
            then the default layer.
    """

    def __init__(
        self,
        model: str | ChatModel | None = None,
        *,
        embedder: Embedder | None = None,
        config: GraphConfig | None = None,
        dependencies: DependencyMap | None = None,
        relations: str | RelationLayer | None = None,
    ) -> None:
        self.model: ChatModel | None = infer_model(model) if model is not None else None
        self.embedder = embedder or get_embedder()
        self.config = config
        self.dependencies = dependencies
        self.relations: RelationLayer = resolve_relations(
            relations if relations is not None else (config.relations if config else None),
            config=config or GraphConfig(),
        )
        self.name = "caap" if self.model is None else f"caap:{self.model.name}"

    # -- stages ----------------------------------------------------------------------------
    def analyze(
        self,
        memories: Sequence[Memory],
        query: str,
        *,
        vectors: Mapping[str, npt.NDArray[np.float32]] | None = None,
        extractions: Mapping[str, Extraction] | None = None,
        reliability: ReliabilityModel | None = None,
    ) -> Analysis:
        """Build the evidence view the decision is made from (``vectors`` and ``extractions``:
        value embeddings and parsed facets a graph already computed, not computed again;
        ``reliability``: the user's source-reliability model)."""
        return analyze(
            memories,
            query,
            self.embedder,
            config=self.config,
            vectors=vectors,
            extractions=extractions,
            reliability=reliability,
            dependencies=self.dependencies,
            relations=self.relations,
        )

    def decide(
        self, memories: Sequence[Memory], query: str, *, analysis: Analysis | None = None
    ) -> Decision:
        """Choose an action and record why."""
        a = analysis or self.analyze(memories, query)
        offline = decide_offline(a)
        if self.model is None:
            return offline
        messages: list[Message] = [
            {"role": "system", "content": _DECIDE_SYSTEM},
            {
                "role": "user",
                "content": f"Memories:\n{_memory_lines(memories)}\n\nQuery: {query}",
            },
        ]
        try:
            draft = structured_call(self.model, messages, DecisionDraft, schema_name="decision")
        except LLMError as exc:
            logger.warning(
                "LLM backbone %s failed to decide (%s: %s); the offline backbone decided",
                self.model.name,
                exc.kind,
                str(exc)[:200],
            )
            return offline.model_copy(update={"fallback_reason": f"{exc.kind}: {str(exc)[:200]}"})
        known = {m.id for m in memories}
        evidence = {k: [i for i in v if i in known] for k, v in draft.evidence.items()}
        return Decision(
            **draft.model_dump(exclude={"evidence"}),
            evidence={k: v for k, v in evidence.items() if v},
            backbone=self.model.name,
        )

    def realize(
        self,
        memories: Sequence[Memory],
        query: str,
        decision: Decision,
        *,
        analysis: Analysis | None = None,
    ) -> Response:
        """Write the response the decision calls for."""
        a = analysis or self.analyze(memories, query)
        if self.model is None:
            return realize_offline(a, decision)
        messages: list[Message] = [
            {"role": "system", "content": _REALIZE_SYSTEM},
            {
                "role": "user",
                "content": f"Memories:\n{_memory_lines(memories)}\n\nQuery: {query}\n\n"
                f"Decision:\n{decision.model_dump_json(exclude={'backbone', 'fallback_reason'})}",
            },
        ]
        try:
            text = self.model.complete(messages).strip()
            if not text:
                raise ValueError("empty reply")
        except (LLMError, ValueError) as exc:
            kind = getattr(exc, "kind", "malformed_output")
            logger.warning(
                "LLM backbone %s failed to write the answer (%s: %s); the offline one wrote it",
                self.model.name,
                kind,
                str(exc)[:200],
            )
            fallback = decision.model_copy(
                update={
                    "fallback_reason": (
                        decision.fallback_reason + "; " if decision.fallback_reason else ""
                    )
                    + f"realize {kind}: {str(exc)[:200]}"
                }
            )
            return realize_offline(a, fallback)
        known = {m.id for m in memories}
        cited = [i for i in dict.fromkeys(re.findall(r"\[([^\[\]\s]+)\]", text)) if i in known]
        if not cited:
            cited = [i for ids in decision.evidence.values() for i in ids if i in known]
        questions = [s.strip() for s in re.findall(r"[^.!?\n]*\?", text) if len(s.strip()) > 3]
        return Response(text=text, decision=decision, cited_memory_ids=cited, questions=questions)

    def respond(
        self,
        memories: Sequence[Memory],
        query: str,
        *,
        vectors: Mapping[str, npt.NDArray[np.float32]] | None = None,
        extractions: Mapping[str, Extraction] | None = None,
        reliability: ReliabilityModel | None = None,
    ) -> Response:
        """``decide`` then ``realize`` over one shared analysis."""
        a = self.analyze(
            memories, query, vectors=vectors, extractions=extractions, reliability=reliability
        )
        decision = self.decide(memories, query, analysis=a)
        return self.realize(memories, query, decision, analysis=a)
