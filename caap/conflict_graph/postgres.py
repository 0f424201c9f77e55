"""Persistence of the conflict graph in PostgreSQL (psycopg 3, pooled, migrated, user-scoped).

The same rows as the SQLite :class:`~caap.conflict_graph.store.GraphStore`: a memory's pydantic
JSON, the facets the extractor inferred, its value vector (``bytea``, float32; the vector index
itself lives in the memory backend), the conflict edges (closed with ``expired_at``, never
deleted), and the labelled source outcomes the agent's reliability model learns from. Every
statement names the user, so tables can be partitioned or sharded by ``user_id``. Each write
is one transaction and returns only after PostgreSQL committed it with
``synchronous_commit = on``.

Needs the ``postgres`` extra: ``pip install 'caap-memory[postgres]'``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from caap.conflict_graph.store import (
    ConflictGraphStore,
    StoredMemory,
    extraction_from_json,
    extraction_to_json,
)
from caap.models import ConflictEdge, Memory

if TYPE_CHECKING:
    import psycopg

__all__ = ["MIGRATIONS", "PostgresGraphStore"]

_INSTALL = "pip install 'caap-memory[postgres]'"
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

#: Ordered schema migrations: ``(version, name, SQL)``. A database records the versions it has
#: applied in ``caap_schema_migrations``; opening a store applies the missing ones in order, in
#: one transaction, under an advisory lock so concurrent openers do not race. Never edit an
#: applied migration: append a new one.
MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "memories and conflict edges",
        """
        CREATE TABLE caap_memories (
            user_id  TEXT NOT NULL,
            id       TEXT NOT NULL,
            seq      BIGINT GENERATED ALWAYS AS IDENTITY,
            payload  TEXT NOT NULL,
            inferred TEXT NOT NULL,
            vector   BYTEA NOT NULL,
            PRIMARY KEY (user_id, id)
        );
        CREATE INDEX caap_memories_user_seq ON caap_memories (user_id, seq);
        CREATE TABLE caap_edges (
            user_id    TEXT NOT NULL,
            id         TEXT NOT NULL,
            seq        BIGINT GENERATED ALWAYS AS IDENTITY,
            kind       TEXT NOT NULL,
            source_id  TEXT NOT NULL,
            target_id  TEXT NOT NULL,
            payload    TEXT NOT NULL,
            expired_at TIMESTAMPTZ,
            PRIMARY KEY (user_id, id)
        );
        CREATE INDEX caap_edges_user_seq ON caap_edges (user_id, seq);
        """,
    ),
    (
        2,
        "labelled source outcomes",
        # The payload is TEXT, not JSONB: JSONB reorders keys, and the agent replays outcomes
        # as they were recorded (the same JSON text SQLite keeps).
        """
        CREATE TABLE caap_reliability_outcomes (
            user_id TEXT NOT NULL,
            id      TEXT NOT NULL,
            seq     BIGINT GENERATED ALWAYS AS IDENTITY,
            payload TEXT NOT NULL,
            PRIMARY KEY (user_id, id)
        );
        CREATE INDEX caap_reliability_outcomes_user_seq
            ON caap_reliability_outcomes (user_id, seq);
        """,
    ),
    (
        3,
        "parsed facets and per-user write generations",
        # Parsed facets are kept so a cold start does not parse every text again; the
        # generation tells an agent in another process that a user's rows changed.
        """
        ALTER TABLE caap_memories ADD COLUMN extraction TEXT;
        CREATE TABLE caap_generations (user_id TEXT PRIMARY KEY, gen BIGINT NOT NULL);
        """,
    ),
    (
        4,
        "conversation segments",
        """
        CREATE TABLE caap_segments (
            user_id   TEXT NOT NULL,
            memory_id TEXT NOT NULL,
            segment   TEXT NOT NULL,
            PRIMARY KEY (user_id, memory_id)
        );
        """,
    ),
)

_INSERT_MEMORY = (
    "INSERT INTO caap_memories (user_id, id, payload, inferred, vector, extraction) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)
_INSERT_MEMORY_V1 = (
    "INSERT INTO caap_memories (user_id, id, payload, inferred, vector) VALUES (%s, %s, %s, %s, %s)"
)
_BUMP = (
    "INSERT INTO caap_generations (user_id, gen) VALUES (%s, 1) "
    "ON CONFLICT (user_id) DO UPDATE SET gen = caap_generations.gen + 1"
)
_UPSERT_SEGMENT = (
    "INSERT INTO caap_segments (user_id, memory_id, segment) VALUES (%s, %s, %s) "
    "ON CONFLICT (user_id, memory_id) DO UPDATE SET segment = EXCLUDED.segment"
)
_UPSERT_EDGE = (
    "INSERT INTO caap_edges (user_id, id, kind, source_id, target_id, payload, expired_at) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (user_id, id) DO UPDATE SET "
    "payload = EXCLUDED.payload, expired_at = EXCLUDED.expired_at"
)


def _import_psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"the PostgreSQL store needs psycopg 3 and psycopg_pool: {_INSTALL}"
        ) from exc
    return psycopg, psycopg_pool


def _redacted(dsn: str, psycopg: Any) -> str:
    # Error messages name the server, never the password.
    try:
        parts = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable dsn>"
    parts.pop("password", None)
    return " ".join(f"{k}={v}" for k, v in sorted(parts.items()))


def _row_to_stored(
    payload: str,
    inferred: str,
    vector: bytes,
    extraction: str | None = None,
    segment: str | None = None,
) -> StoredMemory:
    return StoredMemory(
        Memory.model_validate_json(payload),
        json.loads(inferred),
        np.frombuffer(vector, dtype=np.float32),
        extraction=extraction_from_json(extraction),
        segment=segment,
    )


class PostgresGraphStore(ConflictGraphStore["psycopg.Connection[Any]"]):
    """PostgreSQL-backed store of memories (with value vectors), conflict edges and labelled
    source outcomes.

    Args:
        dsn: A libpq connection string, e.g. ``postgresql://caap@db.internal:5432/caap``. A
            ``search_path`` in its ``options`` selects the schema.
        schema: Keep the tables in this schema (created if missing) instead of the DSN's
            default; a plain identifier.
        min_size: Connections the pool keeps open.
        max_size: Most connections the pool opens.
        connect_timeout: Seconds to wait for the first connection before giving up.

    Raises:
        ImportError: psycopg is not installed (names the pip extra).
        ValueError: ``dsn`` cannot be parsed, or ``schema`` is not a plain identifier.
        ConnectionError: the server cannot be reached within ``connect_timeout``.
        RuntimeError: the database was migrated by a newer caap than this one.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 4,
        connect_timeout: float = 30.0,
    ) -> None:
        psycopg, psycopg_pool = _import_psycopg()
        if not isinstance(dsn, str) or not dsn.strip():
            raise ValueError(f"dsn must be a non-empty libpq connection string, got {dsn!r}")
        try:
            psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as exc:
            raise ValueError(f"dsn is not a valid PostgreSQL connection string: {exc}") from None
        if schema is not None and not _SCHEMA_NAME.match(schema):
            raise ValueError(f"schema must be a plain SQL identifier, got {schema!r}")
        if not 1 <= min_size <= max_size:
            raise ValueError(
                f"min_size and max_size must satisfy 1 <= min_size <= max_size, "
                f"got min_size={min_size!r}, max_size={max_size!r}"
            )
        self.dsn = dsn
        self.schema = schema
        self._psycopg = psycopg
        self._where = _redacted(dsn, psycopg)
        try:
            # One direct attempt first: a refused connection, a wrong password or a missing
            # database is reported at once with libpq's reason, not after the pool's retries.
            psycopg.connect(dsn, connect_timeout=max(1, round(connect_timeout))).close()
        except psycopg.OperationalError as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise ConnectionError(
                f"could not connect to PostgreSQL ({self._where}): {reason}"
            ) from exc
        self._pool: Any = psycopg_pool.ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True},
            configure=self._configure,
            # A connection the server dropped (restart, failover) is replaced on checkout
            # instead of failing the caller's next write.
            check=psycopg_pool.ConnectionPool.check_connection,
            open=False,
            name="caap-graph-store",
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except psycopg_pool.PoolTimeout as exc:
            self._pool.close()
            raise ConnectionError(
                f"could not connect to PostgreSQL ({self._where}) within {connect_timeout:g} s"
            ) from exc
        try:
            self._migrate()
        except BaseException:
            self._pool.close()
            raise
        # Version 3 added parsed facets and generations, version 4 conversation segments
        # (absent when an older migration list is in force).
        self._v3 = MIGRATIONS[-1][0] >= 3
        self._v4 = MIGRATIONS[-1][0] >= 4

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        # Every pooled connection: our schema first, and commits that wait for the WAL flush,
        # whatever the server default, so an acknowledged write is never lost.
        sql = self._psycopg.sql
        if self.schema is not None:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        conn.execute("SET synchronous_commit TO on")

    def _migrate(self) -> None:
        latest = MIGRATIONS[-1][0]
        with self.transaction() as db:
            # One migrator per schema at a time; the lock is released at commit.
            db.execute(
                "SELECT pg_advisory_xact_lock("
                "hashtext('caap:' || COALESCE(%s::text, current_schema())))",
                (self.schema,),
            )
            if self.schema is not None:
                sql = self._psycopg.sql
                db.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
                )
            db.execute(
                "CREATE TABLE IF NOT EXISTS caap_schema_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            applied = {r[0] for r in db.execute("SELECT version FROM caap_schema_migrations")}
            newer = sorted(v for v in applied if v > latest)
            if newer:
                raise RuntimeError(
                    f"the PostgreSQL store ({self._where}) is at schema version {newer[-1]}, "
                    f"newer than this caap knows ({latest}); upgrade caap"
                )
            for version, name, statements in MIGRATIONS:
                if version in applied:
                    continue
                db.execute(statements)
                db.execute(
                    "INSERT INTO caap_schema_migrations (version, name) VALUES (%s, %s)",
                    (version, name),
                )

    def schema_version(self) -> int:
        """The highest migration applied to this database."""
        with self._pool.connection() as conn:
            row = conn.execute("SELECT MAX(version) FROM caap_schema_migrations").fetchone()
        return int(row[0])

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """One atomic unit of work on one pooled connection: committed on success (the commit
        returns once durable), rolled back on any error."""
        with self._pool.connection() as conn, conn.transaction():
            yield conn

    # -- writes ----------------------------------------------------------------------------
    def write(
        self,
        memories: Iterable[StoredMemory] = (),
        edges: Iterable[ConflictEdge] = (),
        *,
        db: psycopg.Connection[Any] | None = None,
    ) -> None:
        """Insert memories and upsert edges (closing an edge rewrites its row)."""
        if db is None:
            with self.transaction() as tx:
                self.write(memories, edges, db=tx)
            return
        memories = list(memories)
        memory_rows = [
            (
                sm.memory.user_id,
                sm.memory.id,
                sm.memory.model_dump_json(),
                json.dumps(sm.inferred),
                np.asarray(sm.vector, dtype=np.float32).tobytes(),
                *((extraction_to_json(sm.extraction),) if self._v3 else ()),
            )
            for sm in memories
        ]
        segment_rows = [
            (sm.memory.user_id, sm.memory.id, sm.segment)
            for sm in memories
            if sm.segment is not None and self._v4
        ]
        edge_rows = [
            (
                e.user_id,
                e.id,
                e.kind.value,
                e.source_id,
                e.target_id,
                e.model_dump_json(),
                e.expired_at,
            )
            for e in edges
        ]
        # executemany pipelines the rows: one round trip per batch, not per row. Memories go
        # in list order, so the identity column keeps write order.
        with db.cursor() as cur:
            if memory_rows:
                cur.executemany(_INSERT_MEMORY if self._v3 else _INSERT_MEMORY_V1, memory_rows)
            if segment_rows:
                cur.executemany(_UPSERT_SEGMENT, segment_rows)
            if edge_rows:
                cur.executemany(_UPSERT_EDGE, edge_rows)
            users = sorted({r[0] for r in memory_rows} | {r[0] for r in edge_rows})
            if users and self._v3:
                cur.executemany(_BUMP, [(u,) for u in users])

    def update_memories(self, memories: Iterable[Memory], *, db: psycopg.Connection[Any]) -> None:
        """Rewrite stored memories' inferred facets (an aspect merge relabels them)."""
        rows = [(m.model_dump_json(), m.user_id, m.id) for m in memories]
        if rows:
            with db.cursor() as cur:
                cur.executemany(
                    "UPDATE caap_memories SET payload = %s WHERE user_id = %s AND id = %s", rows
                )
                if self._v3:
                    cur.executemany(_BUMP, [(u,) for u in sorted({r[1] for r in rows})])

    def delete_memory(
        self, user_id: str, memory_id: str, *, db: psycopg.Connection[Any] | None = None
    ) -> bool:
        """Remove a memory row (its edges stay, closed by the caller)."""
        if db is None:
            with self.transaction() as tx:
                return self.delete_memory(user_id, memory_id, db=tx)
        cur = db.execute(
            "DELETE FROM caap_memories WHERE user_id = %s AND id = %s", (user_id, memory_id)
        )
        if self._v4:
            db.execute(
                "DELETE FROM caap_segments WHERE user_id = %s AND memory_id = %s",
                (user_id, memory_id),
            )
        if self._v3:
            db.execute(_BUMP, (user_id,))
        return bool(cur.rowcount > 0)

    @property
    def _columns(self) -> str:
        """The row columns ``_row_to_stored`` reads and the table(s) they come from (``m`` is
        the memories table)."""
        extraction = "m.extraction" if self._v3 else "NULL"
        if not self._v4:
            return f"m.payload, m.inferred, m.vector, {extraction}, NULL FROM caap_memories m"
        return (
            f"m.payload, m.inferred, m.vector, {extraction}, s.segment FROM caap_memories m "
            "LEFT JOIN caap_segments s ON s.user_id = m.user_id AND s.memory_id = m.id"
        )

    def generation(self, user_id: str) -> int | None:
        """A counter bumped by every write that touches the user (see the base class)."""
        if not self._v3:
            return None
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT gen FROM caap_generations WHERE user_id = %s", (user_id,)
            ).fetchone()
        return int(row[0]) if row else 0

    def lock_user(self, user_id: str, *, db: psycopg.Connection[Any]) -> None:
        """Hold an advisory lock on the user until ``db``'s transaction ends, so agents in
        other processes write this user's graph one at a time."""
        db.execute("SELECT pg_advisory_xact_lock(hashtext('caap-user:' || %s))", (user_id,))

    # -- reads -----------------------------------------------------------------------------
    def memories(self, user_id: str) -> list[StoredMemory]:
        """Every stored memory of one user, in write order."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                f"SELECT {self._columns} WHERE m.user_id = %s ORDER BY m.seq",
                (user_id,),
            ).fetchall()
        return [_row_to_stored(*r) for r in rows]

    def get(self, user_id: str, memory_id: str) -> StoredMemory | None:
        """One stored memory, or ``None``."""
        with self._pool.connection() as conn:
            row = conn.execute(
                f"SELECT {self._columns} WHERE m.user_id = %s AND m.id = %s",
                (user_id, memory_id),
            ).fetchone()
        return None if row is None else _row_to_stored(*row)

    def edges(self, user_id: str, *, include_closed: bool = True) -> list[ConflictEdge]:
        """Stored edges of one user."""
        sql = "SELECT payload FROM caap_edges WHERE user_id = %s"
        if not include_closed:
            sql += " AND expired_at IS NULL"
        # First-write order (an upsert keeps its row's seq), as the graph held them.
        sql += " ORDER BY seq"
        with self._pool.connection() as conn:
            rows = conn.execute(sql, (user_id,)).fetchall()
        return [ConflictEdge.model_validate_json(r[0]) for r in rows]

    def add_outcome(
        self,
        user_id: str,
        outcome_id: str,
        payload: Mapping[str, Any],
        *,
        db: psycopg.Connection[Any] | None = None,
    ) -> bool:
        """Store one labelled source outcome (idempotent by id); ``False`` if already there."""
        if db is None:
            with self.transaction() as tx:
                return self.add_outcome(user_id, outcome_id, payload, db=tx)
        # ON CONFLICT DO NOTHING: a second add of the id (even a concurrent one, which waits for
        # the first to commit) leaves the first payload and its place in the order.
        cur = db.execute(
            "INSERT INTO caap_reliability_outcomes (user_id, id, payload) VALUES (%s, %s, %s) "
            "ON CONFLICT (user_id, id) DO NOTHING",
            (user_id, outcome_id, json.dumps(dict(payload))),
        )
        return bool(cur.rowcount > 0)

    def outcomes(self, user_id: str) -> list[dict[str, Any]]:
        """Every labelled source outcome of one user, in the order they were recorded."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT payload FROM caap_reliability_outcomes WHERE user_id = %s ORDER BY seq",
                (user_id,),
            ).fetchall()
        return [json.loads(r[0]) for r in rows]

    def users(self) -> list[str]:
        """Every user id with at least one memory."""
        with self._pool.connection() as conn:
            rows = conn.execute("SELECT DISTINCT user_id FROM caap_memories").fetchall()
        return sorted(r[0] for r in rows)

    def close(self) -> None:
        """Close every pooled connection (safe to call twice)."""
        self._pool.close()

    def __repr__(self) -> str:
        schema = f", schema={self.schema!r}" if self.schema else ""
        return f"PostgresGraphStore({self._where!r}{schema})"
