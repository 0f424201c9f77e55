"""Offline realization when the graph's sides carry little: conditions nobody stated, a single
stated condition, and source labels taken from the start of a sentence."""

from __future__ import annotations

from caap.models import Action, ConflictCluster, ConflictType, Decision, Memory, RiskTier
from caap.policy._analysis import Analysis
from caap.policy.offline import decide_offline, realize_offline

TEXTS = {
    "a": "Lena drinks her coffee black and strong.",
    "b": "Lena takes a big milky latte with oat milk.",
    "c": "Lena sometimes has a flat white.",
}


def _cpc(sides: dict[str, list[str]]) -> Analysis:
    return Analysis(
        query="How does Lena take her coffee?",
        memories={i: Memory(id=i, text=t, user_id="lena") for i, t in TEXTS.items()},
        cluster=ConflictCluster(
            id="c1",
            user_id="lena",
            aspect="coffee",
            memory_ids=list(TEXTS),
            conflict_type=ConflictType.CPC,
            unresolved="which context applies",
            sides=sides,
        ),
        relevant=list(TEXTS),
        relevance={"a": 0.8, "b": 0.75, "c": 0.5},
        risk=RiskTier.LOW,
        subject={"Lena"},
    )


def test_a_context_conflict_with_no_stated_condition_shows_the_answers_and_asks() -> None:
    a = _cpc({"no condition stated": ["a", "b", "c"]})
    d = decide_offline(a)
    assert d.action is Action.CONDITIONALIZE
    assert d.missing_information and not d.missing_information.rstrip().endswith(":")
    r = realize_offline(a, d)
    assert "0 conditions" not in r.text and "something else" not in r.text
    assert "black and strong" in r.text and "oat milk" in r.text
    assert set(r.cited_memory_ids) >= {"a", "b"}
    assert len(r.questions) == 1
    # The question offers the two answers on record, not an empty list of situations.
    assert "black" in r.questions[0] and "latte" in r.questions[0]
    assert not r.text.rstrip().endswith(": .")


def test_a_single_stated_condition_is_offered_against_any_other_situation() -> None:
    a = _cpc({"on weekdays": ["a"], "no condition stated": ["b", "c"]})
    r = realize_offline(a, decide_offline(a))
    assert "1 conditions" not in r.text and "one condition is on record" in r.text
    assert r.questions == ["Is this for on weekdays, or a different situation?"]
    assert "oat milk" in r.text  # the unconditioned answer is still shown


def test_two_stated_conditions_keep_the_branch_per_context() -> None:
    a = _cpc({"on weekdays": ["a"], "at weekends": ["b"]})
    r = realize_offline(a, decide_offline(a))
    assert "2 conditions are on record" in r.text
    assert len(r.branches) == 2
    assert "on weekdays" in r.questions[0] and "at weekends" in r.questions[0]


def _scc(texts: dict[str, str], sides: dict[str, list[str]], risk: RiskTier) -> Analysis:
    return Analysis(
        query="What does the record say?",
        memories={i: Memory(id=i, text=t, user_id="u") for i, t in texts.items()},
        cluster=ConflictCluster(
            id="scc",
            user_id="u",
            aspect="claim",
            memory_ids=list(texts),
            conflict_type=ConflictType.SCC,
            unresolved="which source is authoritative",
            sides=sides,
            source_count=len(sides),
        ),
        relevant=list(texts),
        relevance=dict.fromkeys(texts, 0.8),
        risk=risk,
    )


def test_a_source_label_from_a_sentence_start_reads_in_lower_case_inside_sentences() -> None:
    texts = {
        "a": "Her son said the new dose is 100 micrograms a day.",
        "b": "The pharmacy label says 50 micrograms a day.",
    }
    a = _scc(texts, {"Her son": ["a"], "The pharmacy label": ["b"]}, RiskTier.HIGH)
    d = decide_offline(a)
    assert d.action is not Action.COMMIT
    r = realize_offline(a, d)
    assert "- Her son:" in r.text  # a bullet still starts with a capital
    assert "Ask her son" in r.text and "Ask Her son" not in r.text
    assert "her son" in r.questions[0] and "the pharmacy label" in r.questions[0]


def test_undated_phases_are_numbered_not_dated_from_an_undated_point() -> None:
    from caap.conflict_graph.rules import Phase, TemporalReading

    texts = {
        "a": "Yara wrote from 5 to 9 in the morning, an early routine.",
        "b": "Then Yara moved her writing to late at night, after an evening walk.",
        "c": "Yara is back to writing at dawn, an alarm at five.",
    }
    phases = tuple(
        Phase(label=n % 2, members=(i,), start=None, duration=None) for n, i in enumerate(texts)
    )
    a = Analysis(
        query="When should Yara block focus time?",
        memories={i: Memory(id=i, text=t, user_id="yara") for i, t in texts.items()},
        cluster=ConflictCluster(
            id="c3",
            user_id="yara",
            aspect="focus",
            memory_ids=list(texts),
            conflict_type=ConflictType.BOC,
            unresolved="which phase is current",
            sides={"0": ["a", "c"], "1": ["b"]},
        ),
        relevant=list(texts),
        relevance={"a": 0.8, "b": 0.7, "c": 0.6},
        risk=RiskTier.LOW,
        subject={"Yara"},
        timeline=TemporalReading(phases=phases, oscillates=True),
    )
    r = realize_offline(a, decide_offline(a))
    assert "undated point" not in r.text
    assert "- Phase 1:" in r.text and "- Phase 3:" in r.text


