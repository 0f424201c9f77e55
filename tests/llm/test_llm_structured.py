"""structured_call: schema goes out, reply is parsed tolerantly and validated."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import pytest
from pydantic import BaseModel, Field, ValidationError

from caap.llm import (
    FunctionModel,
    LLMError,
    LLMMalformedOutput,
    LLMSchemaError,
    LLMTimeout,
    Message,
    OpenAIChatModel,
    ScriptedModel,
    structured_call,
)
from caap.llm.testing import ChatCompletionsServer

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """A generic model; its class name ``Page[int]`` is not a valid wire schema name."""

    items: list[T]


ASK: list[Message] = [{"role": "user", "content": "Classify."}]


class Verdict(BaseModel):
    """A classification result."""

    label: str
    confidence: float = Field(ge=0, le=1)


def call(reply: str) -> Verdict:
    return structured_call(ScriptedModel([reply]), ASK, Verdict)


@pytest.mark.parametrize(
    "reply",
    [
        '{"label": "cpc", "confidence": 0.8}',
        '  \n{"label": "cpc", "confidence": 0.8}\n',
        '```json\n{"label": "cpc", "confidence": 0.8}\n```',
        '```\n{"label": "cpc", "confidence": 0.8}\n```',
        'Here you go:\n```json\n{"label": "cpc", "confidence": 0.8}\n```\nAnything else?',
        'Sure! The answer is {"label": "cpc", "confidence": 0.8} as requested.',
        'Reasoning {not json} then {"label": "cpc", "confidence": 0.8} and {"x": 1}',
    ],
)
def test_tolerant_parsing(reply: str) -> None:
    assert call(reply) == Verdict(label="cpc", confidence=0.8)


def test_braces_inside_strings_do_not_confuse_the_scan() -> None:
    result = call('Result: {"label": "a } tricky { label", "confidence": 0.5} done')
    assert result.label == "a } tricky { label"


def test_schema_and_name_are_sent() -> None:
    seen: dict[str, Any] = {}

    def fn(messages: list[Message], schema: dict[str, Any] | None) -> str:
        seen["schema"] = schema
        return '{"label": "x", "confidence": 1}'

    structured_call(FunctionModel(fn), ASK, Verdict)
    assert seen["schema"] == Verdict.model_json_schema()


def test_schema_name_defaults_to_class_name_over_the_wire() -> None:
    with ChatCompletionsServer(['{"label": "x", "confidence": 0.1}'] * 2) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, max_retries=0)
        structured_call(model, ASK, Verdict)
        structured_call(model, ASK, Verdict, schema_name="custom")
    names = [r["response_format"]["json_schema"]["name"] for r in server.requests]
    assert names == ["Verdict", "custom"]
    assert server.requests[0]["response_format"]["json_schema"]["schema"] == (
        Verdict.model_json_schema()
    )


@pytest.mark.parametrize("reply", ["I think it is CPC.", "{label: cpc}", "```json\n{oops\n```", ""])
def test_no_json_raises_malformed_output_with_excerpt(reply: str) -> None:
    with pytest.raises(LLMMalformedOutput) as info:
        call(reply)
    assert isinstance(info.value, LLMError)
    assert info.value.kind == "malformed_output"
    assert info.value.text == reply
    assert repr(reply[:20])[1:-1] in str(info.value)
    assert info.value.model == "scripted"


def test_long_reply_excerpt_is_shortened() -> None:
    with pytest.raises(LLMMalformedOutput) as info:
        call("no json here " * 200)
    assert len(str(info.value)) < 400


@pytest.mark.parametrize(
    "reply",
    [
        '{"label": "cpc"}',
        '{"label": "cpc", "confidence": 7}',
        '{"label": 3, "confidence": "high"}',
        "[1, 2, 3]",
        "42",
    ],
)
def test_wrong_shape_raises_schema_error(reply: str) -> None:
    with pytest.raises(LLMSchemaError) as info:
        call(reply)
    err = info.value
    assert err.kind == "schema_error"
    assert isinstance(err.validation_error, ValidationError)
    assert err.__cause__ is err.validation_error
    assert err.text == reply
    assert "Verdict" in str(err)


def test_model_errors_propagate_unchanged() -> None:
    with pytest.raises(LLMTimeout):
        structured_call(ScriptedModel([LLMTimeout("slow")]), ASK, Verdict)


def test_generic_model_name_is_made_wire_safe() -> None:
    seen: list[str] = []

    class Recorder(ScriptedModel):
        def complete(self, messages: list[Message], **kwargs: Any) -> str:
            seen.append(kwargs["schema_name"])
            return super().complete(messages, **kwargs)

    result = structured_call(Recorder(['{"items": [1]}']), ASK, Page[int])
    assert result.items == [1]
    assert seen == ["Page_int_"]
