"""``caap.client.Client``: a small HTTP client for a running ``caap serve``.

Standard library only (no torch, no model, no pydantic import), so a command-line call against a
running server starts in a fraction of a second. Every method returns the server's JSON.

>>> from caap.client import Client
>>> memory = Client("http://127.0.0.1:8765")  # doctest: +SKIP
>>> memory.add("I take my coffee black.", user_id="ana")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

__all__ = ["Client", "ServerError", "server_from_env"]


class ServerError(RuntimeError):
    """The server answered with an error status (``status``), or could not be reached (0)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"server error {status}: {detail}" if status else detail)
        self.status = status
        self.detail = detail


def server_from_env() -> str | None:
    """The server URL configured by ``CAAP_SERVER``, or ``None``."""
    url = os.environ.get("CAAP_SERVER", "").strip()
    return url or None


class Client:
    """Talk to ``caap serve`` over HTTP.

    Args:
        url: The server's base URL, e.g. ``http://127.0.0.1:8765``.
        api_key: The server's API key (default: ``CAAP_API_KEY``), sent as a bearer token.
        timeout: Seconds to wait for one answer.
    """

    def __init__(self, url: str, *, api_key: str | None = None, timeout: float = 120.0) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http:// or https:// URL, got {url!r}")
        self.url = url.rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("CAAP_API_KEY") or None
        self.timeout = timeout

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        query: dict[str, Any] | None = None,
    ) -> Any:
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = json.dumps({k: v for k, v in body.items() if v is not None}).encode()
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                detail = json.loads(raw).get("detail", raw.decode(errors="replace"))
            except (ValueError, AttributeError):
                detail = raw.decode(errors="replace")
            raise ServerError(exc.code, str(detail)) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerError(0, f"cannot reach the caap server at {self.url}: {reason}") from None

    def health(self) -> dict[str, Any]:
        """``{"status": "ok", "version": ..., "auth": ...}``."""
        return dict(self._call("GET", "/health"))

    def remember(self, text: str, user_id: str, **facets: Any) -> dict[str, Any]:
        """Store one memory (``source``, ``context``, ``observed_at``, ... as keywords)."""
        return dict(
            self._call("POST", "/v1/remember", {"text": text, "user_id": user_id, **facets})
        )

    def add(self, messages: Any, user_id: str, **kwargs: Any) -> dict[str, Any]:
        """Store a text or a chat's user statements (``agent_id``, ``run_id``, ``metadata`` ...)."""
        body = {"messages": messages, "user_id": user_id, **kwargs}
        return dict(self._call("POST", "/v1/add", body))

    def search(self, query: str, user_id: str, **kwargs: Any) -> dict[str, Any]:
        """Nearest memories (``filters``, ``limit``, ``agent_id``, ``run_id``, ``threshold``)."""
        return dict(
            self._call("POST", "/v1/search", {"query": query, "user_id": user_id, **kwargs})
        )

    def recall(self, query: str, user_id: str, k: int = 8) -> dict[str, Any]:
        """Hits and their whole conflict clusters."""
        return dict(self._call("POST", "/v1/recall", {"query": query, "user_id": user_id, "k": k}))

    def conflicts(self, user_id: str) -> dict[str, Any]:
        """The user's conflict clusters, their members' texts and the user's memory count."""
        return dict(self._call("GET", "/v1/conflicts", query={"user_id": user_id}))

    def respond(self, query: str, user_id: str, k: int = 8) -> dict[str, Any]:
        """The answer: ``decision``, ``text``, ``questions``, ``cited_memories`` ..."""
        return dict(self._call("POST", "/v1/respond", {"query": query, "user_id": user_id, "k": k}))

    def resolve(
        self, decision: dict[str, Any], answer: str, user_id: str, **kwargs: Any
    ) -> dict[str, Any]:
        """Record the answer to a clarification (``decision``: a respond result's decision)."""
        body = {"decision": decision, "answer": answer, "user_id": user_id, **kwargs}
        return dict(self._call("POST", "/v1/resolve", body))

    def forget(self, memory_id: str, user_id: str) -> dict[str, Any]:
        """Delete a memory (``ServerError`` 404 when the user has none with that id)."""
        body = {"memory_id": memory_id, "user_id": user_id}
        return dict(self._call("POST", "/v1/forget", body))

    def history(self, memory_id: str, user_id: str) -> list[dict[str, Any]]:
        """Every version of a memory, oldest first."""
        query = {"memory_id": memory_id, "user_id": user_id}
        return list(self._call("GET", "/v1/history", query=query))

    def get_all(self, user_id: str, **kwargs: Any) -> dict[str, Any]:
        """Every current memory of the user (``filters``, ``agent_id``, ``run_id``, ``limit``)."""
        return dict(self._call("POST", "/v1/memories/list", {"user_id": user_id, **kwargs}))

    def get(self, memory_id: str, user_id: str) -> dict[str, Any]:
        """One memory's record."""
        path = "/v1/memories/" + urllib.parse.quote(memory_id, safe="")
        return dict(self._call("GET", path, query={"user_id": user_id}))

    def update(self, memory_id: str, text: str, user_id: str, **kwargs: Any) -> dict[str, Any]:
        """A new version of the memory that takes its place."""
        path = "/v1/memories/" + urllib.parse.quote(memory_id, safe="")
        return dict(self._call("PUT", path, {"text": text, "user_id": user_id, **kwargs}))

    def delete(self, memory_id: str, user_id: str) -> dict[str, Any]:
        """Delete a memory."""
        path = "/v1/memories/" + urllib.parse.quote(memory_id, safe="")
        return dict(self._call("DELETE", path, query={"user_id": user_id}))
