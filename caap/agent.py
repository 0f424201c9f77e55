"""``caap.Agent``: remember, recall (whole conflict clusters), list conflicts, forget.

Layout of a data directory::

    PATH/graph.sqlite   memories, facets, value vectors, conflict edges, confirmed source
                        outcomes (source of truth)
    PATH/vectors/       the builtin backend's chromadb store (a search index)
    PATH/<name>/        another registered backend's files, when its constructor takes a path

``store=`` moves the source of truth elsewhere: another SQLite file, or a PostgreSQL database
given by a ``postgresql://`` DSN (see ``docs/deployment.md``).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterable, Mapping
from datetime import date, datetime, time, timezone
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from caap._blas import one_blas_thread
from caap._embeddings import DEFAULT_MODEL, Embedder, get_embedder
from caap._mem0_api import VERSIONS_KEY, Mem0Api
from caap._timing import phase
from caap._validation import (
    DEFAULT_MAX_TEXT_BYTES,
    check_items,
    check_json_mapping,
    check_memory_id,
    check_provenance,
    check_text,
)
from caap.adapters.base import MemoryBackend, SearchHit
from caap.adapters.builtin import BuiltinBackend
from caap.adapters.registry import backend_class, get_backend
from caap.conflict_graph._topics_recall import budgeted
from caap.conflict_graph.extractor import Extractor
from caap.conflict_graph.graph import ConflictGraph
from caap.conflict_graph.relations import RelationLayer, resolve_relations
from caap.conflict_graph.reliability import OUTCOME_KEY, ReliabilityModel, claim_of, source_key
from caap.conflict_graph.rules import GraphConfig
from caap.conflict_graph.stale import DependencyMap
from caap.conflict_graph.store import (
    ConflictGraphStore,
    StoreCorruptError,
    open_store,
)
from caap.models import (
    FACETS,
    RESOLVES_KEY,
    Action,
    ConflictCluster,
    ConflictType,
    Decision,
    Memory,
    Recall,
    Response,
    new_id,
    utcnow,
)

__all__ = ["Agent", "StoreMismatchWarning"]


class StoreMismatchWarning(UserWarning):
    """The search index and the graph store disagree about a user's memories."""


#: Reading which source an answer confirms: the closest side must be at least this similar to
#: the answer, and this much closer than the next side.
_CONFIRM_MIN_SIMILARITY = 0.5
_CONFIRM_MARGIN = 0.1


def _as_datetime(value: object, field: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, date):
        return datetime.combine(value, time(), tzinfo=timezone.utc)
    if isinstance(value, str):
        try:
            return _as_datetime(datetime.fromisoformat(value), field)
        except ValueError:
            raise ValueError(f"{field} must be an ISO date or datetime, got {value!r}") from None
    raise TypeError(f"{field} must be a datetime, date or ISO string, got {type(value).__name__}")


def _backend_options(name: str, path: Path, options: Mapping[str, Any] | None) -> dict[str, Any]:
    # A backend that keeps files gets its own folder inside the agent's, unless told otherwise.
    out = dict(options or {})
    if "path" not in out and "path" in inspect.signature(backend_class(name)).parameters:
        out["path"] = path / name
    return out


def _opt_str(value: object, field: str, max_bytes: int = DEFAULT_MAX_TEXT_BYTES) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{field} must not be blank")
    return check_text(value, field, max_bytes).strip()


