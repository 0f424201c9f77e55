"""``caap doctor``: check a data directory, and rebuild what can be rebuilt.

The graph store (``graph.sqlite``) is the source of truth; the builtin vector index
(``vectors/``) is a search index over the same memories. Each can be rebuilt from the other:

* a damaged or lost store is moved aside and rebuilt from the index: memories (text, facets,
  metadata, provenance) come back, and conflict edges are derived again. What cannot come back:
  the history of closed edges, and confirmed source outcomes not carried in a memory's metadata.
* a damaged or lost index is moved aside and rebuilt from the store (everything comes back).
* memories only the index holds are reported; with ``repair`` those whose id the store still
  names in a (closed) edge were forgotten and are dropped from the index, the rest are restored
  to the store.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DoctorReport", "diagnose"]


@dataclass
class DoctorReport:
    """What ``caap doctor`` found and did."""

    ok: bool = True
    """Nothing is wrong (after repair, when repairing)."""
    findings: list[str] = field(default_factory=list)
    """Problems found, one line each."""
    actions: list[str] = field(default_factory=list)
    """What was repaired."""
    unrecoverable: list[str] = field(default_factory=list)
    """What could not be rebuilt."""

    def lines(self) -> list[str]:
        """The report as printable lines."""
        out = [f"problem: {f}" for f in self.findings]
        out += [f"repaired: {a}" for a in self.actions]
        out += [f"lost: {u}" for u in self.unrecoverable]
        out.append("status: ok" if self.ok else "status: problems remain")
        return out


def _store_problem(path: Path) -> str | None:
    """Why the SQLite store at ``path`` is unreadable, or ``None``."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return str(exc)
    try:
        row = db.execute("PRAGMA integrity_check").fetchone()
        if row is None or row[0] != "ok":
            return f"integrity check failed: {row[0] if row else 'no answer'}"
        names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for table in ("meta", "memories", "edges"):
            if table not in names:
                return f"no table {table!r}"
        db.execute("SELECT payload, inferred, vector FROM memories LIMIT 1").fetchall()
    except sqlite3.Error as exc:
        return str(exc)
    finally:
        db.close()
    return None


def _move_aside(path: Path, stamp: str) -> Path:
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    shutil.move(str(path), str(target))
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            shutil.move(str(side), str(target) + suffix)
    return target


def _index_users(backend: Any) -> list[str]:
    res = backend._col.get(include=["metadatas"])
    users = {str(m["user_id"]) for m in res.get("metadatas") or [] if m and "user_id" in m}
    return sorted(users)


def _write_memories(store: Any, embedder: Any, user: str, memories: list[Any]) -> int:
    """Link ``memories`` into the user's stored graph and write them (ids kept)."""
    from caap.conflict_graph.graph import ConflictGraph

    graph = ConflictGraph(user, embedder)
    for sm in store.memories(user):
        graph.load(
            sm.memory,
            sm.vector,
            inferred=sm.inferred,
            extraction=sm.extraction,
            segment=sm.segment,
        )
    graph.load_edges(store.edges(user))
    results = graph.add_many(memories)
    with store.transaction() as db:
        store.write_results(graph, results, db=db)
    return len(results)


