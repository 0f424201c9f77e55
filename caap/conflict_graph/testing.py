"""Conformance tests every :class:`~caap.conflict_graph.ConflictGraphStore` must pass.

Subclass :class:`StoreConformance` and provide a ``make_store`` fixture: a zero-argument
callable that opens the store under test on the same place every time it is called (a path or
a database), so the suite can reopen it::

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def make_store(self, tmp_path):
            return lambda: MyStore(tmp_path / "graph")

The suite closes every store it opens. It needs pytest (a ``dev`` dependency).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from caap.conflict_graph.store import ConflictGraphStore, StoredMemory
from caap.models import ConflictEdge, EdgeKind, Memory

__all__ = ["StoreConformance", "make_edge", "make_outcome", "make_stored"]

StoreFactory = Callable[[], ConflictGraphStore[Any]]


def make_stored(user: str, text: str, *, seed: int, memory_id: str | None = None) -> StoredMemory:
    """A stored memory with every facet set and a random (seeded) 384-d vector."""
    m = Memory(
        user_id=user,
        text=text,
        source="a friend",
        context="on weekends",
        aspect="drinking",
        value=f"value {seed}",
        observed_at=datetime(2025, 3, 1 + seed % 27, tzinfo=timezone.utc),
        metadata={"n": seed, "tags": ["ü", "日本"]},
        provenance={"session": str(seed)},
    )
    if memory_id:
        m = m.model_copy(update={"id": memory_id})
    vector = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
    return StoredMemory(m, ["aspect", "value"], vector)


def make_outcome(seed: int, outcome_id: str | None = None) -> dict[str, Any]:
    """A labelled source outcome as the agent records it (keys deliberately not sorted)."""
    return {
        "id": outcome_id or f"outcome-{seed}",
        "question": f"climbing {seed}",
        "claims": {"gym app": f"{seed} sessions", "climbing partner": "twice, ü 日本"},
        "truth": "twice, ü 日本",
        "confirmed_source": "climbing partner",
        "created_at": datetime(2025, 3, 1 + seed % 27, tzinfo=timezone.utc).isoformat(),
        "memory_id": f"memory-{seed}",
    }


def make_edge(
    a: StoredMemory, b: StoredMemory, kind: EdgeKind = EdgeKind.CONTEXT_PARTITION
) -> ConflictEdge:
    """An open edge from ``a`` to ``b`` of ``a``'s user."""
    return ConflictEdge(
        user_id=a.memory.user_id,
        kind=kind,
        source_id=a.memory.id,
        target_id=b.memory.id,
        evidence="different contexts",
        valid_at=datetime(2025, 1, 1, tzinfo=timezone.utc),
    )


