"""The per-user conflict graph: networkx in memory, storage-free.

Writing a memory: extract facets (caller facets win) -> embed its value -> block candidates by
nearest neighbours -> join or found an aspect -> type edges against the candidates of that
aspect -> re-read the aspect's timeline. Edges the new evidence contradicts are closed
(``expired_at``), never deleted.
"""

from __future__ import annotations

import bisect
import heapq
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
import numpy.typing as npt

from caap._blas import single_blas_thread
from caap._embeddings import Embedder
from caap._timing import phase
from caap.conflict_graph import _text
from caap.conflict_graph._index import VectorIndex
from caap.conflict_graph._prototypes import PROTOTYPES, prototype_matrix
from caap.conflict_graph.extractor import Extraction, Extractor
from caap.conflict_graph.relations import (
    MemoryView,
    PairVerdict,
    RelationLayer,
    edge_of,
    resolve_relations,
)
from caap.conflict_graph.rules import (
    GraphConfig,
    Node,
    TemporalReading,
    TimelineEdge,
    _self_source,
    dominant_type_of,
    read_timeline,
    verdict_timeline,
)
from caap.conflict_graph.stale import (
    DEFAULT_DEPENDENCIES,
    EXCLUSIVE_FACETS,
    DependencyMap,
    Validity,
    entity_supersessions,
    exclusive_supersessions,
    facet_matrix,
    facet_similarities,
    facets_of,
    is_later,
    primary_facets,
    propagated_invalidations,
    reports_own_change,
    state_supersessions,
    trigger_reach,
    validity,
    verdict_stale_edges,
)
from caap.conflict_graph.stale_llm import InvalidationClassifier
from caap.conflict_graph.topics import TopicConfig, TopicModel, TopicMove
from caap.models import (
    RESOLVES_KEY,
    ConflictCluster,
    ConflictEdge,
    ConflictType,
    EdgeKind,
    Memory,
    RiskTier,
    utcnow,
)

__all__ = ["ConflictGraph", "WriteResult"]

Vector = npt.NDArray[np.float32]
_TEMPORAL = (EdgeKind.TEMPORAL_OSCILLATION, EdgeKind.SUPERSEDES)
_TIMED = frozenset((*_TEMPORAL, EdgeKind.PROPAGATED_INVALIDATION))


@dataclass
class WriteResult:
    """What one write changed in the graph."""

    memory: Memory
    """The memory with its facets filled."""
    inferred: list[str]
    """Names of the facets the extractor filled (the caller gave the rest)."""
    vector: Vector
    """The value embedding used for aspects and phases."""
    new_edges: list[ConflictEdge] = field(default_factory=list)
    closed_edges: list[ConflictEdge] = field(default_factory=list)
    relabeled: list[Memory] = field(default_factory=list)
    """Earlier memories whose inferred aspect changed because this one bridged two aspects or
    moved their conversation topic."""
    segment: str | None = None
    """The conversation segment the memory joined (``None`` outside topic formation)."""


class _PairSims:
    """Value similarities of a set of memories, looked up as ``sims.get((a, b), default)``.

    One matrix product instead of a Python dict of every pair: an aspect with hundreds of
    dated memories would otherwise cost a quadratic dict on every write.
    """

    def __init__(self, graph: ConflictGraph, ids: Sequence[str]) -> None:
        self._pos = {i: n for n, i in enumerate(ids)}
        self._rows = [graph._row[i] for i in ids]
        self._graph = graph
        # Computed on the first lookup: most rule passes end before comparing any pair.
        self._mat: npt.NDArray[np.float32] | None = None

    def get(self, key: tuple[str, str], default: float = 0.0) -> float:
        a, b = self._pos.get(key[0]), self._pos.get(key[1])
        if a is None or b is None:
            return default
        return float(self._matrix()[a, b])

    def _matrix(self) -> npt.NDArray[np.float32]:
        if self._mat is None:
            vecs = self._graph._vecs[np.array(self._rows, dtype=np.int64)]
            self._mat = vecs @ vecs.T
        return self._mat

    def matrix(self, ids: Sequence[str]) -> npt.NDArray[np.float32]:
        """The similarities among ``ids`` as a matrix, in that order (0 for an id not in this
        set, as :meth:`get` gives its default)."""
        known = [n for n, i in enumerate(ids) if i in self._pos]
        pos = np.array([self._pos[ids[n]] for n in known], dtype=np.int64)
        out: npt.NDArray[np.float32] = np.zeros((len(ids), len(ids)), dtype=np.float32)
        out[np.ix_(known, known)] = self._matrix()[np.ix_(pos, pos)]
        return out


