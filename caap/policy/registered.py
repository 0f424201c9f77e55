"""Registers the CAAP policy with the benchmark registry as ``caap``."""

from __future__ import annotations

from typing import Any

from caap.benchmark.registry import policy
from caap.policy.policy import CaapPolicy

__all__ = ["caap_policy"]


@policy("caap")
def caap_policy(model: str | None = None, **kwargs: Any) -> CaapPolicy:
    """The CAAP policy; offline unless ``model`` names an OpenAI-compatible model."""
    return CaapPolicy(model, **kwargs)
