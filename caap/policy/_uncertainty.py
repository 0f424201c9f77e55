"""Choosing an action when the reading of the memories is uncertain.

A relation layer that reads whole situations (:class:`~caap.conflict_graph.relations.
SituationVerdict`) says how likely it is that the memories nearest a query agree, depend on
context, keep switching or come from disagreeing sources. The graph's own cluster reading is
one guess among those; acting as if the most likely reading were certain commits exactly when
the reading is wrong. Instead the policy picks the action with the highest *expected fit*:

    fit(action) = sum over situations s of P(s) * FIT[risk][s][action]  (+ a small prior for
    the action the graph's own reading chose)

:data:`FIT` says how well each action serves each situation (1: what the design asks for; 0:
harmful), one table for ordinary stakes and one for high stakes, where committing to the wrong
reading costs more and checking is worth more. It follows the design's guidance (CPC: answer
per context or ask; BOC: a reversible step, per phase or ask; SCC: verify, and never act on a
high-stakes matter before that; stale state: act on the current state, confirming it first
when the stakes are high; nothing in conflict: commit). An action that fits every likely
reading moderately beats one that fits the favourite perfectly and the others not at all.

Pure functions; no wording is read here.
"""

from __future__ import annotations

from collections.abc import Mapping

from caap.models import Action

__all__ = ["FIT", "GRAPH_PRIOR", "choose_under_uncertainty", "expected_fit"]

_C, _CO, _CL, _V, _D, _T = (
    Action.COMMIT,
    Action.CONDITIONALIZE,
    Action.CLARIFY,
    Action.VERIFY,
    Action.DEFER,
    Action.REVERSIBLE_TRIAL,
)

#: How well each action serves each situation: ``FIT[high_risk][situation][action]``.
FIT: dict[bool, dict[str, dict[Action, float]]] = {
    False: {
        "NONE": {_C: 1.0, _CO: 0.3, _CL: 0.3, _V: 0.2, _T: 0.2, _D: 0.0},
        "CPC": {_CO: 1.0, _CL: 0.9, _T: 0.2, _V: 0.1, _C: 0.0, _D: 0.0},
        "BOC": {_T: 1.0, _CO: 0.9, _CL: 0.8, _V: 0.1, _C: 0.0, _D: 0.0},
        "SCC": {_V: 1.0, _CL: 0.8, _CO: 0.8, _D: 0.3, _C: 0.1, _T: 0.0},
        "STALE": {_C: 1.0, _V: 0.6, _CL: 0.4, _CO: 0.3, _T: 0.1, _D: 0.0},
    },
    True: {
        "NONE": {_C: 1.0, _V: 0.4, _CL: 0.3, _CO: 0.3, _D: 0.2, _T: 0.0},
        "CPC": {_CL: 1.0, _CO: 0.9, _V: 0.3, _D: 0.1, _C: 0.0, _T: 0.0},
        "BOC": {_CL: 1.0, _CO: 0.8, _V: 0.4, _T: 0.3, _D: 0.2, _C: 0.0},
        "SCC": {_V: 1.0, _D: 0.9, _CL: 0.4, _CO: 0.2, _C: 0.0, _T: 0.0},
        "STALE": {_V: 1.0, _C: 0.5, _CL: 0.5, _D: 0.4, _CO: 0.2, _T: 0.0},
    },
}

#: Added to the fit of the action the graph's own reading chose: a tie follows the graph.
GRAPH_PRIOR = 0.1


def expected_fit(
    probs: Mapping[str, float], *, high_risk: bool, graph_action: Action | None = None
) -> dict[Action, float]:
    """Expected fit of every action under the situation probabilities ``probs``.

    Raises:
        ValueError: ``probs`` names a situation :data:`FIT` does not know.
    """
    table = FIT[high_risk]
    unknown = set(probs) - set(table)
    if unknown:
        raise ValueError(f"unknown situations {sorted(unknown)}")
    out = {
        action: sum(p * table[s].get(action, 0.0) for s, p in probs.items()) for action in Action
    }
    if graph_action is not None:
        out[graph_action] += GRAPH_PRIOR
    return out


def choose_under_uncertainty(
    probs: Mapping[str, float], *, high_risk: bool, graph_action: Action | None = None
) -> Action:
    """The action with the highest :func:`expected_fit` (ties: the graph's action, then the
    earlier in :class:`~caap.models.Action`'s order).

    >>> choose_under_uncertainty({"NONE": 0.4, "CPC": 0.3, "BOC": 0.2, "SCC": 0.1},
    ...                          high_risk=False).value
    'conditionalize'
    >>> choose_under_uncertainty({"NONE": 0.9, "SCC": 0.1}, high_risk=False).value
    'commit'
    """
    fit = expected_fit(probs, high_risk=high_risk, graph_action=graph_action)
    return max(fit, key=lambda a: (round(fit[a], 9), a is graph_action))
