"""The graph's small matrix products run on one BLAS thread.

A write or an answer multiplies matrices of a few dozen rows (a timeline window, a
neighbour batch). NumPy's OpenBLAS splits even those across its threads, and when the cores
are busy (an embedding running, other requests, other processes) each product then waits on
a thread hand-off: measured on this 2-core machine under load, a 48 x 384 by 384 x 48 product
took 12.5 ms on two threads and 0.2 ms on one. :func:`one_blas_thread` limits NumPy's BLAS
to one thread for the length of a graph operation and restores it after (nested and
concurrent uses share one limit; the last to leave restores). Torch keeps its own threads.
Without ``threadpoolctl`` nothing is limited, and OpenBLAS (0.3.31 here) ignores a limit set
from a thread other than the one that first used it: a server's worker threads run as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, ParamSpec, TypeVar

__all__ = ["one_blas_thread", "single_blas_thread"]

P = ParamSpec("P")
R = TypeVar("R")

_lock = threading.Lock()
_depth = 0
_limiter: Any = None
_controller: Any = None
_loaded = False


def _get_controller() -> Any:
    global _controller, _loaded
    if not _loaded:
        _loaded = True
        try:
            import numpy  # noqa: F401  (its BLAS must be loaded to be seen)
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - threadpoolctl is a dependency
            _controller = None
        else:
            _controller = ThreadpoolController()
    return _controller


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with NumPy's BLAS on one thread (re-entrant, thread-safe)."""
    global _depth, _limiter
    with _lock:
        if _depth == 0:
            controller = _get_controller()
            if controller is not None:
                _limiter = controller.limit(limits=1, user_api="blas")
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _limiter is not None:
                _limiter.restore_original_limits()
                _limiter = None


def single_blas_thread(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a graph operation to run under :func:`one_blas_thread`."""

    @wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with one_blas_thread():
            return fn(*args, **kwargs)

    return run
