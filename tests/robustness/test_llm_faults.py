"""Nothing a model or its adapter does escapes ``respond`` (issue 14, items 1 and 8)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from caap.llm import FunctionModel, OpenAIChatModel, ScriptedModel
from caap.llm._openai import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT
from caap.llm.testing import ChatCompletionsServer, Reply
from caap.models import Memory
from caap.policy import CaapPolicy
from caap.policy.policy import CircuitBreaker
from tests.scenarios import DRINKING

QUERY = "Should I have a few drinks tonight?"
DEEP = "[" * 2000
DEEP_OBJ = '{"a":' * 1500 + "1" + "}" * 1500


def _mems() -> list[Memory]:
    return [Memory(id=f"m{i:02d}", text=t, user_id="ethan") for i, t in enumerate(DRINKING)]


class _Raises:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __call__(self, messages: list[Any], schema: dict[str, Any] | None) -> str:
        raise self.exc


class _Returns:
    """A custom ChatModel (not one of ours) that returns whatever it was given."""

    name = "custom"

    def __init__(self, value: object) -> None:
        self.value = value

    def complete(self, messages: list[Any], **kwargs: Any) -> Any:
        return self.value


@pytest.mark.parametrize("value", [None, 42, b"bytes", {"action": "commit"}])
def test_a_custom_model_returning_a_non_string_falls_back(embedder: Any, value: object) -> None:
    r = CaapPolicy(_Returns(value), embedder=embedder).respond(_mems(), QUERY)  # type: ignore[arg-type]
    assert r.decision.backbone == "offline"
    assert r.decision.fallback_reason is not None
    assert r.decision.fallback_reason.startswith("malformed_output")


@pytest.mark.parametrize(
    ("fn", "kind"),
    [
        (_Raises(RuntimeError("adapter bug")), "adapter_error:RuntimeError"),
        (_Raises(KeyError("choices")), "adapter_error:KeyError"),
        (_Raises(RecursionError("too deep")), "adapter_error:RecursionError"),
        (_Raises(ZeroDivisionError()), "adapter_error:ZeroDivisionError"),
        (lambda m, s: DEEP, "malformed_output"),
        (lambda m, s: f"Here you go: {DEEP}", "malformed_output"),
        (lambda m, s: f"```json\n{DEEP}\n```", "malformed_output"),
        (lambda m, s: DEEP_OBJ, "malformed_output"),
        (lambda m, s: "x" * 2_000_001, "malformed_output"),
    ],
)
def test_no_model_fault_escapes_respond(embedder: Any, fn: Any, kind: str) -> None:
    policy = CaapPolicy(FunctionModel(fn, name="bad"), embedder=embedder)
    r = policy.respond(_mems(), QUERY)
    assert r.decision.backbone == "offline"
    assert r.decision.fallback_reason is not None
    assert r.decision.fallback_reason.startswith(kind), r.decision.fallback_reason
    assert r.text


def test_a_deeply_nested_http_body_falls_back(embedder: Any) -> None:
    body = '{"choices": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with ChatCompletionsServer([Reply(raw_body=body), Reply(raw_body=body)]) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, max_retries=0)
        r = CaapPolicy(model, embedder=embedder).respond(_mems(), QUERY)
    assert r.decision.fallback_reason is not None
    assert r.decision.fallback_reason.startswith("malformed_output")


def test_realize_faults_of_any_type_fall_back(embedder: Any) -> None:
    good = json.dumps(
        {"action": "clarify", "conflict_type": "CPC", "risk": "low", "rationale": "it depends"}
    )
    for bad in (RuntimeError("x"), KeyError("y")):

        def fn(messages: list[Any], schema: dict[str, Any] | None, bad: Any = bad) -> str:
            if schema is not None:
                return good
            raise bad

        r = CaapPolicy(FunctionModel(fn), embedder=embedder).respond(_mems(), QUERY)
        assert r.decision.fallback_reason is not None
        assert "realize adapter_error" in r.decision.fallback_reason


def test_realize_does_not_call_a_model_that_failed_in_decide(embedder: Any) -> None:
    calls: list[bool] = []

    def fn(messages: list[Any], schema: dict[str, Any] | None) -> str:
        calls.append(schema is not None)
        raise TimeoutError("dead endpoint")

    r = CaapPolicy(FunctionModel(fn), embedder=embedder).respond(_mems(), QUERY)
    assert calls == [True]  # decide only
    assert r.decision.fallback_reason is not None


def test_a_run_of_failures_opens_the_breaker_for_a_while(embedder: Any) -> None:
    now = [0.0]
    breaker = CircuitBreaker(failures=2, cooldown=30.0, clock=lambda: now[0])
    calls: list[int] = []

    def fn(messages: list[Any], schema: dict[str, Any] | None) -> str:
        calls.append(1)
        raise ConnectionError("down")

    policy = CaapPolicy(FunctionModel(fn), embedder=embedder, breaker=breaker)
    a = policy.analyze(_mems(), QUERY)
    for _ in range(2):
        policy.decide(_mems(), QUERY, analysis=a)
    assert len(calls) == 2 and breaker.is_open
    d = policy.decide(_mems(), QUERY, analysis=a)
    assert len(calls) == 2  # skipped while open
    assert d.fallback_reason is not None and d.fallback_reason.startswith("circuit_open")
    now[0] = 31.0
    policy.decide(_mems(), QUERY, analysis=a)
    assert len(calls) == 3  # one call let through after the cooldown


def test_a_success_closes_the_breaker(embedder: Any) -> None:
    breaker = CircuitBreaker(failures=2, cooldown=0.0)
    good = json.dumps(
        {"action": "clarify", "conflict_type": "CPC", "risk": "low", "rationale": "x"}
    )
    model = ScriptedModel([RuntimeError("a"), good, RuntimeError("b"), good])
    policy = CaapPolicy(model, embedder=embedder, breaker=breaker)
    a = policy.analyze(_mems(), QUERY)
    for _ in range(4):
        policy.decide(_mems(), QUERY, analysis=a)
    assert not breaker.is_open


def test_default_timeout_and_retries_bound_one_call() -> None:
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")
    assert model.timeout == DEFAULT_TIMEOUT <= 30
    assert model.max_retries == DEFAULT_MAX_RETRIES <= 1
    # decide's worst case; realize is skipped after a decide failure.
    assert (1 + model.max_retries) * model.timeout <= 60
