"""Mem0 (``mem0ai``, ``infer=False``, local qdrant, the packaged model) passes the suite.

Runs the real Mem0 library; skips with the reason when ``mem0ai`` is not installed
(``pip install "caap[mem0]"``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from caap.adapters.testing import BackendConformance, Reopen

if importlib.util.find_spec("mem0") is None:
    pytest.skip(
        'mem0ai is not installed (install it with: pip install "caap[mem0]")',
        allow_module_level=True,
    )

from caap.adapters.mem0 import Mem0Backend


class TestMem0Conformance(BackendConformance):
    @pytest.fixture
    def backend(self, tmp_path: Path) -> Iterator[Mem0Backend]:
        b = Mem0Backend(tmp_path / "store")
        yield b
        b.close()

    @pytest.fixture
    def reopen(self, tmp_path: Path) -> Reopen:
        def _reopen(old: object) -> Mem0Backend:
            # Local qdrant locks its folder: the old client must let go first.
            assert isinstance(old, Mem0Backend)
            old.close()
            return Mem0Backend(tmp_path / "store")

        return _reopen


class TestMem0Chroma(BackendConformance):
    """The same suite on Mem0's other local vector store."""

    @pytest.fixture
    def backend(self, tmp_path: Path) -> Iterator[Mem0Backend]:
        b = Mem0Backend(tmp_path / "store", vector_store="chroma")
        yield b
        b.close()

    @pytest.fixture
    def reopen(self, tmp_path: Path) -> Reopen:
        def _reopen(old: object) -> Mem0Backend:
            assert isinstance(old, Mem0Backend)
            old.close()
            return Mem0Backend(tmp_path / "store", vector_store="chroma")

        return _reopen
