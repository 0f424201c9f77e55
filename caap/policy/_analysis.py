"""What the policy reads off the visible memories: the cluster the query is about.

The policy sees memory texts (with whatever facets a graph already holds) and the query, never
a dataset label. Given the graph that already holds those memories (``Agent.respond`` passes
its own), it reads that graph's aspects, edges and facets restricted to them; otherwise it
builds an ephemeral conflict graph over exactly those memories.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from caap._blas import single_blas_thread
from caap._embeddings import DEFAULT_MODEL, Embedder
from caap.conflict_graph import _text
from caap.conflict_graph.extractor import Extraction
from caap.conflict_graph.graph import ConflictGraph
from caap.conflict_graph.relations import (
    CONFLICT_RELATIONS,
    Facets,
    MemoryView,
    RelationLayer,
    RiskVerdict,
    SituationVerdict,
    guard_situation_of,
    resolve_relations,
    situation_of,
)
from caap.conflict_graph.reliability import ReliabilityModel
from caap.conflict_graph.rules import GraphConfig, TemporalReading
from caap.conflict_graph.stale import DependencyMap, invalidation_certain
from caap.models import (
    RESOLVES_KEY,
    ConflictCluster,
    ConflictEdge,
    ConflictType,
    EdgeKind,
    Memory,
    RiskTier,
)
from caap.policy._injection import PLACEHOLDER
from caap.policy._reliability import SourceView, source_view
from caap.policy._request_head import read_stated
from caap.policy._speech import stated_part

__all__ = ["SELF_SOURCES", "Analysis", "StaleView", "analyze", "is_self_source", "max_risk"]


@dataclass
class StaleView:
    """What a stale-state cluster says: which memories report the change, which they replace
    (same aspect) or put in doubt (a dependent aspect), and whether the query leans on the old
    state."""

    changes: list[str]
    """Ids of the memories that report the change, newest first."""
    superseded: list[str]
    """Ids of memories a later change of the same aspect replaces."""
    invalidated: list[str]
    """Ids of memories a change in an aspect they depend on puts in doubt."""
    certain: bool
    """Every propagated invalidation states how far it reaches (a duration, a ban)."""
    premise: bool
    """The query is closer to the old state than to the change: it presupposes the old one."""

    @property
    def propagated(self) -> bool:
        """The staleness comes through a dependency, not a direct replacement."""
        return bool(self.invalidated) and not self.superseded

    @property
    def old(self) -> list[str]:
        """Every replaced or doubted memory."""
        return self.superseded + [i for i in self.invalidated if i not in self.superseded]


#: A question about the current state ("do I still...?", "where do I live now?") asks which
#: state holds; it does not presuppose the old one.
_STATE_QUESTION = re.compile(
    r"^\s*(?:do|does|did|am|is|are|have|has|where|what|which|who|how)\b[^?]*"
    r"\b(?:still|now|currently|these days|anymore|any more|at the moment|right now)\b",
    re.I,
)


def _stale_view(
    cluster: ConflictCluster,
    memories: Mapping[str, Memory],
    sims: Mapping[str, float],
    query: str,
    facets: Mapping[str, Extraction] | None = None,
) -> StaleView | None:
    kinds = (EdgeKind.SUPERSEDES, EdgeKind.PROPAGATED_INVALIDATION)

    def told_together(e: ConflictEdge) -> bool:
        a, b = memories[e.source_id].observed_at, memories[e.target_id].observed_at
        return a is not None and a == b

    # A change happens in world time: an edge between two memories observed at the same time
    # (the turns of one dated conversation) orders them only by when they were written down,
    # so it neither makes the later one the change nor the earlier one the old state. (Read as
    # one, a passing "so tired" written after a new job in the same chat replaced the new
    # job.) Undated memories keep the order the layer reads from their text.
    edges = [
        e
        for e in cluster.edges
        if e.active
        and e.kind in kinds
        and e.source_id in memories
        and e.target_id in memories
        and not told_together(e)
    ]
    if not edges:
        return None
    sup = {e.target_id for e in edges if e.kind is EdgeKind.SUPERSEDES}
    inv = {e.target_id for e in edges if e.kind is EdgeKind.PROPAGATED_INVALIDATION} - sup
    changes = {e.source_id for e in edges} - sup - inv

    def newest(i: str) -> tuple[float, float]:
        return (memory_time(memories[i]), sims.get(i, 0.0))

    ordered = sorted(changes, key=newest, reverse=True)
    propagated_by = {e.source_id for e in edges if e.kind is EdgeKind.PROPAGATED_INVALIDATION}

    def is_certain(i: str) -> bool:
        f = (facets or {}).get(i)
        return f.certain if isinstance(f, Facets) else invalidation_certain(memories[i].text)

    certain = all(is_certain(i) for i in propagated_by if i in changes)
    old_best = max((sims.get(i, 0.0) for i in sup | inv), default=0.0)
    new_best = max((sims.get(i, 0.0) for i in changes), default=0.0)
    return StaleView(
        changes=ordered,
        superseded=sorted(sup, key=lambda i: -sims.get(i, 0.0)),
        invalidated=sorted(inv, key=lambda i: -sims.get(i, 0.0)),
        certain=certain,
        # The query speaks of the old state rather than the change: "since I ride my bike
        # every day, ..." after a broken leg.
        premise=old_best >= _PREMISE_MIN
        and old_best - new_best >= _PREMISE_MARGIN
        and not _STATE_QUESTION.search(query),
    )


#: A query this similar to an old state (and closer to it than to the change) presupposes it.
_PREMISE_MIN = 0.3
#: ...by at least this much more than to the change.
_PREMISE_MARGIN = 0.1

#: Sources that are the user speaking for themselves (compared after
#: :func:`caap.conflict_graph._text.normalize_source`, or as written, lower-cased).
SELF_SOURCES = frozenset(
    {"self-report", "self report", "user", "self", "your own account", "the user", "you"}
)


def is_self_source(source: str) -> bool:
    """The source is the user speaking for themselves ("self-report", "the user", "You")."""
    return _text.normalize_source(source) in SELF_SOURCES


@dataclass
class Analysis:
    """The evidence a decision is made from."""

    query: str
    memories: dict[str, Memory]
    """The visible memories by id (facets filled)."""
    cluster: ConflictCluster | None
    """The cluster the query is about, if any."""
    relevant: list[str]
    """Ids of the memories that bear on the query, most relevant first."""
    relevance: dict[str, float]
    """Query similarity of every visible memory."""
    risk: RiskTier = RiskTier.LOW
    risk_categories: list[str] = field(default_factory=list)
    risk_confidence: float = 1.0
    """How sure the relation layer is of ``risk``."""
    guard_risk: RiskTier | None = None
    """A second risk reading only the commit guard heeds: under any layer but ``learned`` over
    the shipped weights (``rules``, ``llm``, weights refitted on other data), the shipped risk
    model's (the keyword cues miss high stakes phrased in other words, a model's reply may read
    them low, and a refit was never stress-tested); ``None`` when there is none. It never
    changes what the backbone decides, only whether a commit stands."""
    guard_reading: Callable[[], SituationVerdict | None] | None = field(
        default=None, repr=False, compare=False
    )
    """A second reading of the memories on the query taken together, only the commit guard
    heeds: under a layer that reads no situations (``rules``), the shipped fitted layer's
    situation reading (the cues find no conflict where it is phrased in words they do not
    list); under ``llm``, its fitted fallback's reading of what the model read (a model's
    reading is never the only evidence), or the shipped layer's where the fallback reads no
    situations; under ``learned`` weights refitted on other data, the shipped model's reading
    of the same memories (a refit that no guard stress measured does not loosen the guard).
    Read on demand, since only a commit needs it; ``None`` when there is none. See
    :meth:`second_reading`."""
    _second: list[SituationVerdict | None] = field(
        default_factory=list, init=False, repr=False, compare=False
    )
    timeline: TemporalReading | None = None
    settled_side: str | None = None
    """The side the query itself names (a CPC context it states), if any."""
    resolution: Memory | None = None
    """A later confirmation from the user or a verified source that settles the cluster."""
    subject: set[str] = field(default_factory=set)
    """The user's own name tokens, written as "you" in answers (the graph's
    ``user_names``; empty when the user tells their own story in the first person)."""
    source_view: SourceView | None = None
    """For a source contradiction: which source the user's confirmed outcomes favour."""
    stale: StaleView | None = None
    """For a stale-state cluster: the change, what it replaces, and whether the query leans
    on the old state."""
    situation: SituationVerdict | None = None
    """The relation layer's reading of the memories nearest the query taken together (how
    likely they agree, depend on context, switch, or come from disagreeing sources), when
    the layer reads situations; read of what they state (a stored question states nothing)."""
    attributed: dict[str, float] = field(default_factory=dict)
    """Per memory, how sure the layer is that it is someone else's account (a source other
    than the user); absent when the layer gave no confidence."""
    successor: str | None = None
    """When the situation reads as stale state: the later memory the layer reads as most
    likely replacing (or ruling out) the memory nearest the query."""
    successor_rules_out: bool = False
    """Whether the layer reads the :attr:`successor`'s first step as a change that rules the
    earlier state out (``invalidates``) more than as a new value of it (``supersedes``,
    ``temporal_change``): a dependency the layer inferred, whose extent nothing states."""
    changes_read: list[str] = field(default_factory=list)
    """When the memories read as a stale state (the graph's reading or the situation's): the
    later memories, among those nearest the query, that the layer reads as replacing an
    earlier state (:data:`TOLD_MIN`), in time order. A change is often told over several
    turns (the new employer named in one, the first salary in the next), and the answer
    quotes the ones it has not already quoted."""
    later_state: str | None = None
    """For the graph's own stale reading of a replacement, when the layer reads situations: a
    later memory the layer reads as replacing the graph's newest change (the state as it now
    stands), if any."""
    agreement: dict[frozenset[str], float] = field(default_factory=dict)
    """On a high-stakes query, for pairs of the memories that bear on it most: the share of
    the pair's "related" reading that is agreement (not a context, time or source conflict),
    from a layer that reads whole situations; empty otherwise. The guard reads it as positive
    evidence that someone else's account states the same thing as a first-hand one."""
    said_reading: Callable[[], dict[str, str]] | None = field(
        default=None, repr=False, compare=False
    )
    """Reads :attr:`said` on demand (only an answer that quotes memories needs it)."""
    _said: list[dict[str, str]] = field(default_factory=list, init=False, repr=False, compare=False)
    unrelated: dict[frozenset[str], float] = field(default_factory=dict)
    """For the pairs of :attr:`agreement`: the layer's probability that the two memories are
    about different things (the guard does not hold two first-hand claims read as surely
    unrelated to agreeing with each other)."""

    def second_reading(self) -> SituationVerdict | None:
        """:attr:`guard_reading`'s verdict, read once (``None`` without one)."""
        if self.guard_reading is None:
            return None
        if not self._second:
            self._second.append(self.guard_reading())
        return self._second[0]

    @property
    def conflict_type(self) -> ConflictType:
        """The perceived conflict type (NONE without a conflicting cluster)."""
        return self.cluster.conflict_type if self.cluster else ConflictType.NONE

    def text(self, memory_id: str) -> str:
        """A memory's text."""
        return self.memories[memory_id].text

    @property
    def said(self) -> dict[str, str]:
        """Per memory, what it states, read by the request head beside the sentence-form rules
        (:func:`~caap.policy._request_head.stated_text`), for what answers quote; empty
        without the head, and :meth:`stated` then reads the rules alone. Decisions read the
        rules alone (the situation reading was measured with them; the head's reading there
        cost stale probes). Read once."""
        if self.said_reading is None:
            return {}
        if not self._said:
            self._said.append(self.said_reading())
        return self._said[0]

    def stated(self, memory_id: str) -> str:
        """What a memory states (empty for a stored turn that only asks): :attr:`said`'s
        reading, else the sentence-form rules'."""
        if memory_id in self.said:
            return self.said[memory_id]
        return stated_part(self.text(memory_id))

    @property
    def sides(self) -> dict[str, list[str]]:
        """The recalled cluster's sides (label -> ids), each cut to the visible memories. A side
        whose memories are all out of view stays, empty: it still counts as a side."""
        c = self.cluster
        if c is None:
            return {}
        return {
            label: [i for i in ids if i in self.memories] for label, ids in c.sides.items() if ids
        }

    @property
    def favoured_by_track_record(self) -> str | None:
        """For a source contradiction whose sources have confirmed outcomes: the side the
        user's track record of them favours, unless the posterior abstains."""
        v = self.source_view
        if v is None or not v.informed or v.posterior.abstain:
            return None
        return v.favoured

    @property
    def lone_record_side(self) -> str | None:
        """The side that is a written record, when the cluster has two sides and exactly one
        is a record (a record against an informal account)."""
        sides = self.sides
        records = [s for s in sides if s != "your own account" and _text.is_record_source(s)]
        return records[0] if len(records) == 1 and len(sides) == 2 else None