def test_the_users_own_account_is_described_not_named_twice() -> None:
    texts = {
        "a": "I'm sure training starts at 19:00 at the courts.",
        "b": "The club website lists Tuesday training at 20:00.",
    }
    a = _scc(texts, {"your own account": ["a"], "the club website": ["b"]}, RiskTier.LOW)
    r = realize_offline(a, decide_offline(a))
    assert "your own account is your own account" not in r.text
    assert "your own account is first-hand" in r.text


def test_a_situation_read_as_context_dependent_asks_instead_of_branching_on_itself() -> None:
    # No cluster: the situation reading alone said the memories may depend on the situation.
    a = Analysis(
        query="How does Lena take her coffee?",
        memories={i: Memory(id=i, text=t, user_id="lena") for i, t in TEXTS.items()},
        cluster=None,
        relevant=list(TEXTS),
        relevance={"a": 0.8, "b": 0.75, "c": 0.5},
        risk=RiskTier.LOW,
        subject={"Lena"},
    )
    d = Decision(
        action=Action.CONDITIONALIZE,
        conflict_type=ConflictType.CPC,
        missing_information="which situation this is for",
    )
    r = realize_offline(a, d)
    assert "black and strong" in r.text and "oat milk" in r.text
    # No branch restates its own memory as its condition ("If it's like X: I'd go with X").
    assert not r.branches
    assert "If it's like" not in r.text
    assert len(r.questions) == 1
    assert "black" in r.questions[0] and "latte" in r.questions[0]


def test_a_source_conflict_with_one_side_in_view_is_not_laid_out_as_sources() -> None:
    texts = {
        "a": "The booking confirmation says check-in is from 16:00.",
        "b": "The host's app message says the key box is ready from 14:00.",
    }
    # The other side's memory fell out of view: one side is left to show.
    a = _scc(texts, {"the booking confirmation": ["a"], "the host": ["zz"]}, RiskTier.LOW)
    d = Decision(action=Action.VERIFY, conflict_type=ConflictType.SCC)
    r = realize_offline(a, d)
    assert "(1 sources)" not in r.text and "sources):" not in r.text
    assert "16:00" in r.text and "14:00" in r.text  # the memories themselves are shown
    assert r.questions and not r.questions[0].endswith(": the booking confirmation?")


def test_a_switching_habit_with_one_phase_in_view_is_not_called_a_switch() -> None:
    from caap.conflict_graph.rules import Phase, TemporalReading

    texts = {
        "a": "Gave up on the mornings again, it's after lunch for me now.",
        "b": "Morning walks with the dog used to be the routine.",
    }
    a = Analysis(
        query="When should I walk the dog?",
        memories={i: Memory(id=i, text=t, user_id="u") for i, t in texts.items()},
        cluster=ConflictCluster(
            id="c4",
            user_id="u",
            aspect="walks",
            memory_ids=list(texts),
            conflict_type=ConflictType.BOC,
            unresolved="which phase is current",
            sides={"0": ["a"]},
        ),
        relevant=list(texts),
        relevance={"a": 0.8, "b": 0.7},
        risk=RiskTier.LOW,
        timeline=TemporalReading(
            phases=(Phase(label=0, members=("a",), start=None, duration=None),)
        ),
    )
    d = Decision(action=Action.REVERSIBLE_TRIAL, conflict_type=ConflictType.BOC)
    r = realize_offline(a, d)
    assert "1 phases" not in r.text and "0 switches" not in r.text
    assert "after lunch" in r.text and "Morning walks" in r.text


def test_a_source_conflict_with_one_named_side_does_not_ask_which_of_one_governs() -> None:
    texts = {
        "a": "The lease I signed says rent is $2,350 a month.",
        "b": "The landlord texted that rent stays two thousand three fifty.",
        "c": "I pay the parking separately.",
    }
    a = _scc(texts, {"your own account": ["a", "b", "c"]}, RiskTier.HIGH)
    d = decide_offline(a)
    assert d.action in (Action.VERIFY, Action.DEFER)
    assert d.missing_information is not None
    assert not d.missing_information.endswith("your own account")
    r = realize_offline(a, d)
    assert "authoritative: your own account?" not in r.text
