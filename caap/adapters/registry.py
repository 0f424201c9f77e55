"""Backend registry: a name maps to a dotted class path and an install hint (lazy imports).

Third parties register through the ``caap.backends`` entry-point group or :func:`register`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from caap.adapters.base import MemoryBackend

__all__ = ["BackendSpec", "available_backends", "backend_class", "get_backend", "register"]


@dataclass(frozen=True)
class BackendSpec:
    """Where a backend class lives and how to install what it needs."""

    name: str
    target: str  # "package.module:ClassName"
    install_hint: str


_REGISTRY: dict[str, BackendSpec] = {
    "builtin": BackendSpec(
        "builtin", "caap.adapters.builtin:BuiltinBackend", 'pip install "caap-memory"'
    ),
    "mem0": BackendSpec(
        "mem0", "caap.adapters.mem0:Mem0Backend", 'pip install "caap-memory[mem0]"'
    ),
    "memos": BackendSpec(
        "memos", "caap.adapters.memos:MemOSBackend", 'pip install "caap-memory[memos]"'
    ),
    "letta": BackendSpec(
        "letta", "caap.adapters.letta:LettaBackend", 'pip install "caap-memory[letta]"'
    ),
    "amem": BackendSpec(
        "amem",
        "caap.adapters.amem:AMemBackend",
        'pip install "git+https://github.com/agiresearch/A-mem" "caap-memory[amem]"',
    ),
}


def register(name: str, target: str, install_hint: str = "", *, replace: bool = False) -> None:
    """Register a backend class under ``name`` (``target`` is ``"module:Class"``)."""
    if ":" not in target:
        raise ValueError(f"target must look like 'package.module:ClassName', got {target!r}")
    if name in _REGISTRY and not replace:
        raise ValueError(f"backend {name!r} is already registered; pass replace=True")
    _REGISTRY[name] = BackendSpec(name, target, install_hint)


def _load_entry_points() -> None:
    for ep in entry_points(group="caap.backends"):
        if ep.name not in _REGISTRY:
            _REGISTRY[ep.name] = BackendSpec(ep.name, ep.value, f"pip install {ep.dist}")


def available_backends() -> list[str]:
    """Names of every registered backend (installed or not)."""
    _load_entry_points()
    return sorted(_REGISTRY)


def backend_class(name: str) -> type[MemoryBackend]:
    """The class registered as ``name``, imported now.

    Raises:
        ValueError: unknown name (the message lists the known ones).
        ImportError: the backend's optional dependency is missing (the message names the
            pip command).
        TypeError: the target is not a :class:`MemoryBackend` subclass.
    """
    _load_entry_points()
    try:
        spec = _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown backend {name!r}; known backends: {', '.join(sorted(_REGISTRY))}"
        ) from None
    module_name, _, cls_name = spec.target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        # The adapter's own message may already carry the hint: name the missing module only.
        missing = exc.name or str(exc).split(":")[0]
        raise ImportError(
            f"backend {name!r} needs an optional dependency that is not installed "
            f"({missing}); install it with: {spec.install_hint}"
        ) from exc
    cls = getattr(module, cls_name)
    if not (isinstance(cls, type) and issubclass(cls, MemoryBackend)):
        raise TypeError(f"{spec.target} is not a MemoryBackend")
    return cls


def get_backend(name: str, **kwargs: Any) -> MemoryBackend:
    """Instantiate the backend registered as ``name`` with ``kwargs``.

    Raises:
        ValueError: unknown name (the message lists the known ones).
        ImportError: the backend's optional dependency is missing (the message names the
            pip command).
    """
    backend = backend_class(name)(**kwargs)
    if not isinstance(backend, MemoryBackend):
        raise TypeError(f"{_REGISTRY[name].target} is not a MemoryBackend")
    return backend
