"""OpenAIChatModel against the local chat-completions server: wire format and fault mapping."""

from __future__ import annotations

import pickle
import socket
import sys
import time

import pytest

from caap.llm import (
    LLMConnectionError,
    LLMError,
    LLMMalformedOutput,
    LLMRateLimited,
    LLMRefusal,
    LLMServerError,
    LLMTimeout,
    Message,
    OpenAIChatModel,
)
from caap.llm.testing import ChatCompletionsServer, Reply

HI: list[Message] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Say hi"},
]


def model_for(server: ChatCompletionsServer, **kwargs: float) -> OpenAIChatModel:
    return OpenAIChatModel(
        "test-model",
        base_url=server.base_url,
        timeout=kwargs.get("timeout", 5.0),
        max_retries=int(kwargs.get("max_retries", 0)),
    )


def test_normal_reply_and_request_shape() -> None:
    with ChatCompletionsServer([Reply("hello there")]) as server:
        model = model_for(server)
        assert model.complete(HI, temperature=0.3) == "hello there"
    assert model.name == "openai:test-model"
    (request,) = server.requests
    assert request["model"] == "test-model"
    assert request["messages"] == HI
    assert request["temperature"] == 0.3
    assert "response_format" not in request


def test_json_schema_is_sent_as_response_format() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    with ChatCompletionsServer(['{"x": 1}']) as server:
        reply = model_for(server).complete(HI, json_schema=schema, schema_name="point")
    assert reply == '{"x": 1}'
    assert server.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "point", "schema": schema, "strict": False},
    }


def test_slow_server_raises_timeout_quickly() -> None:
    with ChatCompletionsServer([Reply("late", delay_s=2.0)]) as server:
        model = model_for(server, timeout=0.2, max_retries=0)
        start = time.monotonic()
        with pytest.raises(LLMTimeout) as info:
            model.complete(HI)
        assert time.monotonic() - start < 1.5
    assert info.value.kind == "timeout"
    assert info.value.model == "openai:test-model"


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_raises_server_error(status: int) -> None:
    with (
        ChatCompletionsServer([Reply(status=status)]) as server,
        pytest.raises(LLMServerError) as info,
    ):
        model_for(server).complete(HI)
    assert info.value.status_code == status
    assert info.value.kind == "server_error"


def test_429_raises_rate_limited_with_retry_after() -> None:
    with (
        ChatCompletionsServer([Reply(status=429, headers={"retry-after": "0"})]) as server,
        pytest.raises(LLMRateLimited) as info,
    ):
        model_for(server).complete(HI)
    assert info.value.kind == "rate_limited"
    assert info.value.status_code == 429
    assert info.value.retry_after == 0.0


def test_client_retries_transient_errors_then_succeeds() -> None:
    script = [Reply(status=503, headers={"retry-after": "0"}), Reply("recovered")]
    with ChatCompletionsServer(script) as server:
        assert model_for(server, max_retries=1).complete(HI) == "recovered"
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 404])
def test_other_4xx_raise_plain_llm_error(status: int) -> None:
    with ChatCompletionsServer([Reply(status=status)]) as server, pytest.raises(LLMError) as info:
        model_for(server).complete(HI)
    assert type(info.value) is LLMError
    assert info.value.kind == "error"
    assert info.value.status_code == status


@pytest.mark.parametrize(
    "raw_body",
    [
        "{not json",
        "<html>bad gateway</html>",
        '"just a string"',
        '{"id": "x", "object": "chat.completion"}',
        '{"choices": []}',
        '{"choices": [{"index": 0}]}',
    ],
)
def test_malformed_body_raises_malformed_output(raw_body: str) -> None:
    with (
        ChatCompletionsServer([Reply(raw_body=raw_body)]) as server,
        pytest.raises(LLMMalformedOutput) as info,
    ):
        model_for(server).complete(HI)
    assert info.value.kind == "malformed_output"


