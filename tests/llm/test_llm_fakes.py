"""ScriptedModel, FunctionModel, infer_model and the error hierarchy."""

from __future__ import annotations

from typing import Any

import pytest

import caap.llm as llm
from caap.llm import (
    ChatModel,
    FunctionModel,
    LLMError,
    LLMServerError,
    LLMTimeout,
    Message,
    OpenAIChatModel,
    ScriptedModel,
    SeededSchemaModel,
    infer_model,
)

Q: list[Message] = [{"role": "user", "content": "q"}]


# -- ScriptedModel --------------------------------------------------------------------------


def test_scripted_replays_in_order_and_records_calls() -> None:
    model = ScriptedModel(["one", "two"])
    second: list[Message] = [{"role": "user", "content": "again"}]
    assert model.complete(Q) == "one"
    assert model.complete(second) == "two"
    assert model.calls == [Q, second]
    assert model.name == "scripted"


def test_scripted_raises_scripted_exceptions() -> None:
    model = ScriptedModel([LLMTimeout("slow"), "after"])
    with pytest.raises(LLMTimeout, match="slow"):
        model.complete(Q)
    assert model.complete(Q) == "after"
    assert len(model.calls) == 2


def test_scripted_exhaustion_is_an_llm_error() -> None:
    model = ScriptedModel(["only"], name="judge")
    model.complete(Q)
    with pytest.raises(LLMError, match="script exhausted") as info:
        model.complete(Q)
    assert type(info.value) is LLMError
    assert "judge" in str(info.value)
    with pytest.raises(LLMError, match="script exhausted"):
        model.complete(Q)


def test_scripted_accepts_a_lazy_generator() -> None:
    produced: list[int] = []

    def outputs() -> Any:
        for i in range(3):
            produced.append(i)
            yield f"reply {i}"

    model = ScriptedModel(outputs())
    assert produced == []
    assert model.complete(Q) == "reply 0"
    assert produced == [0]


def test_scripted_calls_are_copies() -> None:
    messages: list[Message] = [{"role": "user", "content": "q"}]
    model = ScriptedModel(["a"])
    model.complete(messages)
    messages.append({"role": "assistant", "content": "a"})
    assert model.calls == [[{"role": "user", "content": "q"}]]


# -- FunctionModel --------------------------------------------------------------------------


def test_function_model_gets_messages_and_schema() -> None:
    seen: list[tuple[list[Message], dict[str, Any] | None]] = []

    def fn(messages: list[Message], schema: dict[str, Any] | None) -> str:
        seen.append((messages, schema))
        return f"{len(messages)} message(s), schema={schema is not None}"

    model = FunctionModel(fn, name="fn")
    assert model.complete(Q) == "1 message(s), schema=False"
    assert model.complete(Q, json_schema={"type": "object"}) == "1 message(s), schema=True"
    assert seen[1] == (Q, {"type": "object"})
    assert model.name == "fn"
    assert model.calls == [Q, Q]


def test_function_model_propagates_llm_errors() -> None:
    def fn(messages: list[Message], schema: dict[str, Any] | None) -> str:
        raise LLMServerError("boom", status_code=503)

    with pytest.raises(LLMServerError) as info:
        FunctionModel(fn).complete(Q)
    assert info.value.status_code == 503


def test_function_model_rejects_non_string_replies() -> None:
    model = FunctionModel(lambda messages, schema: 42)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="int"):
        model.complete(Q)


def test_fakes_satisfy_the_protocol() -> None:
    fakes: list[object] = [
        ScriptedModel([]),
        FunctionModel(lambda m, s: ""),
        SeededSchemaModel(),
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1"),
    ]
    for model in fakes:
        assert isinstance(model, ChatModel)


# -- infer_model ----------------------------------------------------------------------------


def test_infer_openai_spec() -> None:
    model = infer_model("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1", timeout=3.0)
    assert isinstance(model, OpenAIChatModel)
    assert model.model == "gpt-4o-mini"
    assert model.name == "openai:gpt-4o-mini"
    assert model.base_url == "http://127.0.0.1:9/v1"
    assert model.timeout == 3.0


def test_infer_bare_name_is_openai() -> None:
    model = infer_model("gpt-4o-mini")
    assert isinstance(model, OpenAIChatModel)
    assert model.name == "openai:gpt-4o-mini"


def test_infer_keeps_colons_in_the_model_name() -> None:
    model = infer_model("openai:llama3.1:8b")
    assert isinstance(model, OpenAIChatModel)
    assert model.model == "llama3.1:8b"


def test_infer_returns_model_instances_unchanged() -> None:
    fake = ScriptedModel(["x"])
    assert infer_model(fake) is fake


def test_infer_unknown_provider_names_it_and_the_supported_ones() -> None:
    with pytest.raises(ValueError, match="'anthropic'") as info:
        infer_model("anthropic:claude")
    assert "openai" in str(info.value)


@pytest.mark.parametrize("spec", ["", "   ", "openai:"])
def test_infer_empty_specs_raise_value_error(spec: str) -> None:
    with pytest.raises(ValueError):
        infer_model(spec)


def test_infer_rejects_other_types() -> None:
    with pytest.raises(TypeError, match="int"):
        infer_model(42)  # type: ignore[arg-type]


# -- errors ---------------------------------------------------------------------------------


def test_every_error_is_an_llm_error_with_a_distinct_kind() -> None:
    classes: list[type[LLMError]] = [
        llm.LLMError,
        llm.LLMTimeout,
        llm.LLMRateLimited,
        llm.LLMServerError,
        llm.LLMRefusal,
        llm.LLMMalformedOutput,
        llm.LLMSchemaError,
        llm.LLMConnectionError,
    ]
    kinds = [cls.kind for cls in classes]
    assert all(issubclass(cls, LLMError) for cls in classes)
    assert kinds == [
        "error",
        "timeout",
        "rate_limited",
        "server_error",
        "refusal",
        "malformed_output",
        "schema_error",
        "connection_error",
    ]
    assert LLMTimeout("x").kind == "timeout"


def test_public_api_is_exported() -> None:
    for name in llm.__all__:
        assert getattr(llm, name) is not None
    assert "structured_call" in llm.__all__
    assert "_openai" not in llm.__all__
