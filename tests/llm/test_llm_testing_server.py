"""ChatCompletionsServer itself: routing, scripting, recording and clean shutdown."""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any

import pytest

from caap.llm import LLMTimeout, OpenAIChatModel
from caap.llm.testing import ChatCompletionsServer, Reply


def post(server: ChatCompletionsServer, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "x"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hello world"}]}


def test_wire_format_of_a_reply() -> None:
    with ChatCompletionsServer(["hi there"]) as server:
        status, body = post(server, "/v1/chat/completions", REQUEST)
    assert status == 200
    assert body["object"] == "chat.completion"
    assert body["model"] == "m"
    assert isinstance(body["id"], str) and isinstance(body["created"], int)
    assert body["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "hi there", "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ]
    assert body["usage"] == {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}


def test_both_paths_are_served_and_others_are_404() -> None:
    with ChatCompletionsServer(["a", "b"]) as server:
        assert post(server, "/v1/chat/completions", REQUEST)[0] == 200
        assert post(server, "/chat/completions", REQUEST)[0] == 200
        assert post(server, "/v1/completions", REQUEST)[0] == 404
    assert len(server.requests) == 2


def test_exhausted_script_answers_500() -> None:
    with ChatCompletionsServer(["only"]) as server:
        post(server, "/v1/chat/completions", REQUEST)
        status, body = post(server, "/v1/chat/completions", REQUEST)
    assert status == 500
    assert "exhausted" in body["error"]["message"]


def test_non_object_body_is_400_and_not_recorded() -> None:
    with ChatCompletionsServer(["x"]) as server:
        assert post(server, "/v1/chat/completions", [1, 2])[0] == 400
    assert server.requests == []


def test_callable_script_sees_the_request() -> None:
    def respond(request: dict[str, Any]) -> Reply:
        return Reply(content=request["messages"][-1]["content"].upper())

    with ChatCompletionsServer(respond) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, max_retries=0)
        assert model.complete([{"role": "user", "content": "shout"}]) == "SHOUT"
        assert model.complete([{"role": "user", "content": "again"}]) == "AGAIN"


def test_failing_callable_becomes_500() -> None:
    def respond(request: dict[str, Any]) -> Reply:
        raise KeyError("oops")

    with ChatCompletionsServer(respond) as server:
        status, body = post(server, "/v1/chat/completions", REQUEST)
    assert status == 500
    assert "oops" in body["error"]["message"]


def test_binds_loopback_only_and_reports_base_url() -> None:
    with ChatCompletionsServer() as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert server._httpd is not None
        assert server._httpd.server_address[0] == "127.0.0.1"


def test_not_running_has_no_url_and_cannot_start_twice() -> None:
    server = ChatCompletionsServer()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url
    with server, pytest.raises(RuntimeError, match="already running"):
        server.start()
    server.close()  # idempotent


def test_shutdown_is_prompt_even_with_a_pending_delay() -> None:
    threads_before = threading.active_count()
    server = ChatCompletionsServer([Reply("late", delay_s=30.0)]).start()
    model = OpenAIChatModel("m", base_url=server.base_url, timeout=0.2, max_retries=0)
    with pytest.raises(LLMTimeout):
        model.complete([{"role": "user", "content": "q"}])
    start = time.monotonic()
    server.close()
    assert time.monotonic() - start < 2.0
    deadline = time.monotonic() + 2.0
    while threading.active_count() > threads_before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() <= threads_before
