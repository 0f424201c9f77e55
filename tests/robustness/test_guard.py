"""The post-decision guard: no backbone lowers the risk or commits on a high-risk matter
without positive evidence (issue 14, item 2)."""

from __future__ import annotations

import json
from typing import Any

from caap.llm import FunctionModel, ScriptedModel
from caap.models import Action, ConflictType, Decision, Memory, RiskTier
from caap.policy import CaapPolicy
from caap.policy._guard import GUARD_TAG, apply_guard, guarded
from tests.scenarios import MEDICATION

COMMIT_LOW = {
    "action": "commit",
    "conflict_type": "NONE",
    "evidence": {"answer": ["m00"]},
    "risk": "low",
    "rationale": "the record is clear",
}
MED_QUERY = "Can I give Maya ibuprofen for her fever tonight?"


def _meds() -> list[Memory]:
    return [Memory(id=f"m{i:02d}", text=t, user_id="maya") for i, t in enumerate(MEDICATION)]


def test_model_commit_on_high_risk_source_conflict_becomes_verify(embedder: Any) -> None:
    model = ScriptedModel([json.dumps(COMMIT_LOW), "Take 5 mg."])
    r = CaapPolicy(model, embedder=embedder).respond(_meds(), MED_QUERY)
    d = r.decision
    assert d.backbone == model.name and d.fallback_reason is None
    assert d.action is Action.VERIFY
    assert d.risk is RiskTier.HIGH  # the model's "low" does not lower the analysis's risk
    assert guarded(d) and GUARD_TAG in d.rationale and "SCC" in d.rationale
    # A model the guard overruled does not write the answer either.
    assert "Take 5 mg" not in r.text and r.questions


def test_model_cannot_lower_risk_even_when_not_committing(embedder: Any) -> None:
    reply = {**COMMIT_LOW, "action": "verify"}
    r = CaapPolicy(ScriptedModel([json.dumps(reply), "Check first [m00]."]), embedder=embedder)
    d = r.decide(_meds(), MED_QUERY)
    assert d.action is Action.VERIFY and d.risk is RiskTier.HIGH
    assert "risk raised from low to high" in d.rationale


def test_every_model_commit_on_the_high_risk_conflict_is_stopped(embedder: Any) -> None:
    # Whatever evidence and conflict type the model claims, the analysis decides.
    policy = CaapPolicy(embedder=embedder)
    a = policy.analyze(_meds(), MED_QUERY)
    assert a.risk is RiskTier.HIGH and a.conflict_type is ConflictType.SCC
    for evidence in ({"answer": ["m00"]}, {"answer": ["m01"]}, {}, {"x": ["m00", "m01"]}):
        for ctype in ConflictType:
            d = Decision(action=Action.COMMIT, conflict_type=ctype, evidence=evidence)
            g = apply_guard(d, a)
            assert g.action is Action.VERIFY and g.risk is RiskTier.HIGH


def test_offline_high_risk_commit_on_hearsay_becomes_verify(embedder: Any) -> None:
    mems = [
        Memory(
            id="h1",
            text="Maya's neighbour says Maya can take a double dose of her asthma medication.",
            user_id="maya",
            source="neighbour",
        ),
        Memory(id="u1", text="Maya plays tennis on Saturdays.", user_id="maya"),
    ]
    policy = CaapPolicy(embedder=embedder)
    q = "Can Maya take a double dose of her asthma medication?"
    a = policy.analyze(mems, q)
    assert a.risk is RiskTier.HIGH
    r = policy.respond(mems, q)
    assert r.decision.action is not Action.COMMIT
    if a.conflict_type is ConflictType.NONE:
        assert guarded(r.decision) and "neighbour" in r.decision.rationale
        assert "confirm" in r.text and r.questions


def test_first_hand_high_risk_fact_without_dispute_still_commits(embedder: Any) -> None:
    mems = [
        Memory(id="u1", text="I am allergic to penicillin.", user_id="sam"),
        Memory(id="u2", text="I like hiking in the Alps.", user_id="sam"),
    ]
    policy = CaapPolicy(embedder=embedder)
    q = "Am I allergic to penicillin? My doctor wants to prescribe medication."
    a = policy.analyze(mems, q)
    assert a.risk is RiskTier.HIGH
    d = policy.decide(mems, q, analysis=a)
    assert d.action is Action.COMMIT and not guarded(d)


def test_guard_applies_to_a_function_model_committing_with_bogus_ids(embedder: Any) -> None:
    def fn(messages: list[Any], schema: dict[str, Any] | None) -> str:
        if schema is None:
            return "Go ahead."
        return json.dumps({**COMMIT_LOW, "evidence": {"answer": ["nope"]}, "risk": "high"})

    d = CaapPolicy(FunctionModel(fn), embedder=embedder).decide(_meds(), MED_QUERY)
    assert d.action is Action.VERIFY and guarded(d)
