"""Letta archival memory (``pip install "caap-memory[letta]"``) behind :class:`MemoryBackend`.

The adapter speaks to a running Letta server through ``letta-client``
(``agents.passages.create / search / list / delete``; Letta has no passage update). The
self-hosted Python server is ``letta<=0.16.8`` (its repository is archived); archival passages
need only an embedding endpoint, never an LLM, so a server pointed at
:class:`caap.embedding_server.EmbeddingServer` runs fully offline. See ``docs/backends/letta.md``.

Mapping:

- Letta scopes archival memory by agent, so each user gets one agent, named
  ``<agent_prefix>-<sha1 of the user id>`` and tagged ``<agent_prefix>``. The agent's LLM
  configuration is required by Letta but never used (we never message the agent).
- A memory is one passage, ``created_at`` its ``created_at``; Letta refuses passages over 8192
  tokens, so a longer text is cut into 6000-character parts (one passage each, joined back
  exactly). Passage creation takes no metadata, so our id, the part number and the payload
  (facets, provenance, metadata; on part 0) travel as passage tags ``caap-id:<id>``,
  ``caap-part:<i>/<n>`` and ``caap-meta:<json>``.
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
        f"the letta backend needs letta-client ({exc.name or exc}): "
        'pip install "caap-memory[letta]"'
    ) from exc

__all__ = ["DEFAULT_LETTA_URL", "LettaBackend"]

#: Where ``letta server`` listens by default.
DEFAULT_LETTA_URL = "http://localhost:8283"
_ID_TAG = "caap-id:"
_META_TAG = "caap-meta:"
_PART_TAG = "caap-part:"
_PART_CHARS = 6000
_PAGE = 500
# Letta requires an LLM configuration on every agent; archival memory never uses it. A closed
# local port makes any accidental call fail at once instead of reaching a real provider.
_UNUSED_LLM = {
    "model": "unused",
    "model_endpoint_type": "openai",
    "model_endpoint": "http://127.0.0.1:9/v1",
    "context_window": 8192,
}


def _parts(text: str) -> list[str]:
    # Letta refuses a passage over 8192 tokens; cut on character boundaries so the parts join
    # back to the exact text. 6000 characters stay under the limit even at a token per char.
    return [text[i : i + _PART_CHARS] for i in range(0, len(text), _PART_CHARS)] or [text]


def _tags(memory: Memory, part: int, parts: int) -> list[str]:
    tags = [_ID_TAG + memory.id, f"{_PART_TAG}{part}/{parts}"]
    if part == 0:
        payload = memory.model_dump(mode="json", exclude={"text"})
        tags.append(_META_TAG + json.dumps(payload, ensure_ascii=False))
    return tags


def _tag(tags: list[str] | None, prefix: str) -> str | None:
    return next((t[len(prefix) :] for t in tags or [] if t.startswith(prefix)), None)


def _part_of(tags: list[str] | None) -> tuple[int, int]:
    raw = _tag(tags, _PART_TAG)
    if raw is None:
        return 0, 1
    part, _, parts = raw.partition("/")
    return int(part), int(parts)


def _memory(texts: list[str], tags: list[str] | None, user_id: str) -> Memory | None:
    meta = _tag(tags, _META_TAG)
    if meta is None:
        return None  # a passage we did not write (e.g. the agent's own archival inserts)
    payload = json.loads(meta)
    if payload.get("user_id") != user_id:
        return None
    payload["text"] = "".join(texts)
    return Memory.model_validate(payload)


def _assemble(passages: list[Any], user_id: str) -> dict[str, Memory]:
    """Our id -> memory, from an agent's passages (parts joined in order)."""
    groups: dict[str, dict[int, Any]] = {}
    for p in passages:
        ours = _tag(p.tags, _ID_TAG)
        if ours is not None:
            groups.setdefault(ours, {})[_part_of(p.tags)[0]] = p
    out: dict[str, Memory] = {}
    for ours, parts in groups.items():
        first = parts.get(0)
        if first is None or len(parts) != _part_of(first.tags)[1]:
            continue  # an incomplete write (a part missing): not a memory
        m = _memory([parts[i].text for i in sorted(parts)], first.tags, user_id)
        if m is not None:
            out[ours] = m
    return out


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
        # user -> {our id: its passage ids}; filled from the server on first use of a user.
        self._index: dict[str, dict[str, list[str]]] = {}
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

    def _ids(self, user_id: str, agent_id: str) -> dict[str, list[str]]:
        index = self._index.get(user_id)
        if index is None:
            index = {}
            for p in self._passages(agent_id):
                ours = _tag(p.tags, _ID_TAG)
                if ours is not None and p.id is not None:
                    index.setdefault(ours, []).append(p.id)
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
            parts = _parts(memory.text)
            written: builtins.list[str] = []
            try:
                for i, text in enumerate(parts):
                    created = self._call(
                        "passages.create",
                        self._client.agents.passages.create,
                        agent_id,
                        text=text,
                        created_at=memory.created_at,
                        tags=_tags(memory, i, len(parts)),
                    )
                    passages = list(created) if isinstance(created, list) else [created]
                    if not passages or passages[0].id is None:
                        raise BackendError("Letta passages.create returned no passage")
                    written.append(passages[0].id)
            except BackendError:
                for pid in written:  # leave no half-written memory behind
                    self._client.agents.passages.delete(pid, agent_id=agent_id)
                raise
            index[memory.id] = written
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
            # A long memory is several passages: a hit on any part is a hit on the memory.
            ranked: builtins.list[str] = []
            whole: dict[str, Memory] = {}
            for r in res.results:
                ours = _tag(r.tags, _ID_TAG)
                if ours is None or ours in ranked:
                    continue
                ranked.append(ours)
                if _part_of(r.tags) == (0, 1):
                    m = _memory([r.content], r.tags, user_id)
                    if m is not None:
                        whole[ours] = m
            if any(i not in whole for i in ranked):
                whole = {**_assemble(self._passages(agent_id), user_id), **whole}
        hits: builtins.list[SearchHit] = []
        for ours in ranked[:k]:
            if ours in whole:
                hits.append(SearchHit(whole[ours], 1.0 / (1 + len(hits))))
        return hits

    def get(self, memory_id: str, user_id: str) -> Memory | None:
        check_user(user_id)
        with self._lock:
            agent_id = self._agent(user_id, create=False)
            if agent_id is None or memory_id not in self._ids(user_id, agent_id):
                return None
            # No get-by-id for agent passages: read the list.
            return _assemble(self._passages(agent_id), user_id).get(memory_id)

    def list(self, user_id: str) -> builtins.list[Memory]:
        check_user(user_id)
        with self._lock:
            agent_id = self._agent(user_id, create=False)
            passages = [] if agent_id is None else self._passages(agent_id)
        out = builtins.list(_assemble(passages, user_id).values())
        out.sort(key=lambda m: (m.created_at, m.id))
        return out

    def delete(self, memory_id: str, user_id: str) -> bool:
        check_user(user_id)
        with self._lock:
            agent_id = self._agent(user_id, create=False)
            if agent_id is None:
                return False
            index = self._ids(user_id, agent_id)
            pids = index.get(memory_id)
            if not pids:
                return False
            for pid in pids:
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
