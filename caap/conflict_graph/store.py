"""Persistence of the conflict graph: the store interface and its SQLite implementation.

The store is the source of truth for memories, edges and labelled source outcomes (what a
user confirmed about which source was right); the vector backend is an index that can be
rebuilt from it. Edges are closed (``expired_at``), never deleted.

:class:`ConflictGraphStore` is the interface; :class:`GraphStore` keeps everything in one SQLite
file (WAL, one transaction per write) and :class:`~caap.conflict_graph.postgres.PostgresGraphStore`
in a PostgreSQL database. :func:`open_store` picks one from a path or a DSN.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import numpy.typing as npt

from caap.conflict_graph.extractor import Extraction
from caap.conflict_graph.relations import Facets
from caap.models import ConflictEdge, Memory

if TYPE_CHECKING:
    from caap.conflict_graph.graph import ConflictGraph, WriteResult

__all__ = [
    "ConflictGraphStore",
    "GraphStore",
    "StoreCorruptError",
    "StoredMemory",
    "open_store",
]


class StoreCorruptError(ValueError):
    """The store cannot be read: not a caap store, damaged, or missing its tables.

    The message names the file and says how to repair it (``caap doctor``).
    """


def extraction_to_json(extraction: Extraction | None) -> str | None:
    """The parsed facets of a memory as JSON (persisted so a cold start does not re-parse)."""
    if extraction is None:
        return None
    data = dataclasses.asdict(extraction)
    for key, value in data.items():
        if isinstance(value, datetime):
            data[key] = value.isoformat()
        elif isinstance(value, tuple):
            data[key] = list(value)
    return json.dumps(data, ensure_ascii=False)


def extraction_from_json(text: str | None) -> Extraction | None:
    """Read :func:`extraction_to_json`'s output back (a relation layer's :class:`Facets` with
    their confidences, or a plain :class:`Extraction`); ``None`` when absent or from another
    version of either (the text is then parsed again)."""
    if not text:
        return None
    try:
        data = json.loads(text)
        kwargs: dict[str, Any] = {}
        cls = Facets if "source_confidence" in data else Extraction
        for f in dataclasses.fields(cls):
            if f.name not in data:
                return None
            value = data[f.name]
            if f.name == "observed_at" and value is not None:
                value = datetime.fromisoformat(value)
            elif isinstance(value, list):
                value = tuple(value)
            kwargs[f.name] = value
        if set(data) - set(kwargs):
            return None
        return cls(**kwargs)
    except (ValueError, TypeError, KeyError):
        return None


Vector = npt.NDArray[np.float32]
TxT = TypeVar("TxT")
_DSN_SCHEMES = ("postgresql://", "postgres://")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memories (
    user_id TEXT NOT NULL,
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    payload TEXT NOT NULL,
    inferred TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (user_id, id)
);
CREATE INDEX IF NOT EXISTS memories_user_seq ON memories (user_id, seq);
CREATE TABLE IF NOT EXISTS edges (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    source_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    payload TEXT NOT NULL,
    expired_at TEXT
);
CREATE INDEX IF NOT EXISTS edges_user ON edges (user_id, expired_at);
CREATE TABLE IF NOT EXISTS segments (
    user_id TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    segment TEXT NOT NULL,
    PRIMARY KEY (user_id, memory_id)
);
CREATE TABLE IF NOT EXISTS reliability_outcomes (
    user_id TEXT NOT NULL,
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (user_id, id)
);
CREATE TABLE IF NOT EXISTS generations (user_id TEXT PRIMARY KEY, gen INTEGER NOT NULL);
"""
#: Tables every readable store has (a version-1 file lacks the later ones; they are added).
_TABLES = ("meta", "memories", "edges")
#: 2 added ``reliability_outcomes`` (labelled source outcomes); a version-1 file gains the
#: empty table on open and stays readable by everything that read it before. 3 added
#: ``segments`` (the conversation segment of each conversational memory), the same way.
SCHEMA_VERSION = "3"


class StoredMemory:
    """A memory row: the memory, which facets were inferred, its value vector, the facets
    parsed from its text (``None`` for rows written before they were kept), and the
    conversation segment it was placed in (``None`` outside topic formation)."""

    __slots__ = ("extraction", "inferred", "memory", "segment", "vector")

    def __init__(
        self,
        memory: Memory,
        inferred: list[str],
        vector: Vector,
        extraction: Extraction | None = None,
        segment: str | None = None,
    ) -> None:
        self.memory = memory
        self.inferred = inferred
        self.vector = vector
        self.extraction = extraction
        self.segment = segment