def _rank_clusters(
    graph: _GraphLike, qv: np.ndarray, sims: dict[str, float]
) -> list[tuple[float, str]]:
    """Aspects by how well they answer the query: the best member's similarity, averaged with
    the mean of the best three (a lone memory counts its missing neighbours as zero), so a
    topic several memories speak to beats one stray sentence."""
    ranked = []
    for aspect in graph.aspects():
        top = sorted((sims[i] for i in graph.aspect_members(aspect)), reverse=True)[:3]
        support = sum(top) / 3
        ranked.append((0.5 * top[0] + 0.5 * support, aspect))
    ranked.sort(reverse=True)
    return ranked


def _settled_side(cluster: ConflictCluster, query: str, subject: set[str]) -> str | None:
    """The one CPC context the query names, judged by distinctive shared words.

    A context counts as named when the query carries at least half of the words that set it
    apart from the other contexts, and no other context is named as well.
    """
    if cluster.conflict_type is not ConflictType.CPC:
        return None
    q = set(_text.content_words(query))
    if not q:
        return None
    labels = [s for s in cluster.sides if s != "no condition stated"]
    words = {s: set(_text.content_words(_text.mask_names(s, subject))) for s in labels}
    named = []
    for s, w in words.items():
        others = set().union(*(v for k, v in words.items() if k != s))
        distinctive = w - others
        hit = distinctive & q
        # Two distinctive words (or all of a short context's) must appear: one shared word
        # ("meeting", "land") is usually the topic, not the situation.
        if len(hit) >= 2 and len(hit) * 2 >= len(distinctive):
            named.append(s)
    return named[0] if len(named) == 1 else None


