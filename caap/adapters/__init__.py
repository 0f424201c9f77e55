"""Memory backends behind one interface, a registry, and the conformance suite.

>>> from caap.adapters import get_backend
>>> backend = get_backend("builtin", path="./data")  # doctest: +SKIP
"""

from caap.adapters.base import BackendCapabilities, BackendError, MemoryBackend, SearchHit
from caap.adapters.registry import BackendSpec, available_backends, get_backend, register

__all__ = [
    "BackendCapabilities",
    "BackendError",
    "BackendSpec",
    "MemoryBackend",
    "SearchHit",
    "available_backends",
    "get_backend",
    "register",
]
