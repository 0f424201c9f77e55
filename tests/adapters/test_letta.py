"""Letta archival memory, for real, against a running Letta server.

The server's address comes from ``CAAP_TEST_LETTA_URL`` (``.ci/backends`` starts a letta 0.16.8
server on PostgreSQL + pgvector and sets it). The server embeds passages by calling back the
:class:`~caap.embedding_server.EmbeddingServer` these tests start in-process, so no model or
LLM is reached. Without a server, or without ``letta-client``, the tests skip with the reason.
"""

from __future__ import annotations

import os
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip(
    "caap.adapters.letta",
    exc_type=ImportError,
    reason='letta-client is not installed (pip install "caap-memory[letta]")',
)

from caap.adapters import get_backend
from caap.adapters.base import BackendError
from caap.adapters.letta import LettaBackend
from caap.adapters.testing import BackendConformance, Reopen
from caap.embedding_server import EmbeddingServer
from caap.models import Memory

LETTA_URL = os.environ.get("CAAP_TEST_LETTA_URL", "")


def _server_up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/v1/health/", timeout=5) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


needs_server = pytest.mark.skipif(
    not LETTA_URL or not _server_up(LETTA_URL),
    reason=(
        "no Letta server: set CAAP_TEST_LETTA_URL to a running `letta server` "
        "(letta<=0.16.8 on PostgreSQL; .ci/backends starts one)"
    ),
)


@pytest.fixture(scope="module")
def embeddings() -> Iterator[EmbeddingServer]:
    with EmbeddingServer() as s:
        yield s


def _backend(embeddings: EmbeddingServer, prefix: str) -> LettaBackend:
    return LettaBackend(
        LETTA_URL,
        embedding_endpoint=embeddings.base_url,
        embedding_dim=embeddings.dimension,
        agent_prefix=prefix,
    )


@needs_server
class TestLettaConformance(BackendConformance):
    @pytest.fixture
    def prefix(self) -> str:
        # Agents outlive a test on the server: a fresh prefix keeps every test's users apart.
        return f"caaptest-{uuid.uuid4().hex[:12]}"

    @pytest.fixture
    def backend(self, embeddings: EmbeddingServer, prefix: str) -> Iterator[LettaBackend]:
        b = _backend(embeddings, prefix)
        yield b
        b.close()

    @pytest.fixture
    def reopen(self, embeddings: EmbeddingServer, prefix: str) -> Reopen:
        def _reopen(old: object) -> LettaBackend:
            assert isinstance(old, LettaBackend)
            old.close()
            return _backend(embeddings, prefix)

        return _reopen


@needs_server
def test_re_adding_an_id_replaces_the_passage(embeddings: EmbeddingServer) -> None:
    b = _backend(embeddings, f"caaptest-{uuid.uuid4().hex[:12]}")
    b.add(Memory(id="m1", text="Alice lives in Leeds.", user_id="alice"))
    b.add(Memory(id="m1", text="Alice lives in York.", user_id="alice"))
    assert [m.text for m in b.list("alice")] == ["Alice lives in York."]
    assert b.count("alice") == 1


def test_unreachable_server_names_the_url() -> None:
    # Port 9 on loopback is closed: the error says which server could not be reached.
    b = LettaBackend("http://127.0.0.1:9", timeout=2)
    with pytest.raises(BackendError, match=r"127\.0\.0\.1:9"):
        b.list("alice")


def test_bad_arguments_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="base_url"):
        LettaBackend("localhost:8283")
    with pytest.raises(ValueError, match="embedding_dim"):
        LettaBackend(embedding_dim=0)
    with pytest.raises(ValueError, match="agent_prefix"):
        LettaBackend(agent_prefix="no spaces")


def test_registry_knows_letta() -> None:
    b = get_backend("letta", base_url="http://127.0.0.1:9")
    assert isinstance(b, LettaBackend)
