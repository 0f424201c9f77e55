"""Pure rules over facets, time and similarity: which edge joins two memories, how a cluster's
timeline reads, and how risky acting on it is. No storage, no model: unit-testable as is.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from caap.conflict_graph import _text
from caap.conflict_graph.extractor import Extraction
from caap.models import ConflictEdge, ConflictType, EdgeKind, RiskTier

if TYPE_CHECKING:
    from caap.conflict_graph.relations import PairVerdict, RelationLayer

__all__ = [
    "GraphConfig",
    "Node",
    "Phase",
    "TemporalReading",
    "TimelineEdge",
    "VerdictLookup",
    "dominant_type",
    "dominant_type_of",
    "newer_older",
    "pair_edge",
    "read_timeline",
    "risk_tier",
    "verdict_timeline",
]


@dataclass(frozen=True)
class GraphConfig:
    """Thresholds of the offline conflict graph (cosine similarities of unit vectors)."""

    aspect_join: float = 0.35
    """A memory joins an aspect when its mean similarity to that aspect's nearest members
    reaches this."""
    aspect_top: int = 3
    """How many of the aspect's nearest members that mean is taken over."""
    aspect_join_single: float = 0.55
    """...or when its best single neighbour in the aspect reaches this."""
    prototype_min: float = 0.3
    """A memory sits on a life-facet prototype when at least this similar to it."""
    aspect_join_prototype: float = 0.22
    """Two memories on the same prototype join at this lower mean similarity."""
    timeline_window: int = 48
    """Only the most recent dated memories of an aspect are read as a timeline."""
    merge_bridged: bool = True
    """Merge two inferred aspects when a new memory is close enough to join both."""
    aspect_cap: int = 150
    aspect_cap_share: float = 0.015
    """An inferred aspect takes no more memories once it holds
    ``max(aspect_cap, aspect_cap_share * memories of the user)``, and two aspects merge only
    while the result stays under it: a memory that would join a full aspect joins another
    near it or starts a new one. Loose joins, restatements of loosely joined members and
    bridged merges otherwise chain many topics into one that holds nearly every memory.
    Aspects a caller names are never capped."""
    neighbours: int = 12
    """Candidate blocking: how many nearest memories a new memory is compared with."""
    max_expand: int = 200
    """Most cluster members one recall adds beyond its hits (those nearest the query): a topic
    of thousands of memories is not read whole on every answer."""
    exact_neighbours: int = 20_000
    """Up to this many memories per user the nearest neighbours are found by an exact scan;
    beyond it by an inverted-file index (approximate, about ``sqrt(n)`` work per write)."""
    corroborate: float = 0.86
    """Values this similar say the same thing."""
    same_context: float = 0.8
    """Contexts this similar are the same context."""
    same_phase: float = 0.6
    """Two dated memories this similar belong to the same phase of a behaviour."""
    return_phase: float = 0.35
    """A memory that says it went 'back to' something joins the earlier phase it best matches
    when at least this similar."""
    topics: str = "turns"
    """Which memories without a caller aspect get a conversation topic (segments grouped by
    Louvain communities, :mod:`caap.conflict_graph.topics`) instead of per-memory aspect
    chaining: ``"turns"`` (conversation turns: memories whose provenance has a ``turn``
    key), ``"always"`` or ``"never"``."""
    relations: str | RelationLayer | None = None
    """The relation layer that reads facets, pair relations and risk: a registered name
    (``"rules"``, ``"learned"``, ``"llm"``) or an instance; ``None`` for the default
    (see :mod:`caap.conflict_graph.relations`)."""
    relation_min: float = 0.5
    """A pair relation becomes an edge when the layer's confidence in it reaches this."""


@dataclass(frozen=True)
class Node:
    """A memory as the rules see it: facets, time and its topic vector's id."""

    id: str
    text: str
    source: str | None
    context: str | None
    when: datetime | None
    order: float
    extraction: Extraction = field(default_factory=Extraction)


def _self_source(source: str | None) -> bool:
    return source is None or _text.normalize_source(source) in (
        "self-report",
        "self report",
        "user",
        "self",
        "me",
        "himself",
        "herself",
        "themself",
    )