class ConflictGraphStore(ABC, Generic[TxT]):
    """Where memories (with their value vectors), conflict edges and labelled source outcomes
    persist, per user.

    Every read and write names the user; no method returns another user's rows. A write that
    returns has been committed (it survives the process being killed). ``TxT`` is the handle a
    :meth:`transaction` yields; pass it as ``db=`` to group several writes atomically.
    """

    @abstractmethod
    def transaction(self) -> AbstractContextManager[TxT]:
        """One atomic unit of work: committed on success, rolled back on any error."""

    @abstractmethod
    def write(
        self,
        memories: Iterable[StoredMemory] = (),
        edges: Iterable[ConflictEdge] = (),
        *,
        db: TxT | None = None,
    ) -> None:
        """Insert memories and upsert edges (closing an edge rewrites its row).

        Without ``db`` the write is its own transaction.
        """

    @abstractmethod
    def update_memories(self, memories: Iterable[Memory], *, db: TxT) -> None:
        """Rewrite stored memories' inferred facets (an aspect merge relabels them)."""

    def write_results(
        self, graph: ConflictGraph, results: Iterable[WriteResult], *, db: TxT
    ) -> None:
        """Persist what one graph write produced: the new memories (vector, parsed facets,
        segment), their new and closed edges, and the memories an aspect merge relabelled.

        Derived from :meth:`write` and :meth:`update_memories`, inside the caller's ``db``.
        """
        done = list(results)
        self.write(
            [
                StoredMemory(
                    r.memory,
                    r.inferred,
                    r.vector,
                    extraction=graph.extraction(r.memory.id),
                    segment=r.segment,
                )
                for r in done
            ],
            [e for r in done for e in (*r.new_edges, *r.closed_edges)],
            db=db,
        )
        new_ids = {r.memory.id for r in done}
        relabeled = {m.id: m for r in done for m in r.relabeled if m.id not in new_ids}
        self.update_memories(list(relabeled.values()), db=db)

    @abstractmethod
    def delete_memory(self, user_id: str, memory_id: str, *, db: TxT | None = None) -> bool:
        """Remove a memory row (its edges stay, closed by the caller); ``False`` if absent."""

    @abstractmethod
    def memories(self, user_id: str) -> list[StoredMemory]:
        """Every stored memory of one user, in write order."""

    @abstractmethod
    def get(self, user_id: str, memory_id: str) -> StoredMemory | None:
        """One stored memory, or ``None``."""

    @abstractmethod
    def edges(self, user_id: str, *, include_closed: bool = True) -> list[ConflictEdge]:
        """Stored edges of one user."""

    @abstractmethod
    def add_outcome(
        self,
        user_id: str,
        outcome_id: str,
        payload: Mapping[str, Any],
        *,
        db: TxT | None = None,
    ) -> bool:
        """Store one labelled source outcome (what the user confirmed about which source was
        right), keyed by ``(user_id, outcome_id)``.

        Idempotent: adding an id the user already has changes nothing and returns ``False``;
        a new one returns ``True``. ``payload`` must be JSON-serialisable; its key order is
        kept. Without ``db`` the add is its own transaction.
        """

    @abstractmethod
    def outcomes(self, user_id: str) -> list[dict[str, Any]]:
        """Every labelled source outcome of one user, in the order they were first added."""

    @abstractmethod
    def users(self) -> list[str]:
        """Every user id with at least one memory, sorted."""

    @abstractmethod
    def close(self) -> None:
        """Release connections and files (safe to call twice)."""

    def generation(self, user_id: str) -> int | None:
        """A counter that changes whenever one user's memories or edges change (in any
        process), or ``None`` when the store does not keep one. The agent reloads its cached
        graph when it moved."""
        return None

    def lock_user(self, user_id: str, *, db: TxT) -> None:
        """Serialise writers of one user across processes for the rest of transaction ``db``
        (SQLite: its write transaction already does; PostgreSQL: an advisory lock)."""

    def __enter__(self) -> ConflictGraphStore[TxT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(
    target: str | Path | ConflictGraphStore[Any], *, read_only: bool = False
) -> ConflictGraphStore[Any]:
    """The store for ``target``: a ``postgresql://`` (or ``postgres://``) DSN opens
    :class:`~caap.conflict_graph.postgres.PostgresGraphStore`; any other string or path is a
    SQLite file for :class:`GraphStore`; a store instance is returned as is.

    Raises:
        ImportError: a DSN was given but ``psycopg`` is not installed (names the pip extra).
        TypeError: ``target`` is none of the above.
    """
    if isinstance(target, ConflictGraphStore):
        return target
    if isinstance(target, str) and target.strip().lower().startswith(_DSN_SCHEMES):
        from caap.conflict_graph.postgres import PostgresGraphStore

        return PostgresGraphStore(target.strip())
    if isinstance(target, (str, Path)):
        if isinstance(target, str) and not target.strip():
            raise ValueError("store must be a SQLite path or a postgresql:// DSN, got ''")
        return GraphStore(target, read_only=read_only)
    raise TypeError(
        "store must be a SQLite path, a postgresql:// DSN or a ConflictGraphStore, "
        f"got {type(target).__name__}"
    )


class GraphStore(ConflictGraphStore[sqlite3.Connection]):
    """SQLite-backed store of memories (with value vectors), conflict edges and labelled
    source outcomes.

    Several processes may use one file: writes are serialised by SQLite's write lock (a
    writer waits up to ``busy_timeout`` seconds for another), and :meth:`generation` tells an
    agent when another process changed a user's rows.

    Args:
        path: The SQLite file. Its directory is created if missing (unless ``read_only``).
        read_only: Open for reading only (the file must exist; nothing is created or
            migrated), e.g. on a read-only filesystem.
        busy_timeout: Seconds a write waits for another process's write to finish.

    Raises:
        StoreCorruptError: The file is not a readable caap store.
        FileNotFoundError: ``read_only`` and the file does not exist.
    """

    def __init__(
        self, path: str | Path, *, read_only: bool = False, busy_timeout: float = 30.0
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        if self.path.exists() and self.path.is_dir():
            raise ValueError(f"path must be a file, but {str(self.path)!r} is a directory")
        self._lock = threading.RLock()
        if read_only:
            if not self.path.exists():
                raise FileNotFoundError(f"graph store {str(self.path)!r} does not exist")
            self._db = self._connect_read_only(busy_timeout)
            self._check_readable()
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(
                str(self.path), check_same_thread=False, isolation_level=None, timeout=busy_timeout
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            # FULL: an acknowledged write survives a kill -9 and a power cut.
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._check_readable(allow_empty=True)
            self._create()
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(Exception):
                self._db.close()
            raise self._corrupt(exc) from exc

    def _corrupt(self, exc: BaseException) -> StoreCorruptError:
        return StoreCorruptError(
            f"graph store {str(self.path)!r} cannot be read ({exc}); run "
            f"`caap doctor --data {str(self.path.parent)!r} --repair` to move it aside and "
            "rebuild it from the vector index"
        )

    def _connect_read_only(self, busy_timeout: float) -> sqlite3.Connection:
        uri = self.path.resolve().as_uri()
        try:
            db = sqlite3.connect(
                f"{uri}?mode=ro", uri=True, check_same_thread=False, isolation_level=None,
                timeout=busy_timeout,
            )  # fmt: skip
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.OperationalError:
            # A read-only directory: SQLite cannot create the WAL index; read the file as is
            # (a cleanly closed store has no pending WAL).
            return sqlite3.connect(
                f"{uri}?mode=ro&immutable=1", uri=True, check_same_thread=False,
                isolation_level=None,
            )  # fmt: skip
        except sqlite3.DatabaseError as exc:
            raise self._corrupt(exc) from exc

    def _check_readable(self, *, allow_empty: bool = False) -> None:
        """Fail with :class:`StoreCorruptError` unless the file is a caap store (or empty)."""
        try:
            names = {
                r[0]
                for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if not names and allow_empty:
                return
            missing = [t for t in _TABLES if t not in names]
            if missing:
                raise StoreCorruptError(
                    f"graph store {str(self.path)!r} is not a caap store (no table "
                    f"{missing[0]!r}); run `caap doctor --data {str(self.path.parent)!r}`"
                )
            self._db.execute("SELECT COUNT(*) FROM memories").fetchone()
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(Exception):
                self._db.close()
            raise self._corrupt(exc) from exc

    def _create(self) -> None:
        with self.transaction() as db:
            for stmt in _SCHEMA.strip().split(";"):
                if stmt.strip():
                    db.execute(stmt)
            db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                (SCHEMA_VERSION,),
            )
            found = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
            if int(found) > int(SCHEMA_VERSION):
                raise ValueError(
                    f"{str(self.path)!r} has schema version {found}, newer than this caap "
                    f"reads ({SCHEMA_VERSION}); upgrade caap"
                )
            if found != SCHEMA_VERSION:
                # Older file: the CREATE ... IF NOT EXISTS above added what it lacked.
                db.execute(
                    "UPDATE meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION,)
                )
            columns = {r[1] for r in db.execute("PRAGMA table_info(memories)")}
            if "extraction" not in columns:
                # Parsed facets, kept so a cold start does not parse every text again; older
                # readers ignore the column.
                db.execute("ALTER TABLE memories ADD COLUMN extraction TEXT")

    def generation(self, user_id: str) -> int | None:
        """A counter bumped by every write that touches the user (see the base class)."""
        with self._lock:
            try:
                row = self._db.execute(
                    "SELECT gen FROM generations WHERE user_id = ?", (user_id,)
                ).fetchone()
            except sqlite3.OperationalError:  # a read-only file from before the table
                return None
        return int(row[0]) if row else 0

    @staticmethod
    def _bump(db: sqlite3.Connection, users: Iterable[str]) -> None:
        for user in set(users):
            db.execute(
                "INSERT INTO generations (user_id, gen) VALUES (?, 1) "
                "ON CONFLICT(user_id) DO UPDATE SET gen = gen + 1",
                (user,),
            )

    @property
    def schema_version(self) -> str:
        """The schema version of the open file."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return str(row[0])

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic unit of work: committed on success, rolled back on any error."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # -- writes ----------------------------------------------------------------------------
    def write(
        self,
        memories: Iterable[StoredMemory] = (),
        edges: Iterable[ConflictEdge] = (),
        *,
        db: sqlite3.Connection | None = None,
    ) -> None:
        """Insert memories and upsert edges (closing an edge rewrites its row)."""
        if db is None:
            with self.transaction() as tx:
                self.write(memories, edges, db=tx)
            return
        touched: list[str] = []
        for sm in memories:
            m = sm.memory
            touched.append(m.user_id)
            seq = db.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM memories WHERE user_id = ?", (m.user_id,)
            ).fetchone()[0]
            db.execute(
                "INSERT INTO memories (user_id, id, seq, payload, inferred, vector, extraction) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    m.user_id,
                    m.id,
                    seq,
                    m.model_dump_json(),
                    json.dumps(sm.inferred),
                    np.asarray(sm.vector, dtype=np.float32).tobytes(),
                    extraction_to_json(sm.extraction),
                ),
            )
            if sm.segment is not None:
                db.execute(
                    "INSERT OR REPLACE INTO segments (user_id, memory_id, segment) "
                    "VALUES (?, ?, ?)",
                    (m.user_id, m.id, sm.segment),
                )
        for e in edges:
            touched.append(e.user_id)
            db.execute(
                "INSERT INTO edges (id, user_id, kind, source_id, target_id, payload, expired_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                "payload = excluded.payload, expired_at = excluded.expired_at",
                (
                    e.id,
                    e.user_id,
                    e.kind.value,
                    e.source_id,
                    e.target_id,
                    e.model_dump_json(),
                    e.expired_at.isoformat() if e.expired_at else None,
                ),
            )
        self._bump(db, touched)

    def update_memories(self, memories: Iterable[Memory], *, db: sqlite3.Connection) -> None:
        """Rewrite stored memories' inferred facets (an aspect merge relabels them)."""
        touched = []
        for m in memories:
            touched.append(m.user_id)
            db.execute(
                "UPDATE memories SET payload = ? WHERE user_id = ? AND id = ?",
                (m.model_dump_json(), m.user_id, m.id),
            )
        self._bump(db, touched)

    def delete_memory(
        self, user_id: str, memory_id: str, *, db: sqlite3.Connection | None = None
    ) -> bool:
        """Remove a memory row (its edges stay, closed by the caller)."""
        if db is None:
            with self.transaction() as tx:
                return self.delete_memory(user_id, memory_id, db=tx)
        cur = db.execute("DELETE FROM memories WHERE user_id = ? AND id = ?", (user_id, memory_id))
        db.execute("DELETE FROM segments WHERE user_id = ? AND memory_id = ?", (user_id, memory_id))
        self._bump(db, [user_id])
        return cur.rowcount > 0

    # -- reads -----------------------------------------------------------------------------
    def memories(self, user_id: str) -> list[StoredMemory]:
        """Every stored memory of one user, in write order."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {self._columns} WHERE m.user_id = ? ORDER BY m.seq",
                (user_id,),
            ).fetchall()
        return [_stored(*row) for row in rows]

    @property
    def _extraction_col(self) -> str:
        # A read-only file from before the column was added has none.
        if not hasattr(self, "_has_extraction"):
            cols = {r[1] for r in self._db.execute("PRAGMA table_info(memories)")}
            self._has_extraction = "extraction" in cols
        return "extraction" if self._has_extraction else "NULL"

    @property
    def _columns(self) -> str:
        """The row columns ``_stored`` reads and the table(s) they come from (``m`` is the
        memories table); a read-only file from before the segments table has no segments."""
        if not hasattr(self, "_has_segments"):
            self._has_segments = (
                self._db.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'segments'"
                ).fetchone()
                is not None
            )
        extraction = "m.extraction" if self._extraction_col == "extraction" else "NULL"
        if not self._has_segments:
            return f"m.payload, m.inferred, m.vector, {extraction}, NULL FROM memories m"
        return (
            f"m.payload, m.inferred, m.vector, {extraction}, s.segment FROM memories m "
            "LEFT JOIN segments s ON s.user_id = m.user_id AND s.memory_id = m.id"
        )

    def get(self, user_id: str, memory_id: str) -> StoredMemory | None:
        """One stored memory, or ``None``."""
        with self._lock:
            row = self._db.execute(
                f"SELECT {self._columns} WHERE m.user_id = ? AND m.id = ?",
                (user_id, memory_id),
            ).fetchone()
        return None if row is None else _stored(*row)

    def edges(self, user_id: str, *, include_closed: bool = True) -> list[ConflictEdge]:
        """Stored edges of one user."""
        sql = "SELECT payload FROM edges WHERE user_id = ?"
        if not include_closed:
            sql += " AND expired_at IS NULL"
        # First-write order (an upsert keeps its rowid), as the graph held them; without it the
        # (user_id, expired_at) index would put open edges first.
        sql += " ORDER BY rowid"
        with self._lock:
            rows = self._db.execute(sql, (user_id,)).fetchall()
        return [ConflictEdge.model_validate_json(r[0]) for r in rows]

    def add_outcome(
        self,
        user_id: str,
        outcome_id: str,
        payload: Mapping[str, Any],
        *,
        db: sqlite3.Connection | None = None,
    ) -> bool:
        """Store one labelled source outcome (idempotent by id); ``False`` if already there."""
        if db is None:
            with self.transaction() as tx:
                return self.add_outcome(user_id, outcome_id, payload, db=tx)
        seq = db.execute(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM reliability_outcomes WHERE user_id = ?",
            (user_id,),
        ).fetchone()[0]
        # Key order is kept: replaying outcomes in their recorded order rebuilds the same model.
        cur = db.execute(
            "INSERT OR IGNORE INTO reliability_outcomes (user_id, id, seq, payload) "
            "VALUES (?, ?, ?, ?)",
            (user_id, outcome_id, seq, json.dumps(dict(payload))),
        )
        return cur.rowcount > 0

    def outcomes(self, user_id: str) -> list[dict[str, Any]]:
        """Every labelled source outcome of one user, in the order they were recorded."""
        with self._lock:
            rows = self._db.execute(
                "SELECT payload FROM reliability_outcomes WHERE user_id = ? ORDER BY seq",
                (user_id,),
            ).fetchall()
        return [json.loads(r[0]) for r in rows]

    def users(self) -> list[str]:
        """Every user id with at least one memory."""
        with self._lock:
            rows = self._db.execute("SELECT DISTINCT user_id FROM memories").fetchall()
        return sorted(r[0] for r in rows)

    def close(self) -> None:
        """Close the database (safe to call twice)."""
        with self._lock, contextlib.suppress(sqlite3.ProgrammingError):
            self._db.close()


def _stored(
    payload: str, inferred: str, vector: bytes, extraction: str | None, segment: str | None
) -> StoredMemory:
    return StoredMemory(
        Memory.model_validate_json(payload),
        json.loads(inferred),
        np.frombuffer(vector, dtype=np.float32),
        extraction=extraction_from_json(extraction),
        segment=segment,
    )
