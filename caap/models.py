"""The storage-free data model of CAAP (DESIGN §3).

Every model here is a plain pydantic v2 model: no model knows how it is stored. Field
descriptions double as the JSON schema an LLM backbone is asked to fill.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "Action",
    "ConflictCluster",
    "ConflictEdge",
    "ConflictType",
    "Decision",
    "EdgeKind",
    "Memory",
    "Recall",
    "Response",
    "RiskTier",
    "new_id",
    "utcnow",
]

#: Metadata key marking a memory that settles a conflict cluster (written by Agent.resolve,
#: read by the policy).
RESOLVES_KEY = "caap_resolves"

#: Facet names a caller may set on a memory; anything else is rejected with an error naming it.
FACETS = ("source", "context", "aspect", "value", "observed_at")


def utcnow() -> datetime:
    """Current time as a timezone-aware UTC datetime."""
    return datetime.now(timezone.utc)


def new_id() -> str:
    """A fresh opaque id (hex uuid4)."""
    return uuid.uuid4().hex


def _aware(value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


class Action(str, Enum):
    """What the policy does with the evidence, least to most cautious in spirit."""

    COMMIT = "commit"
    CONDITIONALIZE = "conditionalize"
    CLARIFY = "clarify"
    VERIFY = "verify"
    DEFER = "defer"
    REVERSIBLE_TRIAL = "reversible_trial"


class ConflictType(str, Enum):
    """The kind of disagreement a cluster carries."""

    CPC = "CPC"  # context-partitioned
    BOC = "BOC"  # behaviour oscillation
    SCC = "SCC"  # source contradiction
    STALE = "STALE"  # a later state supersedes an earlier one
    NONE = "NONE"


class EdgeKind(str, Enum):
    """Typed relation between two memories of one aspect."""

    CONTEXT_PARTITION = "context_partition"
    TEMPORAL_OSCILLATION = "temporal_oscillation"
    SOURCE_CONTRADICTION = "source_contradiction"
    SUPERSEDES = "supersedes"
    PROPAGATED_INVALIDATION = "propagated_invalidation"
    CORROBORATES = "corroborates"


class RiskTier(str, Enum):
    """Cost of acting wrongly on the memories."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


class Memory(BaseModel):
    """One remembered statement about a user, with its facets.

    Facets the caller supplies always win over what an extractor infers.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str = Field(default_factory=new_id, description="Opaque memory id.")
    user_id: str = Field(description="Owner; a hard isolation boundary.")
    text: str = Field(description="The memory as one natural-language statement.")
    created_at: datetime = Field(
        default_factory=utcnow, description="When the system recorded the memory."
    )
    observed_at: datetime | None = Field(
        default=None, description="When the statement was true in the world, if known."
    )
    source: str | None = Field(
        default=None,
        description="Who or what asserted it: self-report, a record, a log, a named person.",
    )
    context: str | None = Field(
        default=None, description="The condition under which it holds, if stated."
    )
    aspect: str | None = Field(default=None, description="The life facet it is about.")
    value: str | None = Field(default=None, description="What it says about that aspect.")
    provenance: dict[str, str] = Field(
        default_factory=dict, description="Episode / session / message ids it came from."
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free caller metadata.")

    @field_validator("text")
    @classmethod
    def _text_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("text must be a non-empty string")
        return value

    @field_validator("user_id")
    @classmethod
    def _user_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("user_id must be a non-empty string")
        return value

    @field_validator("created_at", "observed_at")
    @classmethod
    def _tz(cls, value: datetime | None) -> datetime | None:
        return _aware(value)


class ConflictEdge(BaseModel):
    """A typed, bi-temporal relation between two memories.

    Edges are closed by setting ``expired_at``; they are never deleted.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=new_id)
    user_id: str
    kind: EdgeKind
    source_id: str = Field(description="Memory id at the tail (for supersedes: the newer one).")
    target_id: str = Field(description="Memory id at the head (for supersedes: the older one).")
    evidence: str = Field(default="", description="Why the edge exists, in words.")
    valid_at: datetime | None = Field(default=None, description="World time it became true.")
    invalid_at: datetime | None = Field(default=None, description="World time it stopped.")
    created_at: datetime = Field(default_factory=utcnow, description="System time recorded.")
    expired_at: datetime | None = Field(default=None, description="System time it was closed.")

    @property
    def active(self) -> bool:
        """True while the edge has not been closed."""
        return self.expired_at is None

    def endpoints(self) -> frozenset[str]:
        """The unordered pair of memory ids."""
        return frozenset((self.source_id, self.target_id))


