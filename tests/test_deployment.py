"""The deployed shape: graph store in PostgreSQL, vectors on a Chroma server, no local state.

Two agents with different (empty) data directories stand for two application servers; what one
remembers, the other recalls with the same conflict clusters.
"""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path
from typing import Any

import pytest

from caap import Agent, ConflictType
from caap.cli import main
from caap.conflict_graph import PostgresGraphStore
from tests.scenarios import DRINKING, MEDICATION, UNRELATED

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sharded_deployment.py"


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

    # An empty collection (lost, or a new Chroma server) is refilled from the store.
    fresh = {**options, "collection": f"{options['collection']}-new"}
    with Agent(
        tmp_path / "server-c", embedder=embedder, store=postgres_dsn, backend_options=fresh
    ) as c:
        r = c.recall("Should I skip drinking before my early shift?", "ethan", k=1)
        assert set(DRINKING) <= {m.text for m in r.memories}
        assert c.backend.count("ethan") == len(DRINKING + UNRELATED)


def test_the_sharded_deployment_example_runs(
    postgres_dsn: str,
    chroma_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = importlib.util.spec_from_file_location("sharded_deployment", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    # Two shards that are the same database: routing still picks one per user.
    monkeypatch.setenv("CAAP_SHARDS", f"{postgres_dsn} {postgres_dsn}")
    monkeypatch.setenv("CAAP_CHROMA_URL", chroma_url)
    assert example.main() == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" ->")[0] for line in lines] == ["ethan", "maya", "lena"]
    assert {example.shard_of(u, 2) for u in ("ethan", "maya", "lena")} == {0, 1}


def test_the_cli_keeps_the_graph_where_caap_store_says(
    tmp_path: Path, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAAP_STORE", postgres_dsn)
    data = str(tmp_path / "d")
    for text in MEDICATION:
        assert main(["remember", text, "--user", "maya", "--data", data]) == 0
    assert not (tmp_path / "d" / "graph.sqlite").exists()
    with PostgresGraphStore(postgres_dsn) as store:
        assert [m.memory.text for m in store.memories("maya")] == MEDICATION
        assert store.edges("maya")


def test_the_cli_reports_an_unreachable_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip(
        "psycopg", reason="psycopg is not installed (pip install 'caap-memory[postgres]')"
    )
    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("CAAP_STORE", f"postgresql://caap@127.0.0.1:{port}/caap")
    assert main(["conflicts", "--user", "maya", "--data", str(tmp_path / "d")]) == 2
    assert f"port={port}" in capsys.readouterr().err