class StoreConformance:
    """Behaviour shared by every conflict-graph store."""

    @pytest.fixture
    def make_store(self) -> StoreFactory:
        raise NotImplementedError("subclasses provide a make_store fixture")

    @pytest.fixture
    def store(self, make_store: StoreFactory) -> Iterator[ConflictGraphStore[Any]]:
        s = make_store()
        yield s
        s.close()

    # -- memories --------------------------------------------------------------------------
    def test_memories_round_trip_in_write_order(self, store: ConflictGraphStore[Any]) -> None:
        rows = [make_stored("alice", f"memory {i}", seed=i) for i in range(7)]
        store.write(rows[:3])
        store.write(rows[3:5])
        store.write(rows[5:])
        got = store.memories("alice")
        assert [g.memory for g in got] == [r.memory for r in rows]
        assert all(g.inferred == ["aspect", "value"] for g in got)
        for g, r in zip(got, rows, strict=True):
            assert g.vector.dtype == np.float32
            np.testing.assert_array_equal(g.vector, r.vector)

    def test_get_returns_one_memory_or_none(self, store: ConflictGraphStore[Any]) -> None:
        row = make_stored("alice", "Alice likes tea", seed=1)
        store.write([row])
        got = store.get("alice", row.memory.id)
        assert got is not None and got.memory == row.memory
        np.testing.assert_array_equal(got.vector, row.vector)
        assert store.get("alice", "no-such-id") is None
        assert store.get("bob", row.memory.id) is None

    def test_update_memories_rewrites_facets(self, store: ConflictGraphStore[Any]) -> None:
        row = make_stored("alice", "Alice likes tea", seed=1)
        store.write([row])
        relabeled = row.memory.model_copy(update={"aspect": "hot drinks"})
        with store.transaction() as db:
            store.update_memories([relabeled], db=db)
        got = store.get("alice", row.memory.id)
        assert got is not None and got.memory.aspect == "hot drinks"
        np.testing.assert_array_equal(got.vector, row.vector)

    def test_delete_memory(self, store: ConflictGraphStore[Any]) -> None:
        a, b = make_stored("alice", "one", seed=1), make_stored("alice", "two", seed=2)
        store.write([a, b])
        assert store.delete_memory("alice", a.memory.id) is True
        assert store.delete_memory("alice", a.memory.id) is False
        assert [g.memory.id for g in store.memories("alice")] == [b.memory.id]
        with store.transaction() as db:
            assert store.delete_memory("alice", b.memory.id, db=db) is True
        assert store.memories("alice") == []

    # -- edges -----------------------------------------------------------------------------
    def test_edges_upsert_and_close_never_delete(self, store: ConflictGraphStore[Any]) -> None:
        a, b, c = (make_stored("alice", t, seed=i) for i, t in enumerate(["x", "y", "z"]))
        e1, e2 = make_edge(a, b), make_edge(b, c, EdgeKind.SOURCE_CONTRADICTION)
        store.write([a, b, c], [e1, e2])
        assert {e.id: e for e in store.edges("alice")} == {e1.id: e1, e2.id: e2}
        closed = e1.model_copy(update={"expired_at": datetime.now(timezone.utc)})
        store.write((), [closed])
        every = {e.id: e for e in store.edges("alice")}
        assert len(every) == 2 and every[e1.id] == closed and every[e2.id] == e2
        assert [e.id for e in store.edges("alice", include_closed=False)] == [e2.id]

    def test_edges_come_back_in_first_write_order(self, store: ConflictGraphStore[Any]) -> None:
        rows = [make_stored("alice", f"m{i}", seed=i) for i in range(6)]
        edges = [make_edge(rows[i], rows[i + 1]) for i in range(5)]
        store.write(rows, edges[:3])
        store.write((), edges[3:])
        closed = edges[1].model_copy(update={"expired_at": datetime.now(timezone.utc)})
        store.write((), [closed])  # closing an edge keeps its place
        assert [e.id for e in store.edges("alice")] == [e.id for e in edges]
        assert [e.id for e in store.edges("alice", include_closed=False)] == [
            e.id for e in edges if e.id != closed.id
        ]

    def test_edge_timestamps_keep_their_instant(self, store: ConflictGraphStore[Any]) -> None:
        a, b = make_stored("alice", "x", seed=1), make_stored("alice", "y", seed=2)
        east = timezone(timedelta(hours=9))
        e = make_edge(a, b).model_copy(
            update={"expired_at": datetime(2025, 5, 1, 12, 30, 15, 123456, tzinfo=east)}
        )
        store.write([a, b], [e])
        (got,) = store.edges("alice")
        assert got.expired_at == e.expired_at and got.valid_at == e.valid_at

    # -- users -----------------------------------------------------------------------------
    def test_users_are_a_hard_boundary(self, store: ConflictGraphStore[Any]) -> None:
        a = make_stored("alice", "Alice's memory", seed=1, memory_id="shared-id")
        b = make_stored("bob", "Bob's memory", seed=2, memory_id="shared-id")
        a2 = make_stored("alice", "Alice again", seed=3)
        store.write([a, a2], [make_edge(a, a2)])
        store.write([b])
        assert [g.memory.text for g in store.memories("bob")] == ["Bob's memory"]
        assert store.edges("bob") == []
        assert store.delete_memory("bob", "shared-id") is True
        got = store.get("alice", "shared-id")
        assert got is not None and got.memory.text == "Alice's memory"
        assert store.users() == ["alice"]
        store.write([make_stored("aaron", "first", seed=4)])
        assert store.users() == ["aaron", "alice"]
        assert store.memories("nobody") == [] and store.edges("nobody") == []

    # -- labelled source outcomes ----------------------------------------------------------
    def test_outcomes_round_trip_in_add_order(self, store: ConflictGraphStore[Any]) -> None:
        outcomes = [make_outcome(i) for i in range(5)]
        for o in outcomes:
            assert store.add_outcome("alice", o["id"], o) is True
        got = store.outcomes("alice")
        assert got == outcomes
        # Key order is kept: replaying outcomes rebuilds the same reliability model.
        assert [list(g) for g in got] == [list(o) for o in outcomes]
        assert [list(g["claims"]) for g in got] == [list(o["claims"]) for o in outcomes]
        assert store.outcomes("nobody") == []

    def test_adding_an_outcome_twice_keeps_the_first(self, store: ConflictGraphStore[Any]) -> None:
        first, second = make_outcome(1), make_outcome(2)
        assert store.add_outcome("alice", first["id"], first) is True
        assert store.add_outcome("alice", second["id"], second) is True
        changed = {**first, "truth": "something else"}
        assert store.add_outcome("alice", first["id"], changed) is False
        assert store.add_outcome("alice", second["id"], second) is False
        assert store.outcomes("alice") == [first, second]

    def test_outcomes_are_kept_per_user(self, store: ConflictGraphStore[Any]) -> None:
        mine, theirs = make_outcome(1, outcome_id="shared-id"), make_outcome(2, "shared-id")
        assert store.add_outcome("alice", "shared-id", mine) is True
        assert store.add_outcome("bob", "shared-id", theirs) is True  # same id, other user
        extra = make_outcome(3)
        assert store.add_outcome("alice", extra["id"], extra) is True
        assert store.outcomes("alice") == [mine, extra]
        assert store.outcomes("bob") == [theirs]

    def test_outcomes_join_a_transaction(self, store: ConflictGraphStore[Any]) -> None:
        kept, lost = make_outcome(1), make_outcome(2)
        with store.transaction() as db:
            assert store.add_outcome("alice", kept["id"], kept, db=db) is True
        row = make_stored("alice", "rolled back", seed=3)
        with pytest.raises(RuntimeError, match="boom"), store.transaction() as db:
            store.write([row], db=db)
            assert store.add_outcome("alice", lost["id"], lost, db=db) is True
            raise RuntimeError("boom")
        assert store.outcomes("alice") == [kept]
        assert store.memories("alice") == []
        assert store.add_outcome("alice", lost["id"], lost) is True  # nothing of it stayed

    def test_outcomes_survive_a_reopen(self, make_store: StoreFactory) -> None:
        a, b, c = make_outcome(1), make_outcome(2), make_outcome(3)
        with make_store() as s:
            s.add_outcome("alice", a["id"], a)
            s.add_outcome("alice", b["id"], b)
            s.add_outcome("bob", c["id"], c)
        with make_store() as s:
            assert s.outcomes("alice") == [a, b]
            assert s.outcomes("bob") == [c]
            assert s.add_outcome("alice", a["id"], a) is False  # still idempotent
            later = make_outcome(4)
            assert s.add_outcome("alice", later["id"], later) is True
            assert s.outcomes("alice") == [a, b, later]

    # -- atomicity and durability ----------------------------------------------------------
    def test_failed_transaction_stores_nothing(self, store: ConflictGraphStore[Any]) -> None:
        kept = make_stored("alice", "kept", seed=0)
        store.write([kept])
        a, b = make_stored("alice", "x", seed=1), make_stored("alice", "y", seed=2)
        with pytest.raises(RuntimeError, match="boom"), store.transaction() as db:
            store.write([a, b], [make_edge(a, b)], db=db)
            store.delete_memory("alice", kept.memory.id, db=db)
            raise RuntimeError("boom")
        assert [g.memory.id for g in store.memories("alice")] == [kept.memory.id]
        assert store.edges("alice") == []

    def test_a_write_that_fails_halfway_stores_nothing(
        self, store: ConflictGraphStore[Any]
    ) -> None:
        first = make_stored("alice", "first", seed=1)
        store.write([first])
        fresh = make_stored("alice", "fresh", seed=2)
        with pytest.raises(Exception):  # noqa: B017 - each database raises its own type
            store.write([fresh, first])  # `first` again: a duplicate key
        assert [g.memory.id for g in store.memories("alice")] == [first.memory.id]
        store.write([fresh])  # the store is still usable afterwards
        assert len(store.memories("alice")) == 2

    def test_everything_survives_a_reopen(self, make_store: StoreFactory) -> None:
        rows = [make_stored("alice", f"m{i}", seed=i) for i in range(4)]
        edge = make_edge(rows[0], rows[1])
        with make_store() as s:
            s.write(rows, [edge])
            s.write([make_stored("bob", "b", seed=9)])
        with make_store() as s:
            assert [g.memory for g in s.memories("alice")] == [r.memory for r in rows]
            assert s.edges("alice") == [edge]
            assert s.users() == ["alice", "bob"]
            s.write([make_stored("alice", "after reopen", seed=5)])
            assert [g.memory.text for g in s.memories("alice")][-1] == "after reopen"

    def test_close_twice_is_safe(self, make_store: StoreFactory) -> None:
        s = make_store()
        s.close()
        s.close()
