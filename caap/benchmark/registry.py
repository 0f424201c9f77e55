"""Registries of policies and judges keyed by name.

Every component is built by a factory registered under a name; building one records
``{name, args}`` so a report can say exactly which component with which arguments produced a
number, and rebuild it.
"""

from __future__ import annotations

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


def _build(table: dict[str, Callable[..., Any]], kind: str, name: str, args: dict[str, Any]) -> Any:
    _ensure_builtin_components()
    try:
        factory = table[name]
    except KeyError:
        raise ValueError(f"unknown {kind} {name!r}; known: {', '.join(sorted(table))}") from None
    obj = factory(**args)
    setattr(obj, _SPEC_ATTR, ComponentSpec(name=name, args=args))
    return obj


def get_policy(name: str, **args: Any) -> Policy:
    """Build the policy registered as ``name``."""
    p: Policy = _build(_POLICIES, "policy", name, args)
    return p


def get_judge(spec: str, **args: Any) -> Judge:
    """Build a judge from ``"structural"`` or ``"llm:MODEL"`` (the model goes into args)."""
    name, _, model = spec.partition(":")
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