class ConflictGraph:
    """Typed conflict graph of one user's memories.

    Args:
        user_id: The only user whose memories this graph accepts.
        embedder: Sentence embedder for memory values.
        extractor: Facet extractor; by default the relation layer reads facets.
        config: Thresholds.
        relations: The relation layer (a registered name or an instance) that reads facets,
            pair relations and risk; default ``config.relations``, then the default layer.
        dependencies: Which life facets depend on which, for propagated invalidation
            (default :data:`caap.conflict_graph.stale.DEFAULT_DEPENDENCIES`).
        classifier: Optional judge (e.g. an
            :class:`~caap.conflict_graph.stale_llm.LLMInvalidationClassifier`) that may veto
            the stale-state edges the rules propose across aspects; it never adds one.
        topic_config: Thresholds of conversation topic formation (``config.topics`` says
            which memories get a topic).
    """

    def __init__(
        self,
        user_id: str,
        embedder: Embedder,
        *,
        extractor: Extractor | None = None,
        config: GraphConfig | None = None,
        dependencies: DependencyMap | None = None,
        classifier: InvalidationClassifier | None = None,
        relations: str | RelationLayer | None = None,
        topic_config: TopicConfig | None = None,
    ) -> None:
        if (config or GraphConfig()).topics not in ("turns", "always", "never"):
            raise ValueError(
                f"config.topics must be 'turns', 'always' or 'never', got {config.topics!r}"  # type: ignore[union-attr]
            )
        self.user_id = user_id
        self.embedder = embedder
        self.config = config or GraphConfig()
        self.relations: RelationLayer = resolve_relations(
            relations if relations is not None else self.config.relations, config=self.config
        )
        self.extractor: Extractor | None = extractor
        # A pairwise layer judges temporal change and stale state pair by pair; the rules read
        # them off whole timelines and the dependency map instead.
        self._pairwise = bool(getattr(self.relations, "pairwise", False))
        self._verdicts: dict[tuple[str, str], PairVerdict] = {}
        self._judged: dict[str, list[str]] = {}
        self._explicit_deps = dependencies is not None
        self.g: nx.MultiGraph = nx.MultiGraph()
        self._mem: dict[str, Memory] = {}
        self._ext: dict[str, Extraction] = {}
        # A memory's node (text, source, time, facets) never changes once it is placed (only
        # its aspect does, which a node does not carry): built once, read on every write.
        self._nodes: dict[str, Node] = {}
        self._own_change: dict[str, tuple[bool, bool]] = {}
        # The active edges that read a change in time (oscillation, supersession, propagated
        # invalidation) at each memory, as edge ids kept in step with ``g``: the per-write
        # re-reading walks these, not every edge of a topic's members.
        self._time_edges_at: dict[str, dict[str, None]] = {}
        self._ids: list[str] = []
        self._by_aspect: dict[str, list[str]] = {}
        self._vecs: Vector = np.zeros((0, embedder.dimension), dtype=np.float32)
        self._n_rows = 0
        self._alive: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self._row: dict[str, int] = {}
        self._edges: dict[str, ConflictEdge] = {}
        self._inferred: dict[str, tuple[str, ...]] = {}
        self._proto: dict[str, str | None] = {}
        self._protos = prototype_matrix(embedder)
        self._subject: set[str] = set()
        self._explicit: Counter[str] = Counter()
        # Per aspect, the memories that can be timeline phases (a small part of a big topic).
        # Kept sorted by (world time, id), so the latest timeline window is a slice.
        self._phases: dict[str, list[tuple[float, str]]] = {}
        # Every member per aspect, sorted the same way, and the windows last read.
        self._ordered: dict[str, list[tuple[float, str]]] = {}
        self._windows: dict[str, list[str]] = {}
        # Clusters are cached per aspect and recomputed only after the aspect changed.
        self._generation: dict[str, int] = {}
        self._clusters: dict[str, tuple[int, ConflictCluster]] = {}
        self._index = VectorIndex(embedder.dimension, exact_limit=self.config.exact_neighbours)
        # Document frequency of capitalised tokens, kept incrementally (no rescans).
        self._name_df: Counter[str] = Counter()
        self._n_texts = 0
        self._n_spoken = 0
        self.dependencies = dependencies if dependencies is not None else DEFAULT_DEPENDENCIES
        self.classifier = classifier
        self._facet_names = list(self.dependencies.descriptions)
        self._facet_mat = facet_matrix(embedder, self.dependencies)
        self._facets: dict[str, frozenset[str]] = {}
        self._primary: dict[str, frozenset[str]] = {}
        self._by_facet: dict[str, list[str]] = {}
        # Conversation topics: the aspect of conversational memories without a caller aspect.
        self._naming: dict[str, tuple[str, str]] = {}
        self.topics = TopicModel(embedder.dimension, self._topic_label, topic_config)

    # -- reading ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._mem)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._mem

    def memory(self, memory_id: str) -> Memory:
        """One memory by id (KeyError if absent)."""
        return self._mem[memory_id]

    def memories(self) -> list[Memory]:
        """Every memory, in insertion order."""
        return [self._mem[i] for i in self._ids if i in self._mem]

    def edges(self, *, include_closed: bool = False) -> list[ConflictEdge]:
        """Conflict edges, active ones only unless ``include_closed``."""
        return [e for e in self._edges.values() if include_closed or e.active]

    def vector(self, memory_id: str) -> Vector:
        """The value embedding of a memory."""
        vec: Vector = self._vecs[self._row[memory_id]]
        return vec

    def vectors(self, memory_ids: Sequence[str]) -> Vector:
        """The value embeddings of several memories, one row each."""
        rows: Vector = self._vecs[[self._row[i] for i in memory_ids]]
        return rows

    def nearest(self, vector: Vector, k: int) -> list[tuple[str, float]]:
        """The ``k`` memories whose values are nearest ``vector``, with similarities."""
        return self._neighbours(vector, k)

    @single_blas_thread
    def expand(
        self, hit_ids: Sequence[str], query_vector: Vector, *, limit: int | None = None
    ) -> tuple[list[tuple[str, float]], list[ConflictCluster]]:
        """The other members of every conflict cluster the hits belong to, nearest the query
        first, with their similarity to it; and those clusters. Unknown ids are ignored.

        At most ``limit`` members are added (default ``config.max_expand``), the nearest.
        """
        limit = self.config.max_expand if limit is None else limit
        seen = {i for i in hit_ids if i in self._mem}
        aspects: list[str] = []
        for i in hit_ids:
            a = self._mem[i].aspect if i in self._mem else None
            if a and a not in aspects:
                aspects.append(a)
        clusters: list[ConflictCluster] = []
        extra: list[tuple[str, float]] = []
        for a in aspects:
            cluster = self.cluster(a)
            if not cluster.has_conflict:
                continue
            clusters.append(cluster)
            others = [o for o in cluster.memory_ids if o not in seen]
            if others:
                sims = self.vectors(others) @ query_vector
                if len(others) > limit:
                    top = np.argpartition(-sims, limit - 1)[:limit]
                    others, sims = [others[int(t)] for t in top], sims[top]
                seen.update(others)
                extra += zip(others, sims.tolist(), strict=True)
        extra.sort(key=lambda t: -t[1])
        return extra[:limit], clusters

    def aspect_members(self, aspect: str) -> list[str]:
        """Ids of the memories of one aspect, in insertion order."""
        return [i for i in self._by_aspect.get(aspect, []) if i in self._mem]

    @property
    def subject(self) -> frozenset[str]:
        """Name tokens frequent across the user's texts (masked from value embeddings)."""
        return frozenset(self._subject)

    @property
    def user_names(self) -> frozenset[str]:
        """Of :attr:`subject`, the names taken for the user themselves (written as "you" in
        answers): none when the user tells their own story in the first person
        (:func:`caap.conflict_graph._text.user_names`)."""
        return frozenset(_text.user_names(self._subject, self._n_texts, self._n_spoken))

    def timeline(self, ids: Sequence[str]) -> TemporalReading:
        """How the user's own dated statements among ``ids`` read in time order."""
        return self._timeline(ids)

    def extraction(self, memory_id: str) -> Extraction:
        """The facets the extractor read from a memory's text."""
        return self._ext[memory_id]

    def life_facets(self, memory_id: str) -> frozenset[str]:
        """The life facets of the dependency map a memory sits on (may be empty)."""
        return self._facets.get(memory_id, frozenset())

    def validity(self, memory_id: str) -> Validity:
        """How long a memory's state held: what supersedes or invalidates it, and since when.

        A superseded memory is closed in world time (``invalid_at``), never deleted.
        """
        m = self._mem[memory_id]
        incident = [self._edges[k] for _, _, k in self._incident([memory_id]) if k in self._edges]
        return validity(memory_id, m.observed_at, incident)

    # -- writing ---------------------------------------------------------------------------
    def add(self, memory: Memory, *, vector: Vector | None = None) -> WriteResult:
        """Add one memory: fill facets, place it in an aspect, type its edges."""
        return self.add_many([memory], vectors=None if vector is None else vector[None, :])[0]

    @single_blas_thread
    def add_many(
        self,
        memories: Sequence[Memory],
        *,
        vectors: Vector | None = None,
        extractions: Sequence[Extraction] | None = None,
    ) -> list[WriteResult]:
        """Add memories in order (values embedded in one batch).

        ``vectors`` and ``extractions`` may carry what another graph already computed for the
        same memories (one per memory, in order), so nothing is embedded or parsed twice.
        """
        if extractions is not None and len(extractions) != len(memories):
            raise ValueError(
                f"extractions has {len(extractions)} items for {len(memories)} memories"
            )
        for m in memories:
            if m.user_id != self.user_id:
                raise ValueError(
                    f"memory {m.id!r} belongs to user {m.user_id!r}, not {self.user_id!r}"
                )
            if m.id in self._mem:
                raise ValueError(f"memory id {m.id!r} is already in the graph")
        self._count_names(memories)
        if extractions is None:
            with phase("extract"):
                extractions = self._read_facets([m.text for m in memories])
        if vectors is None:
            vectors = self._embed_values([e.value for e in extractions])
        # Neighbour search for the whole batch against the memories already held: one
        # matrix product (the batch's own members are scored as each is placed).
        known = self._index.scores(vectors) if len(memories) > 1 else None
        return [
            self._place(m, e, v, None if known is None else known[:, j])
            for j, (m, e, v) in enumerate(zip(memories, extractions, vectors, strict=True))
        ]

    def _embed_values(self, values: list[str]) -> Vector:
        """Embed value texts once: a layer that already embedded the same texts with the same
        embedder while reading facets (``learned``) lends its vectors."""
        lend = getattr(self.relations, "cached_vectors", None)
        same = getattr(self.relations, "embedder", None) is self.embedder
        if lend is None or not same or not values:
            return self.embedder.encode(values)
        known: dict[str, Vector] = lend(values)
        missing = list(dict.fromkeys(v for v in values if v not in known))
        if missing:
            known.update(zip(missing, self.embedder.encode(missing), strict=True))
        out: Vector = np.stack([known[v] for v in values]).astype(np.float32)
        return out

    def load(
        self,
        memory: Memory,
        vector: Vector,
        edges: Iterable[ConflictEdge] = (),
        inferred: Sequence[str] = (),
        extraction: Extraction | None = None,
        segment: str | None = None,
    ) -> None:
        """Put back a stored memory with its stored vector and edges (no re-typing).

        ``extraction`` may give the facets already parsed from its text (else parsed here);
        ``segment`` the conversation segment it was placed in (its aspect is the topic).
        """
        self._inferred[memory.id] = tuple(inferred)
        self._count_names([memory])
        self._ext[memory.id] = extraction or self._read_facets([memory.text])[0]
        self._insert(memory, vector)
        if segment is not None and memory.aspect:
            self.topics.restore(memory.id, vector, segment, memory.aspect)
        for e in edges:
            self._put_edge(e)

    def load_edges(self, edges: Iterable[ConflictEdge]) -> None:
        """Put back stored edges whose endpoints are loaded."""
        for e in edges:
            self._put_edge(e)

    @single_blas_thread
    def remove(self, memory_id: str) -> list[ConflictEdge]:
        """Take a memory out; its edges are closed, not deleted. Returns the closed edges."""
        if memory_id not in self._mem:
            raise KeyError(memory_id)
        aspect = self._mem[memory_id].aspect
        closed = self._close_edges(
            [e for e in self._edges.values() if e.active and memory_id in e.endpoints()]
        )
        if aspect and "aspect" not in self._inferred.get(memory_id, ("aspect",)):
            self._explicit[aspect] -= 1
        if aspect:
            self._touch(aspect)
            key = self._phase_key(self._mem[memory_id])
            for entries in (self._phases.get(aspect, []), self._ordered.get(aspect, [])):
                at = bisect.bisect_left(entries, key)
                if at < len(entries) and entries[at] == key:
                    del entries[at]
        self.topics.remove(memory_id, self._vecs[self._row[memory_id]])
        del self._mem[memory_id]
        self._nodes.pop(memory_id, None)
        self._own_change.pop(memory_id, None)
        self._alive[self._row[memory_id]] = False
        self._index.remove(self._row[memory_id])
        self.g.remove_node(memory_id)
        self._time_edges_at.pop(memory_id, None)
        if aspect:
            closed += self._retime(aspect)[1]
        return closed

    # -- clusters --------------------------------------------------------------------------
    def aspects(self) -> list[str]:
        """Every aspect label, in first-seen order."""
        return [a for a, ids in self._by_aspect.items() if any(i in self._mem for i in ids)]

    def cluster(self, aspect: str) -> ConflictCluster:
        """The cluster of one aspect with its features (cached until the aspect changes)."""
        gen = self._generation.get(aspect, 0)
        cached = self._clusters.get(aspect)
        if cached is not None and cached[0] == gen:
            return cached[1]
        cluster = self.cluster_over(self.aspect_members(aspect), aspect)
        self._clusters[aspect] = (gen, cluster)
        return cluster

    @single_blas_thread
    def cluster_over(self, ids: Sequence[str], aspect: str) -> ConflictCluster:
        """Cluster features over any set of memory ids (e.g. several aspects a query spans)."""
        ids = [i for i in ids if i in self._mem]
        idset = set(ids)
        # A change in another aspect that invalidates one of these memories belongs to the
        # cluster: without it the policy would see the old habit and not why it is stale.
        incident = self._incident(ids)
        pulled: list[str] = []
        for _, _, k in incident:
            e = self._edges.get(k)
            if e is None or not e.active:
                continue
            if e.kind is EdgeKind.PROPAGATED_INVALIDATION and e.target_id in idset:
                add = e.source_id
            elif e.kind is EdgeKind.SUPERSEDES:
                # A supersession filed across two aspects is one aspect's history.
                add = e.target_id if e.source_id in idset else e.source_id
            else:
                continue
            if add not in idset:
                ids.append(add)
                idset.add(add)
                pulled.append(add)
        # Walk the networkx adjacency of these memories only (active edges live there),
        # rather than every edge of the user; each adjacency once.
        if pulled:
            incident += self._incident(pulled)
        keys = {k for a, b, k in incident if a in idset and b in idset}
        edges = [self._edges[k] for k in keys if k in self._edges and self._edges[k].active]
        edges.sort(key=lambda e: (e.created_at, e.id))
        named = {i for i in ids if not _self_source(self._mem[i].source)}
        # A pairwise layer read the sources itself (named or implied): every memory its
        # source-contradiction edges join counts.
        ctype = dominant_type_of(edges, None if self._pairwise else named)
        if ctype is ConflictType.CPC and not self._pairwise:
            contexts = {self._mem[i].context for i in ids if self._mem[i].context}
            if len(contexts) < 2:
                # One stated condition is not a partition: read the other edges instead.
                ctype = dominant_type_of(
                    [e for e in edges if e.kind is not EdgeKind.CONTEXT_PARTITION], named
                )
        mems = [self._mem[i] for i in ids]
        # Risk only tiers a conflict (a cluster without one is LOW): not read otherwise.
        risk = (
            self.relations.risk("", [m.text for m in mems]).tier
            if ctype is not ConflictType.NONE
            else RiskTier.LOW
        )
        sides: dict[str, list[str]] = {}
        reversal_count = 0
        durations: list[str] = []
        unresolved: str | None = None
        sources = sorted({m.source for m in mems if m.source})
        if ctype is ConflictType.SCC:
            for m in mems:
                label = "your own account" if _self_source(m.source) else str(m.source)
                sides.setdefault(label, []).append(m.id)
            unresolved = "which source is authoritative: " + " vs ".join(sides)
        elif ctype is ConflictType.CPC:
            for m in mems:
                sides.setdefault(m.context or "no condition stated", []).append(m.id)
            unresolved = "which context applies: " + " / ".join(sides)
        elif ctype is ConflictType.STALE:
            sides = _stale_sides(ids, edges)
            reversal_count = self._timeline(ids).reversals
            unresolved = "whether the earlier state still holds"
        elif ctype is ConflictType.BOC:
            reading = self._timeline(ids)
            for p in reading.phases:
                label = f"phase {len(sides) + 1}"
                sides[label] = list(p.members)
                if p.duration:
                    durations.append(p.duration)
            reversal_count = reading.reversals
            unresolved = "which phase is current and what triggers a switch"
        return ConflictCluster(
            id=f"{self.user_id}::{aspect}",
            user_id=self.user_id,
            aspect=aspect,
            memory_ids=ids,
            edges=edges,
            conflict_type=ctype,
            unresolved=unresolved,
            sides=sides,
            reversal_count=reversal_count,
            phase_durations=durations,
            source_count=len(sources),
            risk=risk,
        )

    def clusters(self, *, conflicts_only: bool = True) -> list[ConflictCluster]:
        """Clusters of every aspect (only those that carry a conflict, by default)."""
        out = [self.cluster(a) for a in self.aspects()]
        return [c for c in out if c.has_conflict or not conflicts_only]

    def cluster_of(self, memory_id: str) -> ConflictCluster | None:
        """The cluster holding a memory, or ``None`` for an unknown id."""
        m = self._mem.get(memory_id)
        return self.cluster(m.aspect) if m is not None and m.aspect else None

    # -- internals -------------------------------------------------------------------------
    def _count_names(self, memories: Iterable[Memory]) -> None:
        for m in memories:
            if m.metadata.get(RESOLVES_KEY):
                # An answer to the assistant's question is in the first person whoever the
                # memories are about: it says nothing of how the user's own notes read.
                continue
            self._name_df.update(_text.name_tokens(m.text))
            self._n_texts += 1
            self._n_spoken += _text.spoken_by_user(m.text)
        self._subject = _text.subject_from_counts(self._name_df, self._n_texts)

    def _insert(self, memory: Memory, vector: Vector) -> None:
        self._mem[memory.id] = memory
        self._nodes.pop(memory.id, None)
        self._own_change.pop(memory.id, None)
        self._ids.append(memory.id)
        if memory.aspect:
            self._by_aspect.setdefault(memory.aspect, []).append(memory.id)
            if "aspect" not in self._inferred.get(memory.id, ("aspect",)):
                self._explicit[memory.aspect] += 1
            if self._is_phase(memory.id):
                bisect.insort(self._phases.setdefault(memory.aspect, []), self._phase_key(memory))
            bisect.insort(self._ordered.setdefault(memory.aspect, []), self._phase_key(memory))
            self._touch(memory.aspect)
        row = self._n_rows
        if row == len(self._vecs):
            # Grow by doubling: appending row by row would copy the matrix on every write.
            grown = np.zeros((max(16, 2 * len(self._vecs)), self._vecs.shape[1]), np.float32)
            grown[:row] = self._vecs[:row]
            self._vecs = grown
            alive = np.zeros(len(grown), dtype=bool)
            alive[:row] = self._alive[:row]
            self._alive = alive
        self._vecs[row] = vector
        self._alive[row] = True
        self._index.add(row, vector)
        self._n_rows = row + 1
        self._row[memory.id] = row
        self._proto[memory.id] = self._prototype_of(vector)
        fsims = facet_similarities(self._facet_mat, self.dependencies, vector)
        self._facets[memory.id] = facets_of(
            fsims, self._facet_names
        ) | self.dependencies.cued_facets(memory.text)
        for f in self._facets[memory.id]:
            self._by_facet.setdefault(f, []).append(memory.id)
        self._primary[memory.id] = primary_facets(fsims, self._facet_names)
        self.g.add_node(memory.id)

    def _incident(self, nodes: Iterable[str]) -> list[tuple[str, str, str]]:
        """``(node, neighbour, edge id)`` for every edge at ``nodes`` (an edge between two of
        them comes twice), read off the adjacency: a networkx edge view walks itself once
        more just to count its length."""
        adj: dict[str, dict[str, dict[str, object]]] = self.g._adj  # networkx's own dicts
        return [(a, b, k) for a in nodes if a in adj for b, keys in adj[a].items() for k in keys]

    def _touch(self, aspect: str | None) -> None:
        """Mark an aspect changed: its cached cluster is stale."""
        if aspect:
            self._generation[aspect] = self._generation.get(aspect, 0) + 1

    def _prototype_of(self, vector: Vector) -> str | None:
        sims = self._protos @ vector
        best = int(np.argmax(sims))
        return list(PROTOTYPES)[best] if sims[best] >= self.config.prototype_min else None

    def _neighbours(
        self, vector: Vector, k: int, known: Vector | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` nearest live memories: one matrix-vector product (or the similarities
        ``known`` for the first rows) and a partial sort."""
        rows, sims = self._index.search(vector, k, known=known)
        return [(self._ids[r], s) for r, s in zip(rows, sims, strict=True)]

    def _place(
        self, memory: Memory, ext: Extraction, vector: Vector, known: Vector | None = None
    ) -> WriteResult:
        cfg = self.config
        inferred: list[str] = []
        updates: dict[str, object] = {}
        for name, val in (
            ("source", ext.source),
            ("context", ext.context),
            ("value", ext.value),
            ("observed_at", ext.observed_at),
        ):
            if getattr(memory, name) is None and val is not None:
                updates[name] = val
                inferred.append(name)
        neighbours = self._neighbours(vector, cfg.neighbours, known)
        relabeled: list[Memory] = []
        segment: str | None = None
        if memory.aspect is None and self._conversational(memory):
            # A conversation turn: its aspect is the topic of its conversation segment.
            when = memory.observed_at or ext.observed_at
            self._naming[memory.id] = (memory.text, ext.value)
            with phase("topics"):
                segment, topic, moves = self.topics.add(
                    memory.id, vector, when.date().isoformat() if when else None
                )
                self._naming.pop(memory.id, None)
                relabeled += self._apply_moves(moves)
            updates["aspect"] = topic
            inferred.append("aspect")
        elif memory.aspect is None:
            joinable = self._joinable_aspects(neighbours, self._prototype_of(vector))
            if joinable:
                updates["aspect"] = joinable[0]
                # This memory bridges several inferred aspects: they were one all along.
                for other in joinable[1:]:
                    relabeled += self._relabel(other, joinable[0])
            else:
                updates["aspect"] = self._fresh_aspect_label(memory.text, ext.value)
            inferred.append("aspect")
        memory = memory.model_copy(update=updates)
        self._ext[memory.id] = ext
        self._inferred[memory.id] = tuple(inferred)
        self._insert(memory, vector)
        aspect = memory.aspect
        assert aspect is not None
        # Candidate blocking: only the nearest neighbours of the same aspect are typed
        # pairwise; the whole aspect is visited only by the linear timeline pass.
        new: list[ConflictEdge] = []
        near = [o for o, _ in neighbours if o in self._mem and o != memory.id]
        # A pairwise layer also judges the neighbours in other aspects (a change there may
        # supersede or invalidate them); pair edges join memories of one aspect only.
        judged = near if self._pairwise else [o for o in near if self._mem[o].aspect == aspect]
        if self._pairwise:
            self._judged[memory.id] = judged
        for other_id, verdict in zip(judged, self._relate(memory.id, judged), strict=True):
            if self._pairwise:
                self._verdicts[_pair_key(memory.id, other_id)] = verdict
            if self._mem[other_id].aspect != aspect:
                continue
            found = edge_of(verdict, minimum=cfg.relation_min)
            if found is None:
                continue
            kind, evidence = found
            new.append(self._new_edge(kind, memory.id, other_id, evidence))
        added, closed = self._retime(aspect)
        p_added, p_closed = self._repropagate(memory.id)
        return WriteResult(
            memory, inferred, vector, new + added + p_added, closed + p_closed, relabeled, segment
        )

    def _conversational(self, memory: Memory) -> bool:
        mode = self.config.topics
        return mode == "always" or (mode == "turns" and "turn" in memory.provenance)

    def _topic_label(self, memory_id: str) -> str:
        m = self._mem.get(memory_id)
        text, value = self._naming.get(memory_id) or (
            (m.text, self._ext[memory_id].value) if m is not None else ("topic", "topic")
        )
        label = self._fresh_aspect_label(text, value)
        # Reserve it at once: a re-clustering may name several topics in one write.
        self._by_aspect.setdefault(label, [])
        return label

    def _apply_moves(self, moves: Sequence[TopicMove]) -> list[Memory]:
        """Move memories between topics (their inferred aspect) after a topic change."""
        out: list[Memory] = []
        # A re-clustering moves many segments between the same two topics one after another:
        # each topic's tables are rebuilt once per run of such moves, not once per segment.
        runs: list[TopicMove] = []
        for mv in moves:
            if runs and (runs[-1].old, runs[-1].new) == (mv.old, mv.new):
                runs[-1] = TopicMove([*runs[-1].memory_ids, *mv.memory_ids], mv.old, mv.new)
            else:
                runs.append(mv)
        for mv in runs:
            ids = [i for i in mv.memory_ids if i in self._mem and self._mem[i].aspect == mv.old]
            if not ids or mv.old == mv.new:
                continue
            moving = set(ids)
            for i in ids:
                m = self._mem[i].model_copy(update={"aspect": mv.new})
                self._mem[i] = m
                out.append(m)
            for table in (self._phases, self._ordered):
                kept = [t for t in table.get(mv.old, []) if t[1] not in moving]
                taken = [t for t in table.get(mv.old, []) if t[1] in moving]
                table[mv.old] = kept
                table[mv.new] = list(heapq.merge(table.get(mv.new, []), taken))
            self._windows.pop(mv.old, None)
            self._windows.pop(mv.new, None)
            kept_ids = [i for i in self._by_aspect.get(mv.old, []) if i not in moving]
            self._by_aspect[mv.old] = kept_ids
            self._by_aspect[mv.new] = list(
                heapq.merge(
                    self._by_aspect.get(mv.new, []),
                    sorted(ids, key=self._row.__getitem__),
                    key=self._row.__getitem__,
                )
            )
            self._touch(mv.old)
            self._touch(mv.new)
        return out

    def _joinable_aspects(
        self, neighbours: list[tuple[str, float]], proto: str | None
    ) -> list[str]:
        """Aspects the new memory is close enough to join, best first.

        Joining needs a high enough mean similarity to the aspect's nearest members, or one
        near-duplicate, or a lower mean when both sit on the same life-facet prototype; an
        aspect at the cap (:meth:`_aspect_cap`) takes nothing.
        """
        cfg = self.config
        by_aspect: dict[str, list[float]] = {}
        protos: dict[str, list[str | None]] = {}
        for mid, sim in neighbours:
            a = self._mem[mid].aspect
            if a:
                by_aspect.setdefault(a, []).append(sim)
                protos.setdefault(a, []).append(self._proto.get(mid))
        cap = self._aspect_cap()
        scored = []
        for a, sims in by_aspect.items():
            top = sorted(sims, reverse=True)[: cfg.aspect_top]
            mean = sum(top) / len(top)
            if len(self._by_aspect.get(a, ())) >= cap:
                # A full aspect takes nothing more, not even a restatement (restatements of
                # loosely joined members chain other topics in): the memory goes to another
                # aspect near it, or starts the topic's next aspect.
                continue
            shared = proto is not None and protos[a].count(proto) * 2 >= len(protos[a])
            if (
                mean >= cfg.aspect_join
                or top[0] >= cfg.aspect_join_single
                or (shared and mean >= cfg.aspect_join_prototype)
            ):
                scored.append((mean, a))
        scored.sort(reverse=True)
        joinable = [a for _, a in scored]
        if len(joinable) > 1 and not cfg.merge_bridged:
            joinable = joinable[:1]
        if len(joinable) > 1:
            # Only inferred aspects merge, and only while the merged one stays under the cap;
            # an aspect a caller named stays as it is.
            explicit = self._explicit_aspects()
            size = len(self._by_aspect.get(joinable[0], ()))
            merged = [joinable[0]]
            for a in joinable[1:]:
                n = len(self._by_aspect.get(a, ()))
                if a not in explicit and size + n < cap:
                    merged.append(a)
                    size += n
            joinable = merged
        return joinable

    def _aspect_cap(self) -> int:
        """How many memories an inferred aspect holds before it stops taking loose matches."""
        cfg = self.config
        return max(cfg.aspect_cap, int(cfg.aspect_cap_share * len(self._mem)))

    def _explicit_aspects(self) -> set[str]:
        return {a for a, n in self._explicit.items() if n > 0}

    def _relabel(self, old: str, new: str) -> list[Memory]:
        out = []
        for i in self.aspect_members(old):
            m = self._mem[i].model_copy(update={"aspect": new})
            self._mem[i] = m
            out.append(m)
        self._touch(old)
        self._touch(new)
        self._phases[new] = list(heapq.merge(self._phases.get(new, []), self._phases.pop(old, [])))
        self._ordered[new] = list(
            heapq.merge(self._ordered.get(new, []), self._ordered.pop(old, []))
        )
        self._windows[new] = self._windows.get(new, []) + self._windows.pop(old, [])
        moved = self._by_aspect.pop(old, [])
        # Keep insertion order within the merged aspect.
        self._by_aspect[new] = sorted(
            self._by_aspect.get(new, []) + moved, key=lambda i: self._row[i]
        )
        return out

    def _fresh_aspect_label(self, text: str, value: str) -> str:
        capitalised = {w.lower() for w in re.findall(r"\b[A-Z][a-z]+", text)}
        words = [
            w for w in _text.content_words(value) if not w[0].isdigit() and w not in capitalised
        ]
        counts = Counter(words)
        picked = [w for w, _ in counts.most_common()][:2] or ["misc"]
        base = re.sub(r"[^a-z0-9_]+", "_", "_".join(picked)).strip("_") or "misc"
        # Every label ever used stays taken (an emptied aspect's label is not reused).
        label, n = base, 2
        while label in self._by_aspect:
            label, n = f"{base}_{n}", n + 1
        return label

    def _node(self, memory_id: str) -> Node:
        node = self._nodes.get(memory_id)
        if node is None:
            m = self._mem[memory_id]
            when = m.observed_at
            order = when.timestamp() if when else m.created_at.timestamp()
            node = Node(m.id, m.text, m.source, m.context, when, order, self._ext[memory_id])
            self._nodes[memory_id] = node
        return node

    def _stale_role(self, memory_id: str) -> tuple[bool, bool]:
        """Whether a memory reports an own change, and whether it does or records a return
        (memoised per memory: the stale rules read every candidate on every write)."""
        known = self._own_change.get(memory_id)
        if known is None:
            change = reports_own_change(self._node(memory_id))
            known = (change, change or bool(self._ext[memory_id].returns))
            self._own_change[memory_id] = known
        return known

    def _read_facets(self, texts: Sequence[str]) -> list[Extraction]:
        """Facets of new texts: the caller's extractor if one was given, else the layer's."""
        if self.extractor is not None:
            return [self.extractor.extract(t, subject=self._subject) for t in texts]
        return list(self.relations.facets(texts, subject=set(self._subject)))

    def view(self, memory_id: str) -> MemoryView:
        """A memory as the relation layer sees it (facets filled, with its value vector)."""
        n = self._node(memory_id)
        return MemoryView(
            n.id, n.text, n.source, n.context, n.when, n.order, n.extraction, self.vector(n.id)
        )

    def _relate(self, memory_id: str, others: Sequence[str]) -> list[PairVerdict]:
        """The layer's verdicts on ``memory_id`` paired with each of ``others`` (one call)."""
        if not others:
            return []
        new = self.view(memory_id)
        return self.relations.relate([(new, self.view(o)) for o in others])

    def _new_edge(
        self,
        kind: EdgeKind,
        src: str,
        dst: str,
        evidence: str,
        valid_at: object = None,
        invalid_at: object = None,
    ) -> ConflictEdge:
        e = ConflictEdge(
            user_id=self.user_id,
            kind=kind,
            source_id=src,
            target_id=dst,
            evidence=evidence,
            valid_at=valid_at,  # type: ignore[arg-type]
            invalid_at=invalid_at,  # type: ignore[arg-type]
        )
        self._put_edge(e)
        return e

    def _put_edge(self, e: ConflictEdge) -> None:
        if e.user_id != self.user_id:
            raise ValueError(f"edge {e.id!r} belongs to another user")
        self._edges[e.id] = e
        self._touch_endpoints(e)
        if e.active and e.source_id in self._mem and e.target_id in self._mem:
            self.g.add_edge(e.source_id, e.target_id, key=e.id, kind=e.kind.value)
            if e.kind in _TIMED:
                for end in (e.source_id, e.target_id):
                    self._time_edges_at.setdefault(end, {})[e.id] = None

    def _touch_endpoints(self, e: ConflictEdge) -> None:
        for end in (e.source_id, e.target_id):
            m = self._mem.get(end)
            if m is not None:
                self._touch(m.aspect)

    def _close_edges(self, edges: Iterable[ConflictEdge]) -> list[ConflictEdge]:
        now = utcnow()
        closed = []
        for e in edges:
            if not e.active:
                continue
            ce = e.model_copy(update={"expired_at": now})
            self._edges[e.id] = ce
            self._touch_endpoints(ce)
            if self.g.has_edge(e.source_id, e.target_id, key=e.id):
                self.g.remove_edge(e.source_id, e.target_id, key=e.id)
            for end in (e.source_id, e.target_id):
                self._time_edges_at.get(end, {}).pop(e.id, None)
            closed.append(ce)
        return closed

    def _timeline(self, ids: Sequence[str]) -> TemporalReading:
        """The timeline of the user's own dated statements among ``ids``.

        Memories attributed to a named source stay out: a dated record and a later report from
        someone else disagree about the world, they are not one behaviour changing.
        """
        if self._pairwise:
            return verdict_timeline(
                [self._node(i) for i in ids if i in self._mem], self._verdict, self.config
            )
        nodes = [self._node(i) for i in ids if self._is_phase(i)]
        if len(nodes) < 2:
            return TemporalReading()
        # read_timeline reads only the latest window; cut to it before the pairwise matrix.
        nodes.sort(key=lambda n: (n.order, n.id))
        nodes = nodes[-self.config.timeline_window :]
        return read_timeline(nodes, _PairSims(self, [n.id for n in nodes]), self.config)

    def _same_slot(self, a: str, b: str) -> bool:
        """Whether a later memory may replace an earlier one of its topic: not when each is
        mostly about a different one-value part of life that the dependency map does not link
        (a move and a new job filed under one topic: the job does not replace the address).
        What one change does to another part of life is a propagated invalidation, not a
        supersession."""
        pa = self._primary.get(a, frozenset()) & EXCLUSIVE_FACETS
        pb = self._primary.get(b, frozenset()) & EXCLUSIVE_FACETS
        if not (pa and pb) or pa & pb:
            return True
        # Parts of life the map links (a new job and its shifts) are one slot.
        deps = self.dependencies
        return any(deps.depends(x, y) or deps.depends(y, x) for x in pa for y in pb)

    @staticmethod
    def _phase_key(memory: Memory) -> tuple[float, str]:
        when = memory.observed_at
        return (when.timestamp() if when else memory.created_at.timestamp(), memory.id)

    def _verdict(self, a: str, b: str) -> PairVerdict | None:
        """The stored verdict of a pairwise layer on two memories (``None``: never judged)."""
        return self._verdicts.get(_pair_key(a, b))

    def _is_phase(self, memory_id: str) -> bool:
        m = self._mem[memory_id]
        return (
            m.observed_at is not None
            and _self_source(m.source)
            # Only statements that place themselves in time ("in March", "this month",
            # "again", "stopped") are phases; a dated conversation turn stating a standing
            # preference ("if I have an early shift I don't drink") is not.
            and bool({"time", "return", "change"} & set(self._ext[memory_id].cues))
        )

    def _cross_aspect(self, e: ConflictEdge) -> bool:
        if e.kind is EdgeKind.PROPAGATED_INVALIDATION:
            return True
        if e.kind is not EdgeKind.SUPERSEDES:
            return False
        a, b = self._mem.get(e.source_id), self._mem.get(e.target_id)
        return a is not None and b is not None and a.aspect != b.aspect

    def _repropagate(self, new_id: str | None) -> tuple[list[ConflictEdge], list[ConflictEdge]]:
        """Keep the cross-aspect stale edges in step with a write (``new_id``) or a removal.

        Incremental: only pairs with the new memory are typed, against the memories that
        share a life facet with it or sit on a facet linked to its own (an index lookup, not
        a scan of the user). A new memory in an aspect also lifts the propagated
        invalidations of that aspect that it post-dates. A removal closes the removed
        memory's edges (done by :meth:`remove`) and changes nothing else.
        """
        if new_id is None:
            return [], []
        new = self._node(new_id)
        aspect = self._mem[new_id].aspect
        # Bounded work per write: the latest `timeline_window` memories of each facet and
        # aspect stand for its current state (a habit of years ago is history already).
        window = self.config.timeline_window

        mem = self._mem

        def latest(ids: Sequence[str]) -> list[str]:
            # A removed memory stays in these lists until skipped here, so the last
            # window + 1 entries nearly always hold the window; else walk back further.
            tail = ids[-(window + 1) :]
            out = [i for i in tail if i in mem and i != new_id]
            if len(out) >= window or len(tail) == len(ids):
                return out[-window:]
            out = []
            for i in reversed(ids):
                if i in mem and i != new_id:
                    out.append(i)
                    if len(out) == window:
                        break
            out.reverse()
            return out

        mates = latest(self._by_aspect.get(aspect or "", []))
        # The cross-aspect edges this write can repeat touch the new memory; those it can lift
        # are propagated invalidations at its aspect's latest members: read those off the
        # index of timed edges, not every edge of those members nor of the user.
        keys = [k for _, _, k in self._incident([new_id])]
        keys += [k for m in mates for k in self._time_edges_at.get(m, ())]
        current = {}
        for key in keys:
            e = self._edges[key]
            if e.active and self._cross_aspect(e):
                current[(e.kind, e.source_id, e.target_id)] = e
        lifted = [
            e
            for e in current.values()
            if e.kind is EdgeKind.PROPAGATED_INVALIDATION
            and e.target_id != new_id
            and e.target_id in self._mem
            and self._mem[e.target_id].aspect == aspect
            and e.source_id in self._mem
            and _later_than(new, self._node(e.source_id))
        ]
        closed = self._close_edges(lifted)
        for e in lifted:
            current.pop((e.kind, e.source_id, e.target_id), None)
        found: list[TimelineEdge] = []
        if self._pairwise:
            near = self._neighbour_nodes(new_id)
            aspects_of = {n.id: self._mem[n.id].aspect or "" for n in [new, *near]}
            found = verdict_stale_edges(new, near, self._verdict, aspects_of, self.config)
            if not self._explicit_deps:
                # The dependency map is only a prior the user may give: without one, the
                # layer's verdicts alone decide.
                return self._open_stale(found, current), closed
        own = self._facets.get(new_id, frozenset())
        if not own:
            return self._open_stale(found, current), closed
        deps = self.dependencies
        related = set(own)
        for f in self._primary.get(new_id, frozenset()):
            related |= deps.dependents(f)
        related |= {t for t, d in deps.edges.items() if d & own}
        by_facet = self._by_facet
        cand = dict.fromkeys([i for f in sorted(related) for i in latest(by_facet.get(f, ()))])
        # The lifting rule needs the other (latest) members of the invalidated memory's
        # aspect. Every pair includes the new memory: when it cannot act as a change, it can
        # only be the invalidated one, and only its own aspect's members matter.
        if trigger_reach(new, self._primary.get(new_id, frozenset()), deps):
            lifting = dict.fromkeys(mem[c].aspect or "" for c in cand)
        else:
            lifting = dict.fromkeys(
                a for a in (mem[c].aspect or "" for c in cand) if a == (aspect or "")
            )
        peer_ids = list(
            {i for a in lifting for i in latest(self._by_aspect.get(a, [])) if i not in cand}
        )
        cand_ids = list(cand)
        if not self._stale_role(new_id)[0]:
            # Every edge typed below pairs the new memory with a change the user reported.
            # When the new memory is no such change it can only be the earlier side: what
            # matters is the changes in the pool, the memories recording a return (they void
            # a change on their facet) and the new memory's own aspect (a later member lifts
            # an invalidation). The rest is dropped before typing; the edges are the same.
            roles = [(i, self._stale_role(i)) for i in (*cand_ids, *peer_ids)]
            if not any(change for _, (change, _) in roles):
                return self._open_stale(found, current), closed
            mine = aspect or ""
            keep = {i for i, (_, either) in roles if either or (mem[i].aspect or "") == mine}
            cand_ids = [i for i in cand_ids if i in keep]
            peer_ids = [i for i in peer_ids if i in keep]
        pool = [new, *(self._node(i) for i in cand_ids)]
        peers = [self._node(i) for i in peer_ids]
        facets = {n.id: self._facets.get(n.id, frozenset()) for n in pool}
        facets.update({n.id: frozenset() for n in peers})
        aspects = {n.id: self._mem[n.id].aspect or "" for n in (*pool, *peers)}
        primary = {n.id: self._primary.get(n.id, frozenset()) for n in pool}
        sims = _PairSims(self, [n.id for n in pool])
        found += propagated_invalidations(
            [*pool, *peers], aspects, facets, deps, primary, focus=new_id
        )
        if self._pairwise:
            # With a pairwise layer the map is a prior for propagated invalidation only.
            return self._open_stale(found, current), closed
        found += exclusive_supersessions(pool, aspects, facets, sims, self.config, focus=new_id)
        # The user's own name names no thing; a token only counts as that name when most
        # texts carry it (a pet named in two of four chat turns is still a pet).
        own_name = frozenset(w for w in self._subject if 2 * self._name_df[w] > self._n_texts)
        found += entity_supersessions(
            pool, aspects, facets, sims, self.config, own_name, focus=new_id
        )
        return self._open_stale(found, current), closed

    def _neighbour_nodes(self, memory_id: str) -> list[Node]:
        """The memories a pairwise layer judged against ``memory_id`` at its write."""
        return [self._node(i) for i in self._judged.get(memory_id, ()) if i in self._mem]

    def _open_stale(
        self, found: Sequence[TimelineEdge], current: dict[tuple[EdgeKind, str, str], ConflictEdge]
    ) -> list[ConflictEdge]:
        """Open the stale edges ``found`` that are not open yet (an optional classifier may
        veto each)."""
        wanted = {(t.kind, t.source_id, t.target_id): t for t in found}
        added = []
        for key, t in wanted.items():
            if key in current:
                continue
            evidence = t.evidence
            if self.classifier is not None:
                verdict = self.classifier.classify(
                    self._mem[t.source_id].text, self._mem[t.target_id].text
                )
                if verdict is None:
                    evidence += " (classifier unavailable; kept by the rules)"
                elif verdict.relation == "none":
                    continue
                else:
                    evidence += f"; confirmed by the classifier: {verdict.reason}".rstrip(": ")
            added.append(
                self._new_edge(t.kind, t.source_id, t.target_id, evidence, t.valid_at, t.invalid_at)
            )
        return added

    def _retime(self, aspect: str) -> tuple[list[ConflictEdge], list[ConflictEdge]]:
        """Re-read an aspect's timeline; open edges it now implies, close the ones it doesn't."""
        # Temporal edges join phase memories only: the aspect's phase list bounds this work,
        # not the size of the whole topic.
        entries = self._phases.get(aspect, [])
        ids: list[str] = []
        for _, i in reversed(entries):
            if len(ids) == self.config.timeline_window:
                break
            if i in self._mem:
                ids.append(i)
        ids.reverse()
        reading = TemporalReading() if self._pairwise else self._timeline(ids)

        # Standing states ("lives in Seattle") carry no time cue and are no phases; the latest
        # window of all members, by world time, is read for a change that replaces them.
        recent: list[str] = []
        for _, i in reversed(self._ordered.get(aspect, [])):
            if len(recent) == self.config.timeline_window:
                break
            if i in self._mem:
                recent.append(i)
        recent.reverse()
        if self._pairwise:
            reading = self._timeline(recent)
        # Temporal edges (supersessions included) join members of the current or the previous
        # windows: walk those nodes' adjacency, not every member of a large topic.
        walk = list(
            dict.fromkeys(
                [*ids, *recent, *(i for i in self._windows.get(aspect, []) if i in self._mem)]
            )
        )
        self._windows[aspect] = [*ids, *recent]
        current = {}
        for a in walk:
            for key in self._time_edges_at.get(a, ()):
                e = self._edges[key]
                b = e.target_id if e.source_id == a else e.source_id
                if (
                    e.active
                    and e.kind in _TEMPORAL
                    and self._mem[a].aspect == aspect
                    and self._mem[b].aspect == aspect
                ):
                    current[(e.kind, e.source_id, e.target_id)] = e
        wanted = {(t.kind, t.source_id, t.target_id): t for t in reading.edges}
        if self._pairwise:
            # An edge between memories whose pair has no verdict here (loaded from the store,
            # never judged in this process) stays as it was.
            current = {k: e for k, e in current.items() if self._verdict(e.source_id, e.target_id)}
        elif not reading.oscillates and len(recent) >= 2:
            # A later reported change replaces a standing state.
            for t in state_supersessions(
                [self._node(i) for i in recent], _PairSims(self, recent), self.config
            ):
                wanted.setdefault((t.kind, t.source_id, t.target_id), t)
        wanted = {
            k: t
            for k, t in wanted.items()
            if t.kind is not EdgeKind.SUPERSEDES or self._same_slot(t.source_id, t.target_id)
        }
        closed = self._close_edges(e for key, e in current.items() if key not in wanted)
        added = [
            self._new_edge(t.kind, t.source_id, t.target_id, t.evidence, t.valid_at, t.invalid_at)
            for key, t in wanted.items()
            if key not in current
        ]
        return added, closed


def _pair_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _later_than(newer: Node, older: Node) -> bool:
    return is_later(newer, older) is True


def _stale_sides(ids: Sequence[str], edges: Sequence[ConflictEdge]) -> dict[str, list[str]]:
    """Sides of a stale-state cluster: what holds now, what was replaced, what is in doubt."""
    superseded = {e.target_id for e in edges if e.kind is EdgeKind.SUPERSEDES}
    invalidated = {e.target_id for e in edges if e.kind is EdgeKind.PROPAGATED_INVALIDATION}
    sides: dict[str, list[str]] = {}
    for i in ids:
        if i in superseded:
            label = "superseded"
        elif i in invalidated:
            label = "invalidated"
        else:
            label = "current"
        sides.setdefault(label, []).append(i)
    return sides
