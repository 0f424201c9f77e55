"""Letta archival memory (``pip install "caap[letta]"``) behind :class:`MemoryBackend`.

The adapter speaks to a running Letta server through ``letta-client``
(``agents.passages.create / search / list / delete``; Letta has no passage update). The
self-hosted Python server is ``letta<=0.16.8`` (its repository is archived); archival passages
need only an embedding endpoint, never an LLM, so a server pointed at
:class:`caap.embedding_server.EmbeddingServer` runs fully offline. See ``docs/backends/letta.md``.

Mapping:

- Letta scopes archival memory by agent, so each user gets one agent, named
  ``<agent_prefix>-<sha1 of the user id>`` and tagged ``<agent_prefix>``. The agent's LLM
  configuration is required by Letta but never used (we never message the agent).
- A memory is one passage: ``text`` is the memory's text (Letta stores it as one chunk,
  unchanged), ``created_at`` is ``created_at``. Passage creation takes no metadata, so our id
  and payload (facets, provenance, metadata) travel as two passage tags, ``caap-id:<id>`` and
  ``caap-meta:<json>``.
- Letta's search returns passages best first without a similarity, so a hit's score is
  ``1 / (1 + rank)`` -- an order, not a similarity.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import threading
from typing import Any, ClassVar

from caap.adapters.base import (
    BackendCapabilities,
    BackendError,
    MemoryBackend,
    SearchHit,
    check_query,
    check_user,
)
from caap.models import Memory

try:
    import letta_client
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        f'the letta backend needs letta-client ({exc.name or exc}): pip install "caap[letta]"'
    ) from exc

__all__ = ["DEFAULT_LETTA_URL", "LettaBackend"]

#: Where ``letta server`` listens by default.
DEFAULT_LETTA_URL = "http://localhost:8283"
_ID_TAG = "caap-id:"
_META_TAG = "caap-meta:"
_PAGE = 500
# Letta requires an LLM configuration on every agent; archival memory never uses it. A closed
# local port makes any accidental call fail at once instead of reaching a real provider.
_UNUSED_LLM = {
    "model": "unused",
    "model_endpoint_type": "openai",
    "model_endpoint": "http://127.0.0.1:9/v1",
    "context_window": 8192,
}


def _tags(memory: Memory) -> list[str]:
    payload = memory.model_dump(mode="json", exclude={"text"})
    return [_ID_TAG + memory.id, _META_TAG + json.dumps(payload, ensure_ascii=False)]


def _our_id(tags: list[str] | None) -> str | None:
    return next((t[len(_ID_TAG) :] for t in tags or [] if t.startswith(_ID_TAG)), None)


def _from_passage(text: str, tags: list[str] | None, user_id: str) -> Memory | None:
    meta = next((t[len(_META_TAG) :] for t in tags or [] if t.startswith(_META_TAG)), None)
    if meta is None:
        return None  # a passage we did not write (e.g. the agent's own archival inserts)
    payload = json.loads(meta)
    if payload.get("user_id") != user_id:
        return None
    payload["text"] = text
    return Memory.model_validate(payload)


class LettaBackend(MemoryBackend):
    """Letta archival memory on a running Letta server, one agent per user.

    Args:
        base_url: The Letta server, e.g. ``http://localhost:8283``.
        embedding_endpoint: OpenAI-compatible ``/v1`` base URL the *server* calls to embed
            passages (e.g. a :class:`~caap.embedding_server.EmbeddingServer`).
        embedding_model: Model name sent to that endpoint.
        embedding_dim: Length of its vectors (384 for all-MiniLM-L6-v2).
        api_key: Letta API key (``None`` for a local server without auth).
        agent_prefix: Names and tags the agents this backend creates.
        timeout: Seconds per HTTP request.

    Raises:
        BackendError: the server cannot be reached (raised on first use, naming the URL).
    """

    name: ClassVar[str] = "letta"
    capabilities: ClassVar[BackendCapabilities] = BackendCapabilities(
        keeps_raw_text=True, stores_metadata=True, needs_llm=False, persistent=True
    )

    def __init__(
        self,
        base_url: str = DEFAULT_LETTA_URL,
        *,
        embedding_endpoint: str = "http://127.0.0.1:8299/v1",
        embedding_model: str = "all-MiniLM-L6-v2",
        embedding_dim: int = 384,
        api_key: str | None = None,
        agent_prefix: str = "caap",
        timeout: float = 60.0,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if (
            isinstance(embedding_dim, bool)
            or not isinstance(embedding_dim, int)
            or embedding_dim < 1
        ):
            raise ValueError(f"embedding_dim must be a positive int, got {embedding_dim!r}")
        if not agent_prefix or not agent_prefix.replace("-", "").isalnum():
            raise ValueError(f"agent_prefix must be letters, digits and '-', got {agent_prefix!r}")
        self.base_url = base_url.rstrip("/")
        self.agent_prefix = agent_prefix
        self._embedding = {
            "embedding_endpoint_type": "openai",
            "embedding_endpoint": embedding_endpoint,
            "embedding_model": embedding_model,
            "embedding_dim": embedding_dim,
            "embedding_chunk_size": 300,
        }
        self._client = letta_client.Letta(
            base_url=self.base_url, api_key=api_key or "unused", timeout=timeout, max_retries=1
        )
        self._agents: dict[str, str] = {}
        # user -> {our id: passage id}; filled from the server on first use of a user.
        self._index: dict[str, dict[str, str]] = {}
        self._lock = threading.RLock()

    # -- agents ----------------------------------------------------------------------------------
    def _agent_name(self, user_id: str) -> str:
        return f"{self.agent_prefix}-{hashlib.sha1(user_id.encode()).hexdigest()}"

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except letta_client.APIConnectionError as exc:
            raise BackendError(f"Letta server at {self.base_url} is unreachable: {exc}") from exc
        except letta_client.APIError as exc:
            raise BackendError(f"Letta {what} failed: {exc}") from exc

    def _agent(self, user_id: str, *, create: bool) -> str | None:
        with self._lock:
            if user_id in self._agents:
                return self._agents[user_id]
            name = self._agent_name(user_id)
            found = self._call(
                "agents.list", self._client.agents.list, name=name, tags=[self.agent_prefix]
            )
            match = next((a.id for a in found if a.name == name), None)
            if match is None and create:
                agent = self._call(
                    "agents.create",
                    self._client.agents.create,
                    name=name,
                    tags=[self.agent_prefix],
                    llm_config=_UNUSED_LLM,
                    embedding_config=self._embedding,
                    include_base_tools=False,
                    memory_blocks=[],
                )
                match = agent.id
            if match is not None:
                self._agents[user_id] = match
            return match

    def _ids(self, user_id: str, agent_id: str) -> dict[str, str]:
        index = self._index.get(user_id)
        if index is None:
            index = {}
            for p in self._passages(agent_id):
                ours = _our_id(p.tags)
                if ours is not None and p.id is not None:
                    index[ours] = p.id
            self._index[user_id] = index
        return index

    def _passages(self, agent_id: str) -> builtins.list[Any]:
        out: builtins.list[Any] = []
        after: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": _PAGE, "ascending": True}
            if after is not None:
                kwargs["after"] = after
            page = self._call(
                "passages.list", self._client.agents.passages.list, agent_id, **kwargs
            )
            out.extend(page)
            if len(page) < _PAGE or page[-1].id is None:
                return out
            after = page[-1].id

    # -- primitives ------------------------------------------------------------------------------
    def add(self, memory: Memory) -> str:
        with self._lock:
            agent_id = self._agent(memory.user_id, create=True)
            assert agent_id is not None
            index = self._ids(memory.user_id, agent_id)
            if memory.id in index:  # no passage update in Letta: replace
                self.delete(memory.id, memory.user_id)
            created = self._call(
                "passages.create",
                self._client.agents.passages.create,
                agent_id,
                text=memory.text,
                created_at=memory.created_at,
                tags=_tags(memory),
            )
            passages = list(created) if isinstance(created, list) else [created]
            if not passages or passages[0].id is None:
                raise BackendError("Letta passages.create returned no passage")
            index[memory.id] = passages[0].id
            return memory.id

    def search(self, query: str, user_id: str, k: int = 10) -> builtins.list[SearchHit]:
        check_query(query, k)
        check_user(user_id)
        if not query.strip():
            return []
        with self._lock:
            agent_id = self._agent(user_id, create=False)
            if agent_id is None:
                return []
            res = self._call(
                "passages.search",
                self._client.agents.passages.search,
                agent_id,
                query=query,
                top_k=k,
            )
        hits: builtins.list[SearchHit] = []
        for r in res.results[:k]:
            m = _from_passage(r.content, r.tags, user_id)
            if m is not None:
                hits.append(SearchHit(m, 1.0 / (1 + len(hits))))
        return hits

    def get(self, memory_id: str, user_id: str) -> Memory | None:
        check_user(user_id)
        with self._lock:
            agent_id = self._agent(user_id, create=False)
            if agent_id is None or memory_id not in self._ids(user_id, agent_id):
                return None
            # No get-by-id for agent passages: read the list (ids come from our index).
            pid = self._ids(user_id, agent_id)[memory_id]
            for p in self._passages(agent_id):
                if p.id == pid:
                    return _from_passage(p.text, p.tags, user_id)
            return None

    def list(self, user_id: str) -> builtins.list[Memory]:
        check_user(user_id)
        with self._lock:
            agent_id = self._agent(user_id, create=False)
            passages = [] if agent_id is None else self._passages(agent_id)
        out = [m for p in passages if (m := _from_passage(p.text, p.tags, user_id)) is not None]
        out.sort(key=lambda m: (m.created_at, m.id))
        return out

    def delete(self, memory_id: str, user_id: str) -> bool:
        check_user(user_id)
        with self._lock:
            agent_id = self._agent(user_id, create=False)
            if agent_id is None:
                return False
            index = self._ids(user_id, agent_id)
            pid = index.get(memory_id)
            if pid is None:
                return False
            self._call(
                "passages.delete", self._client.agents.passages.delete, pid, agent_id=agent_id
            )
            del index[memory_id]
            return True

    def count(self, user_id: str) -> int:
        # Overridden: the id index answers without fetching every passage's text.
        check_user(user_id)
        with self._lock:
            agent_id = self._agent(user_id, create=False)
            return 0 if agent_id is None else len(self._ids(user_id, agent_id))

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        return f"LettaBackend(base_url={self.base_url!r})"