@single_blas_thread
def analyze(
    memories: Sequence[Memory],
    query: str,
    embedder: Embedder,
    *,
    config: GraphConfig | None = None,
    min_relevance: float = 0.15,
    aspect_margin: float = 0.08,
    top_sources: int = 8,
    max_view: int = 14,
    max_memories: int = 48,
    vectors: Mapping[str, npt.NDArray[np.float32]] | None = None,
    extractions: Mapping[str, Extraction] | None = None,
    reliability: ReliabilityModel | None = None,
    dependencies: DependencyMap | None = None,
    relations: str | RelationLayer | None = None,
    graph: ConflictGraph | None = None,
) -> Analysis:
    """Build a graph over ``memories`` and find the cluster ``query`` is about.

    ``vectors`` may hold value embeddings a graph already computed (memory id -> vector);
    when it covers every memory nothing is re-embedded but the query. ``extractions`` likewise
    may hold the facets a graph already parsed from each memory's text. ``reliability`` is the
    user's source-reliability model, read for a source contradiction. ``dependencies`` is
    the facet dependency map for propagated invalidation (default: the built-in one).
    ``relations`` is the relation layer that reads the memories (default: ``config``'s, then
    the default layer); the query's risk is the layer's too.

    ``graph``: a graph that already holds every one of ``memories`` (the agent's own), read
    in place of building one: its aspects, edges, parsed facets and vectors restricted to
    ``memories``, nothing placed or typed again. Ignored unless it reads relations with the
    same layer and holds every memory. The caller keeps it from changing meanwhile.
    """
    if not isinstance(query, str) or not query.strip():
        raise ValueError("query must be a non-empty string")
    by_id: dict[str, Memory] = {}
    for m in memories:
        if m.id in by_id:
            raise ValueError(f"duplicate memory id {m.id!r}")
        by_id[m.id] = m
    if not by_id:
        return Analysis(query, {}, None, [], {})
    # A graph holding every memory lends its vectors and parsed facets (one array lookup, no
    # per-memory mapping built by the caller).
    held = graph is not None and all(i in graph for i in by_id)
    if len(by_id) > max_memories:
        # A very large recall (a broad cluster) is cut to the memories nearest the query
        # before any graph work, so answering stays cheap however much was recalled.
        all_ids = list(by_id)
        if held and vectors is None:
            assert graph is not None
            mat = graph.vectors(all_ids)
        elif vectors is not None and all(i in vectors for i in all_ids):
            mat = np.stack([np.asarray(vectors[i], dtype=np.float32) for i in all_ids])
        else:
            mat = embedder.encode([by_id[i].text for i in all_ids])
        closest = np.argsort(-(mat @ embedder.encode_one(query)))[:max_memories]
        keep = {all_ids[int(j)] for j in closest}
        by_id = {i: m for i, m in by_id.items() if i in keep}
    users = {m.user_id for m in by_id.values()}
    user = next(iter(users)) if len(users) == 1 else "policy"
    layer = resolve_relations(
        relations if relations is not None else (config.relations if config else None),
        config=config or GraphConfig(),
    )
    if graph is not None and _reusable(graph, layer, by_id):
        view: _GraphLike = _Restricted(graph, list(by_id))
    else:
        if held and graph is not None:
            vectors = vectors or {i: graph.vector(i) for i in by_id}
            extractions = extractions or {i: graph.extraction(i) for i in by_id}
        view = _ephemeral_graph(
            by_id, user, embedder, config, dependencies, layer, vectors, extractions
        )
    filled = {m.id: m for m in view.memories()}
    qv = embedder.encode_one(_text.mask_names(query, set(view.subject)))
    sims = {i: float(np.dot(view.vector(i), qv)) for i in filled}
    ranked = [(score, a) for score, a in _rank_clusters(view, qv, sims) if score >= min_relevance]
    cluster: ConflictCluster | None = None
    if ranked:
        # A query can span several inferred aspects (the graph may have split one topic):
        # take every aspect scoring close to the best one.
        best = ranked[0][0]
        chosen = [a for score, a in ranked if score >= best - aspect_margin]
        ids = [i for a in chosen for i in view.aspect_members(a)]
        if len(ids) > max_view:
            # A broad aspect (many loosely related turns) is read only where the query
            # points: the timeline of forty chatty turns is noise, not a behaviour.
            ids = sorted(ids, key=lambda i: -sims[i])[:max_view]
        cluster = view.cluster_over(ids, chosen[0])
        for i in cluster.memory_ids:
            if i not in filled:  # a change the cluster pulls in from outside the recall
                filled[i] = view.memory(i)
                sims[i] = float(np.dot(view.vector(i), qv))
    relevant = (
        sorted(cluster.memory_ids, key=lambda i: -sims[i])
        if cluster is not None
        else sorted(filled, key=lambda i: -sims[i])[:3]
    )
    near = sorted(filled, key=lambda i: -sims[i])[:top_sources]
    verdict = layer.risk(query, [filled[i].text for i in relevant])
    risk = verdict.tier
    read: dict[frozenset[str], float] = {}  # agreement readings, shared by the two uses below
    unrelated: dict[frozenset[str], float] = {}  # and the same pairs' "unrelated" readings
    if (cluster is None or not cluster.has_conflict) and risk is RiskTier.HIGH:
        # High stakes and several parties speaking on the topic: treat their accounts as a
        # source conflict even if the graph did not link them (it may have split the topic).
        # A party speaks on the topic when its memory is as close to the query as a topic
        # must be to be answered from at all; in a small store the nearest few are anything.
        by_source: dict[str, list[str]] = {}
        for i in near:
            src = filled[i].source
            if sims[i] < min_relevance:
                continue
            if src and not is_self_source(src):
                by_source.setdefault(src, []).append(i)
        if len(by_source) >= 2 and not _parties_agree(layer, filled, by_source, read, unrelated):
            ids = [i for v in by_source.values() for i in v]
            cluster = ConflictCluster(
                id=f"{user}::query-view",
                user_id=user,
                aspect=cluster.aspect if cluster else "query_view",
                memory_ids=ids,
                conflict_type=ConflictType.SCC,
                unresolved="which source is authoritative: " + " vs ".join(by_source),
                sides=by_source,
                source_count=len(by_source),
                risk=risk,
            )
            relevant = sorted(ids, key=lambda i: -sims[i])
    resolution = None
    settled_side = _settled_side(cluster, query, set(view.subject)) if cluster else None
    if cluster is not None and settled_side is None:
        # An answer to "which situation is this for?" settled that occasion; a query that
        # names its own situation is another occasion, and its words decide.
        for i in cluster.memory_ids:
            newer = resolution is None or filled[i].created_at > resolution.created_at
            if filled[i].metadata.get(RESOLVES_KEY) and newer:
                resolution = filled[i]
    verdict = layer.risk(query, _risk_texts(layer, filled, relevant, near))
    tier = verdict.tier
    # The guard's risk is the highest reading available: the offline cues read it too, unless
    # the fitted risk model is sure the matter is low (RISK_VETO).
    if layer.name != "rules" and not _fitted_sure_low(layer, verdict):
        rules = _rules_layer(config).risk(query, [filled[i].text for i in relevant])
        tier = max_risk(tier, rules.tier)
    guard_risk = None
    # Under any layer but the shipped fitted one itself (the cues, a language model, weights
    # refitted on other data), the shipped fitted layer is the guard's second reader of the
    # stakes: cues miss stakes phrased in words they do not list, a model's reply may read
    # them low, and a refit was never stress-tested.
    fitted = None if _is_shipped_layer(layer) else _fitted_risk_layer(embedder)
    if fitted is not None:
        guard_risk = fitted.risk(query, _risk_texts(fitted, filled, relevant, near)).tier
    by_nearness = sorted(filled, key=lambda i: -sims[i])
    situation = _stated_situation(layer, query, [filled[i].text for i in by_nearness])
    guard_reading: Callable[[], SituationVerdict | None] | None = None
    # The shipped layer as a second situation reader, where it is not the layer itself.
    shipped = fitted if getattr(fitted, "reads_situations", False) else None
    if situation is None and shipped is not None:
        on_topic = [filled[i].text for i in by_nearness if sims[i] >= SECOND_READING_MIN]
        guard_reading = partial(_stated_situation, shipped, query, on_topic)
    elif situation is not None and (shipped is not None or hasattr(layer, "guard_situation")):
        # What the layer's own reading read, read again: by the layer's second reader (``llm``'s
        # fitted fallback), else by the shipped layer (weights refitted on other data).
        guard_reading = partial(
            _second_situation, layer, shipped, query, [filled[i].text for i in by_nearness]
        )
    attributed: dict[str, float] = {}
    for i in filled:
        facets = view.extraction(i)
        if isinstance(facets, Facets):
            attributed[i] = facets.source_confidence
    timeline = None
    if cluster is not None and cluster.conflict_type in (ConflictType.BOC, ConflictType.STALE):
        timeline = view.timeline(cluster.memory_ids)
    stale = (
        _stale_view(cluster, filled, sims, query, {i: view.extraction(i) for i in filled})
        if cluster is not None and cluster.conflict_type is ConflictType.STALE
        else None
    )
    successor, rules_out, told = (
        _successor(layer, filled, sims, view.vector)
        if _reads_stale(situation)
        else (None, False, [])
    )
    if stale is not None and stale.old and situation is not None:
        told = [*told, *_told_changes(layer, filled, sims, stale.old[0], near=TOLD_NEAR)]
    return Analysis(
        query=query,
        memories=filled,
        cluster=cluster,
        relevant=relevant,
        relevance=sims,
        risk=tier,
        risk_categories=list(verdict.categories),
        risk_confidence=verdict.confidence,
        guard_risk=guard_risk,
        guard_reading=guard_reading,
        timeline=timeline,
        settled_side=settled_side,
        resolution=resolution,
        subject=set(view.user_names),
        source_view=source_view(cluster, filled, reliability),
        stale=stale,
        situation=situation,
        attributed=attributed,
        successor=successor,
        successor_rules_out=rules_out,
        changes_read=sorted(dict.fromkeys(told), key=lambda i: memory_time(filled[i])),
        later_state=(
            _later_state(layer, filled, sims, stale.changes[0], view.vector)
            if stale is not None
            and stale.changes
            and not stale.propagated
            and situation is not None
            else None
        ),
        agreement=(
            _agreement(layer, filled, relevant, known=read, unrelated=unrelated)
            if situation is not None and RiskTier.HIGH in (tier, guard_risk)
            else {}
        ),
        unrelated=unrelated,
        said_reading=partial(_read_said, embedder, filled),
    )


