"""The builtin backend passes the shipped conformance suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from caap.adapters.builtin import BuiltinBackend
from caap.adapters.testing import BackendConformance, Reopen


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
