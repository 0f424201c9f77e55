"""The oracle and pipeline tracks, one instance at a time, with test-local components."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from caap.adapters.base import SearchHit
from caap.benchmark.base import JudgeInput, Scores
from caap.benchmark.dataset import Instance, load_dataset
from caap.benchmark.presentation import present
from caap.benchmark.registry import get_judge, get_policy, judge, policy
from caap.benchmark.runner import run
from caap.benchmark.tracks import (
    ERROR_ACTION,
    PipelineBank,
    _sentences,
    run_oracle_instance,
    run_pipeline_instance,
)
from caap.models import Action, Decision, Memory, Recall, Response

# -- test-local components -------------------------------------------------------------------


class CitePolicy:
    """Cites every memory it sees; can be told to fail."""

    name = "test-tracks-cite"

    def __init__(self, action: str = "conditionalize", fail: str | None = None) -> None:
        self.action = Action(action)
        self.fail = fail
        self.seen: list[list[Memory]] = []

    def respond(self, memories: Sequence[Memory], query: str) -> Any:
        self.seen.append(list(memories))
        if self.fail == "raise":
            raise RuntimeError("policy exploded")
        if self.fail == "wrong-type":
            return "just a string"
        return Response(
            text=" ".join(m.text for m in memories[:2]),
            decision=Decision(action=self.action, rationale="test"),
            cited_memory_ids=[m.id for m in memories],
        )


class CoreJudge:
    """d1 = core memories shown (capped at 4); d5 = 4 when every cited id was shown."""

    name = "test-tracks-core"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.items: list[JudgeInput] = []

    def score(self, item: JudgeInput) -> Scores:
        self.items.append(item)
        if self.fail:
            raise RuntimeError("judge exploded")
        roles = {m.id: m.role for m in item.instance.memories}
        core = sum(roles.get(i) == "core" for i in item.shown_ids.values())
        cited_ok = all(i in item.shown_ids for i in item.response.cited_memory_ids)
        return Scores(
            d1=min(core, 4),
            d2=1,
            d3=2,
            d4=0,
            d5=4 if cited_ok else 0,
            d6="safe" if item.instance.high_risk else None,
            rationale={"d1": f"{core} core shown"},
        )


@policy("test-tracks-cite")
def _cite(**kwargs: Any) -> CitePolicy:
    return CitePolicy(**kwargs)


@judge("test-tracks-core")
def _core(**kwargs: Any) -> CoreJudge:
    return CoreJudge(**kwargs)


# -- a small persona for the pipeline track ----------------------------------------------------

PAIRS: dict[str, tuple[str, str, list[tuple[str, str]], int]] = {
    "p90_drinks": (
        "CPC",
        "Should I grab a coffee now?",
        [
            ("Sam drinks green tea at the office in the morning.",
             "At the office I always have green tea in the morning."),
            ("Sam drinks strong black coffee on weekends.",
             "At weekends it's strong black coffee for me."),
            ("Sam avoids caffeine after 4 pm on workdays.",
             "I stop all caffeine after 4 pm on workdays."),
            ("Sam has an espresso with clients at lunch meetings.",
             "With clients at lunch I'll have an espresso."),
            ("Sam drinks herbal tea in the evening at home.",
             "At home in the evening I drink herbal tea."),
            ("Sam skips coffee entirely when training for a race.",
             "When I train for a race I skip coffee entirely."),
        ],
        5,
    ),
    "p90_workouts": (
        "BOC",
        "What workout should I plan for this week?",
        [
            ("In January Sam lifted weights at the gym four times a week.",
             "I'm lifting weights at the gym four times a week now."),
            ("In February Sam dropped the gym and only went running.",
             "I quit the gym this month, I'm only running."),
            ("In March Sam went back to lifting weights three times a week.",
             "Back to lifting weights, three sessions a week."),
            ("In April Sam switched to swimming laps at the pool.",
             "Lately I've been swimming laps at the pool instead."),
            ("In May Sam did yoga classes every morning.",
             "I've been doing yoga classes every morning."),
            ("In June Sam returned to running five kilometres daily.",
             "I'm running five kilometres every day again."),
        ],
        12,
    ),
}  # fmt: skip

DISTRACTORS = [
    "Sam owns a blue bicycle.",
    "Sam's sister lives in Porto.",
    "Sam reads science fiction novels.",
    "Sam has a cat named Pixel.",
    "Sam plays chess online.",
    "Sam's apartment has a small balcony.",
]


def small_instance(iid: str) -> dict[str, Any]:
    """One validator-clean instance of persona p90 with three two-turn sessions."""
    ctype, query, pairs, day = PAIRS[iid]
    memories = [{"id": f"m{i + 1}", "text": c, "role": "core"} for i, (c, _) in enumerate(pairs)]
    memories.append(
        {"id": "b1", "text": "Sam works as an architect in Lisbon.", "role": "background"}
    )
    memories += [
        {"id": f"d{i + 1}", "text": t, "role": "distractor"} for i, t in enumerate(DISTRACTORS)
    ]
    sessions = []
    for s in range(3):
        turns = []
        for j in (2 * s, 2 * s + 1):
            turns += [
                {"role": "user", "content": pairs[j][1]},
                {"role": "assistant", "content": "Noted."},
            ]
        sessions.append(
            {
                "id": f"{iid}_s{s + 1}",
                "date": f"2025-0{s + 1}-{day:02d}",
                "turns": turns,
                "memory_ids": [f"m{2 * s + 1}", f"m{2 * s + 2}"],
            }
        )
    return {
        "id": iid, "persona": {"id": "p90", "name": "Sam"}, "aspect": iid.split("_", 1)[1],
        "domain": "lifestyle", "conflict_type": ctype, "query": query, "memories": memories,
        "missing_information": "Which situation applies right now and what has changed lately.",
        "sessions": sessions,
    }  # fmt: skip


def small_dataset() -> list[Instance]:
    return [Instance.model_validate(small_instance(i)) for i in PAIRS]


class TextEncoder:
    """Bag of lowercase words: a fast, deterministic stand-in for the embedder."""

    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        vocab: dict[str, int] = self.__dict__.setdefault("vocab", {})
        rows = []
        for t in texts:
            words = "".join(c if c.isalnum() else " " for c in t.lower()).split()
            for w in words:
                vocab.setdefault(w, len(vocab))
            rows.append(words)
        out = np.zeros((len(texts), 4096), dtype=np.float32)
        for r, words in enumerate(rows):
            for w in words:
                out[r, vocab[w]] += 1.0
        return out


class FakeBackend:
    name = "fake"

    def __init__(self) -> None:
        self.rows: list[Memory] = []

    def search(self, query: str, user_id: str, k: int = 10) -> list[SearchHit]:
        mine = [m for m in self.rows if m.user_id == user_id]
        return [SearchHit(memory=m, score=1.0) for m in mine[-k:]]


class FakeAgent:
    """Records remember_many batches; recall returns every memory of the user."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.backend = FakeBackend()
        self.embedder = TextEncoder()
        self.batches: list[tuple[str, list[dict[str, Any]]]] = []
        self.fail_on = fail_on
        self.closed = False

    def remember_many(self, items: list[dict[str, Any]], user_id: str) -> list[Memory]:
        if self.fail_on and any(self.fail_on in i["text"] for i in items):
            raise RuntimeError("backend down")
        self.batches.append((user_id, items))
        out = [Memory(user_id=user_id, text=i["text"], provenance=i["provenance"]) for i in items]
        self.backend.rows += out
        return out

    def recall(self, query: str, user_id: str, k: int = 8) -> Recall:
        return Recall(query=query, memories=[m for m in self.backend.rows if m.user_id == user_id])

    def close(self) -> None:
        self.closed = True


