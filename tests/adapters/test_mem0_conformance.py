"""Mem0 (``mem0ai``, ``infer=False``, local qdrant, the packaged model) passes the suite.

Runs the real Mem0 library; skips with the reason when ``mem0ai`` is not installed
(``pip install "caap-memory[mem0]"``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from caap.adapters.testing import BackendConformance, Reopen
from caap.models import Memory

if importlib.util.find_spec("mem0") is None:
    pytest.skip(
        'mem0ai is not installed (install it with: pip install "caap-memory[mem0]")',
        allow_module_level=True,
    )

from caap.adapters.mem0 import Mem0Backend


class TestMem0Conformance(BackendConformance):
    @pytest.fixture
    def backend(self, tmp_path: Path) -> Iterator[Mem0Backend]:
        b = Mem0Backend(tmp_path / "store")
        yield b
        b.close()

    @pytest.fixture
    def reopen(self, tmp_path: Path) -> Reopen:
        def _reopen(old: object) -> Mem0Backend:
            # Local qdrant locks its folder: the old client must let go first.
            assert isinstance(old, Mem0Backend)
            old.close()
            return Mem0Backend(tmp_path / "store")

        return _reopen


class TestMem0Chroma(BackendConformance):
    """The same suite on Mem0's other local vector store."""

    @pytest.fixture
    def backend(self, tmp_path: Path) -> Iterator[Mem0Backend]:
        b = Mem0Backend(tmp_path / "store", vector_store="chroma")
        yield b
        b.close()

    @pytest.fixture
    def reopen(self, tmp_path: Path) -> Reopen:
        def _reopen(old: object) -> Mem0Backend:
            assert isinstance(old, Mem0Backend)
            old.close()
            return Mem0Backend(tmp_path / "store", vector_store="chroma")

        return _reopen


# -- Mem0-specific behaviour -------------------------------------------------------------------


def test_facets_land_in_mem0_metadata_where_mem0_users_see_them(tmp_path: Path) -> None:
    with Mem0Backend(tmp_path / "s") as b:
        m = Memory(
            id="m1",
            text="Maya's clinic record lists ibuprofen as contraindicated.",
            user_id="maya",
            source="clinic record",
            aspect="medication",
            provenance={"session": "s1"},
        )
        b.add(m)
        raw = b.mem0.get_all(filters={"user_id": "maya"})["results"]
        assert len(raw) == 1 and raw[0]["memory"] == m.text
        meta = raw[0]["metadata"]
        assert (meta["caap_id"], meta["caap_source"], meta["caap_aspect"]) == (
            "m1",
            "clinic record",
            "medication",
        )
        assert raw[0]["created_at"] == m.created_at.isoformat()


def test_memories_written_by_plain_mem0_are_read_under_mem0_ids(tmp_path: Path) -> None:
    with Mem0Backend(tmp_path / "s") as b:
        res = b.mem0.add(
            "Maya prefers the morning appointments.",
            user_id="maya",
            metadata={"channel": "sms"},
            infer=False,
        )
        mem0_id = res["results"][0]["id"]
        got = b.get(mem0_id, "maya")
        assert got is not None and got.id == mem0_id
        assert got.text == "Maya prefers the morning appointments."
        assert got.metadata.get("channel") == "sms"
        assert b.get(mem0_id, "someone-else") is None
        assert [h.memory.id for h in b.search("appointments", "maya", k=1)] == [mem0_id]
        assert b.delete(mem0_id, "someone-else") is False
        assert b.delete(mem0_id, "maya") is True
        assert b.list("maya") == []


def test_mem0_keeps_both_sides_of_a_contradiction_unlinked(tmp_path: Path) -> None:
    # What Mem0 loses: infer=False appends both sides and nothing relates them, so a search
    # with a small k returns one side only. The Agent over it returns the whole cluster.
    from caap import Agent

    sides = [
        "Maya's clinic record lists ibuprofen as contraindicated for her.",
        "Maya's father says the pediatrician approved ibuprofen for her fevers last year.",
    ]
    with Agent(tmp_path / "agent", backend="mem0") as agent:
        assert isinstance(agent.backend, Mem0Backend)
        assert agent.backend.path == tmp_path / "agent" / "mem0"
        agent.remember_many(sides, "maya")
        query = "Can I give her ibuprofen for the fever?"
        raw = agent.backend.search(query, "maya", k=1)
        assert len(raw) == 1 and raw[0].memory.text in sides
        recalled = agent.recall(query, "maya", k=1)
        assert {m.text for m in recalled.memories} == set(sides)
        assert recalled.clusters and recalled.clusters[0].has_conflict


def test_bad_arguments_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="vector_store"):
        Mem0Backend(tmp_path / "a", vector_store="faiss")
    with pytest.raises(ValueError, match="threshold"):
        Mem0Backend(tmp_path / "b", threshold=1.5)
    with pytest.raises(ValueError, match="embedding_dims is required"):
        Mem0Backend(tmp_path / "c", model="some/other-model")
    with pytest.raises(ValueError, match="embedding_dims must be a positive int"):
        Mem0Backend(tmp_path / "d", embedding_dims=0)
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(ValueError, match="path"):
        Mem0Backend(f)


def test_registry_builds_mem0_with_options(tmp_path: Path) -> None:
    from caap.adapters import available_backends, get_backend

    assert "mem0" in available_backends()
    b = get_backend("mem0", path=tmp_path / "r", vector_store="chroma")
    try:
        assert isinstance(b, Mem0Backend) and b.config["vector_store"]["provider"] == "chroma"
    finally:
        b.close()


def test_the_example_shows_the_graph_adding_the_other_sides(tmp_path: Path) -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / "mem0_backend.py"
    spec = importlib.util.spec_from_file_location("mem0_backend_example", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    out = example.run(tmp_path / "demo", k=1)
    sides = set(example.MEMORIES[:3])
    assert len(out["mem0_search"]) == 1 and out["mem0_search"][0] in sides
    assert sides <= set(out["with_conflict_graph"])
    assert not any("cello" in t for t in out["with_conflict_graph"])
    assert "?" in out["answer"][0]  # a high-stakes source conflict is not answered flat