@pytest.mark.parametrize("content", [None, "", "   "])
def test_empty_content_raises_malformed_output(content: str | None) -> None:
    with (
        ChatCompletionsServer([Reply(content=content)]) as server,
        pytest.raises(LLMMalformedOutput),
    ):
        model_for(server).complete(HI)


def test_refusal_raises_refusal() -> None:
    with (
        ChatCompletionsServer([Reply(refusal="I can't help with that.")]) as server,
        pytest.raises(LLMRefusal) as info,
    ):
        model_for(server).complete(HI)
    assert info.value.refusal == "I can't help with that."
    assert info.value.kind == "refusal"


def test_content_filter_without_content_is_a_refusal() -> None:
    with (
        ChatCompletionsServer([Reply(content=None, finish_reason="content_filter")]) as server,
        pytest.raises(LLMRefusal),
    ):
        model_for(server).complete(HI)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_endpoint_raises_connection_error() -> None:
    model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{_free_port()}/v1", max_retries=0)
    with pytest.raises(LLMConnectionError) as info:
        model.complete(HI)
    assert info.value.kind == "connection_error"


def test_default_endpoint_is_blocked_by_the_offline_guard() -> None:
    # No base_url and no env: the client would go to api.openai.com. The conftest guard stops it
    # with a RuntimeError, deliberately not an LLMError, so no fallback path can swallow it.
    model = OpenAIChatModel("gpt-4o-mini", max_retries=0)
    assert model.base_url is None
    with pytest.raises(RuntimeError, match=r"api\.openai\.com"):
        model.complete(HI)


def test_caap_env_vars_configure_endpoint_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with ChatCompletionsServer(["ok"]) as server:
        monkeypatch.setenv("CAAP_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("CAAP_LLM_API_KEY", "sk-caap")
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
        model = OpenAIChatModel("m", max_retries=0)
        assert model.base_url == server.base_url
        assert model.complete(HI) == "ok"
    assert server.request_headers[0]["authorization"] == "Bearer sk-caap"


def test_openai_env_vars_are_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    with ChatCompletionsServer(["ok"]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
        assert OpenAIChatModel("m", max_retries=0).complete(HI) == "ok"
    assert server.request_headers[0]["authorization"] == "Bearer sk-openai"


def test_arguments_beat_env_and_missing_key_uses_placeholder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAAP_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    with ChatCompletionsServer(["ok", "ok"]) as server:
        assert OpenAIChatModel("m", base_url=server.base_url).complete(HI) == "ok"
        OpenAIChatModel("m", base_url=server.base_url, api_key="sk-arg").complete(HI)
    assert server.request_headers[0]["authorization"] == "Bearer not-needed"
    assert server.request_headers[1]["authorization"] == "Bearer sk-arg"


def test_empty_env_values_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAAP_LLM_BASE_URL", "")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert OpenAIChatModel("m").base_url == "http://127.0.0.1:9/v1"


def test_repr_hides_the_key() -> None:
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key="sk-secret")
    assert "sk-secret" not in repr(model)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"timeout": 0}, "timeout"), ({"max_retries": -1}, "max_retries")],
)
def test_bad_settings_raise_value_error(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        OpenAIChatModel("m", **kwargs)  # type: ignore[arg-type]


def test_empty_model_name_raises_value_error() -> None:
    with pytest.raises(ValueError, match="model"):
        OpenAIChatModel("")


def test_missing_openai_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ImportError, match=r'pip install "caap-memory\[llm\]"'):
        OpenAIChatModel("m")


def test_errors_survive_pickling() -> None:
    # Benchmark workers send failures across processes.
    err = LLMRateLimited("slow down", model="openai:m", retry_after=1.5)
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is LLMRateLimited
    assert (clone.message, clone.model, clone.retry_after, clone.kind) == (
        "slow down",
        "openai:m",
        1.5,
        "rate_limited",
    )