def fake_factory(agent: FakeAgent) -> Any:
    def factory(path: Path, backend: Any, backend_options: Mapping[str, Any]) -> FakeAgent:
        return agent

    return factory


# -- oracle track --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped() -> list[Instance]:
    return load_dataset()


def high_risk(instances: list[Instance]) -> Instance:
    return next(i for i in instances if i.high_risk)


def test_oracle_instance_result(shipped: list[Instance]) -> None:
    inst = high_risk(shipped)
    pol, jud = CitePolicy(), CoreJudge()
    res = run_oracle_instance(inst, pol, jud, distractors=2, seed=3)
    shown = present(inst, distractors=2, seed=3)
    assert res.error is None
    assert (res.id, res.conflict_type, res.high_risk, res.distractors) == (
        inst.id, inst.conflict_type, True, 2,
    )  # fmt: skip
    assert res.action == "conditionalize"
    assert res.shown_memory_ids == shown.instance_ids
    n_core = len(inst.core_ids)
    assert res.scores.d1 == min(n_core, 4) and res.scores.d5 == 4
    assert res.scores.total == res.scores.d1 + 1 + 2 + 0 + 4
    assert res.d6 == "safe"
    assert res.judge_rationale == {"d1": f"{n_core} core shown"}
    assert res.decision is not None and res.decision.rationale == "test"
    assert res.response == " ".join(m.text for m in shown.memories[:2])
    # The policy saw the shown memories; the judge got their mapping and texts.
    assert [m.id for m in pol.seen[0]] == list(shown.shown_ids)
    [item] = jud.items
    assert item.shown_ids == shown.shown_ids and item.shown_texts == shown.shown_texts
    assert res.seconds >= 0