def pair_edge(
    a: Node, b: Node, value_sim: float, context_sim: float | None, cfg: GraphConfig
) -> tuple[EdgeKind, str] | None:
    """The non-temporal edge joining two memories of one aspect, or ``None``.

    Temporal edges need the whole timeline and come from :func:`read_timeline`.
    Priority: a disagreement between named sources, then differing stated contexts.
    """
    if value_sim >= cfg.corroborate:
        return EdgeKind.CORROBORATES, f"both say the same (similarity {value_sim:.2f})"
    sa, sb = a.source, b.source
    if sa and sb and not (_self_source(sa) and _self_source(sb)):
        if _text.normalize_source(sa) != _text.normalize_source(sb):
            return (
                EdgeKind.SOURCE_CONTRADICTION,
                f"{sa!s} and {sb!s} report different things",
            )
    elif bool(sa and not _self_source(sa)) != bool(sb and not _self_source(sb)):
        # One side is attributed to a named source, the other is the user's own statement.
        named = sa if sa and not _self_source(sa) else sb
        return EdgeKind.SOURCE_CONTRADICTION, f"{named} disagrees with the user's own account"
    ca, cb = a.context, b.context
    if ca and cb and (context_sim is None or context_sim < cfg.same_context):
        return EdgeKind.CONTEXT_PARTITION, f"holds {ca!r} vs {cb!r}"
    if (ca or cb) and not (a.when and b.when):
        only = ca or cb
        return EdgeKind.CONTEXT_PARTITION, f"one holds only {only!r}, the other is unconditioned"
    return None


@dataclass(frozen=True)
class Phase:
    """A run of consecutive dated memories that say the same thing."""

    label: int
    members: tuple[str, ...]
    start: datetime | None
    duration: str | None


@dataclass(frozen=True)
class TimelineEdge:
    """An edge the timeline implies."""

    kind: EdgeKind
    source_id: str
    target_id: str
    evidence: str
    valid_at: datetime | None
    invalid_at: datetime | None = None

    @classmethod
    def between(cls, kind: EdgeKind, later: Node, earlier: Node, evidence: str) -> TimelineEdge:
        """An edge from the ``later`` memory to the ``earlier`` one, valid from the later one's
        world time. A replacing edge (a supersession or a propagated invalidation) also closes
        the earlier memory's validity then; an oscillation leaves it open (the old state may
        come back)."""
        closes = kind in (EdgeKind.SUPERSEDES, EdgeKind.PROPAGATED_INVALIDATION)
        return cls(
            kind,
            later.id,
            earlier.id,
            evidence,
            valid_at=later.when,
            invalid_at=later.when if closes else None,
        )


@dataclass(frozen=True)
class TemporalReading:
    """How the dated memories of one aspect read in time order."""

    phases: tuple[Phase, ...] = ()
    edges: tuple[TimelineEdge, ...] = ()
    oscillates: bool = False
    superseded: bool = False

    @property
    def reversals(self) -> int:
        """How many times the behaviour switched."""
        return max(0, len(self.phases) - 1)


class PairSimilarity(Protocol):
    """Anything with ``get((a, b), default)`` giving the value similarity of two node ids."""

    def get(self, key: tuple[str, str], default: float = ..., /) -> float: ...


def _matrix(
    nodes: Sequence[Node], sim: PairSimilarity | Mapping[tuple[str, str], float]
) -> npt.NDArray[np.float64]:
    """Pairwise value similarities of ``nodes`` (0 where ``sim`` has no entry), as one matrix.

    A lookup that can hand over its matrix (``matrix(ids)``) does so; anything else is read
    pair by pair.
    """
    ids = [n.id for n in nodes]
    whole = getattr(sim, "matrix", None)
    if whole is not None:
        out: npt.NDArray[np.float64] = np.asarray(whole(ids), dtype=np.float64)
        return out
    m = np.zeros((len(ids), len(ids)), dtype=np.float64)
    for i, a in enumerate(ids):
        for j, b in enumerate(ids):
            if i != j:
                m[i, j] = float(sim.get((a, b), 0.0))
    return m


