"""The policy protocol: memories + query -> response (decide, then realize)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from caap.models import Decision, Memory, Response

__all__ = ["Policy", "TwoStagePolicy"]


@runtime_checkable
class Policy(Protocol):
    """Anything that answers a query from a set of visible memories.

    Policies receive memory texts (with whatever facets a graph holds) and the query, never a
    conflict-type label or dataset annotation.
    """

    name: str

    def respond(self, memories: Sequence[Memory], query: str) -> Response:
        """Answer ``query`` from ``memories``; the response carries its decision record."""
        ...


@runtime_checkable
class TwoStagePolicy(Policy, Protocol):
    """A policy that decides first, then writes (DESIGN §6)."""

    def decide(self, memories: Sequence[Memory], query: str) -> Decision:
        """Choose an action and record why."""
        ...

    def realize(self, memories: Sequence[Memory], query: str, decision: Decision) -> Response:
        """Write the response the decision calls for."""
        ...