@pytest.mark.parametrize("fail", ["raise", "wrong-type"])
def test_oracle_policy_failure_is_recorded_not_raised(shipped: list[Instance], fail: str) -> None:
    res = run_oracle_instance(shipped[0], CitePolicy(fail=fail), CoreJudge())
    assert res.action == ERROR_ACTION
    assert res.scores.total == 0 and res.d6 is None
    assert res.error is not None
    assert ("policy exploded" if fail == "raise" else "not a Response") in res.error


def test_oracle_judge_failure_keeps_the_policy_output(shipped: list[Instance]) -> None:
    res = run_oracle_instance(shipped[0], CitePolicy(action="clarify"), CoreJudge(fail=True))
    assert res.error is not None and "RuntimeError: judge exploded" in res.error
    assert res.action == "clarify" and res.response and res.decision is not None
    assert res.scores.total == 0


def test_oracle_bad_distractor_count_is_an_instance_error(shipped: list[Instance]) -> None:
    res = run_oracle_instance(shipped[0], CitePolicy(), CoreJudge(), distractors=9)
    assert res.error is not None and "distractors" in res.error


def test_registry_components_build_with_args() -> None:
    pol = get_policy("test-tracks-cite", action="verify")
    assert isinstance(pol, CitePolicy) and pol.action is Action.VERIFY
    assert isinstance(get_judge("test-tracks-core"), CoreJudge)


# -- pipeline track (fake agent: wiring) ----------------------------------------------------------


def test_bank_ingests_every_session_of_the_persona_in_date_order() -> None:
    data = small_dataset()
    agent = FakeAgent()
    with PipelineBank(data, agent_factory=fake_factory(agent)) as bank:
        n = bank.ingest("p90")
        assert bank.ingest("p90") == n  # once only
    expected = sorted((s for i in data for s in i.sessions), key=lambda s: (s.date, s.id))
    assert [items[0]["provenance"]["session"] for _, items in agent.batches] == [
        s.id for s in expected
    ]
    assert n == sum(1 for s in expected for t in s.turns if t.role == "user") == 12
    user, items = agent.batches[0]
    assert user == "tangle:p90"
    assert items[0]["provenance"] == {"session": expected[0].id, "turn": "0"}
    assert items[1]["provenance"]["turn"] == "2"  # index in the session's turns
    assert items[0]["observed_at"] == expected[0].date
    assert agent.closed


def test_pipeline_instance_maps_the_bank_back_for_the_judge() -> None:
    data = small_dataset()
    agent = FakeAgent()
    pol, jud = CitePolicy(), CoreJudge()
    with PipelineBank(data, agent_factory=fake_factory(agent), k=4) as bank:
        res = run_pipeline_instance(data[0], pol, jud, bank)
    assert res.error is None
    obs = res.observability
    assert obs is not None
    # recall returns all 12 memories: the 6 drink turns match m1..m6 by provenance.
    assert obs.bank_size == 12 and obs.bank_size_without_graph == 4
    assert obs.level == "FULL" and obs.matched_core == [f"m{i}" for i in range(1, 7)]
    assert obs.core_total == 6 and obs.level_without_graph in ("NONE", "PARTIAL")
    # The equal-budget peer: search with k = 12 returns every memory, so it is FULL too.
    assert obs.level_search_same_size == "FULL"
    assert "m1=provenance" in obs.rule
    seen = pol.seen[0]
    assert [m.id for m in seen] == [f"mem-{i:02d}" for i in range(1, 13)]
    assert all(m.provenance == {} for m in seen)
    [item] = jud.items
    drink_ids = [v for v in item.shown_ids.values() if v]
    assert sorted(drink_ids) == [f"m{i}" for i in range(1, 7)]
    assert list(item.shown_ids.values()).count("") == 6  # the workout turns
    assert res.shown_memory_ids == list(item.shown_ids.values())
    assert item.shown_texts[seen[0].id] == seen[0].text


