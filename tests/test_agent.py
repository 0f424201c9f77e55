"""caap.Agent end to end on the builtin backend (real chromadb, real embeddings, offline)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from caap import Agent, ConflictType
from caap.models import EdgeKind
from tests.scenarios import BUDGET, DRINKING, MEDICATION, UNRELATED

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def agent(tmp_path: Path, embedder: Any) -> Agent:
    return Agent(tmp_path / "data", embedder=embedder)


@pytest.fixture
def any_store_agent(tmp_path: Path, embedder: Any, store_target: str) -> Iterator[Agent]:
    """An agent on each conflict-graph store in turn: SQLite, then PostgreSQL."""
    with Agent(tmp_path / "data", embedder=embedder, store=store_target) as a:
        yield a


def _fill(agent: Agent, user: str = "ethan") -> None:
    agent.remember_many(DRINKING + BUDGET + UNRELATED, user)


def test_remember_fills_facets_and_returns_memory(agent: Agent) -> None:
    m = agent.remember(MEDICATION[0], "maya")
    assert m.user_id == "maya" and m.text == MEDICATION[0]
    assert m.source == "Maya's clinic record"
    assert m.aspect


def test_conflicts_lists_each_typed_cluster(agent: Agent) -> None:
    _fill(agent)
    types = {c.conflict_type for c in agent.conflicts("ethan")}
    assert {ConflictType.CPC, ConflictType.BOC} <= types


def test_recall_of_one_side_returns_the_other_sides(agent: Agent) -> None:
    _fill(agent)
    r = agent.recall("Should I skip drinking before my early shift?", "ethan", k=1)
    assert len(r.hit_ids) == 1
    returned = {m.text for m in r.memories}
    assert set(DRINKING) <= returned
    assert r.clusters and r.clusters[0].conflict_type is ConflictType.CPC
    assert not returned & set(UNRELATED)


def test_users_are_a_hard_boundary(any_store_agent: Agent) -> None:
    agent = any_store_agent
    _fill(agent, "ethan")
    agent.remember_many(MEDICATION, "maya")
    r = agent.recall("ibuprofen clinic record", "ethan", k=8)
    assert all(m.user_id == "ethan" for m in r.memories)
    assert not {m.text for m in r.memories} & set(MEDICATION)
    maya_ids = {m.id for m in agent.memories("maya")}
    for c in agent.conflicts("ethan"):
        assert not set(c.memory_ids) & maya_ids
        assert all(e.user_id == "ethan" for e in c.edges)
    assert agent.forget(next(iter(maya_ids)), "ethan") is False
    assert len(agent.memories("maya")) == len(MEDICATION)


@pytest.mark.parametrize(
    ("call", "exc", "field"),
    [
        (lambda a: a.remember("", "u"), ValueError, "text"),
        (lambda a: a.remember("   ", "u"), ValueError, "text"),
        (lambda a: a.remember(42, "u"), TypeError, "text"),
        (lambda a: a.remember("ok", ""), ValueError, "user_id"),
        (lambda a: a.remember("ok", "u", mood="happy"), ValueError, "mood"),
        (lambda a: a.remember("ok", "u", observed_at="yesterday"), ValueError, "observed_at"),
        (lambda a: a.remember("ok", "u", source=3), TypeError, "source"),
        (lambda a: a.recall("q", "u", k=0), ValueError, "k"),
    ],
)
def test_bad_input_names_the_field_and_loses_nothing(
    agent: Agent, call: Any, exc: type[Exception], field: str
) -> None:
    agent.remember_many(MEDICATION, "u")
    before = [m.id for m in agent.memories("u")]
    with pytest.raises(exc, match=field):
        call(agent)
    assert [m.id for m in agent.memories("u")] == before


def test_a_batch_with_one_bad_item_stores_nothing(any_store_agent: Agent) -> None:
    agent = any_store_agent
    with pytest.raises(ValueError, match="text"):
        agent.remember_many(["fine memory", ""], "u")
    assert agent.memories("u") == []
    assert agent.store.memories("u") == []


def test_path_that_is_a_file_is_rejected(tmp_path: Path, embedder: Any) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError, match="path"):
        Agent(f, embedder=embedder)


def test_forget_deletes_text_and_closes_edges(any_store_agent: Agent) -> None:
    agent = any_store_agent
    mems = agent.remember_many(MEDICATION, "maya")
    assert agent.forget(mems[0].id, "maya") is True
    assert [m.id for m in agent.memories("maya")] == [mems[1].id]
    assert agent.backend.get(mems[0].id, "maya") is None
    closed = [e for e in agent.store.edges("maya") if mems[0].id in e.endpoints()]
    assert closed and all(e.expired_at is not None for e in closed)
    assert agent.forget(mems[0].id, "maya") is False


def test_state_survives_restart(tmp_path: Path, embedder: Any, store_target: str) -> None:
    with Agent(tmp_path / "d", embedder=embedder, store=store_target) as a:
        _fill(a)
        before = {c.aspect: c.conflict_type for c in a.conflicts("ethan")}
        ids = [m.id for m in a.memories("ethan")]
    with Agent(tmp_path / "d", embedder=embedder, store=store_target) as b:
        assert [m.id for m in b.memories("ethan")] == ids
        after = {c.aspect: c.conflict_type for c in b.conflicts("ethan")}
        assert after == before
        r = b.recall("weekend drinks", "ethan", k=1)
        assert set(DRINKING) <= {m.text for m in r.memories}


def test_memory_and_edges_survive_sigkill(tmp_path: Path, store_target: str) -> None:
    data = tmp_path / "killed"
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from caap import Agent
        a = Agent({str(data)!r}, store={store_target!r})
        a.remember({MEDICATION[0]!r}, "maya")
        m = a.remember({MEDICATION[1]!r}, "maya")
        print(m.id, flush=True)
        sys.stdin.readline()  # wait here until killed
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert proc.stdout is not None
    acked = proc.stdout.readline().strip()
    assert acked, "child did not acknowledge the write"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    a = Agent(data, store=store_target)
    ids = {m.id for m in a.memories("maya")}
    assert acked in ids and len(ids) == 2
    edges = [e for e in a.store.edges("maya") if acked in e.endpoints()]
    assert any(e.kind is EdgeKind.SOURCE_CONTRADICTION for e in edges)
    hits = a.backend.search("pediatrician approved ibuprofen", "maya", k=2)
    assert acked in {h.memory.id for h in hits}
    a.close()


def test_ingest_embeds_each_memory_once(tmp_path: Path, embedder: Any) -> None:
    class Counting:
        """The real embedder, counting the texts it is asked to embed."""

        def __init__(self, inner: Any) -> None:
            self.inner, self.texts = inner, 0
            self.dimension, self.model_name = inner.dimension, inner.model_name

        def encode(self, texts: list[str], batch_size: int = 64) -> Any:
            self.texts += len(texts)
            return self.inner.encode(texts, batch_size)

        def encode_one(self, text: str) -> Any:
            return self.inner.encode_one(text)

    counting = Counting(embedder)
    agent = Agent(tmp_path / "d", embedder=counting)  # type: ignore[arg-type]
    agent.graph("u")  # a new graph embeds its topic prototypes once
    counting.texts = 0
    texts = [
        "I take the night bus home on Fridays.",
        "My favourite snack is salted almonds.",
        "According to my sister, I hate the smell of fresh paint.",
    ]
    stored = agent.remember_many(texts, "u")
    g = agent.graph("u")
    values = [g.extraction(m.id).value for m in stored]
    assert values[0] == texts[0] and values[2] != texts[2]  # one value is not its text
    assert counting.texts == len(stored)
    # The index holds the graph's vector: a memory's value finds it as itself, and its
    # whole text still finds it first.
    for m, value in zip(stored, values, strict=True):
        hit = agent.backend.search(value, "u", k=1)[0]
        assert hit.memory.id == m.id and hit.score > 0.99
        assert agent.backend.search(m.text, "u", k=1)[0].memory.id == m.id
    agent.close()
