"""The deployed shape: graph store in PostgreSQL, vectors on a Chroma server, no local state.

Two agents with different (empty) data directories stand for two application servers; what one
remembers, the other recalls with the same conflict clusters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from caap import Agent, ConflictType
from tests.scenarios import DRINKING, MEDICATION, UNRELATED


def test_a_second_server_sees_the_first_ones_memories_and_conflicts(
    tmp_path: Path, embedder: Any, postgres_dsn: str, chroma_url: str
) -> None:
    options = {"chroma_url": chroma_url, "collection": f"caap-deploy-{tmp_path.name[-12:]}"}
    with Agent(
        tmp_path / "server-a", embedder=embedder, store=postgres_dsn, backend_options=options
    ) as a:
        a.remember_many(DRINKING + UNRELATED, "ethan")
        a.remember_many(MEDICATION, "maya")
        before = {c.aspect: c.conflict_type for c in a.conflicts("ethan")}
    assert ConflictType.CPC in before.values()
    assert not (tmp_path / "server-a" / "graph.sqlite").exists()
    assert not (tmp_path / "server-a" / "vectors").exists()

    with Agent(
        tmp_path / "server-b", embedder=embedder, store=postgres_dsn, backend_options=options
    ) as b:
        assert {c.aspect: c.conflict_type for c in b.conflicts("ethan")} == before
        r = b.recall("Should I skip drinking before my early shift?", "ethan", k=1)
        assert set(DRINKING) <= {m.text for m in r.memories}
        assert all(m.user_id == "ethan" for m in r.memories)
        assert sorted(b.store.users()) == ["ethan", "maya"]