def read_timeline(
    nodes: Sequence[Node], sim: PairSimilarity | Mapping[tuple[str, str], float], cfg: GraphConfig
) -> TemporalReading:
    """Group dated memories into phases and decide oscillation vs supersession.

    ``sim[(a, b)]`` is the value similarity of two node ids (both orders present).
    Oscillation: some phase recurs after another (A B A), the behaviour changed more than once,
    or a memory says it went back. Supersession: one change with no return (A then B): the
    later state invalidates the earlier.
    """
    dated = sorted((n for n in nodes if n.when is not None), key=lambda n: (n.order, n.id))
    # Read the most recent window only: it shows whether a behaviour is switching now, and it
    # bounds the cost of a write to a very large aspect.
    dated = dated[-cfg.timeline_window :]
    if len(dated) < 2:
        return TemporalReading()
    sims = _matrix(dated, sim)
    # near[c, j]: the best similarity of node j to any member m of phase class c so far,
    # read as sim[(j, m)].
    near = np.empty((0, len(dated)), dtype=np.float64)
    classes: list[list[Node]] = []
    label_of: dict[str, int] = {}
    for pos, n in enumerate(dated):
        best, best_sim = -1, -1.0
        if classes:
            best = int(np.argmax(near[:, pos]))
            best_sim = float(near[best, pos])
        prev = label_of[dated[pos - 1].id] if label_of else None
        if n.extraction.returns and classes:
            earlier = [(float(near[i, pos]), i) for i in range(len(classes)) if i != prev]
            if earlier:
                s, i = max(earlier)
                if s >= cfg.return_phase:
                    best, best_sim = i, max(best_sim, cfg.same_phase)
        if (
            best >= 0
            and best_sim >= cfg.same_phase
            # A negated claim ("stopped investing") is another phase however close its words.
            and classes[best][-1].extraction.negated == n.extraction.negated
        ):
            classes[best].append(n)
            label_of[n.id] = best
            np.maximum(near[best], sims[:, pos], out=near[best])
        else:
            classes.append([n])
            label_of[n.id] = len(classes) - 1
            near = np.vstack([near, sims[:, pos][None, :]])
    runs: list[list[Node]] = []
    for n in dated:
        if runs and label_of[runs[-1][-1].id] == label_of[n.id]:
            runs[-1].append(n)
        else:
            runs.append([n])
    if len(runs) < 2:
        return TemporalReading()
    phases = tuple(
        Phase(
            label=label_of[r[0].id],
            members=tuple(m.id for m in r),
            start=r[0].when,
            duration=next((m.extraction.duration for m in r if m.extraction.duration), None),
        )
        for r in runs
    )
    labels = [p.label for p in phases]
    returns = len(labels) - len(set(labels))
    # Switching more than once is oscillation even without an exact return (A B C); one
    # change with no return is a supersession.
    oscillates = returns > 0 or len(runs) > 2 or any(n.extraction.returns for n in dated[1:])
    edges: list[TimelineEdge] = []
    if oscillates:
        for prev_run, run in pairwise(runs):
            a, b = prev_run[-1], run[0]
            edges.append(
                TimelineEdge.between(
                    EdgeKind.TEMPORAL_OSCILLATION,
                    b,
                    a,
                    f"switched from phase {label_of[a.id] + 1} to phase {label_of[b.id] + 1}",
                )
            )
        return TemporalReading(phases, tuple(edges), oscillates=True)
    # One change with no return: the newest state supersedes every earlier one.
    newest = runs[-1][0]
    for old_run in runs[:-1]:
        for old in old_run:
            edges.append(
                TimelineEdge.between(
                    EdgeKind.SUPERSEDES,
                    newest,
                    old,
                    "a later observation replaces this one",
                )
            )
    return TemporalReading(phases, tuple(edges), superseded=True)


