"""The offline CAAP backbone: each action's trigger, and faithful realization."""

from __future__ import annotations

import re
from typing import Any

import pytest

from caap.models import Action, ConflictType, Memory
from caap.policy import CaapPolicy
from tests.scenarios import BUDGET, DRINKING, MEDICATION, UNRELATED

AGREEING = [
    "Ethan orders a flat white with oat milk at the cafe near the hospital.",
    "Ethan always asks for oat milk because dairy upsets his stomach.",
    "Ethan's usual cafe order is a flat white, never anything sweet.",
]
MEDICATION_3 = [
    *MEDICATION,
    "Pharmacy purchase history shows repeated children's ibuprofen purchases for Maya.",
]
MONEY_PHASES = [
    "In January 2025 Ethan moved his savings into an index fund every payday for three weeks.",
    "In February 2025 Ethan stopped investing and kept his savings in a bank deposit account.",
    "In April 2025 Ethan went back to moving his savings into the index fund for two weeks.",
]
LOW_SCC = [
    "Ethan's gym app logged 12 climbing sessions in March.",
    "Ethan's climbing partner says Ethan only climbed twice in March.",
]
STALE = [
    "In 2023 Ethan lived in a flat in Seattle near Green Lake.",
    "In March 2025 Ethan signed a lease and moved to an apartment in Portland.",
]


@pytest.fixture(scope="module")
def policy(embedder: Any) -> CaapPolicy:
    return CaapPolicy(embedder=embedder)


@pytest.fixture(scope="module")
def rules_policy(embedder: Any) -> CaapPolicy:
    """The policy over the hand-written rules layer, for readings specific to it."""
    return CaapPolicy(embedder=embedder, relations="rules")


def _mems(texts: list[str]) -> list[Memory]:
    return [Memory(id=f"m{i:02d}", text=t, user_id="ethan") for i, t in enumerate(texts)]


def test_agreeing_memories_commit(policy: CaapPolicy) -> None:
    r = policy.respond(_mems(AGREEING + UNRELATED), "What's my usual coffee order?")
    assert r.decision.action is Action.COMMIT
    assert r.decision.conflict_type is ConflictType.NONE
    assert "flat white" in r.text
    assert not r.questions


def test_context_conflict_conditionalizes_with_branches_and_a_question(
    rules_policy: CaapPolicy,
) -> None:
    # Tests the rules layer: its reading of these rules-tuned examples.
    r = rules_policy.respond(_mems(DRINKING + UNRELATED), "Should I have a few drinks tonight?")
    assert r.decision.action is Action.CONDITIONALIZE
    assert r.decision.conflict_type is ConflictType.CPC
    assert len(r.branches) >= 2
    assert r.questions and r.questions[0].endswith("?")
    assert "early shift" in r.text and "next day" in r.text


def test_query_that_names_the_context_commits(rules_policy: CaapPolicy) -> None:
    # Tests the rules layer: its reading of these rules-tuned examples.
    r = rules_policy.respond(
        _mems(DRINKING), "I have an early shift the following morning, should I drink tonight?"
    )
    assert r.decision.action is Action.COMMIT
    assert re.search(r"\bskips? alcohol", r.text), r.text  # "you skip alcohol ..." to the user


def test_oscillation_gets_a_reversible_trial_that_quantifies_the_pattern(
    rules_policy: CaapPolicy,
) -> None:
    # Tests the rules layer: its reading of these rules-tuned examples.
    r = rules_policy.respond(
        _mems(BUDGET + UNRELATED), "How should I track my spending this month?"
    )
    assert r.decision.action is Action.REVERSIBLE_TRIAL
    assert r.decision.conflict_type is ConflictType.BOC
    assert "2 switches" in r.text
    assert "three weeks" in r.text and "two weeks" in r.text
    assert r.questions


