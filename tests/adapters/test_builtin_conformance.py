"""The builtin backend passes the shipped conformance suite."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path
from typing import Any

import pytest

from caap.adapters.base import BackendError
from caap.adapters.builtin import BuiltinBackend
from caap.adapters.testing import BackendConformance, Reopen
from caap.models import Memory


class TestBuiltinConformance(BackendConformance):
    @pytest.fixture
    def backend(self, tmp_path: Path) -> BuiltinBackend:
        return BuiltinBackend(tmp_path / "store")

    @pytest.fixture
    def reopen(self, tmp_path: Path) -> Reopen:
        def _reopen(old: object) -> BuiltinBackend:
            return BuiltinBackend(tmp_path / "store")

        return _reopen


def test_path_that_is_a_file_is_rejected(tmp_path: Path) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(ValueError, match="path"):
        BuiltinBackend(f)


class TestBuiltinOnChromaServer(BackendConformance):
    """The same suite with the vectors on a Chroma server (chromadb ``HttpClient``)."""

    @pytest.fixture
    def collection(self) -> str:
        return f"caap-test-{uuid.uuid4().hex[:12]}"

    @pytest.fixture
    def backend(self, tmp_path: Path, chroma_url: str, collection: str) -> BuiltinBackend:
        return BuiltinBackend(tmp_path, chroma_url=chroma_url, collection=collection)

    @pytest.fixture
    def reopen(self, tmp_path: Path, chroma_url: str, collection: str) -> Reopen:
        def _reopen(old: object) -> BuiltinBackend:
            return BuiltinBackend(tmp_path, chroma_url=chroma_url, collection=collection)

        return _reopen


def test_remote_backend_writes_nothing_under_path(tmp_path: Path, chroma_url: str) -> None:
    b = BuiltinBackend(tmp_path / "unused", chroma_url=chroma_url, collection="caap-nothing-local")
    b.add(Memory(text="kept on the server", user_id="u"))
    assert not (tmp_path / "unused" / "vectors").exists()
    assert [h.memory.text for h in b.search("server", "u", k=1)] == ["kept on the server"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"chroma_url": "chroma:8000"}, "chroma_url"),
        ({"chroma_url": "ftp://host:8000"}, "chroma_url"),
        ({"chroma_url": "http://host:notaport"}, "chroma_url"),
        ({"collection": "x"}, "collection"),
        ({"collection": "bad name!"}, "collection"),
    ],
)
def test_bad_remote_options_name_the_field(
    tmp_path: Path, kwargs: dict[str, str], field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        BuiltinBackend(tmp_path, **kwargs)  # type: ignore[arg-type]


def test_unreachable_chroma_server_is_a_backend_error(tmp_path: Path, embedder: Any) -> None:
    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(BackendError, match=f"127.0.0.1:{port}"):
        BuiltinBackend(tmp_path, embedder=embedder, chroma_url=f"http://127.0.0.1:{port}")
