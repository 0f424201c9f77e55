"""Both conflict-graph stores pass the same conformance suite; store selection by target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from caap.conflict_graph import GraphStore, PostgresGraphStore, open_store
from caap.conflict_graph.testing import StoreConformance


class TestSQLiteStore(StoreConformance):
    @pytest.fixture
    def make_store(self, tmp_path: Path) -> Any:
        return lambda: GraphStore(tmp_path / "graph.sqlite")


class TestPostgresStore(StoreConformance):
    @pytest.fixture
    def make_store(self, postgres_dsn: str) -> Any:
        return lambda: PostgresGraphStore(postgres_dsn)


def test_open_store_picks_the_store_from_the_target(tmp_path: Path) -> None:
    s = open_store(str(tmp_path / "a.sqlite"))
    assert isinstance(s, GraphStore) and s.path == tmp_path / "a.sqlite"
    assert open_store(s) is s
    s.close()
    with pytest.raises(TypeError, match="store must be"):
        open_store(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="store must be"):
        open_store("  ")