class _GraphLike(Protocol):
    """What :func:`analyze` reads from a graph."""

    @property
    def subject(self) -> frozenset[str]: ...
    @property
    def user_names(self) -> frozenset[str]: ...
    def memory(self, memory_id: str) -> Memory: ...
    def memories(self) -> list[Memory]: ...
    def vector(self, memory_id: str) -> npt.NDArray[np.float32]: ...
    def aspects(self) -> list[str]: ...
    def aspect_members(self, aspect: str) -> list[str]: ...
    def cluster_over(self, ids: Sequence[str], aspect: str) -> ConflictCluster: ...
    def extraction(self, memory_id: str) -> Extraction: ...
    def timeline(self, ids: Sequence[str]) -> TemporalReading: ...


class _Restricted:
    """A graph read only over some of its memories (the recalled ones): aspects and their
    members are cut to those; clusters, edges, facets and vectors are the graph's own."""

    def __init__(self, graph: ConflictGraph, ids: Sequence[str]) -> None:
        self._g = graph
        self._ids = list(ids)
        self._members: dict[str, list[str]] = {}
        for i in self._ids:
            self._members.setdefault(graph.memory(i).aspect or "", []).append(i)

    @property
    def subject(self) -> frozenset[str]:
        return self._g.subject

    @property
    def user_names(self) -> frozenset[str]:
        return self._g.user_names

    def memory(self, memory_id: str) -> Memory:
        return self._g.memory(memory_id)

    def memories(self) -> list[Memory]:
        return [self._g.memory(i) for i in self._ids]

    def vector(self, memory_id: str) -> npt.NDArray[np.float32]:
        return self._g.vector(memory_id)

    def aspects(self) -> list[str]:
        return list(self._members)

    def aspect_members(self, aspect: str) -> list[str]:
        return list(self._members.get(aspect, []))

    def cluster_over(self, ids: Sequence[str], aspect: str) -> ConflictCluster:
        return self._g.cluster_over(ids, aspect)

    def extraction(self, memory_id: str) -> Extraction:
        return self._g.extraction(memory_id)

    def timeline(self, ids: Sequence[str]) -> TemporalReading:
        return self._g.timeline(ids)


