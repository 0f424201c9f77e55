"""MemOS, for real: ``general_text`` passes the conformance suite; ``naive_text`` is checked for
what it does (word-overlap search, JSON persistence), since it has no semantic search.

Skips when MemOS is not installed (``pip install "caap-memory[memos]"``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

# Import through the adapter: it tells MemOS where its log folder goes before MemOS loads.
pytest.importorskip(
    "caap.adapters.memos",
    exc_type=ImportError,
    reason='MemOS is not installed (pip install "caap-memory[memos]"); '
    ".ci/run tests it in its own venv",
)

from caap.adapters import get_backend
from caap.adapters.memos import MemOSBackend
from caap.adapters.testing import BackendConformance, Reopen
from caap.models import Memory


class TestMemOSGeneralTextConformance(BackendConformance):
    @pytest.fixture
    def backend(self, tmp_path: Path) -> Iterator[MemOSBackend]:
        b = MemOSBackend(tmp_path / "store", mode="general_text")
        yield b
        b.close()

    @pytest.fixture
    def reopen(self, tmp_path: Path) -> Reopen:
        def _reopen(old: object) -> MemOSBackend:
            assert isinstance(old, MemOSBackend)
            old.close()  # qdrant's local mode locks its folder: one client at a time
            return MemOSBackend(tmp_path / "store", mode="general_text")

        return _reopen


def test_registry_builds_memos_with_defaults() -> None:
    b = get_backend("memos")
    try:
        assert isinstance(b, MemOSBackend) and b.mode == "general_text"
        b.add(Memory(text="Alice grows tomatoes on her balcony.", user_id="alice"))
        assert b.search("vegetables she grows", "alice", k=1)[0].memory.text.startswith("Alice")
        tmp = b.path
    finally:
        b.close()
    assert not tmp.exists(), "the temporary directory of a path-less backend is removed"


def test_users_get_separate_memos_stores(tmp_path: Path) -> None:
    with MemOSBackend(tmp_path, mode="general_text") as b:
        b.add(Memory(text="Alice's locker code is 4471.", user_id="alice"))
        b.add(Memory(text="Bob's locker code is 9902.", user_id="bob"))
        stores = sorted(p.name for p in (tmp_path / "users").iterdir())
        assert len(stores) == 2
        assert [h.memory.user_id for h in b.search("locker code", "bob", k=5)] == ["bob"]
        # Reading an unknown user creates nothing.
        assert b.list("carol") == [] and b.search("x", "carol") == []
        assert len(list((tmp_path / "users").iterdir())) == 2


def test_re_adding_an_id_replaces_the_memory(tmp_path: Path) -> None:
    with MemOSBackend(tmp_path) as b:
        b.add(Memory(id="m1", text="Alice lives in Leeds.", user_id="alice"))
        b.add(Memory(id="m1", text="Alice lives in York.", user_id="alice"))
        assert [m.text for m in b.list("alice")] == ["Alice lives in York."]


def test_bad_mode_and_file_path_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="mode"):
        MemOSBackend(tmp_path, mode="tree_text")  # type: ignore[arg-type]
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(ValueError, match="path"):
        MemOSBackend(f)


class TestNaiveText:
    """``naive_text`` ranks by shared words: honest about that, and otherwise a full store."""

    def test_round_trip_metadata_delete_isolation_and_reopen(self, tmp_path: Path) -> None:
        m = Memory(
            text="Alice's clinic record lists ibuprofen as contraindicated.",
            user_id="alice",
            source="clinic record",
            aspect="medication",
            provenance={"session": "s1", "turn": "3"},
            metadata={"n": 2},
        )
        other = Memory(text="Bob takes ibuprofen for headaches.", user_id="bob")
        with MemOSBackend(tmp_path, mode="naive_text") as b:
            b.add_many([m, other])
            got = b.get(m.id, "alice")
            assert got == m
            assert b.get(m.id, "bob") is None and b.delete(m.id, "bob") is False
            assert [h.memory.id for h in b.search("ibuprofen", "bob", k=5)] == [other.id]
        with MemOSBackend(tmp_path, mode="naive_text") as again:
            assert again.get(m.id, "alice") == m
            assert again.delete(m.id, "alice") is True
        with MemOSBackend(tmp_path, mode="naive_text") as third:
            assert third.list("alice") == []
            assert [x.id for x in third.list("bob")] == [other.id]

    def test_search_ranks_by_shared_words(self, tmp_path: Path) -> None:
        with MemOSBackend(tmp_path, mode="naive_text") as b:
            b.add_many(
                [
                    Memory(text="Alice plays football on Tuesday evenings.", user_id="alice"),
                    Memory(text="Alice is allergic to penicillin.", user_id="alice"),
                ]
            )
            hits = b.search("is she allergic to penicillin", "alice", k=2)
            assert hits[0].memory.text == "Alice is allergic to penicillin."
            assert hits[0].score > hits[1].score >= 0.0
            # No shared word, no signal: a synonym does not match (no embeddings here).
            hits = b.search("medicine intolerance", "alice", k=2)
            assert all(h.score == 0.0 for h in hits)
