"""A local chat-completions server for testing code that talks to a model over HTTP.

:class:`ChatCompletionsServer` speaks just enough of the OpenAI wire format for the ``openai``
client (and so :class:`~caap.llm.OpenAIChatModel`) to work against it, and replays a script of
:class:`Reply` objects, so tests can produce normal answers, slow answers (timeouts), 429/5xx
errors, refusals and malformed bodies without any network or model. It binds 127.0.0.1 only.

Example:
    >>> from caap.llm import OpenAIChatModel
    >>> from caap.llm.testing import ChatCompletionsServer, Reply
    >>> with ChatCompletionsServer([Reply("hello"), Reply(status=503)]) as server:
    ...     model = OpenAIChatModel("any", base_url=server.base_url, max_retries=0)
    ...     model.complete([{"role": "user", "content": "hi"}])
    'hello'
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from caap.llm._types import Message

__all__ = [
    "ChatCompletionsServer",
    "Reply",
    "Script",
    "harmless_relations_reply",
    "harmless_relations_response",
]

_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
_HOST = "127.0.0.1"
# Bound how long a handler thread may block on a silent client.
_SOCKET_TIMEOUT_S = 10.0
_MAX_BODY_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Reply:
    """One scripted answer of :class:`ChatCompletionsServer`.

    Attributes:
        content: Assistant text for a 200 reply (``None`` sends ``"content": null``).
        status: HTTP status; anything but 200 sends an OpenAI-style error body.
        delay_s: Seconds to wait before answering (longer than the client timeout to provoke a
            timeout); cut short when the server shuts down.
        raw_body: Sent verbatim instead of a generated body (for malformed responses).
        refusal: Sets ``message.refusal`` (the model declined).
        headers: Extra response headers, e.g. ``{"retry-after": "0"}``.
        finish_reason: ``choices[0].finish_reason`` of a 200 reply.
    """

    content: str | None = None
    status: int = 200
    delay_s: float = 0.0
    raw_body: str | None = None
    refusal: str | None = None
    headers: dict[str, str] | None = None
    finish_reason: str = "stop"


Script = Iterable[Reply | str] | Callable[[dict[str, Any]], Reply]
"""What drives the server: replies in order (a ``str`` is shorthand for ``Reply(content=...)``),
or a function from the parsed request body to the reply."""


def _error_body(status: int, message: str) -> str:
    kinds = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
             429: "rate_limit_error"}  # fmt: skip
    kind = kinds.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}})


def _completion_body(reply: Reply, request: dict[str, Any]) -> str:
    prompt = " ".join(
        str(m.get("content", "")) for m in request.get("messages", []) if isinstance(m, dict)
    )
    prompt_tokens = len(prompt.split())
    completion_tokens = len((reply.content or "").split())
    return json.dumps(
        {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(request.get("model", "test-model")),
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": reply.content,
                        "refusal": reply.refusal,
                    },
                    "logprobs": None,
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )


class ChatCompletionsServer:
    """A scripted OpenAI-compatible ``/v1/chat/completions`` server on 127.0.0.1.

    Use it as a context manager; it listens on a free port from ``__enter__`` until
    ``__exit__``. Each POST consumes the next :class:`Reply`; once the script is exhausted every
    request gets HTTP 500, so a runaway client fails instead of hanging.

    Attributes:
        requests: Parsed JSON body of every chat-completions request, in arrival order.
        request_headers: Headers of those requests (lower-cased names), same order.
    """

    def __init__(self, script: Script = ()) -> None:
        """Create the server (not yet listening).

        Args:
            script: Replies in order (``str`` is shorthand for ``Reply(content=...)``), or a
                callable from the parsed request body to a :class:`Reply`.
        """
        self._responder: Callable[[dict[str, Any]], Reply] | None = None
        self._replies: list[Reply] = []
        if callable(script):
            self._responder = script
        else:
            self._replies = [Reply(content=r) if isinstance(r, str) else r for r in script]
        self._next = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> ChatCompletionsServer:
        """Start listening on a free 127.0.0.1 port; returns ``self``.

        Raises:
            RuntimeError: The server is already running.
        """
        if self._httpd is not None:
            raise RuntimeError("ChatCompletionsServer is already running")
        self._stopping.clear()
        httpd = ThreadingHTTPServer((_HOST, 0), _make_handler(self))
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="caap-chat-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port; delayed replies are cut short. Idempotent."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5.0)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ChatCompletionsServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        """The port the server listens on.

        Raises:
            RuntimeError: The server is not running.
        """
        if self._httpd is None:
            raise RuntimeError("ChatCompletionsServer is not running; use it in a with block")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, to pass as ``base_url`` to the client."""
        return f"http://{_HOST}:{self.port}/v1"

    # -- request handling (called from handler threads) --------------------------------------

    def _record(self, body: dict[str, Any], headers: dict[str, str]) -> Reply:
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(headers)
            if self._responder is None:
                if self._next >= len(self._replies):
                    return Reply(status=500, raw_body=_error_body(500, "script exhausted"))
                reply = self._replies[self._next]
                self._next += 1
                return reply
            responder = self._responder
        try:
            return responder(body)
        except Exception as exc:  # a broken test callable becomes a visible 500
            return Reply(status=500, raw_body=_error_body(500, f"script callable failed: {exc!r}"))

    def _wait(self, seconds: float) -> None:
        # An Event wait rather than sleep, so close() is never held up by a long delay.
        if seconds > 0:
            self._stopping.wait(seconds)