def test_oscillation_with_money_at_stake_conditionalizes(rules_policy: CaapPolicy) -> None:
    # Tests the rules layer: its reading of these rules-tuned examples.
    r = rules_policy.respond(_mems(MONEY_PHASES), "Where should I put my savings this month?")
    assert r.decision.conflict_type is ConflictType.BOC
    assert r.decision.action is Action.CONDITIONALIZE


def test_high_risk_source_conflict_verifies_first(policy: CaapPolicy) -> None:
    r = policy.respond(_mems(MEDICATION_3), "Is ibuprofen okay for Maya's fever?")
    assert r.decision.action is Action.VERIFY
    assert r.decision.risk.value == "high"
    for source in ("clinic record", "father", "Pharmacy purchase history"):
        assert source in r.text
    assert "wouldn't act" in r.text or "hold off" in r.text


def test_high_risk_source_conflict_defers_a_requested_action(rules_policy: CaapPolicy) -> None:
    # Tests the rules layer: its reading of these rules-tuned examples.
    r = rules_policy.respond(
        _mems(MEDICATION_3), "Can you tell Maya's babysitter to give her ibuprofen?"
    )
    assert r.decision.action is Action.DEFER


def test_low_stakes_record_against_hearsay_commits_to_the_record(rules_policy: CaapPolicy) -> None:
    # Tests the rules layer: its reading of these rules-tuned examples.
    r = rules_policy.respond(_mems(LOW_SCC), "How much did I climb in March?")
    assert r.decision.conflict_type is ConflictType.SCC
    assert r.decision.action is Action.COMMIT
    assert "gym app" in r.text


def test_stale_state_commits_to_the_current_one(rules_policy: CaapPolicy) -> None:
    # Tests the rules layer: its reading of these rules-tuned examples.
    r = rules_policy.respond(_mems(STALE), "Which city should I search for a dentist in?")
    assert r.decision.conflict_type is ConflictType.STALE
    assert r.decision.action is Action.COMMIT
    assert "Portland" in r.text.split("\n")[0]


def test_realized_responses_cite_only_given_memories(policy: CaapPolicy) -> None:
    mems = _mems(DRINKING + BUDGET + MEDICATION_3 + UNRELATED)
    ids = {m.id for m in mems}
    for q in (
        "Should I drink tonight?",
        "How should I track spending?",
        "Can Maya take ibuprofen?",
        "What instrument do I play?",
    ):
        r = policy.respond(mems, q)
        assert r.cited_memory_ids and set(r.cited_memory_ids) <= ids
        assert set(r.decision.evidence) and all(set(v) <= ids for v in r.decision.evidence.values())


def test_quoted_user_facts_come_from_memories(policy: CaapPolicy) -> None:
    """Every bullet the offline backbone writes quotes a stored memory's words."""
    mems = _mems(DRINKING + MEDICATION_3)
    texts = [m.text.rstrip(".") for m in mems]
    for q in ("Should I drink tonight?", "Can Maya take ibuprofen?"):
        r = policy.respond(mems, q)
        for line in r.text.splitlines():
            m = re.match(r"- [^:]+: (.+?)\.?$", line)
            # Numbered lines are the verification plan, not quotes.
            if m and not re.match(r"- \d+\. ", line):
                quoted = m.group(1).rstrip("…")
                # Quoted in the user's own words, addressed to them ("you skip", not "Ethan
                # skips"): every other word comes from one memory.
                said = _words(quoted)
                assert any(said <= _words(t) for t in texts), line


_PERSON = {"you", "your", "yourself", "he", "she", "his", "her", "him", "i", "my", "ethan", "maya"}
_IRREGULAR = {"has": "have", "is": "are", "was": "were", "does": "do", "goes": "go"}


def _words(text: str) -> set[str]:
    out = set()
    for w in re.findall(r"[a-z']+", text.lower().replace("'s", "")):
        if w not in _PERSON:
            out.add(_IRREGULAR.get(w, w).rstrip("s"))
    return out


