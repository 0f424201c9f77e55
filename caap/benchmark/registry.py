"""Registries of policies and judges keyed by name.

Every component is built by a factory registered under a name; building one records
``{name, args}`` so a report can say exactly which component with which arguments produced a
number, and rebuild it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from caap.benchmark.base import Judge
from caap.policy.base import Policy

__all__ = [
    "ComponentSpec",
    "get_judge",
    "get_policy",
    "judge",
    "judges",
    "policies",
    "policy",
    "spec_of",
]

F = TypeVar("F", bound=Callable[..., Any])

_POLICIES: dict[str, Callable[..., Policy]] = {}
_JUDGES: dict[str, Callable[..., Judge]] = {}
_SPEC_ATTR = "__caap_spec__"


class ComponentSpec(BaseModel):
    """Which component, built with which arguments."""

    model_config = ConfigDict(extra="forbid")

    name: str
    args: dict[str, Any] = Field(default_factory=dict)


def _register(table: dict[str, Callable[..., Any]], name: str) -> Callable[[F], F]:
    def deco(factory: F) -> F:
        if name in table and table[name] is not factory:
            raise ValueError(f"{name!r} is already registered")
        table[name] = factory
        return factory

    return deco


def policy(name: str) -> Callable[[F], F]:
    """Register a policy factory: ``@policy("recency") def recency(**args) -> Policy``."""
    return _register(_POLICIES, name)


def judge(name: str) -> Callable[[F], F]:
    """Register a judge factory: ``@judge("structural") def structural(**args) -> Judge``."""
    return _register(_JUDGES, name)


def _ensure_builtin_components() -> None:
    # Importing these modules runs their @policy / @judge decorators.
    import caap.benchmark.baselines
    import caap.benchmark.judges
    import caap.policy.registered  # noqa: F401


def policies() -> list[str]:
    """Names of every registered policy."""
    _ensure_builtin_components()
    return sorted(_POLICIES)


def judges() -> list[str]:
    """Names of every registered judge (``llm`` takes a model: ``llm:MODEL``)."""
    _ensure_builtin_components()
    return sorted(_JUDGES)


def _import_object(ref: str, kind: str) -> Any:
    """Import ``module:object`` (``object`` may be dotted); the current directory is searched."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{kind} reference must be 'module:object', got {ref!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        # Like ``python -m``: a user's own module next to where the command runs is found.
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ImportError(
            f"cannot import {kind} module {module_name!r} from {ref!r}: {exc}"
        ) from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"{kind} {ref!r}: module {module_name!r} has no {attr!r}") from None
    return obj


def _build(table: dict[str, Callable[..., Any]], kind: str, name: str, args: dict[str, Any]) -> Any:
    _ensure_builtin_components()
    factory = table.get(name)
    if factory is None and ":" in name:
        # A user's own component: a factory, a class, or a ready instance.
        target = _import_object(name, kind)
        method = "respond" if kind == "policy" else "score"
        if not callable(target) or (not isinstance(target, type) and hasattr(target, method)):
            if args:
                raise ValueError(f"{kind} {name!r} is an instance; it takes no arguments")
            if not hasattr(target, method):
                raise ValueError(f"{kind} {name!r} has no {method}() method")
            obj = target
        else:
            obj = target(**args)
            if not hasattr(obj, method):
                raise ValueError(
                    f"{kind} {name!r} returned {type(obj).__name__}, which has no {method}()"
                )
        with contextlib.suppress(AttributeError):  # objects with __slots__ keep no spec
            setattr(obj, _SPEC_ATTR, ComponentSpec(name=name, args=args))
        return obj
    if factory is None:
        known = ", ".join(sorted(table))
        raise ValueError(f"unknown {kind} {name!r}; known: {known} (or module:object)")
    obj = factory(**args)
    setattr(obj, _SPEC_ATTR, ComponentSpec(name=name, args=args))
    return obj


def get_policy(name: str, **args: Any) -> Policy:
    """Build the policy registered as ``name``, or import one from ``module:object``.

    ``module:object`` names a factory or class (called with ``args``) or a ready policy
    instance; the current directory is on the import path, so ``my_policy:MyPolicy`` finds
    ``./my_policy.py``.
    """
    p: Policy = _build(_POLICIES, "policy", name, args)
    return p


def get_judge(spec: str, **args: Any) -> Judge:
    """Build a judge from ``"structural"``, ``"llm:MODEL"`` or ``"module:object"``.

    ``llm:MODEL`` passes the model to the registered ``llm`` judge; any other ``module:object``
    is imported like :func:`get_policy` does (a factory, a class or an instance with
    ``score``).
    """
    name, _, model = spec.partition(":")
    _ensure_builtin_components()
    if model and name not in _JUDGES:
        return _build(_JUDGES, "judge", spec, args)  # type: ignore[no-any-return]
    if model:
        args = {"model": model, **args}
    j: Judge = _build(_JUDGES, "judge", name, args)
    return j


def spec_of(component: object) -> ComponentSpec:
    """The ``{name, args}`` a registry-built component was made with."""
    spec = getattr(component, _SPEC_ATTR, None)
    if spec is None:
        name = getattr(component, "name", type(component).__name__)
        return ComponentSpec(name=str(name))
    assert isinstance(spec, ComponentSpec)
    return spec