def _make_handler(server: ChatCompletionsServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so no idle keep-alive threads outlive a test.
        protocol_version = "HTTP/1.0"
        timeout = _SOCKET_TIMEOUT_S

        def log_message(self, format: str, *args: Any) -> None:  # stdlib signature
            pass  # keep test output clean

        def _send(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
            data = body.encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (e.g. timed out); nothing to tell it

        def do_GET(self) -> None:  # stdlib naming
            self._send(404, _error_body(404, f"no route for GET {self.path}"))

        def do_POST(self) -> None:  # stdlib naming
            path = self.path.split("?", 1)[0]
            if path not in _PATHS:
                self._send(404, _error_body(404, f"no route for POST {self.path}"))
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > _MAX_BODY_BYTES:
                self._send(413, _error_body(413, "request body too large"))
                return
            try:
                body = json.loads(self.rfile.read(length) or b"null")
            except ValueError:
                body = None
            if not isinstance(body, dict):
                self._send(400, _error_body(400, "request body must be a JSON object"))
                return
            reply = server._record(body, {k.lower(): v for k, v in self.headers.items()})
            server._wait(reply.delay_s)
            if reply.raw_body is not None:
                self._send(reply.status, reply.raw_body, reply.headers)
            elif reply.status != 200:
                self._send(
                    reply.status,
                    _error_body(reply.status, f"scripted HTTP {reply.status}"),
                    reply.headers,
                )
            else:
                self._send(200, _completion_body(reply, body), reply.headers)

    return Handler


def _data_block(messages: list[Message]) -> Any:
    """The JSON quoted between ``<data>`` and ``</data>`` in the last message."""
    text = messages[-1]["content"]
    start, end = text.find("<data>"), text.rfind("</data>")
    if start < 0 or end < start:
        raise ValueError("the request quotes no <data> block")
    return json.loads(text[start + len("<data>") : end])


def harmless_relations_reply(messages: list[Message], json_schema: dict[str, Any] | None) -> str:
    """What a relation model that reads everything as harmless answers the ``llm`` relation
    layer: every statement is the user's own and holds generally, every pair of statements
    agrees, the statements taken together agree, and every question is low stakes. It is what
    a model steered by text quoted from the memories, or simply wrong, could say, so the
    commit guard must hold every unjustified high-stakes commit whatever it says. Use it as
    ``FunctionModel(harmless_relations_reply)``, or over the wire with
    :func:`harmless_relations_response`; ``benchmark/guard_stress.py --relations
    harmless-llm`` stresses the guard with it.

    Raises:
        ValueError: a request the relation layer does not send (another schema).
    """
    title = (json_schema or {}).get("title")
    if title == "PairAnswers":
        pairs = _data_block(messages)["pairs"]
        answers = [
            {"pair": p["pair"], "relation": "agree", "confidence": 0.95, "later": "unknown"}
            for p in pairs
        ]
        return json.dumps({"pairs": answers})
    if title == "FacetAnswers":
        items = _data_block(messages)["statements"]
        answers = [
            {
                "item": it["item"],
                "source": None,
                "source_confidence": 0.0,
                "context": None,
                "context_confidence": 0.0,
                "time_confidence": 0.0,
            }
            for it in items
        ]
        return json.dumps({"items": answers})
    if title == "SituationAnswer":
        return json.dumps(
            {
                "agree": 0.97,
                "depends_on_context": 0.01,
                "keeps_switching": 0.01,
                "sources_disagree": 0.01,
                "later_replaces_earlier": 0.0,
            }
        )
    if title == "RiskAnswer":
        return json.dumps({"tier": "low", "confidence": 0.97, "categories": []})
    raise ValueError(f"not a relation-layer request (schema {title!r})")


def harmless_relations_response(body: dict[str, Any]) -> Reply:
    """:func:`harmless_relations_reply` for :class:`ChatCompletionsServer` (pass this function
    as its script): a 400 for a request it does not answer."""
    schema = body.get("response_format", {}).get("json_schema", {}).get("schema")
    try:
        return Reply(content=harmless_relations_reply(body["messages"], schema))
    except (ValueError, KeyError) as exc:
        return Reply(status=400, content=str(exc))