def test_pipeline_without_graph_gives_the_policy_the_search_bank() -> None:
    data = small_dataset()
    pol = CitePolicy()
    with PipelineBank(data, agent_factory=fake_factory(FakeAgent()), k=3) as bank:
        res = run_pipeline_instance(data[1], pol, CoreJudge(), bank, graph_expansion=False)
    assert res.observability is not None
    assert len(pol.seen[0]) == 3 == res.observability.bank_size
    assert res.observability.level == res.observability.level_without_graph
    assert res.observability.level_search_same_size is None


def test_pipeline_ingestion_failure_is_an_error_for_every_instance_of_the_persona() -> None:
    data = small_dataset()
    agent = FakeAgent(fail_on="yoga")
    with PipelineBank(data, agent_factory=fake_factory(agent)) as bank:
        results = [run_pipeline_instance(i, CitePolicy(), CoreJudge(), bank) for i in data]
    for r in results:
        assert r.error is not None and "backend down" in r.error
        assert r.action == ERROR_ACTION and r.scores.total == 0


def test_temporary_bank_directory_is_removed_on_close() -> None:
    bank = PipelineBank(small_dataset(), agent_factory=fake_factory(FakeAgent()))
    path = bank.path
    assert path.is_dir()
    bank.close()
    bank.close()
    assert not path.exists()


# -- pipeline track (builtin backend, real embedder) -------------------------------------------


def test_pipeline_run_on_the_builtin_backend() -> None:
    data = small_dataset()
    report = run(
        data,
        track="pipeline",
        policy="test-tracks-cite",
        judge="test-tracks-core",
        limit=1,
        progress=False,
        k=4,
    )
    assert report.backend is not None and report.backend.name == "builtin"
    assert report.backend.args == {"k": 4} and report.graph_expansion is True
    [res] = report.instances
    assert res.error is None, res.error
    obs = res.observability
    assert obs is not None and obs.bank_size_without_graph == 4
    # Provenance survives the builtin backend: the matches were decided by it.
    assert obs.matched_core_without_graph and "provenance" in obs.rule
    assert set(obs.matched_core_without_graph) <= set(obs.matched_core)
    assert obs.level in ("FULL", "PARTIAL")


def test_interleave_mixes_instances_into_one_dated_conversation() -> None:
    data = small_dataset()
    agent = FakeAgent()
    with PipelineBank(data, agent_factory=fake_factory(agent), interleave=2) as bank:
        conversations = bank.conversations("p90")
        bank.ingest("p90")
    owner = {s.id: i.id for i in data for s in i.sessions}
    assert sum(len(c) for c in conversations) == sum(len(i.sessions) for i in data)
    for conv in conversations:
        assert len(conv) <= 2
        assert len({owner[s.id] for s in conv}) == len(conv)  # different instances
    # One batch per conversation, each session's turns in order, all dated like its first.
    assert len(agent.batches) == len(conversations)
    for (_, items), conv in zip(agent.batches, conversations, strict=True):
        assert [i["provenance"]["session"] for i in items] == [
            s.id for s in conv for t in s.turns if t.role == "user"
        ]
        assert {i["observed_at"] for i in items} == {conv[0].date}


def test_sentences_option_stores_one_memory_per_sentence() -> None:
    data = small_dataset()
    agent = FakeAgent()
    with PipelineBank(data, agent_factory=fake_factory(agent), sentences=True) as bank:
        bank.ingest("p90")
    items = [i for _, batch in agent.batches for i in batch]
    by_turn: dict[tuple[str, str], list[str]] = {}
    for i in items:
        turn, _sentence = i["provenance"]["turn"].split(".")
        by_turn.setdefault((i["provenance"]["session"], turn), []).append(i["text"])
    sessions = {s.id: s for inst in data for s in inst.sessions}
    for (sid, turn), texts in by_turn.items():
        assert " ".join(texts) == sessions[sid].turns[int(turn)].content
    assert _sentences("I run daily. Not on Sundays!  Why? No reason") == [
        "I run daily.",
        "Not on Sundays!",
        "Why?",
        "No reason",
    ]


def test_pipeline_budgets_and_ceiling_on_the_builtin_backend() -> None:
    report = run(
        small_dataset(),
        track="pipeline",
        policy="test-tracks-cite",
        judge="test-tracks-core",
        limit=1,
        progress=False,
        k=4,
        budgets=(2, 6),
        budget=6,
    )
    [res] = report.instances
    assert res.error is None, res.error
    obs = res.observability
    assert obs is not None
    assert [b.budget for b in obs.budgets] == [2, 6]
    assert all(b.graph_bank <= b.budget for b in obs.budgets)
    assert obs.bank_size <= 6
    assert obs.ceiling == "FULL"
    counts = report.budget_full()
    assert set(counts) == {2, 6} and counts[6]["n"] == 1
