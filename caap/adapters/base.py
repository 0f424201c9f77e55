"""The ``MemoryBackend`` interface: a few primitives, many derived helpers (DESIGN §4)."""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from caap.models import Memory

__all__ = ["BackendCapabilities", "BackendError", "MemoryBackend", "SearchHit"]


class BackendError(RuntimeError):
    """A backend could not do what was asked (server down, store corrupt, ...)."""


@dataclass(frozen=True)
class BackendCapabilities:
    """What a backend keeps and needs; the conformance suite reads these to pick its tests."""

    keeps_raw_text: bool = True
    """``get`` returns the exact text that was added (no LLM rewriting)."""
    stores_metadata: bool = True
    """Facets, provenance and metadata round-trip through the backend."""
    needs_llm: bool = False
    """Adding or searching calls a language model."""
    persistent: bool = True
    """Data survives closing and reopening the backend on the same location."""
    keeps_ids: bool = True
    """The backend stores memories under the id the caller gave."""


@dataclass(frozen=True)
class SearchHit:
    """One search result: the memory as the backend holds it and a similarity in [-1, 1]."""

    memory: Memory
    score: float


class MemoryBackend(ABC):
    """Abstract memory store. Implementations write the five primitives; the rest is derived.

    Every method takes the user id and must never return, count or delete another user's data.
    """

    name: ClassVar[str] = "abstract"
    capabilities: ClassVar[BackendCapabilities] = BackendCapabilities()

    # -- primitives ------------------------------------------------------------------------
    @abstractmethod
    def add(self, memory: Memory) -> str:
        """Store one memory; return the id it is stored under."""

    @abstractmethod
    def search(self, query: str, user_id: str, k: int = 10) -> builtins.list[SearchHit]:
        """The ``k`` memories of ``user_id`` most relevant to ``query``, best first."""

    @abstractmethod
    def get(self, memory_id: str, user_id: str) -> Memory | None:
        """One memory of ``user_id`` by id, or ``None``."""

    @abstractmethod
    def list(self, user_id: str) -> list[Memory]:
        """Every memory of ``user_id``, oldest first."""

    @abstractmethod
    def delete(self, memory_id: str, user_id: str) -> bool:
        """Delete one memory of ``user_id``; ``True`` if something was deleted."""

    # -- derived helpers -------------------------------------------------------------------
    def add_many(self, memories: Iterable[Memory]) -> builtins.list[str]:
        """Store several memories in order; backends may override to batch."""
        return [self.add(m) for m in memories]

    def count(self, user_id: str) -> int:
        """How many memories ``user_id`` has."""
        return len(self.list(user_id))

    def exists(self, memory_id: str, user_id: str) -> bool:
        """Whether ``memory_id`` belongs to ``user_id`` and is stored."""
        return self.get(memory_id, user_id) is not None

    def clear(self, user_id: str) -> int:
        """Delete every memory of ``user_id``; returns how many were deleted."""
        return sum(self.delete(m.id, user_id) for m in self.list(user_id))

    def close(self) -> None:  # noqa: B027 - optional hook, most backends need nothing
        """Release resources. Safe to call twice."""

    def __enter__(self) -> MemoryBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_dir(path: str | Path) -> Path:
    """``path`` as a ``Path``; ``ValueError`` if it exists and is not a directory."""
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ValueError(f"path must be a directory, but {str(out)!r} is a file")
    return out


def check_query(query: object, k: object) -> None:
    """Shared argument checks for ``search``: errors name the field and the bad value."""
    if not isinstance(query, str):
        raise TypeError(f"query must be a str, got {type(query).__name__}")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")


def check_user(user_id: object) -> str:
    """``user_id`` must be a non-empty str."""
    if not isinstance(user_id, str) or not user_id.strip():
        raise ValueError(f"user_id must be a non-empty str, got {user_id!r}")
    return user_id
