"""Source reliability in the agent: confirmed outcomes update it online, it persists with the
graph, and the policy stops committing on a source that keeps being wrong.

The tests that go through the store (recording, replaying and repairing outcomes) run on each
conflict-graph store in turn: SQLite, then PostgreSQL (skipped without
``CAAP_TEST_POSTGRES_DSN``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from caap import Action, Agent, ConflictType, Memory
from caap.conflict_graph import GraphStore, ReliabilityModel
from caap.conflict_graph.postgres import MIGRATIONS
from caap.conflict_graph.reliability import OUTCOME_KEY
from caap.policy import CaapPolicy

APP = "Ethan's gym app"
PARTNER = "Ethan's climbing partner"
# Low-stakes topics on which the app and the partner disagree (written for these tests).
TOPICS = [
    ("climbing", "Ethan's gym app logged 12 climbing sessions in March.",
     "Ethan's climbing partner says Ethan only climbed twice in March.",
     "How much did I climb in March?"),
    ("running", "Ethan's gym app logged 10 runs in April.",
     "Ethan's climbing partner says Ethan went running only once in April.",
     "How often did I run in April?"),
    ("swimming", "Ethan's gym app logged 9 swimming sessions in May.",
     "Ethan's climbing partner says Ethan swam only once in May.",
     "How often did I swim in May?"),
    ("yoga", "Ethan's gym app logged 8 yoga classes in June.",
     "Ethan's climbing partner says Ethan went to yoga only once in June.",
     "How often did I do yoga in June?"),
]  # fmt: skip


@pytest.fixture
def agent(tmp_path: Path, embedder: Any, store_target: str) -> Iterator[Agent]:
    """An agent on each conflict-graph store in turn: SQLite, then PostgreSQL."""
    with Agent(tmp_path / "data", embedder=embedder, store=store_target) as a:
        yield a


@pytest.fixture
def local_agent(tmp_path: Path, embedder: Any) -> Iterator[Agent]:
    """An agent on the default SQLite store, for checks that never reach the store."""
    with Agent(tmp_path / "data", embedder=embedder) as a:
        yield a


def _is_postgres(store_target: str) -> bool:
    return store_target.startswith(("postgresql://", "postgres://"))


def _delete_outcome_rows(store_target: str) -> None:
    # What a kill between the memory's commit and the outcome row's leaves behind.
    if _is_postgres(store_target):
        import psycopg

        with psycopg.connect(store_target, autocommit=True) as conn:
            conn.execute("DELETE FROM caap_reliability_outcomes")
        return
    db = sqlite3.connect(store_target)
    db.execute("DELETE FROM reliability_outcomes")
    db.commit()
    db.close()


def _topic(agent: Agent, n: int, user: str = "ethan") -> str:
    aspect, app, partner, query = TOPICS[n]
    agent.remember_many(
        [
            {"text": app, "aspect": aspect, "source": APP},
            {"text": partner, "aspect": aspect, "source": PARTNER},
        ],
        user,
    )
    return query


def test_a_source_that_keeps_being_wrong_stops_being_committed_on(agent: Agent) -> None:
    first = agent.respond(_topic(agent, 0), "ethan")
    # No track record yet: the standing rule goes with the record (the app).
    assert first.decision.conflict_type is ConflictType.SCC
    assert first.decision.action is Action.COMMIT
    assert "one side is a record (Ethan's gym app)" in first.decision.rationale
    agent.resolve(first, "My partner is right, I only climbed twice.", "ethan", confirms=PARTNER)
    rel = agent.reliability("ethan")
    assert rel.outcomes("gym app") == (0, 1)
    assert rel.outcomes("climbing partner") == (1, 0)

    # One wrong outcome: the app is no longer committed on, and the response says why.
    second = agent.respond(_topic(agent, 1), "ethan")
    assert second.decision.action is Action.VERIFY
    assert "margin" in second.decision.rationale
    assert f"{APP} was right 0 of 1 time" in second.text
    assert "12 climbing" not in second.text  # names this topic's claims, not old ones
    assert "10 runs" in second.text and "only once in April" in second.text
    agent.resolve(second, "The partner had it right.", "ethan", confirms="climbing partner")
    assert agent.reliability("ethan").source_accuracy("gym app") < 0.4

    # A consistent record: the posterior margin clears the threshold, at low stakes, for the
    # source that has been right, and the response names the record behind it.
    third = agent.respond(_topic(agent, 2), "ethan")
    assert third.decision.action is Action.COMMIT
    assert f"favours {PARTNER}" in third.decision.rationale
    assert "I'd go with Ethan's climbing partner" in third.text


def test_reliability_persists_across_reopen(
    tmp_path: Path, embedder: Any, store_target: str
) -> None:
    path = tmp_path / "data"
    with Agent(path, embedder=embedder, store=store_target) as a:
        for n in range(2):
            r = a.respond(_topic(a, n), "ethan")
            a.resolve(r, "My partner is right.", "ethan", confirms=PARTNER)
        before = a.respond(_topic(a, 2), "ethan").decision
        predictions = list(a.reliability("ethan").predictions)
    with Agent(path, embedder=embedder, store=store_target) as b:
        # Replaying the stored outcomes rebuilds the same online calibration state.
        assert b.reliability("ethan").predictions == predictions
        assert len(predictions) == 2
        if isinstance(b.store, GraphStore):
            assert b.store.schema_version == "3"
        else:
            assert b.store.schema_version() == MIGRATIONS[-1][0]
        assert b.reliability("ethan").outcomes("gym app") == (0, 2)
        assert b.reliability("ethan").outcomes("climbing partner") == (2, 0)
        after = b.respond(TOPICS[2][3], "ethan").decision
        assert after.action is before.action is Action.COMMIT
        # Users stay apart: another user starts with no track record.
        assert b.reliability("maya").sources == []


def test_outcome_lost_in_a_crash_is_rebuilt_from_the_memory(
    tmp_path: Path, embedder: Any, store_target: str
) -> None:
    path = tmp_path / "data"
    with Agent(path, embedder=embedder, store=store_target) as a:
        r = a.respond(_topic(a, 0), "ethan")
        m = a.resolve(r, "My partner is right.", "ethan", confirms=PARTNER)
        assert m.metadata[OUTCOME_KEY]["confirmed_source"] == "climbing partner"
    _delete_outcome_rows(store_target)
    with Agent(path, embedder=embedder, store=store_target) as b:
        assert b.reliability("ethan").outcomes("gym app") == (0, 1)
        assert len(b.store.outcomes("ethan")) == 1


def test_the_confirmed_side_is_read_off_a_clear_answer(agent: Agent) -> None:
    r = agent.respond(_topic(agent, 0), "ethan")
    m = agent.resolve(r, "Right, I only climbed twice in March.", "ethan")
    assert m.metadata[OUTCOME_KEY]["confirmed_source"] == "climbing partner"
    # An answer that bears on neither claim records no outcome.
    r = agent.respond(_topic(agent, 1), "ethan")
    m = agent.resolve(r, "Let me check my calendar tonight.", "ethan")
    assert OUTCOME_KEY not in m.metadata
    assert agent.reliability("ethan").outcomes("gym app") == (0, 1)


def test_confirms_must_name_a_source_of_the_decision(local_agent: Agent) -> None:
    agent = local_agent
    r = agent.respond(_topic(agent, 0), "ethan")
    with pytest.raises(ValueError, match="confirms 'the coach' is none of the decision's sources"):
        agent.resolve(r, "The coach knows.", "ethan", confirms="the coach")
    with pytest.raises(ValueError, match="answer must be a non-empty string"):
        agent.resolve(r, "  ", "ethan")
    with pytest.raises(ValueError, match="reliability_threshold"):
        Agent(agent.path, embedder=agent.embedder, reliability_threshold=1.5)
    with pytest.raises(ValueError, match="reliability_recalibrate_after"):
        Agent(agent.path, embedder=agent.embedder, reliability_recalibrate_after=0)


def test_policy_without_a_track_record_is_unchanged(embedder: Any) -> None:
    mems = [
        Memory(id="m0", text=TOPICS[0][1], user_id="ethan", source=APP, aspect="climbing"),
        Memory(id="m1", text=TOPICS[0][2], user_id="ethan", source=PARTNER, aspect="climbing"),
    ]
    policy = CaapPolicy(embedder=embedder)
    plain = policy.respond(mems, TOPICS[0][3])
    empty = policy.respond(mems, TOPICS[0][3], reliability=ReliabilityModel())
    assert plain.decision.action is empty.decision.action is Action.COMMIT
    assert plain.text == empty.text
    # A model where the app has been right every time also commits, now on its record.
    trusted = ReliabilityModel(threshold=0.5)
    for n in range(4):
        trusted.observe(f"t{n}", {"gym app": f"a{n}", "climbing partner": f"b{n}"}, f"a{n}")
    r = policy.respond(mems, TOPICS[0][3], reliability=trusted)
    assert r.decision.action is Action.COMMIT
    assert f"favours {APP}" in r.decision.rationale


@pytest.mark.parametrize("relations", ["rules", "learned"])
def test_a_track_record_settles_a_source_conflict_under_every_layer(
    embedder: Any, relations: str
) -> None:
    # The learned layer also reads the situation as a whole (a source conflict, near certain
    # here); that reading does not know the user's confirmed outcomes, so it must not reopen
    # a conflict they settled at low stakes.
    mems = [
        Memory(id="m0", text=TOPICS[0][1], user_id="ethan", source=APP, aspect="climbing"),
        Memory(id="m1", text=TOPICS[0][2], user_id="ethan", source=PARTNER, aspect="climbing"),
    ]
    policy = CaapPolicy(embedder=embedder, relations=relations)
    partner_right = ReliabilityModel(threshold=0.5)
    for n in range(4):
        partner_right.observe(f"t{n}", {"gym app": f"a{n}", "climbing partner": f"b{n}"}, f"b{n}")
    r = policy.respond(mems, TOPICS[0][3], reliability=partner_right)
    assert r.decision.conflict_type is ConflictType.SCC
    assert r.decision.action is Action.COMMIT
    assert f"favours {PARTNER}" in r.decision.rationale
    assert "only climbed twice" in r.text
    # A record that does not separate them leaves the conflict open.
    split = ReliabilityModel(threshold=0.5)
    for n in range(4):
        right = f"a{n}" if n % 2 else f"b{n}"
        split.observe(f"t{n}", {"gym app": f"a{n}", "climbing partner": f"b{n}"}, right)
    assert policy.respond(mems, TOPICS[0][3], reliability=split).decision.action is not (
        Action.COMMIT
    )


def test_high_stakes_never_commit_on_a_track_record(embedder: Any) -> None:
    mems = [
        Memory(id="m0", text="Maya's clinic record lists ibuprofen as contraindicated for her.",
               user_id="maya", source="Maya's clinic record", aspect="ibuprofen"),
        Memory(id="m1", text="Maya's father says the pediatrician approved ibuprofen for her.",
               user_id="maya", source="Maya's father", aspect="ibuprofen"),
    ]  # fmt: skip
    model = ReliabilityModel()
    for n in range(10):
        model.observe(f"t{n}", {"clinic record": f"a{n}", "father": f"b{n}"}, f"b{n}")
    r = CaapPolicy(embedder=embedder).respond(
        mems, "Can I give Maya ibuprofen tonight?", reliability=model
    )
    assert r.decision.action in (Action.VERIFY, Action.DEFER)


def test_a_version_1_file_opens_and_gains_the_outcomes_table(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '1');
        CREATE TABLE memories (user_id TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL,
            payload TEXT NOT NULL, inferred TEXT NOT NULL, vector BLOB NOT NULL,
            PRIMARY KEY (user_id, id));
        CREATE TABLE edges (id TEXT PRIMARY KEY, user_id TEXT NOT NULL, kind TEXT NOT NULL,
            source_id TEXT NOT NULL, target_id TEXT NOT NULL, payload TEXT NOT NULL,
            expired_at TEXT);
        """
    )
    m = Memory(id="m1", text="Ethan likes tea.", user_id="ethan")
    db.execute(
        "INSERT INTO memories VALUES (?, ?, 1, ?, '[]', ?)",
        ("ethan", "m1", m.model_dump_json(), b"\x00" * 16),
    )
    db.commit()
    db.close()
    store = GraphStore(path)
    assert store.schema_version == "3"
    assert [s.memory.text for s in store.memories("ethan")] == ["Ethan likes tea."]
    assert store.outcomes("ethan") == []
    assert store.add_outcome("ethan", "o1", {"question": "q", "claims": {}, "truth": "x"})
    assert not store.add_outcome("ethan", "o1", {"question": "q", "claims": {}, "truth": "x"})
    store.close()


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite"
    GraphStore(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(ValueError, match="schema version 99, newer than this caap reads"):
        GraphStore(path)