def _reusable(graph: ConflictGraph, layer: RelationLayer, by_id: Mapping[str, Memory]) -> bool:
    """A graph can stand in for the per-answer one when it reads relations with the same
    layer and holds every memory as given (same text: not edited since it was recalled)."""
    if graph.relations is not layer:
        return False
    return all(i in graph and graph.memory(i).text == m.text for i, m in by_id.items())


def _ephemeral_graph(
    by_id: Mapping[str, Memory],
    user: str,
    embedder: Embedder,
    config: GraphConfig | None,
    dependencies: DependencyMap | None,
    layer: RelationLayer,
    vectors: Mapping[str, npt.NDArray[np.float32]] | None,
    extractions: Mapping[str, Extraction] | None,
) -> ConflictGraph:
    """A graph over exactly ``by_id``, placed and typed now (vectors and facets a graph
    already computed are reused)."""
    graph = ConflictGraph(user, embedder, config=config, dependencies=dependencies, relations=layer)
    known = None
    if vectors is not None and all(i in vectors for i in by_id):
        known = np.stack([np.asarray(vectors[i], dtype=np.float32) for i in by_id])
    parsed = None
    if extractions is not None and all(i in extractions for i in by_id):
        parsed = [extractions[i] for i in by_id]
    graph.add_many(
        [
            m if m.user_id == user else m.model_copy(update={"user_id": user})
            for m in by_id.values()
        ],
        vectors=known,
        extractions=parsed,
    )
    return graph


def _risk_texts(
    layer: RelationLayer, filled: Mapping[str, Memory], relevant: list[str], near: list[str]
) -> list[str]:
    """What the layer reads the risk from: the cues read the memories of the query's cluster;
    a fitted layer the nearest memories as well (it was trained on the memories nearest the
    query, and picks those itself)."""
    ids = relevant if layer.name == "rules" else list(dict.fromkeys(relevant + near))
    return [filled[i].text for i in ids]


def _read_said(embedder: Embedder, filled: Mapping[str, Memory]) -> dict[str, str]:
    """:attr:`Analysis.said` for ``filled`` (empty without a request head)."""
    heads = read_stated(embedder, [m.text for m in filled.values()])
    return dict(zip(filled, heads, strict=True)) if heads is not None else {}


def _second_situation(
    layer: RelationLayer, shipped: RelationLayer | None, query: str, texts: Sequence[str]
) -> SituationVerdict | None:
    """The guard's second reading of what a layer that reads situations read: the layer's own
    second reader where it offers one (``llm``: its fallback, when that reads situations), else
    the shipped fitted layer's reading (``None`` without one)."""
    second = _stated_situation(layer, query, texts, second=True)
    if second is None and shipped is not None:
        second = _stated_situation(shipped, query, texts)
    return second


def _stated_situation(
    layer: RelationLayer, query: str, texts: Sequence[str], *, second: bool = False
) -> SituationVerdict | None:
    """``layer``'s situation reading of what ``texts`` state (a stored request states nothing):
    :attr:`Analysis.situation`, and :attr:`Analysis.guard_reading` when a commit needs it.
    ``None`` at once for a layer that does not read situations (``rules``), so picking out what
    memories state is not done on every answer there. What they state is the sentence-form
    rules' reading (the request head's, :attr:`Analysis.said`, is for what answers quote). The
    situation model was fitted on whole stored texts; refitting it on this reading moved it
    little (TS in ``benchmark/PREREG.md``). ``second``: the layer's second reading for the
    guard (``guard_situation``) in place of its own."""
    if getattr(layer, "guard_situation" if second else "situation", None) is None:
        return None
    stated = [t for t in (stated_part(x) for x in texts) if t]
    return (guard_situation_of if second else situation_of)(layer, query, stated)


def _reads_stale(situation: SituationVerdict | None) -> bool:
    if situation is None:
        return False
    return max(situation.probs, key=lambda k: situation.probs[k]) == "STALE"


#: Relations that say the later of two memories replaces or rules out the earlier.
_REPLACING = ("supersedes", "invalidates", "temporal_change")
#: The query similarity from which a memory is part of what the guard's second reader reads
#: (:attr:`Analysis.guard_reading`): a memory on another subject ("I like hiking" beside a
#: penicillin allergy) is no part of whether the memories on the query agree. It reads what
#: the memories state; a stored request ("Can you give me a curry recipe?") states nothing.
SECOND_READING_MIN = 0.2
#: How many of the memories bearing on a high-stakes query are read pairwise for agreement.
AGREEMENT_TOP = 5


#: Agreement's share of a pair's agree-or-conflict reading from which two parties' accounts
#: read as one (the guard holds second-hand claims to the same share).
AGREEMENT_SHARE = 0.5


def _agreement(
    layer: RelationLayer,
    filled: Mapping[str, Memory],
    relevant: list[str],
    top: int = AGREEMENT_TOP,
    known: dict[frozenset[str], float] | None = None,
    unrelated: dict[frozenset[str], float] | None = None,
) -> dict[frozenset[str], float]:
    """For every pair of the ``top`` most relevant memories: agreement's share of the
    layer's agreement-or-conflict reading (one batched call). ``known``: readings already
    made, reused and extended with the new ones; ``unrelated``, when given, receives each
    newly read pair's probability that the two are about different things."""
    known = {} if known is None else known
    top_ids = relevant[:top]
    pairs = [(a, b) for k, a in enumerate(top_ids) for b in top_ids[k + 1 :]]
    todo = [(a, b) for a, b in pairs if frozenset((a, b)) not in known]
    if todo:

        def view(m: Memory) -> MemoryView:
            return MemoryView(id=m.id, text=m.text, source=m.source)

        verdicts = layer.relate([(view(filled[a]), view(filled[b])) for a, b in todo])
        for (a, b), v in zip(todo, verdicts, strict=True):
            # The model's own odds: a layer's prior shift toward agreement in the verdicts it
            # types edges from (``agree_odds``) is no evidence for a high-stakes commit.
            agree = v.probs.get("agree", 0.0) / v.agree_odds
            conflict = sum(v.probs.get(r, 0.0) for r in CONFLICT_RELATIONS)
            known[frozenset((a, b))] = agree / (agree + conflict) if agree + conflict > 0 else 0.0
            if unrelated is not None:
                unrelated[frozenset((a, b))] = v.probs.get("unrelated", 0.0)
    return {frozenset(p): known[frozenset(p)] for p in pairs}


