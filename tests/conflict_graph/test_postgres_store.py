"""What only the PostgreSQL store has: migrations, schemas, pooling, connection errors."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

from caap.conflict_graph import PostgresGraphStore
from caap.conflict_graph.postgres import MIGRATIONS
from caap.conflict_graph.testing import make_edge, make_stored

psycopg = pytest.importorskip(
    "psycopg", reason="psycopg is not installed (pip install 'caap-memory[postgres]')"
)


def test_migrations_are_recorded_once(postgres_dsn: str) -> None:
    with PostgresGraphStore(postgres_dsn) as s:
        assert s.schema_version() == MIGRATIONS[-1][0]
    with PostgresGraphStore(postgres_dsn) as s:  # reopening applies nothing twice
        pass
    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute("SELECT version, name FROM caap_schema_migrations").fetchall()
    assert rows == [(v, n) for v, n, _ in MIGRATIONS]


def test_a_version_1_database_gains_the_outcomes_table(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import caap.conflict_graph.postgres as pg

    row = make_stored("alice", "written before outcomes existed", seed=1)
    with monkeypatch.context() as m:
        m.setattr(pg, "MIGRATIONS", MIGRATIONS[:1])  # what a caap before version 2 applied
        with PostgresGraphStore(postgres_dsn) as old:
            assert old.schema_version() == 1
            old.write([row])
    with PostgresGraphStore(postgres_dsn) as s:
        assert s.schema_version() == MIGRATIONS[-1][0] >= 2
        assert [g.memory for g in s.memories("alice")] == [row.memory]
        assert s.outcomes("alice") == []
        outcome = {"id": "o1", "question": "q", "claims": {"a": "x", "b": "y"}, "truth": "x"}
        assert s.add_outcome("alice", "o1", outcome) is True
        assert s.add_outcome("alice", "o1", outcome) is False
        assert s.outcomes("alice") == [outcome]
    with psycopg.connect(postgres_dsn) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM caap_schema_migrations")]
    assert sorted(versions) == [v for v, _, _ in MIGRATIONS]


def test_a_database_from_a_newer_caap_is_refused(postgres_dsn: str) -> None:
    PostgresGraphStore(postgres_dsn).close()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO caap_schema_migrations (version, name) VALUES (999, 'future')")
    with pytest.raises(RuntimeError, match="schema version 999"):
        PostgresGraphStore(postgres_dsn)


def test_concurrent_openers_migrate_once(postgres_dsn: str) -> None:
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            PostgresGraphStore(postgres_dsn).close()
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with psycopg.connect(postgres_dsn) as conn:
        (n,) = conn.execute("SELECT count(*) FROM caap_schema_migrations").fetchone()
    assert n == len(MIGRATIONS)


def test_schema_option_keeps_stores_apart(postgres_dsn: str) -> None:
    a = make_stored("alice", "in schema one", seed=1)
    with PostgresGraphStore(postgres_dsn, schema="caap_shard_one") as one:
        one.write([a])
        with PostgresGraphStore(postgres_dsn, schema="caap_shard_two") as two:
            assert two.memories("alice") == []
        assert [m.memory.text for m in one.memories("alice")] == ["in schema one"]
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA caap_shard_one CASCADE")
        conn.execute("DROP SCHEMA caap_shard_two CASCADE")


def test_writes_from_many_threads_all_land(postgres_dsn: str) -> None:
    with PostgresGraphStore(postgres_dsn, max_size=3) as s:

        def write(user: str) -> None:
            for i in range(5):
                x = make_stored(user, f"{user} {i}a", seed=i)
                y = make_stored(user, f"{user} {i}b", seed=i)
                s.write([x, y], [make_edge(x, y)])

        threads = [threading.Thread(target=write, args=(f"user{n}",)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for n in range(6):
            texts = [m.memory.text for m in s.memories(f"user{n}")]
            assert texts == [f"user{n} {i}{ab}" for i in range(5) for ab in "ab"]
            assert len(s.edges(f"user{n}")) == 5


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"dsn": ""}, "dsn"),
        ({"dsn": "postgresql://127.0.0.1:1/x?nonsense=1"}, "dsn"),
        ({"dsn": "postgresql://127.0.0.1/x", "schema": "bad; drop"}, "schema"),
        ({"dsn": "postgresql://127.0.0.1/x", "min_size": 3, "max_size": 2}, "min_size"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        PostgresGraphStore(**kwargs)


def test_unreachable_server_is_a_clear_error_without_the_password() -> None:
    with socket.socket() as sock:  # a port on loopback that nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dsn = f"postgresql://caap:s3cret@127.0.0.1:{port}/caap"
    with pytest.raises(ConnectionError, match=f"port={port}") as info:
        PostgresGraphStore(dsn)  # fails at once, not after connect_timeout
    assert "s3cret" not in str(info.value)
    assert "refused" in str(info.value).lower()


def test_a_missing_database_is_named(postgres_dsn: str) -> None:
    parts = psycopg.conninfo.conninfo_to_dict(postgres_dsn)
    parts["dbname"] = "caap_no_such_database"
    with pytest.raises(ConnectionError, match="caap_no_such_database"):
        PostgresGraphStore(psycopg.conninfo.make_conninfo(**parts))


def test_a_connection_the_server_dropped_is_replaced(postgres_dsn: str) -> None:
    a, b = make_stored("alice", "before", seed=1), make_stored("alice", "after", seed=2)
    with PostgresGraphStore(postgres_dsn, min_size=1, max_size=1) as s:
        with s.transaction() as db:
            s.write([a], db=db)
            pid = db.info.backend_pid
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            # What a server restart or failover does to the pooled connection.
            (killed,) = admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
        assert killed
        s.write([b])
        assert [m.memory.text for m in s.memories("alice")] == ["before", "after"]