class Agent(Mem0Api):
    """A memory that keeps conflicts, for one or many users.

    Args:
        path: Data directory; created if missing. Must not be a file.
        backend: ``"builtin"`` (chromadb + sentence-transformers, offline), another registered
            backend name, or a :class:`~caap.adapters.MemoryBackend` instance.
        model: Sentence-transformers model name or path for embeddings (default: the
            packaged all-MiniLM-L6-v2).
        extractor: Facet extractor (default: offline cues).
        config: Conflict-graph thresholds.
        backend_options: Keyword arguments for a backend given by name (for ``"builtin"``:
            ``chroma_url``, ``collection``).
        llm: ``None`` for the offline policy backbone, or a model for the LLM backbone
            (``"openai:gpt-4o-mini"`` or a :class:`caap.llm.ChatModel`).
        store: Where memories, conflict edges and confirmed source outcomes persist:
            ``None`` for ``PATH/graph.sqlite``, another SQLite path, a ``postgresql://`` DSN
            (needs ``caap-memory[postgres]``), or a
            :class:`~caap.conflict_graph.ConflictGraphStore`.
            The agent closes it on :meth:`close`.
        reliability_threshold: Posterior margin a source's claim needs, by the user's
            confirmed track record, before a low-stakes source conflict is committed on.
        reliability_recalibrate_after: Once a user has this many confirmed source outcomes,
            their threshold is recalibrated (F0.5) on how the model predicted each outcome
            before learning it; ``None`` keeps ``reliability_threshold``.
        dependencies: Facet dependency map for propagated invalidation, used by the graph and
            the policy (default: :data:`caap.conflict_graph.DEFAULT_DEPENDENCIES`).
        relations: The relation layer that reads facets, pair relations and risk, for the
            graph and the policy: a name (``"rules"``, ``"learned"``, ``"llm"``) or an
            instance; default ``config.relations``, then the default layer.
        max_text_bytes: Longest memory text, facet or query accepted, in UTF-8 bytes (default
            32 KiB). Longer texts are rejected with an error naming the field, never
            truncated; :func:`caap.split_text` splits one on request.
        read_only: Open an existing data directory for reading only (``recall``,
            ``respond``, ``conflicts``, ...; writes raise ``PermissionError``). Works on a
            read-only filesystem: the builtin index is searched from a temporary copy.

    Raises:
        StoreCorruptError: The graph store cannot be read, or it has lost memories the
            vector index still holds (see ``caap doctor``).
    """

    def __init__(
        self,
        path: str | Path = "caap-data",
        backend: str | MemoryBackend = "builtin",
        *,
        model: str = DEFAULT_MODEL,
        embedder: Embedder | None = None,
        extractor: Extractor | None = None,
        config: GraphConfig | None = None,
        backend_options: Mapping[str, Any] | None = None,
        llm: str | Any | None = None,
        store: str | Path | ConflictGraphStore[Any] | None = None,
        reliability_threshold: float = 0.5,
        reliability_recalibrate_after: int | None = 20,
        dependencies: DependencyMap | None = None,
        relations: str | RelationLayer | None = None,
        max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES,
        read_only: bool = False,
    ) -> None:
        if not isinstance(path, (str, Path)):
            raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
        # Arguments are checked before anything is opened, so a bad one leaks no connection.
        if not 0 <= reliability_threshold <= 1:
            raise ValueError(
                f"reliability_threshold must be in [0, 1], got {reliability_threshold!r}"
            )
        self.reliability_threshold = float(reliability_threshold)
        if not isinstance(max_text_bytes, int) or isinstance(max_text_bytes, bool):
            raise TypeError(f"max_text_bytes must be an int, got {type(max_text_bytes).__name__}")
        if max_text_bytes < 1:
            raise ValueError(f"max_text_bytes must be >= 1, got {max_text_bytes!r}")
        self.max_text_bytes = max_text_bytes
        if reliability_recalibrate_after is not None and reliability_recalibrate_after < 1:
            raise ValueError(
                "reliability_recalibrate_after must be a positive int or None, got "
                f"{reliability_recalibrate_after!r}"
            )
        self.reliability_recalibrate_after = reliability_recalibrate_after
        cfg = config or GraphConfig()
        layer = resolve_relations(relations if relations is not None else cfg.relations, config=cfg)
        self.path = Path(path)
        self.read_only = bool(read_only)
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"path must be a directory, but {str(self.path)!r} is a file")
        if self.read_only:
            if not self.path.is_dir():
                raise FileNotFoundError(f"data directory {str(self.path)!r} does not exist")
        else:
            self.path.mkdir(parents=True, exist_ok=True)
        self._readonly_tmp: Any = None
        # Resolve a named backend first: a missing extra fails before a model is loaded.
        named = isinstance(backend, str) and backend != "builtin"
        options = _backend_options(str(backend), self.path, backend_options) if named else {}
        self.embedder = embedder or get_embedder(model)
        if isinstance(backend, MemoryBackend):
            self.backend = backend
        elif backend == "builtin":
            self.backend = BuiltinBackend(
                self._index_dir(backend_options),
                embedder=self.embedder,
                **dict(backend_options or {}),
            )
        elif isinstance(backend, str):
            self.backend = get_backend(backend, **options)
        else:
            raise TypeError(
                f"backend must be a name or a MemoryBackend, got {type(backend).__name__}"
            )
        try:
            self.store: ConflictGraphStore[Any] = open_store(
                self.path / "graph.sqlite" if store is None else store, read_only=self.read_only
            )
        except BaseException:
            self.backend.close()
            raise
        self.extractor = extractor
        self.config = cfg
        self.relations: RelationLayer = layer
        self._graphs: dict[str, ConflictGraph] = {}
        self._lock = threading.RLock()
        self._closed = False
        self._llm = llm
        self.dependencies = dependencies
        self._policy: Any = None
        self._reliability: dict[str, ReliabilityModel] = {}
        self._generations: dict[str, int | None] = {}

    @property
    def policy(self) -> Any:
        """The :class:`caap.policy.CaapPolicy` that :meth:`respond` uses (built on first use)."""
        if self._policy is None:
            from caap.policy import CaapPolicy

            self._policy = CaapPolicy(
                self._llm,
                embedder=self.embedder,
                config=self.config,
                dependencies=self.dependencies,
                relations=self.relations,
            )
        return self._policy

    # -- writing ---------------------------------------------------------------------------
    def remember(
        self,
        text: str,
        user_id: str,
        *,
        source: str | None = None,
        context: str | None = None,
        observed_at: datetime | date | str | None = None,
        aspect: str | None = None,
        value: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        provenance: Mapping[str, str] | None = None,
        **facets: Any,
    ) -> Memory:
        """Store one memory and link it into the user's conflict graph.

        Facets given here always win over what the extractor infers. Unknown keyword
        arguments are rejected (``ValueError`` naming the facet). Returns the stored memory
        with its facets filled.
        """
        return self.remember_many(
            [
                dict(
                    text=text,
                    source=source,
                    context=context,
                    observed_at=observed_at,
                    aspect=aspect,
                    value=value,
                    metadata=metadata,
                    provenance=provenance,
                    **facets,
                )
            ],
            user_id,
        )[0]

    def remember_many(self, items: Iterable[str | Mapping[str, Any]], user_id: str) -> list[Memory]:
        """Store several memories for one user in order, in one transaction.

        Each item is a text or a mapping with ``text`` and any facets of :meth:`remember`.
        Nothing is stored if any item is invalid.
        """
        return self._remember_many(items, user_id, versions=False)

    def _remember_many(
        self, items: Iterable[str | Mapping[str, Any]], user_id: str, *, versions: bool
    ) -> list[Memory]:
        """:meth:`remember_many`; ``versions``: the metadata may carry a version chain (only
        :meth:`update` writes one)."""
        user_id = self._check_user(user_id)
        memories = [self._build(item, user_id) for item in check_items(items)]
        if not versions and any(VERSIONS_KEY in m.metadata for m in memories):
            raise ValueError(
                f"metadata key {VERSIONS_KEY!r} is reserved: it holds the version chain that "
                "update() writes"
            )
        if not memories:
            return []
        self._check_writable()
        with self._lock:
            try:
                # One write transaction around read-link-write: another process writing the
                # same store waits, and the graph is reloaded first if one already wrote, so
                # memories from different processes are linked too.
                with self.store.transaction() as db:
                    self.store.lock_user(user_id, db=db)
                    graph = self._graph(user_id)
                    with phase("graph"):
                        results = graph.add_many(memories)
                    with phase("sqlite"):
                        self.store.write_results(graph, results, db=db)
                    self._generations[user_id] = self.store.generation(user_id)
                self._index([r.memory for r in results], graph)
            except BaseException:
                # Keep memory and disk in step: drop this user's cached graph so it reloads
                # from what was committed.
                self._graphs.pop(user_id, None)
                raise
        return [r.memory for r in results]

    def forget(self, memory_id: str, user_id: str) -> bool:
        """Delete a memory (text and vectors). Its edges are closed and kept for audit.

        Returns ``False`` when the user has no such memory (another user's id included).
        """
        memory_id = check_memory_id(memory_id)
        user_id = self._check_user(user_id)
        self._check_writable()
        with self._lock:
            try:
                with self.store.transaction() as db:
                    self.store.lock_user(user_id, db=db)
                    graph = self._graph(user_id)
                    if memory_id not in graph:
                        return False
                    closed = graph.remove(memory_id)
                    self.store.write((), closed, db=db)
                    self.store.delete_memory(user_id, memory_id, db=db)
                    self._generations[user_id] = self.store.generation(user_id)
            except BaseException:
                self._graphs.pop(user_id, None)
                raise
            self.backend.delete(memory_id, user_id)
        return True

    # -- reading ---------------------------------------------------------------------------
    def recall(self, query: str, user_id: str, k: int = 8, *, budget: int | None = None) -> Recall:
        """Search, then expand every hit to its whole conflict cluster.

        Hits come first (best first), then the other members of their clusters ranked by
        similarity to the query, so one side of a conflict never arrives without the others.

        With ``budget``, at most ``budget`` memories come back instead, on the query's subject:
        the candidates that best match the query (embedding plus word overlap), then the rest
        in the order of a walk from those matches over the candidates' nearest-neighbour graph
        (personalised PageRank), so turns that tell the subject in other words come in whether
        or not their topic carries a conflict edge; a conflict cluster touched comes whole
        when it fits in what is left and holds at most a quarter of the budget. ``k`` is then
        unused.
        """
        check_text(query, "query", self.max_text_bytes, blank_ok=True)
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        if budget is not None and (
            not isinstance(budget, int) or isinstance(budget, bool) or budget < 1
        ):
            raise ValueError(f"budget must be a positive int or None, got {budget!r}")
        user_id = self._check_user(user_id)
        with self._lock:
            graph = self._graph(user_id)
            if budget is not None:
                with phase("graph"):
                    return self._budgeted(query, graph, budget)
            hits = self.backend.search(query, user_id, k=k)
            if not hits:
                return Recall(query=query)
            with phase("graph"):
                return self._expand(query, graph, hits)

    def _expand(self, query: str, graph: ConflictGraph, hits: list[SearchHit]) -> Recall:
        """Hits first, then the rest of every conflict cluster they touch, nearest first."""
        out: list[Memory] = []
        scores: dict[str, float] = {}
        hit_ids: list[str] = []
        own_ids = self.backend.capabilities.keeps_ids
        by_text: dict[str, str] | None = None
        for h in hits:
            mid: str | None = h.memory.id
            if mid not in graph:
                if own_ids:
                    continue  # an index entry of a memory the graph no longer holds
                # A backend that assigns its own ids: find the graph's memory by its text.
                if by_text is None:
                    by_text = {m.text: m.id for m in graph.memories()}
                mid = by_text.get(h.memory.text)
            if mid is None:
                # A memory the backend rewrote: keep it as the backend returned it; the
                # graph has no cluster to add for it.
                if h.memory.id not in scores:
                    out.append(h.memory)
                    scores[h.memory.id] = h.score
                continue
            if mid not in scores:
                out.append(graph.memory(mid))
                scores[mid] = h.score
                hit_ids.append(mid)
        extra, clusters = graph.expand(hit_ids, self.embedder.encode_one(query))
        for mid, sim in extra:
            scores[mid] = sim
            out.append(graph.memory(mid))
        return Recall(query=query, memories=out, hit_ids=hit_ids, scores=scores, clusters=clusters)

    def _budgeted(self, query: str, graph: ConflictGraph, budget: int) -> Recall:
        """At most ``budget`` memories on the query's subject, clusters kept whole."""
        if not len(graph):
            return Recall(query=query)
        query_vector = self.embedder.encode_one(query)
        with one_blas_thread():
            picked, aspects = budgeted(graph, query_vector, budget, query)
            clusters = [c for c in (graph.cluster(a) for a in aspects) if c.has_conflict]
        return Recall(
            query=query,
            memories=[graph.memory(i) for i, _ in picked],
            hit_ids=[],
            scores=dict(picked),
            clusters=clusters,
        )

    def respond(self, query: str, user_id: str, *, k: int = 8) -> Response:
        """Answer ``query`` from the user's memories: recall whole clusters, decide, realize."""
        recall = self.recall(query, user_id, k=k)
        policy = self.policy
        with self._lock:
            graph = self._graph(user_id)
            analyze = partial(
                policy.analyze,
                recall.memories,
                query,
                reliability=self._reliability_model(user_id),
            )
            analysis = None
            if all(m.id in graph for m in recall.memories):
                # The policy reads this graph's clusters, edges, facets and vectors over the
                # recalled memories (under the lock: nothing changes it meanwhile) instead of
                # placing and typing them again in a graph of its own.
                with phase("policy"):
                    analysis = analyze(graph=graph)
            else:
                # Reuse the value vectors the graph stored: only the rest is embedded.
                ids = [m.id for m in recall.memories if m.id in graph]
                analyze = partial(
                    analyze,
                    vectors={i: graph.vector(i) for i in ids},
                    extractions={i: graph.extraction(i) for i in ids},
                )
        with phase("policy"):
            if analysis is None:
                analysis = analyze()
            decision = policy.decide(recall.memories, query, analysis=analysis)
            return policy.realize(  # type: ignore[no-any-return]
                recall.memories, query, decision, analysis=analysis
            )

    def resolve(
        self,
        settled: Response | Decision,
        answer: str,
        user_id: str,
        *,
        source: str = "the user",
        observed_at: datetime | date | str | None = None,
        confirms: str | None = None,
    ) -> Memory:
        """Record the answer to a clarification or verification as a new memory.

        The memory carries its ``source``, joins the aspect of the evidence the decision
        cited, and is marked as settling that cluster, so the next :meth:`respond` about it can
        commit. Nothing earlier is overwritten. The answer to a ``clarify`` that found nothing
        on record (no conflict) is stored as a memory of its own, settling nothing.

        When the decision was about sources that disagree, the answer is also a labelled
        outcome: each source whose claim matches the confirmed one was right, the others
        wrong, and the user's source reliability is updated (and stored). ``confirms`` names
        the side (a source label of the decision's evidence) whose claim the user confirmed;
        without it the side is read off the answer when one side's memories are clearly the
        closest to it in meaning, and no outcome is recorded when none is.
        """
        decision = settled.decision if isinstance(settled, Response) else settled
        if not isinstance(decision, Decision):
            raise TypeError("settled must be a Response or a Decision")
        if not isinstance(answer, str) or not answer.strip():
            raise ValueError("answer must be a non-empty string")
        no_conflict = decision.conflict_type in (None, ConflictType.NONE)
        if decision.action is Action.COMMIT and no_conflict:
            # (A commit over a conflict can still be corrected: the answer is an outcome.)
            raise ValueError(
                "the decision committed on memories that agree, so nothing was left "
                "unresolved; store new information with remember() (`caap remember`)"
            )
        user_id = self._check_user(user_id)
        if decision.action is Action.CLARIFY and no_conflict:
            # Nothing on record answered the query: the answer is new information, not the
            # settlement of memories it was never about.
            return self.remember(
                answer, user_id, source=source, observed_at=observed_at or utcnow()
            )
        with self._lock:
            graph = self._graph(user_id)
            aspects = [
                graph.memory(i).aspect
                for ids in decision.evidence.values()
                for i in ids
                if i in graph
            ]
            if not aspects:
                raise ValueError("the decision cites no memory of this user; nothing to resolve")
            aspect = max(set(aspects), key=lambda a: (aspects.count(a), a or ""))
            outcome = self._outcome(graph, decision, answer, aspect or "", confirms)
            metadata: dict[str, Any] = {
                RESOLVES_KEY: aspect or "",
                "unresolved": decision.unresolved or "",
            }
            if outcome is not None:
                metadata[OUTCOME_KEY] = outcome
            memory = self.remember(
                answer,
                user_id,
                source=source,
                aspect=aspect,
                observed_at=observed_at or utcnow(),
                metadata=metadata,
            )
            if outcome is not None:
                self._record_outcome(user_id, memory.id, outcome)
        return memory

    def reliability(self, user_id: str) -> ReliabilityModel:
        """The user's source-reliability model, learned from the outcomes they confirmed
        (read it; it is updated through :meth:`resolve`)."""
        user_id = self._check_user(user_id)
        with self._lock:
            return self._reliability_model(user_id)

    def conflicts(self, user_id: str) -> list[ConflictCluster]:
        """Every cluster of the user's memories that carries a conflict."""
        user_id = self._check_user(user_id)
        with self._lock:
            return self._graph(user_id).clusters()

    def memories(self, user_id: str) -> list[Memory]:
        """Every memory of the user, in write order."""
        user_id = self._check_user(user_id)
        with self._lock:
            return self._graph(user_id).memories()

    def graph(self, user_id: str) -> ConflictGraph:
        """The user's in-memory conflict graph (read it; write through the agent)."""
        user_id = self._check_user(user_id)
        with self._lock:
            return self._graph(user_id)

    def close(self) -> None:
        """Flush and release the stores. Any later call on this agent raises ``RuntimeError``."""
        with self._lock:
            self._closed = True
            self.store.close()
            self.backend.close()
            if self._readonly_tmp is not None:
                self._readonly_tmp.cleanup()
                self._readonly_tmp = None

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------
    def _check_user(self, user_id: object) -> str:
        if self._closed:
            raise RuntimeError("this Agent is closed; open a new one on the same path")
        return check_text(user_id, "user_id", 1024)

    def _build(self, item: str | Mapping[str, Any], user_id: str) -> Memory:
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, Mapping):
            raise TypeError(f"each item must be a str or a mapping, got {type(item).__name__}")
        data = dict(item)
        limit = self.max_text_bytes
        text = check_text(data.pop("text", None), "text", limit)
        metadata = check_json_mapping(data.pop("metadata", None), "metadata")
        provenance = check_provenance(data.pop("provenance", None), limit)
        unknown = sorted(k for k, v in data.items() if k not in FACETS and v is not None)
        if unknown:
            raise ValueError(f"unknown facet {unknown[0]!r}; known facets: {', '.join(FACETS)}")
        return Memory(
            user_id=user_id,
            text=text,
            source=_opt_str(data.get("source"), "source", limit),
            context=_opt_str(data.get("context"), "context", limit),
            aspect=_opt_str(data.get("aspect"), "aspect", limit),
            value=_opt_str(data.get("value"), "value", limit),
            observed_at=_as_datetime(data.get("observed_at"), "observed_at"),
            metadata=metadata,
            provenance=provenance,
        )

    def _index_dir(self, options: Mapping[str, Any] | None) -> Path:
        """Where the builtin backend keeps its index: the data directory, or in read-only
        mode a temporary copy of its ``vectors`` folder (chromadb opens its files for writing)."""
        if not self.read_only or (options and options.get("chroma_url")):
            return self.path
        import shutil
        import tempfile

        self._readonly_tmp = tempfile.TemporaryDirectory(prefix="caap-ro-")
        tmp = Path(self._readonly_tmp.name)
        if (self.path / "vectors").is_dir():
            shutil.copytree(self.path / "vectors", tmp / "vectors")
        return tmp

    def _check_writable(self) -> None:
        if self.read_only:
            raise PermissionError(f"the agent on {str(self.path)!r} was opened read_only")

    def _graph(self, user_id: str) -> ConflictGraph:
        graph = self._graphs.get(user_id)
        generation = self.store.generation(user_id)
        if graph is not None and (
            generation is None or generation == self._generations.get(user_id)
        ):
            return graph
        # First use, or another process changed this user's rows: (re)load from the store.
        self._reliability.pop(user_id, None)
        graph = ConflictGraph(
            user_id,
            self.embedder,
            extractor=self.extractor,
            config=self.config,
            dependencies=self.dependencies,
            relations=self.relations,
        )
        stored = self.store.memories(user_id)
        for sm in stored:
            graph.load(
                sm.memory,
                sm.vector,
                inferred=sm.inferred,
                extraction=sm.extraction,
                segment=sm.segment,
            )
        graph.load_edges(self.store.edges(user_id))
        self._check_index(user_id, [sm.memory for sm in stored], graph)
        self._graphs[user_id] = graph
        self._generations[user_id] = generation
        return graph

    def _index(self, memories: list[Memory], graph: ConflictGraph) -> None:
        """Add memories to the search backend with the graph's vectors: each memory is
        embedded once.

        The vector is the memory's value: its statement without the reporter, the date or the
        user's own name (the whole text for most memories), which is what a question asks
        about; the text itself is stored as the document, and who said it and when are the
        graph's facets. A backend that embeds for itself (any but the builtin one) is given
        the memories only.
        """
        backend = self.backend
        # Only the builtin add_many takes precomputed vectors (a subclass may override it).
        if not (
            isinstance(backend, BuiltinBackend)
            and type(backend).add_many is BuiltinBackend.add_many
            and backend.embedder is self.embedder
        ):
            backend.add_many(memories)
            return
        known: list[Any] = [graph.vector(m.id) for m in memories]
        backend.add_many(memories, embeddings=known)

    def _outcome(
        self,
        graph: ConflictGraph,
        decision: Decision,
        answer: str,
        aspect: str,
        confirms: str | None,
    ) -> dict[str, Any] | None:
        """The labelled source outcome an answer gives, or ``None``."""
        sides = {
            label: [graph.memory(i) for i in ids if i in graph]
            for label, ids in decision.evidence.items()
            if label != "resolution"
        }
        sides = {label: ms for label, ms in sides.items() if ms}
        claims = {
            label: claim_of(max(ms, key=lambda m: m.created_at)) for label, ms in sides.items()
        }
        if decision.conflict_type is not ConflictType.SCC or len(set(claims.values())) < 2:
            if confirms is not None:
                raise ValueError(
                    "confirms is only meaningful for a decision about sources that disagree"
                )
            return None
        if confirms is not None:
            wanted = source_key(confirms)
            match = [label for label in sides if source_key(label) == wanted]
            if not match:
                raise ValueError(
                    f"confirms {confirms!r} is none of the decision's sources: "
                    + ", ".join(repr(s) for s in sides)
                )
            confirmed: str | None = match[0]
        else:
            confirmed = self._closest_side(answer, sides)
        if confirmed is None:
            return None
        return {
            "id": new_id(),
            "question": aspect or "unknown",
            "claims": {source_key(label): claim for label, claim in claims.items()},
            "truth": claims[confirmed],
            "confirmed_source": source_key(confirmed),
            "created_at": utcnow().isoformat(),
        }

    def _closest_side(self, answer: str, sides: Mapping[str, list[Memory]]) -> str | None:
        # Conservative: one side must be close to the answer and clearly closer than the rest.
        labels = list(sides)
        texts = [m.text for label in labels for m in sides[label]]
        vecs = self.embedder.encode([answer, *texts])
        sims = vecs[1:] @ vecs[0]
        best: dict[str, float] = {}
        n = 0
        for label in labels:
            k = len(sides[label])
            best[label] = float(np.max(sims[n : n + k]))
            n += k
        ranked = sorted(labels, key=lambda s: -best[s])
        top, second = best[ranked[0]], best[ranked[1]]
        if top >= _CONFIRM_MIN_SIMILARITY and top - second >= _CONFIRM_MARGIN:
            return ranked[0]
        return None

    def _record_outcome(self, user_id: str, memory_id: str, outcome: Mapping[str, Any]) -> None:
        payload = {**outcome, "memory_id": memory_id}
        if self.store.add_outcome(user_id, str(outcome["id"]), payload):
            model = self._reliability.get(user_id)
            if model is not None:
                model.observe(str(outcome["question"]), outcome["claims"], str(outcome["truth"]))

    def _reliability_model(self, user_id: str) -> ReliabilityModel:
        model = self._reliability.get(user_id)
        if model is not None:
            return model
        graph = self._graph(user_id)
        stored = self.store.outcomes(user_id)
        known = {str(o.get("id")) for o in stored}
        # The resolution memory commits before its outcome row: a crash in between leaves the
        # row missing, and the memory's metadata still holds it.
        for m in graph.memories():
            o = m.metadata.get(OUTCOME_KEY)
            if isinstance(o, dict) and str(o.get("id")) not in known:
                payload = {**o, "memory_id": m.id}
                self.store.add_outcome(user_id, str(o["id"]), payload)
                stored.append(payload)
        model = ReliabilityModel(
            source_prior=(2.0, 2.0),
            threshold=self.reliability_threshold,
            recalibrate_after=self.reliability_recalibrate_after,
        )
        for o in stored:
            model.observe(str(o["question"]), o["claims"], str(o["truth"]))
        self._reliability[user_id] = model
        return model

    def _check_index(self, user_id: str, stored: list[Memory], graph: ConflictGraph) -> None:
        """Compare the store with the search index: an index short of the store is repaired
        (the store commits first; a crash in between leaves it short); an index holding
        memories the store lacks is reported, never silently ignored."""
        if not self.backend.capabilities.keeps_ids:
            return
        indexed = {m.id for m in self.backend.list(user_id)}
        known = {m.id for m in stored}
        extra = indexed - known
        if extra and not stored:
            raise StoreCorruptError(
                f"the graph store has no memories of user {user_id!r}, but the vector index "
                f"holds {len(extra)}: the store was lost or replaced. Run `caap doctor --data "
                f"{str(self.path)!r} --repair` to rebuild it from the index"
            )
        if extra:
            import warnings

            warnings.warn(
                f"the vector index holds {len(extra)} memories of user {user_id!r} that the "
                f"graph store does not (e.g. {sorted(extra)[0]!r}); they are not recalled. "
                f"`caap doctor --data {str(self.path)!r}` reports and repairs this",
                StoreMismatchWarning,
                stacklevel=3,
            )
        missing = [m for m in stored if m.id not in indexed]
        if missing and not self.read_only:
            self._index(missing, graph)
