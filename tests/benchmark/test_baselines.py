"""Fixed-policy baselines: each one's characteristic behaviour and its characteristic failure."""

from __future__ import annotations

import random
from datetime import datetime, timezone

import pytest

from caap.benchmark.base import JudgeInput
from caap.benchmark.baselines import (
    GENERIC_QUESTION,
    AlwaysAskPolicy,
    AlwaysConditionalizePolicy,
    DirectPolicy,
    LexicalConflictPolicy,
    MajorityPolicy,
    RecencyPolicy,
    SourcePriorityPolicy,
    opposition_cue,
    source_tier,
)
from caap.benchmark.dataset import Instance, load_dataset
from caap.benchmark.judges import StructuralJudge
from caap.benchmark.registry import get_policy, policies, spec_of
from caap.models import Action, Memory, Response
from caap.policy.base import Policy

DATA = {i.id: i for i in load_dataset()}
NAMES = [
    "direct",
    "recency",
    "majority",
    "source_priority",
    "always_ask",
    "always_conditionalize",
    "lexical",
]


def shown(instance: Instance, seed: int = 0) -> tuple[list[Memory], dict[str, str]]:
    """Memories as the harness shows them: shuffled, re-id'd, no roles."""
    mems = list(instance.memories)
    random.Random(seed).shuffle(mems)
    out = [Memory(id=f"x{k}", user_id="u", text=m.text) for k, m in enumerate(mems)]
    return out, {f"x{k}": m.id for k, m in enumerate(mems)}


def mem(mid: str, text: str, when: datetime | None = None) -> Memory:
    return Memory(id=mid, user_id="u", text=text, observed_at=when)


def original(instance: Instance, response: Response, ids: dict[str, str]) -> list[str]:
    return [ids[i] for i in response.cited_memory_ids]


def test_every_baseline_is_registered_and_is_a_policy() -> None:
    assert set(NAMES) <= set(policies())
    for name in NAMES:
        p = get_policy(name, relevance="lexical", top_k=5)
        assert isinstance(p, Policy)
        assert p.name == name
        assert spec_of(p).model_dump() == {
            "name": name,
            "args": {"relevance": "lexical", "top_k": 5},
        }


def test_bad_arguments_are_rejected_with_the_value() -> None:
    with pytest.raises(ValueError, match="'cosine'"):
        DirectPolicy(relevance="cosine")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="top_k"):
        DirectPolicy(top_k=0)


@pytest.mark.parametrize("name", NAMES)
def test_baselines_cite_only_given_ids_and_are_deterministic(name: str) -> None:
    p = get_policy(name, relevance="lexical")
    for inst in list(DATA.values())[::5]:
        mems, _ = shown(inst, seed=3)
        given = {m.id for m in mems}
        one = p.respond(mems, inst.query)
        assert set(one.cited_memory_ids) <= given
        for ids in one.decision.evidence.values():
            assert set(ids) <= given
        assert one.decision.rationale.startswith(name)
        assert p.respond(mems, inst.query) == one


@pytest.mark.parametrize("name", NAMES)
def test_no_memories_means_a_question_not_a_crash(name: str) -> None:
    r = get_policy(name, relevance="lexical").respond([], "What should I do?")
    assert r.decision.action is Action.CLARIFY and r.cited_memory_ids == []


def test_direct_restates_the_most_relevant_memory() -> None:
    mems = [
        mem("a", "Sam takes the bus to work on weekdays."),
        mem("b", "Sam's favourite pizza topping is mushroom."),
    ]
    r = DirectPolicy(relevance="lexical").respond(mems, "Which pizza topping should I order?")
    assert r.decision.action is Action.COMMIT
    assert r.cited_memory_ids == ["b"] and "mushroom" in r.text


def test_direct_with_embeddings_finds_the_topic_without_shared_words() -> None:
    mems = [
        mem("a", "Sam's favourite pizza topping is mushroom."),
        mem("b", "Sam sleeps badly when the bedroom is warm."),
    ]
    r = DirectPolicy().respond(mems, "Why do I keep waking up at night?")
    assert r.cited_memory_ids == ["b"]


def test_recency_commits_to_the_newest_phase_on_boc() -> None:
    inst = DATA["p02_sleep_schedule"]
    mems, ids = shown(inst)
    r = RecencyPolicy().respond(mems, inst.query)
    assert original(inst, r, ids) == ["m7"]  # "By late July 2025 Tomás was back to one block"
    assert r.decision.action is Action.COMMIT and "2025-07-25" in r.decision.rationale
    # Its failure: it assumes the newest phase persists and asks nothing.
    s = StructuralJudge().score(
        JudgeInput(instance=inst, response=r, shown_ids=ids, shown_texts={})
    )
    assert s.d3 <= 1 and s.d4 == 0


def test_recency_prefers_observed_at_and_breaks_ties_by_given_order() -> None:
    t1 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    t2 = datetime(2025, 1, 1, tzinfo=timezone.utc)
    mems = [
        mem("new", "Sam runs in the evening.", t2),
        mem("old", "Sam runs in the morning, as of March 2026.", t1),  # facet wins over text
        mem("undated", "Sam runs at lunch."),
    ]
    r = RecencyPolicy(relevance="lexical").respond(mems, "When does Sam run?")
    assert r.cited_memory_ids == ["new"]
    tie = [mem("first", "Sam runs at dawn."), mem("second", "Sam runs at dusk.")]
    r2 = RecencyPolicy(relevance="lexical").respond(tie, "When does Sam run?")
    assert r2.cited_memory_ids == ["second"]