def _parties_agree(
    layer: RelationLayer,
    filled: Mapping[str, Memory],
    by_source: Mapping[str, list[str]],
    known: dict[frozenset[str], float] | None = None,
    unrelated: dict[frozenset[str], float] | None = None,
) -> bool:
    """True when a layer that reads situations reads every account of one party as agreeing
    with every account of each other party (:func:`_agreement`'s share at least one half):
    several parties speaking is then corroboration, not a conflict. Always false for a layer
    that does not read situations (``rules``): there several parties are treated as a
    conflict, the cautious reading. ``known``: as for :func:`_agreement`."""
    if getattr(layer, "situation", None) is None:
        return False
    ids = [i for v in by_source.values() for i in v]
    party = {i: src for src, v in by_source.items() for i in v}
    shares = _agreement(layer, filled, ids, top=len(ids), known=known, unrelated=unrelated)
    cross = [v for pair, v in shares.items() if len({party[i] for i in pair}) == 2]
    return bool(cross) and min(cross) >= AGREEMENT_SHARE


def _views(filled: Mapping[str, Memory], ids: Sequence[str]) -> dict[str, MemoryView]:
    """Each memory as the layer reads it, built once (a memory is in many of the pairs): what
    a turn states, not what it asks, so a long turn that tells a new prescription and then
    asks for a recipe is read as the prescription."""
    return {
        i: MemoryView(
            id=filled[i].id,
            text=stated_part(filled[i].text) or filled[i].text,
            source=filled[i].source,
            order=memory_time(filled[i]),
        )
        for i in ids
    }


def memory_time(m: Memory) -> float:
    """When a memory happened, as far as it says: observed, else stored (a timestamp)."""
    return (m.observed_at or m.created_at).timestamp()


def _replacing(
    layer: RelationLayer, views: Mapping[str, MemoryView], pairs: list[tuple[str, str]]
) -> list[tuple[float, float]]:
    """Per pair: the replacing share of the layer's reading, and the largest other relation."""
    return [
        _replacing_and_other(v.probs)
        for v in layer.relate([(views[a], views[b]) for a, b in pairs])
    ]


def _replacing_and_other(probs: Mapping[str, float]) -> tuple[float, float]:
    """A pair reading's replacing share and its largest other relation."""
    other = max((p for r, p in probs.items() if r not in _REPLACING), default=0.0)
    return _replacing_share(probs), other


def _replacing_share(probs: Mapping[str, float]) -> float:
    """How much of a pair reading says the later memory replaces or rules out the earlier."""
    return sum(probs.get(r, 0.0) for r in _REPLACING)


#: A later memory this far off the current state's topic (cosine of their vectors) does not
#: replace it in a chain of replacements, whatever the pair reading says: "Rainy Saturday.
#: Recommend a Nordic crime series?" is no news about a pacemaker. Read off
#: ``pairs_restatements/train`` (pairs the shipped reader never trained on): below 0.25 lie 1
#: of 87 true replacements and 7 of the 60 unrelated pairs the layer reads as replacing.
REPLACE_MIN_COSINE = 0.25


def _follow(
    layer: RelationLayer,
    filled: Mapping[str, Memory],
    views: Mapping[str, MemoryView],
    ranked: Sequence[str],
    current: str,
    vector: Callable[[str], npt.NDArray[np.float32]],
) -> str:
    """From ``current``, the chain of later replacements among ``ranked``: while a still later
    memory on its topic (:data:`REPLACE_MIN_COSINE`) is read as replacing the current one more
    than as anything else, it is the newer state."""
    seen = {current}
    while True:
        now, topic = memory_time(filled[current]), vector(current)
        later = [
            c
            for c in ranked
            if c not in seen
            and memory_time(filled[c]) > now
            and float(np.dot(vector(c), topic)) >= REPLACE_MIN_COSINE
        ]
        if not later:
            return current
        read = _replacing(layer, views, [(current, c) for c in later])
        leading = [(rep, c) for c, (rep, other) in zip(later, read, strict=True) if rep > other]
        if not leading:
            return current
        current = max(leading)[1]
        seen.add(current)


def _successor(
    layer: RelationLayer,
    filled: Mapping[str, Memory],
    sims: Mapping[str, float],
    vector: Callable[[str], npt.NDArray[np.float32]],
    near: int = 8,
    anchors: int = 3,
) -> tuple[str | None, bool, list[str]]:
    """The latest state, among the ``near`` memories nearest the query, that the layer reads
    as replacing what came before (``None`` when nothing nearby is later than the nearest),
    whether the layer reads its first step as ruling the earlier state out rather than
    as a new value of it (:attr:`Analysis.successor_rules_out`), and every later memory it
    reads as replacing one of the anchors (:func:`_reads_as_change`), looked for among the
    :data:`TOLD_NEAR` nearest recalled memories: in chat the turn that names the change is often
    the least like the query.

    The first step takes the later memory the layer reads as most likely replacing one of
    the ``anchors`` nearest memories (an old state is often said more than once, and the
    nearest saying of it need not be the one the change reads against). From there the chain
    is followed (:func:`_follow`)."""
    ranked = sorted(filled, key=lambda i: -sims[i])[:near]
    if not ranked:
        return None, False, []
    when = {i: memory_time(filled[i]) for i in ranked}
    if not any(when[i] > when[ranked[0]] for i in ranked[1:]):
        return None, False, []
    views = _views(filled, ranked)
    pairs = [(a, c) for a in ranked[:anchors] for c in ranked if when[c] > when[a]]
    # Per later memory, the reading of its most replacing step from an anchor.
    step: dict[str, Mapping[str, float]] = {}
    verdicts = layer.relate([(views[a], views[c]) for a, c in pairs])
    for (_, c), v in zip(pairs, verdicts, strict=True):
        if c not in step or _replacing_share(v.probs) > _replacing_share(step[c]):
            step[c] = v.probs
    current = max(step, key=lambda c: (_replacing_share(step[c]), -ranked.index(c)))
    probs = step[current]
    rules_out = probs.get("invalidates", 0.0) > probs.get("supersedes", 0.0) + probs.get(
        "temporal_change", 0.0
    )
    told = [c for c in step if _reads_as_change(step[c])]
    # The turns of the change are looked for beyond the nearest memories too (up to
    # TOLD_NEAR), read against each anchor in one batch; the chain stays among the nearest.
    far = sorted(filled, key=lambda i: -sims[i])[near:TOLD_NEAR]
    far_pairs = [(a, c) for a in ranked[:anchors] for c in far if memory_time(filled[c]) > when[a]]
    told += _read_as_changes(layer, filled, far_pairs)
    return _follow(layer, filled, views, ranked, current, vector), rules_out, told