_TYPE_OF_EDGE = {
    EdgeKind.SOURCE_CONTRADICTION: ConflictType.SCC,
    EdgeKind.CONTEXT_PARTITION: ConflictType.CPC,
    EdgeKind.TEMPORAL_OSCILLATION: ConflictType.BOC,
    EdgeKind.SUPERSEDES: ConflictType.STALE,
    EdgeKind.PROPAGATED_INVALIDATION: ConflictType.STALE,
}
# Ties go to the type whose wrong handling costs most.
_TIE_ORDER = [ConflictType.SCC, ConflictType.BOC, ConflictType.STALE, ConflictType.CPC]


def dominant_type(kinds: Sequence[EdgeKind]) -> ConflictType:
    """The conflict type most of a cluster's active edges speak for."""
    counts: dict[ConflictType, int] = {}
    for k in kinds:
        t = _TYPE_OF_EDGE.get(k)
        if t is not None:
            counts[t] = counts.get(t, 0) + 1
    if not counts:
        return ConflictType.NONE
    top = max(counts.values())
    return next(t for t in _TIE_ORDER if counts.get(t) == top)


def dominant_type_of(
    edges: Sequence[ConflictEdge], named_sources: set[str] | None = None
) -> ConflictType:
    """The conflict type that involves the most memories of a cluster.

    Counting memories rather than edges keeps pairwise kinds (a context edge joins every pair
    of contexts) from outvoting chained ones (an oscillation links consecutive phases only).
    For source contradictions only memories with a named source count (``named_sources``):
    one third party quoted among many of the user's own statements is one memory, not all.
    """
    touched: dict[ConflictType, set[str]] = {}
    for e in edges:
        t = _TYPE_OF_EDGE.get(e.kind)
        if t is None:
            continue
        ends = {e.source_id, e.target_id}
        if t is ConflictType.SCC and named_sources is not None:
            ends &= named_sources
        touched.setdefault(t, set()).update(ends)
    touched = {t: v for t, v in touched.items() if v}
    if not touched:
        return ConflictType.NONE
    top = max(len(v) for v in touched.values())
    return next(t for t in _TIE_ORDER if len(touched.get(t, ())) == top)


_HIGH_RISK = {
    "medical": r"medic\w*|dose|dosage|\d+\s?mg|allerg\w*|contraindicat\w*|prescri\w*|diagnos\w*|"
    r"surgery|insulin|inhaler|epi-?pen|vaccin\w*|pediatrician|paediatrician|physician|doctor|"
    r"clinic|hospital|pharmac\w*|ibuprofen|paracetamol|acetaminophen|antibiotic\w*|"
    r"treatment|symptom\w*|seizure\w*|blood pressure|anaphyla\w*|chemo\w*|therap(?:y|ist)|"
    r"nurse|pills?|tablets?|drug|drugs|injection\w*|asthma|diabetes|diabetic|epilep\w*",
    "care_authority": r"custody|guardian\w*|pick(?:ing)?[ -]?up|power of attorney|consent|"
    r"caregiver|care home|visitation|parenting plan|court order|legal guardian|foster|"
    r"next of kin|emergency contact",
    "legal": r"lawyer|attorney|court|lawsuit|contract|lease|visa|immigration|notar\w*|"
    r"\bwill\b|testament|subpoena|fine[sd]?\b|ticket|license|licence|permit",
    "records": r"official record\w*|records?\b|registry|certificate|transcript|file on record",
    "authorization": r"authori[sz]\w*|access|password|permission\w*|signator\w*|sign[- ]off|"
    r"approv\w*|credential\w*|badge|admin rights|login|two-factor|2fa|keycard|allowed to",
}
_MEDIUM_RISK = (
    r"bank|loan|invest\w*|payment\w*|transfer\w*|\btax\w*|credit|debt|mortgage|salary|"
    r"\$\d|€\d|£\d|money|insurance|driv\w*|alcohol|deposit|refund"
)


