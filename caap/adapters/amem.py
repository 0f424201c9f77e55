"""A-mem (agiresearch/A-mem, ``agentic_memory``) behind :class:`MemoryBackend`.

A-mem is not on PyPI (the PyPI name ``agentic-memory`` is an unrelated project): install it from
its repository, ``pip install "git+https://github.com/agiresearch/A-mem"``, plus
``pip install "caap-memory[amem]"`` for the rest of its dependencies.

What A-mem does, and how we drive it:

- ``AgenticMemorySystem.add_note`` stores a note and then asks an LLM whether to *evolve* it
  (link it to neighbours, rewrite the neighbours' tags and context). So A-mem needs an LLM
  endpoint (``needs_llm``); without one, each add logs A-mem's own "Error in memory evolution"
  and stores the note unevolved. Point it at any OpenAI-compatible server with ``base_url``.
- A-mem has no user scoping, so each user gets their own ``AgenticMemorySystem``.
- Its constructor resets a process-wide in-memory chromadb client that every instance shares,
  which would wipe and mix users. We therefore give each user's system its own
  ``PersistentChromaRetriever`` (A-mem's class) in its own folder right after construction, and
  set ``evo_threshold`` out of reach: A-mem's periodic ``consolidate_memories`` would swap the
  shared in-memory retriever back in.
- A-mem keeps its notes in a Python dict (``AgenticMemorySystem.memories``); its chroma folder
  alone cannot rebuild them, so data does not survive closing the backend (``persistent`` is
  false) and the folders live in a temporary directory.

Mapping: the note id is our memory id; ``content`` is the text, unchanged; ``timestamp`` is
``observed_at`` (else ``created_at``) as A-mem's ``YYYYMMDDHHMM``; our facets, provenance and
metadata travel as JSON in the note's ``category`` -- the one metadata field A-mem's evolution
never rewrites (it rewrites ``tags``, ``context`` and ``links``). Scores: A-mem returns chromadb's
squared L2 distance between unit vectors, turned back into cosine similarity ``1 - d / 2``.
"""

from __future__ import annotations

import builtins
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, ClassVar

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

# litellm (imported by A-mem) fetches a price list from the network at import unless told not to.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
try:
    from agentic_memory.memory_system import AgenticMemorySystem
    from agentic_memory.retrievers import PersistentChromaRetriever
except ImportError as exc:  # pragma: no cover - exercised only without A-mem
    raise ImportError(
        f"the amem backend needs A-mem ({exc.name or exc}), which is not on PyPI: "
        'pip install "git+https://github.com/agiresearch/A-mem" "caap-memory[amem]"'
    ) from exc

__all__ = ["AMemBackend"]

_PAYLOAD_PREFIX = "caap:"
# A-mem's add_note calls consolidate_memories every evo_threshold evolutions, which replaces
# the retriever with the shared in-memory one; never reach it.
_NEVER = 2**62


def _timestamp(memory: Memory) -> str:
    return (memory.observed_at or memory.created_at).strftime("%Y%m%d%H%M")


def _from_note(note: Any, user_id: str) -> Memory | None:
    category = getattr(note, "category", "") or ""
    if not isinstance(category, str) or not category.startswith(_PAYLOAD_PREFIX):
        return None  # a note we did not write
    payload = json.loads(category[len(_PAYLOAD_PREFIX) :])
    if payload.get("user_id") != user_id:
        return None
    payload["text"] = note.content
    return Memory.model_validate(payload)