#: How many of the recalled memories nearest the query are looked at for the turns of a
#: change (:attr:`Analysis.changes_read`): every memory of an ordinary recall (ten or so), and
#: a bound on the pair readings when a recall brings a large conflict cluster whole.
TOLD_NEAR = 24

#: The replacing share of a pair reading from which the later memory is quoted as part of the
#: change (:attr:`Analysis.changes_read`): more likely than not, and above any other relation.
TOLD_MIN = 0.5


def _reads_as_change(probs: Mapping[str, float]) -> bool:
    """Whether a pair reading says the later memory replaces the earlier one more likely than
    not (:data:`TOLD_MIN`) and more than it says anything else."""
    share, other = _replacing_and_other(probs)
    return share >= TOLD_MIN and share > other


def _told_changes(
    layer: RelationLayer,
    filled: Mapping[str, Memory],
    sims: Mapping[str, float],
    old: str,
    near: int = 8,
) -> list[str]:
    """The later memories among the ``near`` nearest the query that the layer reads as
    replacing the earlier state ``old`` (:func:`_reads_as_change`)."""
    if old not in filled:
        return []
    start = memory_time(filled[old])
    later = [
        i
        for i in sorted(filled, key=lambda i: -sims[i])[:near]
        if i != old and memory_time(filled[i]) > start
    ]
    return _read_as_changes(layer, filled, [(old, c) for c in later])


def _read_as_changes(
    layer: RelationLayer, filled: Mapping[str, Memory], pairs: Sequence[tuple[str, str]]
) -> list[str]:
    """The later memory of each (earlier, later) pair that the layer, reading the pairs in one
    batch, reads as replacing the earlier one (:func:`_reads_as_change`), in pair order."""
    if not pairs:
        return []
    views = _views(filled, list(dict.fromkeys(i for pair in pairs for i in pair)))
    verdicts = layer.relate([(views[a], views[c]) for a, c in pairs])
    return [c for (_, c), v in zip(pairs, verdicts, strict=True) if _reads_as_change(v.probs)]


def _later_state(
    layer: RelationLayer,
    filled: Mapping[str, Memory],
    sims: Mapping[str, float],
    change: str,
    vector: Callable[[str], npt.NDArray[np.float32]],
    near: int = 8,
) -> str | None:
    """For the graph's own stale reading: a memory among the ``near`` nearest the query that
    the layer reads as replacing the graph's newest change, followed along later replacements
    as :func:`_successor` is (``None`` when nothing later replaces it). The graph links a
    change to the state it replaces; a still later turn ("jeep + MRT with a gym bag" after
    the car was sold) may be the state as it now stands."""
    ranked = [i for i in sorted(filled, key=lambda i: -sims[i])[:near] if i != change]
    if not any(memory_time(filled[i]) > memory_time(filled[change]) for i in ranked):
        return None
    views = _views(filled, [change, *ranked])
    latest = _follow(layer, filled, views, ranked, change, vector)
    return None if latest == change else latest


#: The fitted risk model's high-risk probability below which its LOW reading overrules the
#: cues' (keyword) HIGH: about a twentieth of its HIGH threshold (0.21). The lowest it gave any
#: high-risk instance of blind dev, blind extra or the shipped set was 0.033; the cues fire on
#: a word anywhere in the recalled memories (an inhaler in a note beside a laundry rota).
RISK_VETO = 0.01


def _fitted_sure_low(layer: RelationLayer, verdict: RiskVerdict) -> bool:
    """Whether the shipped fitted risk model (the ``learned`` layer, never a model reply) reads
    the query as low risk with a high-risk probability under :data:`RISK_VETO`."""
    return (
        layer.name == "learned"
        and verdict.tier is RiskTier.LOW
        and 1.0 - verdict.confidence < RISK_VETO
    )


_RULES: dict[int, RelationLayer] = {}


def _rules_layer(config: GraphConfig | None) -> RelationLayer:
    key = id(config)
    if key not in _RULES:
        _RULES.clear()
        _RULES[key] = resolve_relations("rules", config=config or GraphConfig())
    return _RULES[key]


def _is_shipped_layer(layer: RelationLayer) -> bool:
    """Whether ``layer`` is the ``learned`` layer over the shipped weights (the ones the
    guard's figures were measured with), not a refit on other data."""
    path = getattr(layer, "weights_path", None)
    return layer.name == "learned" and path is not None and _is_shipped_weights(str(path))


@cache
def _is_shipped_weights(path: str) -> bool:
    """Whether ``path`` is the shipped weights file, resolved once per path in the process
    (every analysis asks, and resolving a path is a round of file-system calls)."""
    from caap.conflict_graph._relations_learned import default_weights_path

    return Path(path).resolve() == default_weights_path().resolve()


_FITTED: dict[int, RelationLayer | None] = {}


def _fitted_risk_layer(embedder: Embedder) -> RelationLayer | None:
    """The shipped ``learned`` layer as a risk reader over ``embedder``, when that is the
    embedding model its weights were trained on (``None`` for any other embedder, or when the
    weights cannot be read: its risk model reads that model's vectors and nothing else)."""
    key = id(embedder)
    if key not in _FITTED:
        layer: RelationLayer | None = None
        if getattr(embedder, "model_name", None) == DEFAULT_MODEL:
            from caap.conflict_graph._relations_learned import LearnedRelations

            try:
                candidate = LearnedRelations(embedder=embedder)
            except (OSError, ValueError):
                candidate = None
            if candidate is not None and candidate.card.get("embedder") == DEFAULT_MODEL:
                layer = candidate
        _FITTED.clear()
        _FITTED[key] = layer
    return _FITTED[key]


_ORDER = {RiskTier.LOW: 0, RiskTier.MEDIUM: 1, RiskTier.HIGH: 2}


