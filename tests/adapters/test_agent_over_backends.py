"""The Agent's conflict-graph expansion over a backend that assigns its own ids.

``OwnIdBackend`` is a small third-party-style backend (the builtin store under ids it makes up,
as Mem0, Letta or A-mem do when used without a mapping); it is not a stand-in for any system.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, ClassVar

from caap import Agent
from caap.adapters.base import BackendCapabilities
from caap.adapters.builtin import BuiltinBackend
from caap.models import Memory
from tests.scenarios import DRINKING, UNRELATED


class OwnIdBackend(BuiltinBackend):
    capabilities: ClassVar[BackendCapabilities] = BackendCapabilities(keeps_ids=False)

    def add_many(self, memories: Any) -> list[str]:
        renamed = [m.model_copy(update={"id": uuid.uuid4().hex}) for m in memories]
        return super().add_many(renamed)


def test_recall_maps_foreign_ids_back_by_text_and_expands(tmp_path: Path, embedder: Any) -> None:
    backend = OwnIdBackend(tmp_path / "own", embedder=embedder)
    agent = Agent(tmp_path / "agent", backend=backend, embedder=embedder)
    stored = agent.remember_many(DRINKING + UNRELATED, "ethan")
    graph_ids = {m.id for m in stored}
    assert not graph_ids & {m.id for m in backend.list("ethan")}
    r = agent.recall("Should I skip drinking before my early shift?", "ethan", k=1)
    assert {m.text for m in r.memories} >= set(DRINKING)
    assert set(r.hit_ids) <= graph_ids and r.clusters


def test_recall_keeps_a_hit_the_graph_does_not_know(tmp_path: Path, embedder: Any) -> None:
    backend = OwnIdBackend(tmp_path / "own", embedder=embedder)
    agent = Agent(tmp_path / "agent", backend=backend, embedder=embedder)
    agent.remember_many(UNRELATED, "ethan")
    # Written around the agent (as a backend's own LLM rewrite would be): no graph memory.
    backend.add(Memory(text="Ethan's band rehearses in a garage in Leith.", user_id="ethan"))
    r = agent.recall("Where does his band rehearse?", "ethan", k=1)
    assert [m.text for m in r.memories] == ["Ethan's band rehearses in a garage in Leith."]
    assert r.hit_ids == []
