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

import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

try:
    import pytest
except ImportError as exc:  # pragma: no cover
    raise ImportError('caap.adapters.testing needs pytest: pip install "caap-memory[dev]"') from exc

from pydantic import ValidationError

from caap.adapters.base import MemoryBackend, SearchHit
from caap.models import Memory

__all__ = ["RELEVANCE_MEMORIES", "RELEVANCE_QUERIES", "BackendConformance"]

Reopen = Callable[[MemoryBackend], MemoryBackend]


def _mem(text: str, user: str = "alice", **kw: object) -> Memory:
    return Memory(text=text, user_id=user, **kw)  # type: ignore[arg-type]


#: A small labelled relevance set: one user's memories about unrelated life facets.
RELEVANCE_MEMORIES: dict[str, str] = {
    "allergy": "Alice is allergic to penicillin and carries an epipen.",
    "commute": "Alice cycles to the office along the canal every weekday.",
    "diet": "Alice has been vegetarian since 2019 and avoids fish too.",
    "sister": "Alice's sister Maya lives in Lisbon and visits every August.",
    "sleep": "Alice goes to bed around 11 pm and wakes at 6:30.",
    "budget": "Alice saves 15% of her salary into an index fund each month.",
    "pet": "Alice adopted a grey tabby cat called Biscuit from the shelter.",
    "language": "Alice is taking evening classes in Japanese on Thursdays.",
}
#: Queries that do not repeat their memory's words, each labelled with the memory it is about.
RELEVANCE_QUERIES: list[tuple[str, str]] = [
    ("Which antibiotics must a doctor avoid giving her?", "allergy"),
    ("How does she get to work?", "commute"),
    ("Can I cook a salmon dinner for her?", "diet"),
    ("Who in her family lives abroad?", "sister"),
    ("What time does she usually fall asleep?", "sleep"),
    ("How does she invest her money?", "budget"),
    ("Does she have any animals at home?", "pet"),
    ("What is she studying at night school?", "language"),
]


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

    def test_search_on_the_labelled_relevance_set(self, backend: MemoryBackend) -> None:
        ids = dict(
            zip(
                RELEVANCE_MEMORIES,
                backend.add_many([_mem(t) for t in RELEVANCE_MEMORIES.values()]),
                strict=True,
            )
        )
        by_text = {text: ids[label] for label, text in RELEVANCE_MEMORIES.items()}

        def stored_id(hit: SearchHit) -> str:
            # A backend that assigns its own ids is matched by the exact text it kept.
            if backend.capabilities.keeps_ids:
                return hit.memory.id
            return by_text.get(hit.memory.text, "")

        first, in_top3 = 0, 0
        for query, label in RELEVANCE_QUERIES:
            found = [stored_id(h) for h in backend.search(query, "alice", k=3)]
            first += bool(found) and found[0] == ids[label]
            in_top3 += ids[label] in found
        n = len(RELEVANCE_QUERIES)
        # Paraphrased queries: every memory must be in the top 3, most of them first.
        assert in_top3 == n, f"only {in_top3}/{n} labelled memories in the top 3"
        assert first >= n - 2, f"only {first}/{n} labelled memories ranked first"

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

    def test_provenance_and_times_round_trip_through_search(self, backend: MemoryBackend) -> None:
        if not backend.capabilities.stores_metadata:
            pytest.skip("backend does not store metadata")
        created = datetime(2024, 11, 5, 8, 30, tzinfo=timezone.utc)
        older = _mem(
            "Alice signed a lease on a flat in Portland.",
            created_at=created,
            observed_at=created - timedelta(days=3),
            provenance={"session": "s7", "turn": "2", "episode": "ep-ü"},
            source="self-report",
        )
        newer = _mem(
            "Alice's favourite bakery is on Alberta Street.",
            created_at=created + timedelta(hours=1),
        )
        backend.add_many([newer, older])
        hits = backend.search("Where does she rent her apartment?", "alice", k=2)
        assert hits and hits[0].memory.id == older.id
        got = hits[0].memory
        assert got.provenance == {"session": "s7", "turn": "2", "episode": "ep-ü"}
        assert (got.source, got.observed_at, got.created_at) == (
            "self-report",
            created - timedelta(days=3),
            created,
        )
        # list is oldest first by the memory's own created_at, not by insertion order.
        assert [m.id for m in backend.list("alice")] == [older.id, newer.id]

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

    def test_users_stay_isolated_under_interleaved_writes(self, backend: MemoryBackend) -> None:
        users = ["alice", "bob", "carol d", "dmitri"]  # one id with a space on purpose
        errors: list[BaseException] = []

        def write(user: str) -> None:
            try:
                for i in range(6):
                    backend.add(
                        _mem(f"{user} note {i}: the parcel locker code is {user}-{i}.", user)
                    )
            except BaseException as exc:  # surfaced below; a thread must not swallow it
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(u,)) for u in users]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        for user in users:
            mine = backend.list(user)
            assert len(mine) == 6 and all(m.user_id == user for m in mine)
            if backend.capabilities.keeps_raw_text:
                assert all(m.text.startswith(f"{user} note ") for m in mine)
            hits = backend.search("parcel locker code", user, k=10)
            assert hits and all(h.memory.user_id == user for h in hits)
            if backend.capabilities.keeps_raw_text:
                assert all(h.memory.text.startswith(f"{user} note ") for h in hits)

    def test_adding_the_same_id_again_replaces(self, backend: MemoryBackend) -> None:
        if not backend.capabilities.keeps_ids:
            pytest.skip("backend assigns its own ids")
        backend.add(Memory(id="m1", text="Alice lives in Seattle.", user_id="alice"))
        backend.add(Memory(id="m1", text="Alice lives in Portland.", user_id="alice"))
        assert backend.count("alice") == 1
        got = backend.get("m1", "alice")
        assert got is not None
        if backend.capabilities.keeps_raw_text:
            assert got.text == "Alice lives in Portland."

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