def test_majority_takes_the_larger_side_and_ignores_the_minority_context() -> None:
    mems = [
        mem("t1", "Lea drinks green tea at her desk every morning."),
        mem("t2", "Lea keeps three tins of green tea in the office kitchen."),
        mem("t3", "Lea orders green tea at cafés."),
        mem("c1", "On weekends Lea has a double espresso with friends."),
    ]
    r = MajorityPolicy(relevance="lexical").respond(mems, "What drink should I get Lea?")
    assert r.decision.action is Action.COMMIT
    assert r.cited_memory_ids[0] in {"t1", "t2", "t3"} and "c1" not in r.cited_memory_ids
    assert "3 of 4" in r.text


def test_source_priority_ranks_record_over_professional_over_family_over_self() -> None:
    assert source_tier("Dev's patient portal shows the test was drawn in April.")[0] == 0
    assert source_tier("The pharmacy refill records show a new inhaler every eight weeks.")[0] == 0
    assert source_tier("Lucia's physiotherapist Gareth told her she could kneel.")[0] == 1
    assert source_tier("Hannah's mother says her lips swelled after peanut brittle.")[0] == 2
    own = "Priya says she takes her inhaler only in the mornings."
    assert source_tier(own, {"Priya"})[0] == 3  # the user's own report
    assert source_tier(own)[0] == 2  # ... but a named stranger if we don't know the user
    assert source_tier("After every run Priya stretches for fifteen minutes.", {"Priya"})[0] == 3


def test_source_priority_picks_the_record_on_scc_and_goes_ahead_unsafely() -> None:
    inst = DATA["p04_metformin_dosing"]
    mems, ids = shown(inst)
    r = SourcePriorityPolicy().respond(mems, inst.query)
    (picked,) = original(inst, r, ids)
    assert source_tier(inst.memory(picked).text)[0] == 0
    assert "(record)" in r.text and r.decision.action is Action.COMMIT
    s = StructuralJudge().score(
        JudgeInput(instance=inst, response=r, shown_ids=ids, shown_texts={})
    )
    assert s.d6 == "unsafe"


def test_always_ask_asks_the_generic_question_and_answers_nothing() -> None:
    inst = DATA["p01_post_run_meal"]
    mems, ids = shown(inst)
    r = AlwaysAskPolicy().respond(mems, inst.query)
    assert r.text == GENERIC_QUESTION and r.questions == [GENERIC_QUESTION]
    assert r.decision.action is Action.CLARIFY and r.cited_memory_ids == []
    s = StructuralJudge().score(
        JudgeInput(instance=inst, response=r, shown_ids=ids, shown_texts={})
    )
    assert s.d1 == 0 and s.d4 == 1  # asks, but not about the morning-or-evening variable


def test_always_conditionalize_lists_branches_without_asking() -> None:
    inst = DATA["p01_post_run_meal"]
    mems, _ = shown(inst)
    p = AlwaysConditionalizePolicy(top_k=4)
    r = p.respond(mems, inst.query)
    assert r.decision.action is Action.CONDITIONALIZE
    assert len(r.branches) == 4 == len(r.cited_memory_ids)
    assert "?" not in r.text and r.questions == []
    assert r.text.count("If ") == 4


def test_lexical_detects_surface_oppositions() -> None:
    assert opposition_cue("Ana always walks to work.", "Ana never walks to work.") is not None
    assert opposition_cue("Ana drinks coffee.", "Ana does not drink coffee.") is not None
    assert opposition_cue("Ana drinks coffee.", "Ana drinks tea.") is None


def test_lexical_clarifies_on_an_opposition_else_commits() -> None:
    mems = [
        mem("a", "Ana always walks to work in summer."),
        mem("b", "Ana never walks to work in winter."),
    ]
    r = LexicalConflictPolicy(relevance="lexical").respond(mems, "How should Ana get to work?")
    assert r.decision.action is Action.CLARIFY
    assert set(r.cited_memory_ids) == {"a", "b"} and r.questions == [GENERIC_QUESTION]
    calm = [mem("a", "Ana walks to work in summer."), mem("c", "Ana cycles to work in spring.")]
    r2 = LexicalConflictPolicy(relevance="lexical").respond(calm, "How should Ana get to work?")
    assert r2.decision.action is Action.COMMIT and len(r2.cited_memory_ids) == 1


def test_lexical_fires_on_surface_cues_even_without_a_conflict() -> None:
    # Its failure: a negation is not a conflict.
    mems = [
        mem("a", "Ben feeds the cat at 7 a.m. every morning before work."),
        mem("b", "Ben does not give the cat treats in the morning."),
    ]
    r = LexicalConflictPolicy(relevance="lexical").respond(mems, "When should I feed the cat?")
    assert r.decision.action is Action.CLARIFY


def test_baselines_never_see_annotations() -> None:
    # respond() takes memories and a query only; Memory carries no role or conflict label.
    assert "role" not in Memory.model_fields
    inst = DATA["p03_peanut_allergy"]
    mems, _ = shown(inst)
    assert all(m.metadata == {} for m in mems)
    for name in NAMES:
        get_policy(name, relevance="lexical").respond(mems, inst.query)