def test_policy_never_sees_labels(policy: CaapPolicy) -> None:
    """The decision depends on texts and query only: ids that hint at roles change nothing."""
    a = policy.respond(_mems(DRINKING), "Should I drink tonight?")
    relabelled = [
        Memory(id=f"core-{i}", text=m.text, user_id="ethan") for i, m in enumerate(_mems(DRINKING))
    ]
    b = policy.respond(relabelled, "Should I drink tonight?")
    assert a.decision.action == b.decision.action
    assert a.decision.conflict_type == b.decision.conflict_type


def test_empty_query_is_rejected(policy: CaapPolicy) -> None:
    with pytest.raises(ValueError, match="query"):
        policy.respond(_mems(DRINKING), "  ")


HIGH_CPC = [
    "Maya takes two puffs of her inhaler when she has a cold.",
    "Maya takes one puff of her inhaler before football practice.",
    "Maya takes four puffs of her inhaler when she wakes up wheezing at night.",
]
HIGH_BOC = [
    "In January 2025 Ethan took his blood pressure medication every morning for three weeks.",
    "In February 2025 Ethan stopped taking his blood pressure medication for a month.",
    "In April 2025 Ethan went back to taking his blood pressure medication daily for two weeks.",
]


def test_context_conflict_with_high_stakes_clarifies(rules_policy: CaapPolicy) -> None:
    # Tests the rules layer: its reading of these rules-tuned examples.
    r = rules_policy.respond(_mems(HIGH_CPC), "How many puffs should Maya take now?")
    assert r.decision.conflict_type is ConflictType.CPC
    assert r.decision.risk.value == "high"
    assert r.decision.action is Action.CLARIFY
    assert r.questions and "rather ask than guess" in r.text


def test_oscillation_with_high_stakes_clarifies(rules_policy: CaapPolicy) -> None:
    # Tests the rules layer: its reading of these rules-tuned examples.
    r = rules_policy.respond(_mems(HIGH_BOC), "Should I take my blood pressure pill today?")
    assert r.decision.conflict_type is ConflictType.BOC
    assert r.decision.action is Action.CLARIFY
    assert r.questions


def test_a_large_recall_is_read_where_the_query_points(policy: CaapPolicy) -> None:
    """Past 48 memories the policy reads the ones nearest the query; the conflict survives."""
    filler = [f"Ethan noted item number {i} on his grocery list for week {i}." for i in range(60)]
    mems = _mems(filler + DRINKING)
    r = policy.respond(mems, "Should I have a few drinks tonight?")
    assert r.decision.conflict_type is ConflictType.CPC
    assert {m.id for m in mems if m.text in DRINKING} <= set(r.cited_memory_ids)


def test_no_memory_bearing_on_the_query_asks_instead_of_committing(policy: CaapPolicy) -> None:
    r = policy.respond(_mems(UNRELATED), "Can I give my dog his heartworm tablet with food?")
    assert r.decision.action is Action.CLARIFY
    assert r.questions
    assert "bass guitar" not in r.text


def _dated(rows: list[tuple[str, str, int, int]]) -> list[Memory]:
    from datetime import datetime, timezone

    return [
        Memory(id=i, user_id="ethan", text=t, observed_at=datetime(y, m, 1, tzinfo=timezone.utc))
        for i, t, y, m in rows
    ]


STALE_HISTORY = [
    ("sea", "I live in Seattle, near Green Lake.", 2024, 1),
    ("bike", "I cycle to work every day, about 25 minutes each way.", 2024, 2),
    ("bass", "I play bass in a band on Sundays.", 2024, 3),
    ("leg", "I broke my leg playing basketball last weekend.", 2025, 1),
    ("pdx", "I signed a lease and set up utilities in Portland.", 2025, 2),
]