class ConflictCluster(BaseModel):
    """The memories of one aspect joined by conflict edges, with features for the policy."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="Stable id: derived from the user and the aspect.")
    user_id: str
    aspect: str = Field(description="The life facet the memories are about.")
    memory_ids: list[str] = Field(default_factory=list)
    edges: list[ConflictEdge] = Field(default_factory=list)
    conflict_type: ConflictType = ConflictType.NONE
    unresolved: str | None = Field(
        default=None,
        description="The variable that would settle it: a context, the current phase, "
        "which source governs, or whether an earlier state still holds.",
    )
    sides: dict[str, list[str]] = Field(
        default_factory=dict, description="Side label (context, phase, source) -> memory ids."
    )
    reversal_count: int = 0
    phase_durations: list[str] = Field(
        default_factory=list, description="Durations of the phases in order, as stated."
    )
    source_count: int = 0
    risk: RiskTier = RiskTier.LOW

    @property
    def has_conflict(self) -> bool:
        """True when the cluster carries a disagreement of some type."""
        return self.conflict_type is not ConflictType.NONE


class Decision(BaseModel):
    """The policy's record ``z``: what it decided and why. Serialisable and logged."""

    model_config = ConfigDict(extra="forbid")

    action: Action = Field(description="The chosen action.")
    conflict_type: ConflictType = Field(
        default=ConflictType.NONE, description="The conflict the policy perceived."
    )
    unresolved: str | None = Field(
        default=None, description="The variable that, once known, would settle the answer."
    )
    missing_information: str | None = Field(
        default=None, description="What to ask or check to settle it, in words."
    )
    evidence: dict[str, list[str]] = Field(
        default_factory=dict, description="Side label -> ids of the memories supporting it."
    )
    risk: RiskTier = Field(default=RiskTier.LOW, description="Cost of being wrong.")
    rationale: str = Field(default="", description="Why this action, briefly.")
    backbone: str = Field(default="offline", description="Which backbone produced the record.")
    fallback_reason: str | None = Field(
        default=None, description="Set when a model failed and the offline policy stood in."
    )


class Response(BaseModel):
    """What the agent says, with the decision behind it."""

    model_config = ConfigDict(extra="forbid")

    text: str
    decision: Decision
    cited_memory_ids: list[str] = Field(default_factory=list)
    questions: list[str] = Field(default_factory=list)
    branches: dict[str, str] = Field(
        default_factory=dict, description="Condition -> recommendation, for if/then answers."
    )


class Recall(BaseModel):
    """What :meth:`caap.Agent.recall` returns: search hits expanded to whole clusters."""

    model_config = ConfigDict(extra="forbid")

    query: str
    memories: list[Memory] = Field(
        default_factory=list,
        description="Hits first (best first), then the rest of their clusters.",
    )
    hit_ids: list[str] = Field(default_factory=list, description="Ids the backend search returned.")
    scores: dict[str, float] = Field(
        default_factory=dict, description="Similarity of each returned memory to the query."
    )
    clusters: list[ConflictCluster] = Field(
        default_factory=list, description="Clusters the returned memories belong to."
    )

    @property
    def ids(self) -> list[str]:
        """Ids of the returned memories, in order."""
        return [m.id for m in self.memories]
