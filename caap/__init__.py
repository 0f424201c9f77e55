"""CAAP: a memory for LLM agents that keeps conflicts, and a policy that acts on them.

>>> from caap import Agent
>>> agent = Agent("./caap-data")  # doctest: +SKIP
>>> agent.remember("Ethan texts his peers but calls his boss.", "ethan")  # doctest: +SKIP
"""

from caap._validation import DEFAULT_MAX_TEXT_BYTES, split_text
from caap.agent import Agent
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

__all__ = [
    "DEFAULT_MAX_TEXT_BYTES",
    "Action",
    "Agent",
    "ConflictCluster",
    "ConflictEdge",
    "ConflictType",
    "Decision",
    "EdgeKind",
    "Memory",
    "Recall",
    "Response",
    "RiskTier",
    "__version__",
    "split_text",
]
