"""CAAP: a memory for LLM agents that keeps conflicts, and a policy that acts on them.

>>> from caap import Agent
>>> agent = Agent("./caap-data")  # doctest: +SKIP
>>> agent.remember("Ethan texts his peers but calls his boss.", "ethan")  # doctest: +SKIP

The public names load on first use, so ``import caap`` (and the command line talking to a
running server) does not pay for torch and the model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from caap._dist_check import check_distribution

# The unrelated PyPI distribution "caap" installs a top-level package of the same name.
check_distribution()

if TYPE_CHECKING:
    from caap._embeddings import Embedder, get_embedder
    from caap._validation import DEFAULT_MAX_TEXT_BYTES, split_text
    from caap.agent import Agent
    from caap.async_agent import AsyncAgent
    from caap.models import (
        Action,
        ConflictCluster,
        ConflictEdge,
        ConflictType,
        Decision,
        EdgeKind,
        Memory,
        Recall,
        Response,
        RiskTier,
    )

__version__ = "0.1.0"

_LAZY = {
    "Agent": "caap.agent",
    "AsyncAgent": "caap.async_agent",
    "Embedder": "caap._embeddings",
    "get_embedder": "caap._embeddings",
    "DEFAULT_MAX_TEXT_BYTES": "caap._validation",
    "split_text": "caap._validation",
    **{
        name: "caap.models"
        for name in (
            "Action",
            "ConflictCluster",
            "ConflictEdge",
            "ConflictType",
            "Decision",
            "EdgeKind",
            "Memory",
            "Recall",
            "Response",
            "RiskTier",
        )
    },
}

__all__ = [
    "DEFAULT_MAX_TEXT_BYTES",
    "Action",
    "Agent",
    "AsyncAgent",
    "ConflictCluster",
    "ConflictEdge",
    "ConflictType",
    "Decision",
    "EdgeKind",
    "Embedder",
    "Memory",
    "Recall",
    "Response",
    "RiskTier",
    "__version__",
    "get_embedder",
    "split_text",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'caap' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