def risk_tier(texts: Sequence[str], query: str = "") -> tuple[RiskTier, list[str]]:
    """Cost of acting wrongly: HIGH for medical, care authority, legal, records and
    authorization matters; MEDIUM for money and safety; LOW otherwise.

    Returns the tier and the categories that fired. A category fires on one hit in the query
    or two hits across the memories, so one passing mention does not raise the stakes.
    """
    counts = [_risk_hits(t) for t in texts]
    in_query = _risk_hits(query)
    fired = [
        cat for j, cat in enumerate(_HIGH_RISK) if in_query[j] or sum(c[j] for c in counts) >= 2
    ]
    if fired:
        return RiskTier.HIGH, fired
    m = len(_HIGH_RISK)
    if in_query[m] or sum(c[m] for c in counts) >= 2:
        return RiskTier.MEDIUM, ["money_or_safety"]
    return RiskTier.LOW, []


_RISK_PATTERNS = [re.compile(rx) for rx in (*_HIGH_RISK.values(), _MEDIUM_RISK)]


@functools.lru_cache(maxsize=65536)
def _risk_hits(text: str) -> tuple[int, ...]:
    """How often each high-risk category (in order), then the medium one, occurs in a text
    (memoised: a memory is read again on every answer that recalls it)."""
    low = text.lower()
    return tuple(len(rx.findall(low)) for rx in _RISK_PATTERNS)


class VerdictLookup(Protocol):
    """Anything giving the relation layer's verdict on two node ids (either order), or
    ``None`` when the pair was never judged."""

    def __call__(self, a: str, b: str, /) -> PairVerdict | None: ...


def newer_older(a: Node, b: Node) -> tuple[Node, Node]:
    """The later and the earlier of two nodes: world time when both have it, else their
    order key (write time for undated memories); ties go by id."""
    if a.when is not None and b.when is not None and a.when != b.when:
        return (a, b) if a.when > b.when else (b, a)
    return (a, b) if (a.order, a.id) > (b.order, b.id) else (b, a)


def verdict_timeline(
    nodes: Sequence[Node], verdict: VerdictLookup, cfg: GraphConfig
) -> TemporalReading:
    """How one aspect's memories read in time, from pair verdicts (a pairwise layer).

    A ``temporal_change`` verdict (confidence at least ``cfg.relation_min``) joins two
    memories as different phases of a switching behaviour: an oscillation edge, later ->
    earlier. A ``supersedes`` verdict makes the later memory replace the earlier one. Phases
    are the memories taking part in temporal changes, in time order; consecutive ones the
    layer reads as agreeing share a phase. Only the latest ``cfg.timeline_window`` memories
    are read.
    """
    ordered = sorted(nodes, key=lambda n: (n.order, n.id))[-cfg.timeline_window :]
    edges: list[TimelineEdge] = []
    moving: dict[str, Node] = {}
    superseded = False
    for i, x in enumerate(ordered):
        for y in ordered[i + 1 :]:
            v = verdict(x.id, y.id)
            if v is None or v.confidence < cfg.relation_min:
                continue
            new, old = newer_older(x, y)
            if v.relation == "temporal_change":
                moving[x.id], moving[y.id] = x, y
                edges.append(
                    TimelineEdge.between(
                        EdgeKind.TEMPORAL_OSCILLATION,
                        new,
                        old,
                        v.evidence or "the behaviour changed between these",
                    )
                )
            elif v.relation == "supersedes":
                superseded = True
                edges.append(
                    TimelineEdge.between(
                        EdgeKind.SUPERSEDES,
                        new,
                        old,
                        v.evidence or "a later statement replaces this one",
                    )
                )
    members = sorted(moving.values(), key=lambda n: (n.order, n.id))
    runs: list[list[Node]] = []
    for n in members:
        v = verdict(runs[-1][-1].id, n.id) if runs else None
        if v is not None and v.relation == "agree" and v.confidence >= cfg.relation_min:
            runs[-1].append(n)
        else:
            runs.append([n])
    phases = tuple(
        Phase(
            label=k,
            members=tuple(m.id for m in r),
            start=r[0].when,
            duration=next((m.extraction.duration for m in r if m.extraction.duration), None),
        )
        for k, r in enumerate(runs)
    )
    return TemporalReading(
        phases, tuple(edges), oscillates=bool(moving), superseded=superseded and not moving
    )
