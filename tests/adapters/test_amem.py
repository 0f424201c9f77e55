"""A-mem, for real, when the user has installed it (it is not on PyPI).

A-mem asks an LLM whether to evolve each new note; here that LLM is the local
chat-completions server of :mod:`caap.llm.testing` answering with a scripted, schema-valid
decision, so A-mem's own evolution code runs without any model or network.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "caap.adapters.amem",
    exc_type=ImportError,
    reason=(
        "A-mem is not installed; it is not on PyPI: "
        'pip install "git+https://github.com/agiresearch/A-mem" "caap-memory[amem]"'
    ),
)

from caap.adapters import get_backend
from caap.adapters.amem import AMemBackend
from caap.adapters.testing import BackendConformance
from caap.llm.testing import ChatCompletionsServer, Reply
from caap.models import Memory

_NO_EVOLUTION = {
    "should_evolve": False,
    "actions": [],
    "suggested_connections": [],
    "tags_to_update": [],
    "new_context_neighborhood": [],
    "new_tags_neighborhood": [],
}


def _decide(request: dict[str, Any]) -> Reply:
    # A-mem's evolution prompt gets "do not evolve"; anything else gets an empty analysis.
    prompt = json.dumps(request.get("messages", []))
    if "should_evolve" in prompt:
        return Reply(json.dumps(_NO_EVOLUTION))
    return Reply(json.dumps({"keywords": [], "context": "General", "tags": []}))


@pytest.fixture(scope="module")
def llm() -> Iterator[ChatCompletionsServer]:
    with ChatCompletionsServer(_decide) as server:
        yield server


class TestAMemConformance(BackendConformance):
    @pytest.fixture
    def backend(self, llm: ChatCompletionsServer, tmp_path: Path) -> Iterator[AMemBackend]:
        b = AMemBackend(base_url=llm.base_url, llm_model="scripted", path=tmp_path)
        yield b
        b.close()


def test_evolution_runs_through_the_llm_and_keeps_our_payload(
    llm: ChatCompletionsServer, tmp_path: Path
) -> None:
    strengthen = {
        **_NO_EVOLUTION,
        "should_evolve": True,
        "actions": ["strengthen", "update_neighbor"],
        "tags_to_update": ["coffee"],
        "new_context_neighborhood": ["drinks"],
        "new_tags_neighborhood": [["rewritten"]],
    }
    with ChatCompletionsServer(lambda req: Reply(json.dumps(strengthen))) as evolving:
        b = AMemBackend(base_url=evolving.base_url, llm_model="scripted", path=tmp_path)
        first = Memory(text="Alice drinks oat milk.", user_id="alice", source="self-report")
        second = Memory(text="Alice switched to soy milk.", user_id="alice", aspect="milk")
        b.add_many([first, second])
        # A-mem rewrote tags and context of the notes; our facets live where it does not write.
        assert b.get(first.id, "alice") == first
        assert b.get(second.id, "alice") == second
        note = b._systems["alice"].memories[first.id]
        assert note.tags == ["rewritten"] and note.context == "drinks"
        b.close()


def test_users_get_separate_systems_and_stores(llm: ChatCompletionsServer, tmp_path: Path) -> None:
    b = AMemBackend(base_url=llm.base_url, llm_model="scripted", path=tmp_path)
    b.add(Memory(text="Alice's locker code is 4471.", user_id="alice"))
    b.add(Memory(text="Bob's locker code is 9902.", user_id="bob"))
    assert b._systems["alice"] is not b._systems["bob"]
    assert [h.memory.user_id for h in b.search("locker code", "bob", k=5)] == ["bob"]
    assert [h.memory.user_id for h in b.search("locker code", "alice", k=5)] == ["alice"]
    b.close()


def test_registry_knows_amem(llm: ChatCompletionsServer) -> None:
    b = get_backend("amem", base_url=llm.base_url)
    assert isinstance(b, AMemBackend)
    b.close()