def max_risk(*tiers: RiskTier) -> RiskTier:
    """The highest of ``tiers`` (``LOW`` when none are given)."""
    return max(tiers, key=lambda t: _ORDER[t], default=RiskTier.LOW)


def short(text: str, words: int = 18) -> str:
    """``text`` cut to about ``words`` words, without a trailing period; a cut that would fall
    inside the injection check's placeholder falls before it ("[a…" says nothing)."""
    parts = text.strip().rstrip(".").split()
    out = " ".join(parts[:words])
    if len(parts) > words:
        opened = out.rfind("[")
        cut = out[opened:]
        if opened >= 0 and "]" not in cut and PLACEHOLDER.startswith(cut):
            out = out[:opened].rstrip()
    return out + ("…" if len(parts) > words else "")


#: Words after which a capitalised word names a thing or a place, not a person ("the
#: Botanic Garden", "a Kastella taverna", "a licence in Victoria"): English person names take
#: no article, and a person is rarely *in* anything.
_NOT_A_PERSON_AFTER = frozenset({"the", "a", "an", "this", "that", "these", "those", "our",
                                 "your", "their", "its", "his", "her", "my", "in"})  # fmt: skip


def _name_to_you(clause: str, subject: set[str]) -> str:
    """``clause`` with the user's name written as "you" ("your" when possessive).

    A run of the user's name tokens ("Mei Lin", "Mei-Lin", with a lower-case part or an
    honorific joined by a hyphen: "Min-jun", "Tanaka-san") is one "you". A run that is part
    of a longer proper name (next to a capitalised word that is not the user's: "Al Ansari
    Exchange", "Botanic Garden") or follows an article ("the Weinbauer") names a place or a
    thing, and is left as written.
    """
    if not subject:
        return clause
    alt = "|".join(re.escape(n) for n in sorted(subject, key=len, reverse=True))
    # a lower-case part joined by a hyphen is the name's too ("Min-jun", "Tanaka-san")
    run = re.compile(rf"\b(?:{alt})(?:[\s-]+(?:{alt}))*(?:-[a-z]+)*\b((?:'s|’s)\b)?")

    def repl(m: re.Match[str]) -> str:
        prev = re.search(r"([A-Za-z]+)[\s-]+$", clause[: m.start()])
        if prev is not None:
            word = prev.group(1)
            if word.lower() in _NOT_A_PERSON_AFTER:
                return m.group(0)  # "the Weinbauer": a place or a thing
            head = clause[: prev.start()].rstrip()
            if word[:1].isupper() and head and head[-1] not in ".!?:;\"'‘“(—":
                return m.group(0)  # "Botanic Garden": part of a longer name
        if m.group(1) is None and re.match(r"[\s-]+[A-Z][a-z]", clause[m.end() :]):
            return m.group(0)  # "Al Ansari Exchange", "Rahul Sharma"
        return "your" if m.group(1) else "you"

    return run.sub(repl, clause)


#: Words that follow an object pronoun but never a possessive one: prepositions, articles,
#: conjunctions and particles ("asked her to", "told her that", "picked her up").
_AFTER_AN_OBJECT = "|".join(
    ("to", "the", "a", "an", "that", "about", "in", "on", "at", "for", "with", "from", "by",
     "up", "out", "back", "off", "again", "and", "or", "but", "so", "if", "when", "because",
     "this", "it", "over", "into", "before", "after", "yesterday", "today", "once", "twice")
)  # fmt: skip
#: Adverbs of frequency, which sit between a subject and its verb ("she never goes").
_FREQUENCY = "never|always|often|usually|still|also|just|only|sometimes|rarely|seldom|already"


def second_person(clause: str, subject: set[str]) -> str:
    """Turn a clause about the user into second person (best effort).

    A clause in the user's own words ("I", "my") has its first person written as "you"; its
    "he" and "she" are someone else ("My mum is on warfarin and she takes 5 mg" is the
    mother's dose, not the user's) and stay as written. A clause about the user in the third
    person (no first person in it) has its third person written as "you".
    """
    own_words = _text.in_own_words(clause)
    out = _name_to_you(clause, subject)
    # First person, as memories taken from the user's own words read.
    # (chat writes the pronoun in lower case too: "i'm", "on solo weeks i basically live";
    # never "i.e.")
    out = re.sub(r"\b[Ii] am\b", "you are", out)
    out = re.sub(r"\b[Ii] was\b", "you were", out)
    out = re.sub(r"\b[Ii]['’]m\b", "you're", out)
    out = re.sub(r"\b[Ii]['’]ve\b", "you've", out)
    out = re.sub(r"\b[Ii]['’]d\b", "you'd", out)
    out = re.sub(r"\b[Ii]['’]ll\b", "you'll", out)
    out = re.sub(r"\bI\b|\bi\b(?!\.\w)", "you", out)
    out = re.sub(r"\b(?:my|My)\b", "your", out)
    out = re.sub(r"\bmyself\b", "yourself", out)
    out = re.sub(r"\bme\b", "you", out)  # "the scooter gets me to Umeda"
    out = re.sub(r"\bmine\b", "yours", out)
    if not own_words:
        out = re.sub(r"\b(?:he|she|they)'s\b", "you're", out, flags=re.I)
        out = re.sub(r"\b(?:he|she)\b", "you", out, flags=re.I)
        # "her" is an object before punctuation or a word that cannot follow a possessive
        # ("told her, years ago", "asked her to"); elsewhere it is possessive, like "his"
        out = re.sub(
            rf"\bher\b(?!-)(?=\s*(?:[.,;:!?)]|$|\s(?:{_AFTER_AN_OBJECT})\b(?!-)))", "you", out
        )
        out = re.sub(r"\b(?:his|her)\b", "your", out, flags=re.I)
        out = re.sub(r"\b(?:himself|herself)\b", "yourself", out, flags=re.I)

    def fix(m: re.Match[str]) -> str:
        verb = m.group(3)
        irregular = {"has": "have", "is": "are", "was": "were", "does": "do", "goes": "go"}
        if verb in irregular:
            new = irregular[verb]
        elif verb.endswith("ies") and len(verb) > 4:
            new = verb[:-3] + "y"
        elif re.search(r"(?:ch|sh|ss|x|z|o)es$", verb):
            new = verb[:-2]
        elif verb.endswith("s") and not verb.endswith("ss") and len(verb) > 3:
            new = verb[:-1]
        else:
            new = verb
        return f"{m.group(1)} {m.group(2) or ''}{new}"

    # the verb agrees across a frequency adverb too ("you never go")
    out = re.sub(rf"\b(you|You)\s+((?:{_FREQUENCY})\s+)?([a-z]+)\b", fix, out)
    return out
