"""Per-phase wall-clock accounting for benchmarks (``caap bench``).

Code marks its phases with ``with phase("embed"): ...``. Outside :func:`collect` a phase is a
shared no-op context manager, so instrumented code pays one context-variable read. Inside
``collect()`` the seconds of every phase are summed into the collector; nested phases are
charged to the innermost one only (an "embed" inside a "graph" phase is not counted twice).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar

__all__ = ["PHASES", "Timings", "collect", "phase"]

PHASES = ("embed", "extract", "graph", "topics", "vector_store", "sqlite", "policy")
"""The phases the SDK marks; anything not inside one is reported as ``other``."""

_NULL: AbstractContextManager[None] = nullcontext()


class Timings:
    """Seconds spent per phase while collecting."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stack: list[tuple[str, float]] = []

    def _enter(self, name: str) -> None:
        now = time.perf_counter()
        if self._stack:
            outer, since = self._stack[-1]
            self.seconds[outer] = self.seconds.get(outer, 0.0) + now - since
        self._stack.append((name, now))

    def _exit(self) -> None:
        now = time.perf_counter()
        name, since = self._stack.pop()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - since
        if self._stack:
            outer, _ = self._stack[-1]
            self._stack[-1] = (outer, now)


_current: ContextVar[Timings | None] = ContextVar("caap_timings", default=None)


@contextmanager
def _timed(t: Timings, name: str) -> Iterator[None]:
    t._enter(name)
    try:
        yield
    finally:
        t._exit()


def phase(name: str) -> AbstractContextManager[None]:
    """Charge the time inside the ``with`` block to ``name`` (no-op unless collecting)."""
    t = _current.get()
    if t is None:
        return _NULL
    return _timed(t, name)


@contextmanager
def collect() -> Iterator[Timings]:
    """Collect phase times of everything run inside the block (this thread/context)."""
    t = Timings()
    token = _current.set(t)
    try:
        yield t
    finally:
        _current.reset(token)