def diagnose(data: str | Path, *, repair: bool = False, embedder: Any = None) -> DoctorReport:
    """Check the data directory ``data`` (graph store + builtin vector index).

    Args:
        data: The agent's data directory.
        repair: Rebuild what can be rebuilt (damaged files are moved aside, never deleted).
        embedder: Sentence embedder (default: the packaged one).

    Returns:
        The report; ``ok`` is False when a problem remains.
    """
    from caap._embeddings import get_embedder
    from caap.adapters.builtin import BuiltinBackend
    from caap.conflict_graph.store import GraphStore

    root = Path(data)
    rep = DoctorReport()
    if not root.is_dir():
        rep.ok = False
        rep.findings.append(f"data directory {str(root)!r} does not exist")
        return rep
    stamp = time.strftime("%Y%m%dT%H%M%S")
    embedder = embedder or get_embedder()
    store_path = root / "graph.sqlite"
    store_bad = _store_problem(store_path) if store_path.exists() else "missing"

    backend: Any = None
    index_bad: str | None = None
    try:
        backend = BuiltinBackend(root, embedder=embedder)
        index_users = _index_users(backend)
    except Exception as exc:  # chromadb raises many kinds on a damaged index
        index_bad = f"{type(exc).__name__}: {exc}"
        rep.findings.append(f"vector index {str(root / 'vectors')!r} cannot be read: {index_bad}")
        index_users = []
    if store_bad == "missing" and not index_users and not index_bad:
        store_bad = None  # nothing stored yet
    if store_bad:
        rep.findings.append(f"graph store {str(store_path)!r}: {store_bad}")

    if store_bad and index_bad:
        rep.ok = False
        rep.unrecoverable.append("both the store and the index are unreadable; nothing to rebuild")
        return rep
    if not repair and (store_bad or index_bad):
        rep.ok = False
    if repair and store_bad:
        if store_path.exists():
            moved = _move_aside(store_path, stamp)
            rep.actions.append(f"moved the damaged store to {str(moved)!r}")
        store = GraphStore(store_path)
        n = sum(_write_memories(store, embedder, u, backend.list(u)) for u in index_users)
        store.close()
        rep.actions.append(
            f"rebuilt the graph store from the index: {n} memories of {len(index_users)} users, "
            "conflict edges derived again"
        )
        rep.unrecoverable.append(
            "closed-edge history, and confirmed source outcomes not kept in memory metadata"
        )
        store_bad = None
    if repair and index_bad:
        vectors = root / "vectors"
        if vectors.exists():
            moved = _move_aside(vectors, stamp)
            rep.actions.append(f"moved the damaged index to {str(moved)!r}")
        backend = BuiltinBackend(root, embedder=embedder)
        index_bad = None
    if store_bad or index_bad:
        return rep

    store = GraphStore(store_path)
    try:
        users = sorted(set(store.users()) | set(_index_users(backend)))
        for user in users:
            stored = store.memories(user)
            known = {sm.memory.id for sm in stored}
            indexed = {m.id: m for m in backend.list(user)}
            missing = [sm for sm in stored if sm.memory.id not in indexed]
            short = [sm.memory for sm in missing]
            extra = [m for i, m in indexed.items() if i not in known]
            if short:
                rep.findings.append(f"user {user!r}: {len(short)} stored memories not in the index")
                if repair:
                    # The stored vectors are the ones the agent indexes (one per memory).
                    backend.add_many(short, embeddings=[sm.vector for sm in missing])
                    rep.actions.append(f"user {user!r}: indexed {len(short)} memories")
                else:
                    rep.ok = False
            if extra:
                rep.findings.append(
                    f"user {user!r}: {len(extra)} memories in the index but not in the store"
                )
                if not repair:
                    rep.ok = False
                    continue
                # ``forget`` closes a memory's edges and keeps them; a memory whose row was
                # lost still has active ones. Only the first kind is dropped from the index.
                edges = store.edges(user)
                named = {i for e in edges for i in (e.source_id, e.target_id)}
                live = {i for e in edges if e.active for i in (e.source_id, e.target_id)}
                forgotten = [m for m in extra if m.id in named and m.id not in live]
                gone = {m.id for m in forgotten}
                lost = [m for m in extra if m.id not in gone]
                for m in forgotten:
                    backend.delete(m.id, user)
                if forgotten:
                    rep.actions.append(
                        f"user {user!r}: dropped {len(forgotten)} forgotten memories from the index"
                    )
                if lost:
                    _write_memories(store, embedder, user, lost)
                    rep.actions.append(
                        f"user {user!r}: restored {len(lost)} memories to the store from the index"
                    )
                    rep.unrecoverable.append(
                        f"user {user!r}: closed-edge history of the restored memories"
                    )
    finally:
        store.close()
        backend.close()
    return rep