def test_premise_on_a_superseded_state_is_corrected_and_answered_for_now(
    rules_policy: CaapPolicy,
) -> None:
    # Tests the rules layer: its reading of these rules-tuned examples.
    r = rules_policy.respond(
        _dated(STALE_HISTORY), "Recommend a good Seattle cafe near my place in Green Lake."
    )
    assert r.decision.conflict_type is ConflictType.STALE
    assert r.decision.action is Action.COMMIT
    first = r.text.split("\n")[0]
    assert "out of date" in first and "Portland" in first
    assert "pdx" in r.cited_memory_ids


def test_a_question_about_the_current_state_is_not_treated_as_a_premise(
    policy: CaapPolicy,
) -> None:
    r = policy.respond(_dated(STALE_HISTORY), "Where do I live now?")
    assert r.decision.conflict_type is ConflictType.STALE
    assert r.text.startswith("Going by the most recent information")
    assert "Portland" in r.text.split("\n")[0]


def test_a_stale_answer_quotes_the_news_not_the_request_told_with_it(
    rules_policy: CaapPolicy,
) -> None:
    import dataclasses

    from caap.policy.offline import decide_offline, realize_offline

    # Tests the rules layer's stale reading of these rules-tuned examples; the turn that
    # reports the move then also asks for something, as chat turns do.
    a = rules_policy.analyze(
        _dated(STALE_HISTORY), "Recommend a good Seattle cafe near my place in Green Lake."
    )
    assert a.stale is not None and a.stale.changes[0] == "pdx"
    asks = "Can you find me a quiet cafe near the new place?"
    pdx = a.memories["pdx"]
    a = dataclasses.replace(
        a, memories={**a.memories, "pdx": pdx.model_copy(update={"text": f"{pdx.text} {asks}"})}
    )
    r = realize_offline(a, decide_offline(a))
    assert "Portland" in r.text and "pdx" in r.cited_memory_ids
    assert "quiet cafe" not in r.text, r.text  # the request is not restated as information


def test_uncertain_propagated_invalidation_acts_on_the_current_state_and_verifies(
    rules_policy: CaapPolicy,
) -> None:
    # Tests the rules layer: only it applies the default dependency map unasked.
    r = rules_policy.respond(
        _dated(STALE_HISTORY),
        "Since I ride my bike to work every day, plan my bike maintenance for next month.",
    )
    assert r.decision.conflict_type is ConflictType.STALE
    assert r.decision.action is Action.VERIFY
    # The premise is named as out of date, not blamed on the question (a plain "where do I
    # work?" presupposes nothing).
    assert r.text.startswith("What I had on record for this may no longer hold")
    assert "broke your leg" in r.text  # the change, in the user's words, second person
    # The old habit is put on hold, not offered as an equal branch; what would restore it is
    # asked.
    assert "on hold" in r.text and not r.branches and r.questions
    assert {"leg", "bike"} <= set(r.cited_memory_ids)
    assert r.decision.missing_information and "leg" in r.decision.missing_information


def test_a_weak_stale_reading_is_weighed_against_the_situation_reading(
    rules_policy: CaapPolicy,
) -> None:
    from caap.conflict_graph.relations import SituationVerdict
    from caap.policy.offline import decide_offline

    query = "Since I ride my bike to work every day, plan my bike maintenance for next month."
    a = rules_policy.analyze(_dated(STALE_HISTORY), query)
    assert a.stale is not None and a.stale.propagated and not a.stale.certain
    # Read as a context-dependent preference rather than a change: answered per context.
    a.situation = SituationVerdict({"CPC": 0.8, "STALE": 0.1, "NONE": 0.1})
    d = decide_offline(a)
    assert d.action in (Action.CONDITIONALIZE, Action.CLARIFY)
    assert d.conflict_type is ConflictType.CPC and "fits the likely readings" in d.rationale
    # Read as a change: the reading agrees with the graph's, and cannot tell a replacement
    # the user stated from a dependency the layer inferred; the graph's check stands, not a
    # commit on a replacement nobody stated.
    a.situation = SituationVerdict({"STALE": 0.8, "CPC": 0.1, "NONE": 0.1})
    d = decide_offline(a)
    assert d.action is Action.VERIFY and d.conflict_type is ConflictType.STALE
    assert "fits the likely readings" not in d.rationale


