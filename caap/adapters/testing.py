"""Conformance suite every ``MemoryBackend`` must pass (ours or a third party's).

Subclass :class:`BackendConformance` in a test module and provide the ``backend`` fixture
(a fresh, empty backend) and, for persistent backends, ``reopen``::

    import pytest
    from caap.adapters.testing import BackendConformance

    class TestMyBackend(BackendConformance):
        @pytest.fixture
        def backend(self, tmp_path):
            return MyBackend(tmp_path)

        @pytest.fixture
        def reopen(self, tmp_path):
            return lambda old: MyBackend(tmp_path)

Tests pick themselves by the backend's ``capabilities``; a backend that cannot run here should
``pytest.skip`` in its fixture with the reason (what server or model is missing).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

try:
    import pytest
except ImportError as exc:  # pragma: no cover
    raise ImportError('caap.adapters.testing needs pytest: pip install "caap[dev]"') from exc

from pydantic import ValidationError

from caap.adapters.base import MemoryBackend
from caap.models import Memory

__all__ = ["BackendConformance"]

Reopen = Callable[[MemoryBackend], MemoryBackend]


def _mem(text: str, user: str = "alice", **kw: object) -> Memory:
    return Memory(text=text, user_id=user, **kw)  # type: ignore[arg-type]


class BackendConformance:
    """Behaviour every backend must show. Override fixtures, not tests."""

    @pytest.fixture
    def backend(self) -> MemoryBackend:
        raise NotImplementedError("subclasses provide a fresh backend fixture")

    @pytest.fixture
    def reopen(self) -> Reopen | None:
        """Return a function that closes a backend and opens a new one on the same data."""
        return None

    # -- round trip ------------------------------------------------------------------------
    def test_add_then_get_round_trips(self, backend: MemoryBackend) -> None:
        m = _mem("Alice drinks oat milk in her coffee.")
        stored_id = backend.add(m)
        got = backend.get(stored_id, "alice")
        assert got is not None
        if backend.capabilities.keeps_ids:
            assert stored_id == m.id
        if backend.capabilities.keeps_raw_text:
            assert got.text == m.text
        assert got.user_id == "alice"

    def test_list_and_count(self, backend: MemoryBackend) -> None:
        ids = backend.add_many([_mem(f"Alice note number {i} about topic {i}.") for i in range(5)])
        listed = backend.list("alice")
        assert sorted(m.id for m in listed) == sorted(ids)
        assert backend.count("alice") == 5
        assert backend.count("nobody") == 0
        assert backend.list("nobody") == []

    def test_get_missing_returns_none(self, backend: MemoryBackend) -> None:
        assert backend.get("does-not-exist", "alice") is None

    # -- search ----------------------------------------------------------------------------
    def test_search_ranks_the_relevant_memory_first(self, backend: MemoryBackend) -> None:
        target = _mem("Alice is allergic to penicillin and carries an epipen.")
        backend.add_many(
            [
                _mem("Alice plays five-a-side football on Tuesday evenings."),
                target,
                _mem("Alice's landlord raised the rent in March."),
            ]
        )
        hits = backend.search("Which medicine allergies does she have?", "alice", k=3)
        assert hits, "search returned nothing"
        assert hits[0].memory.id == target.id or hits[0].memory.text == target.text
        assert all(-1.0001 <= h.score <= 1.0001 for h in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)

    def test_search_respects_k(self, backend: MemoryBackend) -> None:
        backend.add_many([_mem(f"Alice fact {i}: she likes colour {i}.") for i in range(6)])
        assert len(backend.search("colour", "alice", k=2)) == 2

    def test_search_rejects_bad_k(self, backend: MemoryBackend) -> None:
        with pytest.raises(ValueError, match="k"):
            backend.search("anything", "alice", k=0)

    def test_empty_query_returns_nothing(self, backend: MemoryBackend) -> None:
        backend.add(_mem("Alice likes tea."))
        assert backend.search("", "alice", k=3) == []

    # -- metadata --------------------------------------------------------------------------
    def test_facets_and_metadata_round_trip(self, backend: MemoryBackend) -> None:
        if not backend.capabilities.stores_metadata:
            pytest.skip("backend does not store metadata")
        observed = datetime(2025, 3, 2, tzinfo=timezone.utc)
        m = _mem(
            "Alice's clinic record lists ibuprofen as contraindicated.",
            source="clinic record",
            context="fever",
            aspect="medication",
            value="ibuprofen contraindicated",
            observed_at=observed,
            provenance={"session": "s1", "message": "3"},
            metadata={"tags": ["health"], "n": 2},
        )
        backend.add(m)
        got = backend.get(m.id, "alice")
        assert got is not None
        assert (got.source, got.context, got.aspect, got.value) == (
            "clinic record",
            "fever",
            "medication",
            "ibuprofen contraindicated",
        )
        assert got.observed_at == observed
        assert got.provenance == {"session": "s1", "message": "3"}
        assert got.metadata == {"tags": ["health"], "n": 2}

    # -- deletion --------------------------------------------------------------------------
    def test_delete_removes_from_get_list_and_search(self, backend: MemoryBackend) -> None:
        keep = _mem("Alice walks her dog every morning.")
        gone = _mem("Alice takes the 7:40 train to work.")
        backend.add_many([keep, gone])
        assert backend.delete(gone.id, "alice") is True
        assert backend.get(gone.id, "alice") is None
        assert gone.id not in {m.id for m in backend.list("alice")}
        assert all(h.memory.id != gone.id for h in backend.search("train to work", "alice"))
        assert backend.delete(gone.id, "alice") is False
        assert backend.get(keep.id, "alice") is not None

    # -- isolation -------------------------------------------------------------------------
    def test_users_are_isolated(self, backend: MemoryBackend) -> None:
        a = _mem("The spare key is under the blue flowerpot.", user="alice")
        b = _mem("Bob keeps his passport in the desk drawer.", user="bob")
        backend.add_many([a, b])
        assert all(h.memory.user_id == "bob" for h in backend.search("spare key", "bob", k=5))
        assert [m.id for m in backend.list("bob")] == [b.id]
        assert backend.get(a.id, "bob") is None
        assert backend.delete(a.id, "bob") is False
        assert backend.get(a.id, "alice") is not None

    def test_same_id_for_two_users_does_not_collide(self, backend: MemoryBackend) -> None:
        if not backend.capabilities.keeps_ids:
            pytest.skip("backend assigns its own ids")
        backend.add(Memory(id="shared", text="Alice likes jazz.", user_id="alice"))
        backend.add(Memory(id="shared", text="Bob likes metal.", user_id="bob"))
        got_a, got_b = backend.get("shared", "alice"), backend.get("shared", "bob")
        assert got_a is not None and got_b is not None
        assert (got_a.user_id, got_b.user_id) == ("alice", "bob")
        if backend.capabilities.keeps_raw_text:
            assert (got_a.text, got_b.text) == ("Alice likes jazz.", "Bob likes metal.")

    # -- odd input -------------------------------------------------------------------------
    def test_unicode_round_trips_and_is_searchable(self, backend: MemoryBackend) -> None:
        texts = [
            "Zoë prefers crème brûlée ☕ after dinner.",
            "爱丽丝每天早上喝绿茶。",
            "أليس تحب القهوة العربية",
        ]
        ids = backend.add_many([_mem(t) for t in texts])
        for stored_id, t in zip(ids, texts, strict=True):
            got = backend.get(stored_id, "alice")
            assert got is not None
            if backend.capabilities.keeps_raw_text:
                assert got.text == t
        assert backend.search("crème brûlée", "alice", k=3)

    def test_empty_text_is_rejected_before_storage(self, backend: MemoryBackend) -> None:
        with pytest.raises(ValidationError, match="text"):
            _mem("   ")
        assert backend.count("alice") == 0

    def test_huge_text_is_stored(self, backend: MemoryBackend) -> None:
        text = "Alice's long journal entry. " + ("She wrote about the garden. " * 2000)
        i = backend.add(_mem(text))
        got = backend.get(i, "alice")
        assert got is not None
        if backend.capabilities.keeps_raw_text:
            assert got.text == text

    # -- persistence -----------------------------------------------------------------------
    def test_data_survives_reopen(self, backend: MemoryBackend, reopen: Reopen | None) -> None:
        if not backend.capabilities.persistent or reopen is None:
            pytest.skip("backend is not persistent or gave no reopen fixture")
        m = _mem("Alice's bike is a green Dutch city bike.")
        backend.add(m)
        again = reopen(backend)
        got = again.get(m.id, "alice")
        assert got is not None and got.user_id == "alice"
        assert again.search("bicycle", "alice", k=1)[0].memory.id == m.id
