"""The Mem0-shaped surface of Agent (add / search / get_all / update / history / delete),
AsyncAgent, Agent.from_config, and the distribution check."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from caap import Agent, AsyncAgent
from caap._mem0_api import match_filters

ROOT = Path(__file__).resolve().parents[1]

CHAT = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "I skip alcohol when I have an early shift the next morning."},
    {"role": "assistant", "content": "Got it, no drinks before early shifts."},
    {"role": "user", "content": "I have a couple of beers when the next day is free."},
]


@pytest.fixture
def agent(tmp_path: Path, embedder: Any) -> Any:
    with Agent(tmp_path / "data", embedder=embedder) as a:
        yield a


def test_add_messages_stores_the_users_statements_only(agent: Agent) -> None:
    out = agent.add(CHAT, "ethan", agent_id="coach", run_id="s1", metadata={"topic": "drinks"})
    texts = [r["memory"] for r in out["results"]]
    assert texts == [CHAT[1]["content"], CHAT[3]["content"]]
    assert {r["event"] for r in out["results"]} == {"ADD"}
    assert all(r["agent_id"] == "coach" and r["run_id"] == "s1" for r in out["results"])
    assert all(r["metadata"] == {"topic": "drinks"} for r in out["results"])
    # The two statements conflict by context: kept, and reported on every record.
    listed = agent.get_all("ethan")["results"]
    assert {r["conflict"]["type"] for r in listed if r["conflict"]} == {"CPC"}


def test_add_without_inference_stores_every_turn_with_its_role(agent: Agent) -> None:
    out = agent.add(CHAT, "ethan", infer=False)
    assert [r["memory"] for r in out["results"]] == [m["content"] for m in CHAT]
    roles = [agent.get(r["id"], "ethan")["metadata"]["role"] for r in out["results"]]  # type: ignore[index]
    assert roles == ["system", "user", "assistant", "user"]


def test_the_same_statement_is_stored_once_and_reported(agent: Agent) -> None:
    first = agent.add("I take my coffee black.", "ana")["results"][0]
    again = agent.add("I take my coffee black.", "ana")["results"][0]
    assert again["event"] == "NONE" and again["id"] == first["id"]
    twice = agent.add(["I like green tea.", "I like green tea."], "ana")["results"]
    assert [r["event"] for r in twice] == ["ADD", "NONE"] and twice[0]["id"] == twice[1]["id"]
    assert len(agent.memories("ana")) == 2
    # Another scope, source or user is another statement.
    assert agent.add("I take my coffee black.", "ana", run_id="r2")["results"][0]["event"] == "ADD"
    assert agent.add("I take my coffee black.", "bob")["results"][0]["event"] == "ADD"
    # remember itself still records every observation (repetition is evidence).
    agent.remember("I take my coffee black.", "ana")
    assert len(agent.memories("ana")) == 4


def test_search_filters_by_metadata_and_scope(agent: Agent) -> None:
    agent.add("I take my coffee black.", "ana", agent_id="barista", metadata={"topic": "coffee"})
    agent.add("On weekends I like a flat white.", "ana", metadata={"topic": "coffee", "n": 2})
    agent.add("I run 5 km every morning.", "ana", agent_id="coach", metadata={"topic": "sport"})
    hits = agent.search("what coffee do I drink", "ana", filters={"topic": "coffee"})["results"]
    assert {h["memory"] for h in hits} == {
        "I take my coffee black.",
        "On weekends I like a flat white.",
    }
    assert hits[0]["score"] >= hits[-1]["score"]
    scoped = agent.search("coffee", "ana", agent_id="barista")["results"]
    assert [h["memory"] for h in scoped] == ["I take my coffee black."]
    ops = agent.search("coffee", "ana", filters={"n": {"gte": 2}})["results"]
    assert [h["memory"] for h in ops] == ["On weekends I like a flat white."]
    either = agent.search(
        "anything", "ana", filters={"OR": [{"topic": "sport"}, {"n": 2}]}, limit=5
    )["results"]
    assert len(either) == 2
    assert agent.search("coffee", "ana", limit=1)["results"][0]["memory"].endswith("black.")
    assert agent.search("coffee", "nobody")["results"] == []
    with pytest.raises(ValueError, match="unknown filter operator 'like'"):
        agent.search("coffee", "ana", filters={"topic": {"like": "c%"}})
    with pytest.raises(ValueError, match="limit"):
        agent.search("coffee", "ana", limit=0)


def test_match_filters_reads_metadata_then_fields() -> None:
    record = {"memory": "x", "source": "bank", "metadata": {"k": "v", "tags": ["a"]}}
    assert match_filters(record, {"source": "bank", "k": ["v", "w"]})
    assert match_filters(record, {"tags": {"contains": "a"}, "NOT": {"k": "w"}})
    # Mem0's form: NOT over a list holds when none of its filters does.
    assert match_filters(record, {"NOT": [{"k": "w"}, {"source": "shop"}]})
    assert not match_filters(record, {"NOT": [{"k": "w"}, {"source": "bank"}]})
    assert not match_filters(record, {"missing": "*"})
    assert not match_filters(record, {"AND": [{"k": "v"}, {"source": "other"}]})


def test_update_is_a_new_version_and_history_keeps_the_old(agent: Agent) -> None:
    mid = agent.add("I take my coffee black.", "ana", metadata={"topic": "coffee"})["results"][0][
        "id"
    ]
    new = agent.update(mid, "I take my coffee with oat milk now.", "ana")
    assert new["event"] == "UPDATE" and new["previous_id"] == mid and new["id"] != mid
    assert new["metadata"] == {"topic": "coffee"}
    assert [r["memory"] for r in agent.get_all("ana")["results"]] == [
        "I take my coffee with oat milk now."
    ]
    hits = agent.search("coffee", "ana")["results"]
    assert [h["id"] for h in hits] == [new["id"]]
    again = agent.update(new["id"], "I take my coffee with soy milk.", "ana")
    for any_version in (mid, new["id"], again["id"]):
        history = agent.history(any_version, "ana")
        assert [h["memory"] for h in history] == [
            "I take my coffee black.",
            "I take my coffee with oat milk now.",
            "I take my coffee with soy milk.",
        ]
        assert [h["event"] for h in history] == ["ADD", "UPDATE", "UPDATE"]
        assert [h["current"] for h in history] == [False, False, True]
    assert agent.history(mid, "bob") == []
    with pytest.raises(KeyError):
        agent.update(again["id"], "hijack", "bob")
    with pytest.raises(ValueError, match="text"):
        agent.update(again["id"], "  ", "ana")


def test_delete_and_delete_all_respect_users_and_scope(agent: Agent) -> None:
    a = agent.add("I take my coffee black.", "ana", run_id="r1")["results"][0]["id"]
    agent.add("I like green tea.", "ana", run_id="r2")
    agent.add("I like green tea.", "bob")
    assert agent.delete(a, "bob") is False
    assert agent.get(a, "bob") is None
    assert agent.delete(a, "ana") is True and agent.get(a, "ana") is None
    assert agent.delete_all("ana", run_id="r2") == 1
    assert agent.get_all("ana")["results"] == []
    assert len(agent.get_all("bob")["results"]) == 1


def test_add_rejects_bad_messages_and_reserved_keys_naming_them(agent: Agent) -> None:
    with pytest.raises(TypeError, match=r"messages\[1\]\.content must be a str"):
        agent.add([{"role": "user", "content": "ok"}, {"role": "user", "content": None}], "ana")
    with pytest.raises(ValueError, match=r"messages\[0\]\.role"):
        agent.add([{"content": "no role"}], "ana")
    with pytest.raises(ValueError, match="'agent_id' is reserved"):
        agent.add("x", "ana", metadata={"agent_id": "a"})
    with pytest.raises(TypeError, match="messages must be"):
        agent.add(None, "ana")  # type: ignore[arg-type]
    assert agent.memories("ana") == []


def test_from_config_dict_and_files(tmp_path: Path) -> None:
    cfg = {"path": str(tmp_path / "a"), "graph": {"aspect_join": 0.4}}
    (tmp_path / "caap.json").write_text(json.dumps(cfg), encoding="utf-8")
    (tmp_path / "caap.toml").write_text(
        f'[caap]\npath = "{tmp_path / "b"}"\nreliability_threshold = 0.7\n', encoding="utf-8"
    )
    with Agent.from_config(tmp_path / "caap.json") as a:
        assert a.config.aspect_join == 0.4 and a.path == tmp_path / "a"
    with Agent.from_config(str(tmp_path / "caap.toml")) as b:
        assert b.reliability_threshold == 0.7
    with pytest.raises(ValueError, match="unknown config key 'pth'"):
        Agent.from_config({"pth": "x"})
    with pytest.raises(ValueError, match="unknown graph setting 'nope'"):
        Agent.from_config({"graph": {"nope": 1}})
    with pytest.raises(FileNotFoundError):
        Agent.from_config(tmp_path / "missing.json")


def test_async_agent_runs_the_same_api(tmp_path: Path, embedder: Any) -> None:
    async def main() -> None:
        async with AsyncAgent(Agent(tmp_path / "d", embedder=embedder)) as memory:
            added = await asyncio.gather(
                memory.add(CHAT, "ethan"), memory.add("I take my coffee black.", "ana")
            )
            assert len(added[0]["results"]) == 2
            hits = await memory.search("coffee", "ana")
            assert hits["results"][0]["memory"] == "I take my coffee black."
            resp = await memory.respond("Should I have a few drinks tonight?", "ethan")
            assert resp.decision.action.value == "conditionalize"
            await memory.resolve(resp, "I have an early shift tomorrow.", "ethan")
            assert len(await memory.memories("ethan")) == 3

    asyncio.run(main())


def test_import_refuses_the_unrelated_caap_distribution(tmp_path: Path) -> None:
    # The PyPI project "caap" (CPU AS A PROGRAM) installs a top-level caap too.
    info = tmp_path / "caap-0.0.5.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: caap\nVersion: 0.0.5\nSummary: CPU AS A PROGRAM\n",
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    proc = subprocess.run(
        [sys.executable, "-c", "import caap"], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode != 0
    assert "caap 0.0.5 (CPU AS A PROGRAM)" in proc.stderr
    assert "cannot share an environment" in proc.stderr
    cli = subprocess.run(
        [sys.executable, "-m", "caap.cli", "--version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode != 0 and "pip install caap-memory" in cli.stderr


def test_add_reports_the_conflict_its_statements_just_formed(agent: Agent) -> None:
    out = agent.add(CHAT, "ethan")["results"]
    assert [r["conflict"]["type"] if r["conflict"] else None for r in out] == ["CPC", "CPC"]
    again = agent.add(CHAT[1]["content"], "ethan")["results"][0]
    assert again["event"] == "NONE" and again["conflict"]["type"] == "CPC"


def test_roles_are_read_in_any_case_and_an_unknown_role_is_an_error(agent: Agent) -> None:
    out = agent.add(
        [
            {"role": "User", "content": "I am allergic to peanuts."},
            {"role": "human", "content": "I carry an adrenaline pen."},
            {"role": "AI", "content": "Noted."},
        ],
        "carl",
    )["results"]
    assert [r["memory"] for r in out] == ["I am allergic to peanuts.", "I carry an adrenaline pen."]
    with pytest.raises(ValueError, match=r"messages\[0\]\.role must be one of .*'speaker'"):
        agent.add([{"role": "speaker", "content": "I like tea."}], "carl")
    assert len(agent.memories("carl")) == 2


def test_the_version_chain_key_is_written_by_update_only(agent: Agent) -> None:
    with pytest.raises(ValueError, match="'caap_versions' is reserved"):
        agent.remember("I like plums.", "u", metadata={"caap_versions": "zzz"})
    with pytest.raises(ValueError, match="'caap_versions' is reserved"):
        agent.remember_many([{"text": "I like plums.", "metadata": {"caap_versions": []}}], "u")
    assert agent.memories("u") == []
    # Scope keys are how a memory written with remember gets a scope.
    m = agent.remember("I like pears.", "u", metadata={"agent_id": "coach"})
    assert [r["id"] for r in agent.get_all("u", agent_id="coach")["results"]] == [m.id]
    new = agent.update(m.id, "I like pears and plums.", "u")
    assert [h["memory"] for h in agent.history(new["id"], "u")] == [
        "I like pears.",
        "I like pears and plums.",
    ]


def test_from_config_names_a_relation_layer(tmp_path: Path) -> None:
    with Agent.from_config({"path": str(tmp_path / "a"), "relations": "rules"}) as a:
        assert a.relations.name == "rules"
    with pytest.raises(ValueError, match="nope"):
        Agent.from_config({"path": str(tmp_path / "b"), "relations": "nope"})


def test_a_threshold_outside_cosine_range_and_a_closed_agent_are_errors(
    tmp_path: Path, embedder: Any
) -> None:
    a = Agent(tmp_path / "d", embedder=embedder)
    a.remember("I take my coffee black.", "ana")
    assert a.search("coffee", "ana", threshold=0.1)["results"]
    with pytest.raises(ValueError, match=r"threshold must be a number in \[-1, 1\]"):
        a.search("coffee", "ana", threshold=2)
    a.close()
    with pytest.raises(RuntimeError, match="closed"):
        a.remember("I like tea.", "ana")
    with pytest.raises(RuntimeError, match="closed"):
        a.search("coffee", "ana")
    with Agent(tmp_path / "d", embedder=embedder) as again:  # nothing was lost
        assert [m.text for m in again.memories("ana")] == ["I take my coffee black."]