class AMemBackend(MemoryBackend):
    """One A-mem ``AgenticMemorySystem`` per user, in memory for the backend's lifetime.

    Args:
        llm_model: Model name A-mem asks for memory evolution.
        base_url: OpenAI-compatible endpoint for that model (``None``: the ``openai`` client's
            default, i.e. ``OPENAI_BASE_URL`` or OpenAI itself).
        api_key: Key for the endpoint; A-mem refuses to start without one, so ``"unused"`` is
            passed for local servers that need none.
        llm_backend: A-mem's ``"openai"`` or ``"ollama"``.
        model: Sentence-transformers model for A-mem's chromadb; default is the packaged
            all-MiniLM-L6-v2.
        path: Where the per-user chroma folders go; a temporary directory (removed on
            :meth:`close`) when ``None``.
    """

    name: ClassVar[str] = "amem"
    capabilities: ClassVar[BackendCapabilities] = BackendCapabilities(
        keeps_raw_text=True, stores_metadata=True, needs_llm=True, persistent=False
    )

    def __init__(
        self,
        *,
        llm_model: str = "gpt-4o-mini",
        base_url: str | None = None,
        api_key: str | None = None,
        llm_backend: str = "openai",
        model: str = DEFAULT_MODEL,
        path: str | Path | None = None,
    ) -> None:
        if llm_backend not in ("openai", "ollama"):
            raise ValueError(f"llm_backend must be 'openai' or 'ollama', got {llm_backend!r}")
        self._tmp: str | None = None
        if path is None:
            self._tmp = tempfile.mkdtemp(prefix="caap-amem-")
            path = self._tmp
        self.path = check_dir(path)
        self.llm_model = llm_model
        self.base_url = base_url
        self.llm_backend = llm_backend
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or "unused"
        self._model_path = _default_model_path() if model == DEFAULT_MODEL else model
        self._systems: dict[str, Any] = {}
        self._lock = threading.RLock()

    def _system(self, user_id: str, *, create: bool) -> Any | None:
        with self._lock:
            system = self._systems.get(user_id)
            if system is not None or not create:
                return system
            try:
                system = AgenticMemorySystem(
                    model_name=self._model_path,
                    llm_backend=self.llm_backend,
                    llm_model=self.llm_model,
                    evo_threshold=_NEVER,
                    api_key=self._api_key,
                )
                folder = self.path / "users" / f"u{len(self._systems):06d}"
                system.retriever = PersistentChromaRetriever(
                    directory=str(folder), collection_name="memories", model_name=self._model_path
                )
                if self.base_url is not None and self.llm_backend == "openai":
                    from openai import OpenAI

                    system.llm_controller.llm.client = OpenAI(
                        api_key=self._api_key, base_url=self.base_url
                    )
            except Exception as exc:
                raise BackendError(f"A-mem could not start: {exc}") from exc
            self._systems[user_id] = system
            return system

    # -- primitives ----------------------------------------------------------------------------
    def add(self, memory: Memory) -> str:
        payload = memory.model_dump(mode="json", exclude={"text"})
        with self._lock:
            system = self._system(memory.user_id, create=True)
            assert system is not None
            if memory.id in system.memories:
                system.delete(memory.id)  # re-adding an id replaces the memory
            try:
                return str(
                    system.add_note(
                        memory.text,
                        time=_timestamp(memory),
                        id=memory.id,
                        category=_PAYLOAD_PREFIX + json.dumps(payload, ensure_ascii=False),
                    )
                )
            except Exception as exc:
                raise BackendError(f"A-mem add_note failed: {exc}") from exc

    def search(self, query: str, user_id: str, k: int = 10) -> builtins.list[SearchHit]:
        check_query(query, k)
        check_user(user_id)
        if not query.strip():
            return []
        with self._lock:
            system = self._system(user_id, create=False)
            if system is None or not system.memories:
                return []
            found = system.search(query, k=min(k, len(system.memories)))
            hits = []
            for row in found:
                note = system.memories.get(row["id"])
                m = None if note is None else _from_note(note, user_id)
                if m is not None:
                    sim = 1.0 - float(row.get("score") or 0.0) / 2.0
                    hits.append(SearchHit(m, max(-1.0, min(1.0, sim))))
        hits.sort(key=lambda h: h.score, reverse=True)
        return hits

    def get(self, memory_id: str, user_id: str) -> Memory | None:
        check_user(user_id)
        with self._lock:
            system = self._system(user_id, create=False)
            note = None if system is None else system.read(memory_id)
            return None if note is None else _from_note(note, user_id)

    def list(self, user_id: str) -> builtins.list[Memory]:
        check_user(user_id)
        with self._lock:
            system = self._system(user_id, create=False)
            notes = [] if system is None else list(system.memories.values())
            out = [m for n in notes if (m := _from_note(n, user_id)) is not None]
        out.sort(key=lambda m: (m.created_at, m.id))
        return out

    def delete(self, memory_id: str, user_id: str) -> bool:
        check_user(user_id)
        with self._lock:
            system = self._system(user_id, create=False)
            if system is None:
                return False
            return bool(system.delete(memory_id))

    def close(self) -> None:
        with self._lock:
            self._systems = {}
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None

    def __repr__(self) -> str:
        return f"AMemBackend(llm_model={self.llm_model!r}, base_url={self.base_url!r})"