def test_propagated_invalidation_that_states_its_extent_commits(rules_policy: CaapPolicy) -> None:
    # Tests the rules layer: only it applies the default dependency map unasked.
    rows = [
        ("bike", "I cycle to work every day, about 25 minutes each way.", 2024, 2),
        ("leg", "I broke my leg and I'm in a cast for six weeks, no cycling.", 2025, 1),
    ]
    r = rules_policy.respond(_dated(rows), "How should I get to work tomorrow?")
    assert r.decision.conflict_type is ConflictType.STALE
    assert r.decision.action is Action.COMMIT
    assert "on hold" in r.text and not r.branches


def test_a_plain_answer_rests_on_the_memories_that_corroborate_each_other(
    policy: CaapPolicy,
) -> None:
    # The memory nearest the query stands alone; two others were read as saying the same thing.
    # The answer quotes (and the guard holds) the corroborating pair, not the loner.
    import dataclasses

    from caap.models import ConflictCluster, ConflictEdge, EdgeKind
    from caap.policy.offline import _answer

    texts = [
        "Sam's family, who host the sleepover, keep a vegetarian home.",
        "Eli's allergist confirmed a cow's milk allergy.",
        "The action plan the school holds lists cow's milk as Eli's allergen.",
        "Eli lost his first molar last month.",
    ]
    mems = _mems(texts)
    a = policy.analyze(mems, "Can Eli have yogurt at the sleepover?")
    ids = [m.id for m in mems]
    edge = ConflictEdge(
        user_id=mems[0].user_id, kind=EdgeKind.CORROBORATES, source_id=ids[1], target_id=ids[2]
    )
    cluster = ConflictCluster(id="c", user_id=mems[0].user_id, aspect="a", memory_ids=ids[:3])
    a = dataclasses.replace(a, relevant=ids, cluster=cluster)
    assert _answer(a) == ids[:3]  # nothing corroborates: the most relevant, as before
    a = dataclasses.replace(a, cluster=cluster.model_copy(update={"edges": [edge]}))
    assert _answer(a) == [ids[1], ids[2]]
    closed = edge.model_copy(update={"expired_at": edge.created_at})
    a = dataclasses.replace(a, cluster=cluster.model_copy(update={"edges": [closed]}))
    assert _answer(a) == ids[:3]  # a closed edge says nothing now


def test_a_later_memory_read_as_ruling_the_old_state_out_is_checked_not_committed(
    rules_policy: CaapPolicy,
) -> None:
    # The graph typed nothing; the situation reading says a later state replaced an earlier
    # one. A new value of the state is acted on; a change the layer reads as ruling the
    # earlier state out (a dependency it inferred, extent unstated) is checked first.
    import dataclasses

    from caap.conflict_graph.relations import SituationVerdict
    from caap.policy.offline import decide_offline, realize_offline

    rows = [
        ("swim", "I swim at the lido every Saturday morning.", 2024, 3),
        ("knee", "The physio says no kicking for a while after the knee op.", 2024, 9),
    ]
    a = rules_policy.analyze(_dated(rows), "Book my usual Saturday swim.")
    a = dataclasses.replace(
        a,
        cluster=None,
        stale=None,
        resolution=None,
        relevant=["swim", "knee"],
        situation=SituationVerdict({"STALE": 0.8, "NONE": 0.2}),
        successor="knee",
        successor_rules_out=False,
    )
    assert decide_offline(a).action is Action.COMMIT
    ruled_out = dataclasses.replace(a, successor_rules_out=True)
    d = decide_offline(ruled_out)
    assert d.action is Action.VERIFY and d.conflict_type is ConflictType.STALE
    assert "ruling the earlier state out" in d.rationale
    text = realize_offline(ruled_out, d).text
    assert "how far that change goes" in text and "stakes are high" not in text
