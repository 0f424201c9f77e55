"""The CAAP policy: decide -> realize over the actions of :class:`caap.Action`."""

from caap.policy.base import Policy, TwoStagePolicy
from caap.policy.policy import CaapPolicy, DecisionDraft

__all__ = ["CaapPolicy", "DecisionDraft", "Policy", "TwoStagePolicy"]
