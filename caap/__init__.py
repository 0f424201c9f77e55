"""CAAP: a memory for LLM agents that keeps conflicts, and a policy that acts on them.

>>> from caap import Agent
>>> agent = Agent("./caap-data")  # doctest: +SKIP
>>> agent.remember("Ethan texts his peers but calls his boss.", "ethan")  # doctest: +SKIP
"""

from caap._dist_check import check_distribution

# The unrelated PyPI distribution "caap" installs a top-level package of the same name.
check_distribution()

from caap.agent import Agent  # noqa: E402
from caap.async_agent import AsyncAgent  # noqa: E402
from caap.models import (  # noqa: E402
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
    "Action",
    "Agent",
    "AsyncAgent",
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
]
