"""The LLM backbone: one structured call per stage, and a fallback on every model fault."""

from __future__ import annotations

import json
from typing import Any

import pytest

from caap.llm import (
    FunctionModel,
    LLMMalformedOutput,
    LLMRateLimited,
    LLMRefusal,
    LLMServerError,
    LLMTimeout,
    OpenAIChatModel,
    ScriptedModel,
)
from caap.llm.testing import ChatCompletionsServer, Reply
from caap.models import Action, Memory
from caap.policy import CaapPolicy
from tests.scenarios import DRINKING

QUERY = "Should I have a few drinks tonight?"
GOOD_DECISION = {
    "action": "clarify",
    "conflict_type": "CPC",
    "unresolved": "what tomorrow holds",
    "missing_information": "whether there is an early shift tomorrow",
    "evidence": {"early shift": ["m01"], "free day": ["m00"], "bogus": ["not-a-memory"]},
    "risk": "low",
    "rationale": "depends on tomorrow",
}


def _mems() -> list[Memory]:
    return [Memory(id=f"m{i:02d}", text=t, user_id="ethan") for i, t in enumerate(DRINKING)]


def _offline(embedder: Any) -> Action:
    return CaapPolicy(embedder=embedder).decide(_mems(), QUERY).action


def test_structured_decide_and_constrained_realize(embedder: Any) -> None:
    seen: list[Any] = []

    def fn(messages: list[Any], schema: dict[str, Any] | None) -> str:
        seen.append((messages, schema))
        if schema is not None:
            return json.dumps(GOOD_DECISION)
        return "Is tomorrow an early shift [m01] or a free day [m00]? If early, skip it."

    policy = CaapPolicy(FunctionModel(fn, name="fake"), embedder=embedder)
    r = policy.respond(_mems(), QUERY)
    assert r.decision.action is Action.CLARIFY and r.decision.backbone == "fake"
    assert r.decision.fallback_reason is None
    # Ids the model invented are dropped from the evidence.
    assert r.decision.evidence == {"early shift": ["m01"], "free day": ["m00"]}
    assert r.cited_memory_ids == ["m01", "m00"]
    assert r.questions == ["Is tomorrow an early shift [m01] or a free day [m00]?"]
    assert seen[0][1] is not None and "action" in json.dumps(seen[0][1])
    # realize is told the decision it must follow.
    assert '"clarify"' in seen[1][0][-1]["content"]


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (LLMTimeout("slow"), "timeout"),
        (LLMServerError("boom"), "server_error"),
        (LLMRateLimited("busy"), "rate_limited"),
        (LLMRefusal("no"), "refusal"),
        ("this is not json at all", "malformed_output"),
        ('{"action": "explode", "risk": "low"}', "schema_error"),
    ],
)
def test_every_decide_fault_falls_back_and_says_so(embedder: Any, fault: Any, kind: str) -> None:
    model = ScriptedModel([fault, "A written answer [m00]."])
    r = CaapPolicy(model, embedder=embedder).respond(_mems(), QUERY)
    assert r.decision.fallback_reason is not None
    assert r.decision.fallback_reason.startswith(kind)
    assert r.decision.backbone == "offline"
    assert r.decision.action is _offline(embedder)


@pytest.mark.parametrize("fault", [LLMTimeout("slow"), LLMMalformedOutput("bad"), ""])
def test_realize_fault_falls_back_to_offline_text(embedder: Any, fault: Any) -> None:
    model = ScriptedModel([json.dumps(GOOD_DECISION), fault])
    r = CaapPolicy(model, embedder=embedder).respond(_mems(), QUERY)
    assert r.decision.action is Action.CLARIFY
    assert r.decision.fallback_reason is not None and "realize" in r.decision.fallback_reason
    assert "early shift" in r.text and r.questions


def test_over_the_wire_server_errors_fall_back(embedder: Any) -> None:
    script = [Reply(status=500), Reply(content="Fine answer [m00].")]
    with ChatCompletionsServer(script) as server:
        model = OpenAIChatModel("test-model", base_url=server.base_url, max_retries=0)
        r = CaapPolicy(model, embedder=embedder).respond(_mems(), QUERY)
        calls = len(server.requests)
    assert r.decision.fallback_reason is not None
    assert r.decision.fallback_reason.startswith("server_error")
    # Once decide fell back, realize does not call the failing endpoint again.
    assert calls == 1
    assert r.text != "Fine answer [m00]." and "early shift" in r.text


def test_over_the_wire_happy_path(embedder: Any) -> None:
    script = [Reply(content=json.dumps(GOOD_DECISION)), Reply(content="Early shift? [m01]")]
    with ChatCompletionsServer(script) as server:
        model = OpenAIChatModel("test-model", base_url=server.base_url, max_retries=0)
        r = CaapPolicy(model, embedder=embedder).respond(_mems(), QUERY)
        body = server.requests[0]
    assert r.decision.backbone == "openai:test-model"
    assert body["response_format"]["type"] == "json_schema"
