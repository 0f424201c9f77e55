"""The relation layer: everything that reads meaning from memory text, behind one interface.

Models classify, pure functions decide (graphiti's split). A :class:`RelationLayer` reads

- **facets** of each memory (who asserts it, under which condition, whether it marks a time
  order or a change, the claim itself), each with a confidence: :meth:`RelationLayer.facets`;
- **pair relations** between two memories, a probability for each of :data:`RELATIONS`
  (the pair-label vocabulary of the TANGLE dataset): :meth:`RelationLayer.relate`;
- the **risk** of acting wrongly on a query: :meth:`RelationLayer.risk`.

The conflict graph, the stale-state logic and the policy consume only this output; the
decisions (thresholds, time order, validity) are pure functions such as :func:`edge_of`.
Every method takes a batch (one call per write window), so an implementation backed by a
language model can make one structured call per batch.

Implementations are chosen by name with :func:`get_relation_layer`:

- ``"rules"``: the hand-written lexical cues (:mod:`caap.conflict_graph._text`), the baseline;
- ``"learned"``: small models over the packaged sentence embeddings, weights shipped with the
  package (:mod:`caap.conflict_graph._relations_learned`);
- ``"llm"``: one batched structured call through :mod:`caap.llm` (registered by its module).

Example::

    from caap.conflict_graph.relations import MemoryView, get_relation_layer

    layer = get_relation_layer("rules")
    a = MemoryView("m1", "Dana drinks oat milk at home.")
    b = MemoryView("m2", "At the office Dana takes her coffee black.")
    [verdict] = layer.relate([(a, b)])
    verdict.relation, verdict.confidence
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from caap.conflict_graph.extractor import Extraction
from caap.models import EdgeKind, RiskTier

__all__ = [
    "CONFLICT_RELATIONS",
    "RELATIONS",
    "SITUATIONS",
    "Facets",
    "MemoryView",
    "PairVerdict",
    "Relation",
    "RelationLayer",
    "RiskVerdict",
    "SituationVerdict",
    "edge_of",
    "get_relation_layer",
    "guard_situation_of",
    "register_relation_layer",
    "relation_layer_names",
    "resolve_relations",
    "situation_of",
]

Relation = Literal[
    "agree",
    "context_partition",
    "temporal_change",
    "source_contradiction",
    "supersedes",
    "invalidates",
    "unrelated",
]
#: The pair relations a layer scores (the same vocabulary as the dataset's pair labels).
RELATIONS: tuple[Relation, ...] = (
    "agree",
    "context_partition",
    "temporal_change",
    "source_contradiction",
    "supersedes",
    "invalidates",
    "unrelated",
)
#: The relations that set two memories against each other (the rest: agreement, unrelated).
CONFLICT_RELATIONS: tuple[Relation, ...] = (
    "context_partition",
    "temporal_change",
    "source_contradiction",
    "supersedes",
    "invalidates",
)

#: What a relation layer can read a query's nearest memories as, taken together: nothing in
#: conflict, a preference that depends on context, a behaviour that keeps switching, sources
#: that disagree (the TANGLE conflict types), or a later state that replaced or ruled out an
#: earlier one (stale state).
SITUATIONS: tuple[str, ...] = ("NONE", "CPC", "BOC", "SCC", "STALE")


@dataclass(frozen=True)
class Facets(Extraction):
    """One memory's facets (an :class:`Extraction`) with how sure the layer is of each.

    A confidence is the probability that the facet is present: ``source_confidence`` that the
    memory is attributed to someone or something other than the user, ``context_confidence``
    that it holds only under a condition, ``time_confidence`` that it places itself in a time
    order (a date, "then", "these days", a change or a return).
    """

    source_confidence: float = 0.0
    context_confidence: float = 0.0
    time_confidence: float = 0.0
    value_confidence: float = 1.0
    change_event: bool = False
    """It reports that something changed (an event or a new state), not a standing habit."""
    certain: bool = False
    """A change that states how far it reaches (a duration, a ban, finality)."""
    about_other: bool = False
    """It is about another person, not the user."""


@dataclass(frozen=True)
class MemoryView:
    """One memory as a layer sees it in a pair: its text, what is known of its facets and time,
    and (optionally) its value embedding."""

    id: str
    text: str
    source: str | None = None
    """Who asserts it (``None``: the user, or not known)."""
    context: str | None = None
    """The condition it holds under, if known."""
    observed_at: datetime | None = None
    """When it held in the world, if known."""
    order: float = 0.0
    """Sort key in time: world time if known, else write time (a POSIX timestamp)."""
    facets: Extraction = field(default_factory=Extraction)
    """Facets already read from the text (a :class:`Facets` when a layer produced them)."""
    vector: npt.NDArray[np.float32] | None = field(default=None, compare=False)
    """Unit value embedding, if the caller has it (saves the layer embedding it again)."""


@dataclass(frozen=True)
class PairVerdict:
    """How two memories relate: a probability per relation, the most likely one, its
    confidence and a short human-readable reason.

    Direction: for ``supersedes`` and ``invalidates`` the layer says *that* one replaces or
    puts the other in doubt; which one is newer is decided by time order (:func:`edge_of`),
    unless ``newer`` names it.
    """

    probs: Mapping[str, float]
    relation: Relation
    confidence: float
    evidence: str = ""
    newer: int | None = None
    """0 or 1 when the layer itself read which side is the later state; else ``None``."""
    agree_odds: float = 1.0
    """The factor the layer applied to agreement's odds in ``probs`` (a prior shift for
    typing edges); a reader that needs the model's own reading, like the guard's agreement,
    divides it back out."""

    @classmethod
    def from_probs(
        cls, probs: Mapping[str, float], evidence: str = "", newer: int | None = None
    ) -> PairVerdict:
        """A verdict whose relation is the argmax of ``probs`` (missing relations: 0)."""
        full: dict[str, float] = {r: float(probs.get(r, 0.0)) for r in RELATIONS}
        unknown = set(probs) - set(RELATIONS)
        if unknown:
            raise ValueError(f"probs names unknown relations {sorted(unknown)}")
        best = max(RELATIONS, key=lambda r: full[r])
        return cls(full, best, full[best], evidence, newer)

    @classmethod
    def certain(cls, relation: Relation, evidence: str = "") -> PairVerdict:
        """A verdict with all its mass on one relation (what a rule says)."""
        return cls.from_probs({relation: 1.0}, evidence)


@dataclass(frozen=True)
class RiskVerdict:
    """The cost of acting wrongly on a query: a tier, how sure the layer is, and why."""

    tier: RiskTier
    confidence: float
    categories: tuple[str, ...] = ()
    """What raised it (e.g. ``"medical"``), for explanations."""

    def __iter__(self) -> Any:
        """Unpacks as ``(tier, confidence)``."""
        return iter((self.tier, self.confidence))


@dataclass(frozen=True)
class SituationVerdict:
    """How the memories nearest a query stand to each other as a whole: a probability for
    each of ``NONE`` (nothing in conflict), ``CPC`` (depends on context), ``BOC`` (keeps
    switching), ``SCC`` (sources disagree) and ``STALE`` (a later state replaced an earlier
    one), and why. A policy that is unsure which
    holds can choose the action that fits all the likely ones (see
    :func:`caap.policy.choose_under_uncertainty`).

    ``unshifted``: for a layer whose reading is recalibrated to new text by a prior shift
    (``caap relations calibrate``), the model's reading before the shift;
    ``probs`` is the shifted one the policy decides on. The high-stakes guard reads the
    unshifted one (:attr:`evidence_probs`): a calibration fitted for better decisions on
    average never lowers the bar for positive evidence."""

    probs: Mapping[str, float]
    evidence: str = ""
    unshifted: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        for name, probs in (("probs", self.probs), ("unshifted", self.unshifted)):
            if probs is None:
                continue
            unknown = set(probs) - set(SITUATIONS)
            if unknown:
                raise ValueError(f"{name} names unknown situations {sorted(unknown)}")
            total = sum(probs.values())
            if not 0.99 <= total <= 1.01 or any(v < 0 for v in probs.values()):
                raise ValueError(
                    f"situation probabilities must be >= 0 and sum to 1, got {total} ({name})"
                )

    @property
    def evidence_probs(self) -> Mapping[str, float]:
        """The reading the guard holds a high-stakes commit to: :attr:`unshifted` when the
        layer shifted its reading, else :attr:`probs`."""
        return self.unshifted if self.unshifted is not None else self.probs


def _optional_reading(
    layer: object, method: str, query: str, texts: Sequence[str]
) -> SituationVerdict | None:
    read = getattr(layer, method, None)
    if read is None:
        return None
    verdict = read(query, texts)
    return verdict if isinstance(verdict, SituationVerdict) else None


def situation_of(layer: object, query: str, texts: Sequence[str]) -> SituationVerdict | None:
    """``layer.situation(query, texts)`` for a layer that reads whole situations (optional
    in the protocol; ``None`` for one that does not, like ``rules``)."""
    return _optional_reading(layer, "situation", query, texts)


def guard_situation_of(layer: object, query: str, texts: Sequence[str]) -> SituationVerdict | None:
    """The situation reading the commit guard checks beside the layer's own
    (``layer.guard_situation``, optional in the protocol: ``llm``'s fitted fallback), or
    ``None`` for a layer that offers none (its own reading is then the guard's only one)."""
    return _optional_reading(layer, "guard_situation", query, texts)


@runtime_checkable
class RelationLayer(Protocol):
    """Reads facets, pair relations and risk from memory text, in batches."""

    name: str
    """The registry name of the implementation (``"rules"``, ``"learned"``, ...)."""

    def facets(self, texts: Sequence[str], *, subject: set[str] | None = None) -> list[Facets]:
        """Facets of each text, in order. ``subject``: the user's own name tokens."""
        ...

    def relate(self, pairs: Sequence[tuple[MemoryView, MemoryView]]) -> list[PairVerdict]:
        """One verdict per pair, in order."""
        ...

    def risk(self, query: str, texts: Sequence[str]) -> RiskVerdict:
        """How costly acting wrongly on ``query`` is, given the memories' ``texts``
        (``query`` may be empty: the risk of a cluster of memories alone)."""
        ...


# -- registry ---------------------------------------------------------------------------------
_Factory = Callable[..., RelationLayer]
_REGISTRY: dict[str, _Factory | str] = {
    "rules": "caap.conflict_graph._relations_rules:RulesRelations",
    "learned": "caap.conflict_graph._relations_learned:LearnedRelations",
    "llm": "caap.conflict_graph._relations_llm:LLMRelations",
}


def register_relation_layer(name: str, factory: _Factory | str) -> None:
    """Make ``get_relation_layer(name)`` build a layer with ``factory`` (a callable taking
    keyword arguments, or a ``"module:attribute"`` path imported on first use)."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"relation layer name must be a non-empty string, got {name!r}")
    _REGISTRY[name] = factory


def relation_layer_names() -> list[str]:
    """The registered layer names."""
    return sorted(_REGISTRY)


def get_relation_layer(name: str, **kwargs: Any) -> RelationLayer:
    """Build the relation layer registered under ``name`` with ``kwargs``.

    Raises:
        ValueError: no layer has that name.
        ImportError: the layer's module cannot be imported (e.g. not built yet).
    """
    entry = _REGISTRY.get(name)
    if entry is None:
        raise ValueError(
            f"relations={name!r} is not a relation layer; choose one of {relation_layer_names()}"
        )
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        try:
            entry = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ImportError(f"relation layer {name!r} is not available: {exc}") from exc
    assert callable(entry)
    layer = entry(**kwargs)
    if not isinstance(layer, RelationLayer):
        raise TypeError(f"relation layer {name!r} does not implement RelationLayer")
    return layer


def resolve_relations(spec: str | RelationLayer | None, **kwargs: Any) -> RelationLayer:
    """A layer from a name (built with ``kwargs``), an instance (returned as is) or ``None``
    (the default layer)."""
    if spec is None:
        spec = DEFAULT_RELATIONS
    if isinstance(spec, str):
        return get_relation_layer(spec, **kwargs)
    if isinstance(spec, RelationLayer):
        return spec
    raise TypeError(f"relations must be a layer name or a RelationLayer, got {type(spec).__name__}")


#: The layer used when none is named.
DEFAULT_RELATIONS = "rules"


# -- pure decisions ---------------------------------------------------------------------------
_PAIR_EDGE: Mapping[str, EdgeKind] = {
    "agree": EdgeKind.CORROBORATES,
    "context_partition": EdgeKind.CONTEXT_PARTITION,
    "source_contradiction": EdgeKind.SOURCE_CONTRADICTION,
}


def edge_of(verdict: PairVerdict, *, minimum: float = 0.5) -> tuple[EdgeKind, str] | None:
    """The non-temporal edge a verdict implies, or ``None``.

    ``agree``, ``context_partition`` and ``source_contradiction`` become edges when the
    verdict's confidence reaches ``minimum``; the temporal and stale relations are decided
    with time order by the timeline and stale functions, not here.
    """
    kind = _PAIR_EDGE.get(verdict.relation)
    if kind is None or verdict.confidence < minimum:
        return None
    return kind, verdict.evidence or verdict.relation.replace("_", " ")
