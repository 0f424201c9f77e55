"""Choosing under an uncertain reading: expected fit over the situation probabilities."""

from __future__ import annotations

import pytest

from caap.models import Action
from caap.policy._uncertainty import FIT, GRAPH_PRIOR, choose_under_uncertainty, expected_fit


def test_a_clear_agreement_commits() -> None:
    assert choose_under_uncertainty({"NONE": 0.9, "CPC": 0.1}, high_risk=False) is Action.COMMIT


def test_an_even_reading_picks_an_action_that_fits_every_conflict() -> None:
    # Committing fits only one of four readings; answering per case fits three of them.
    probs = {"NONE": 0.25, "CPC": 0.25, "BOC": 0.25, "SCC": 0.25}
    action = choose_under_uncertainty(probs, high_risk=False)
    assert action is not Action.COMMIT
    assert all(FIT[False][s][action] >= 0.8 for s in ("CPC", "BOC", "SCC"))


def test_a_likely_high_stakes_source_conflict_is_verified() -> None:
    probs = {"NONE": 0.3, "SCC": 0.6, "CPC": 0.1}
    assert choose_under_uncertainty(probs, high_risk=True) in (Action.VERIFY, Action.DEFER)


def test_commit_never_fits_a_high_stakes_conflict() -> None:
    for situation in ("CPC", "BOC", "SCC"):
        assert FIT[True][situation][Action.COMMIT] == 0.0


def test_the_graph_choice_breaks_near_ties() -> None:
    probs = {"CPC": 0.5, "BOC": 0.5}
    plain = expected_fit(probs, high_risk=False)
    assert plain[Action.CONDITIONALIZE] > plain[Action.CLARIFY]
    gap = plain[Action.CONDITIONALIZE] - plain[Action.CLARIFY]
    assert gap < GRAPH_PRIOR
    assert choose_under_uncertainty(probs, high_risk=False) is Action.CONDITIONALIZE
    chosen = choose_under_uncertainty(probs, high_risk=False, graph_action=Action.CLARIFY)
    assert chosen is Action.CLARIFY


def test_an_unknown_situation_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown situations"):
        expected_fit({"MAYBE": 1.0}, high_risk=False)


def _analysis(probs: dict[str, float], risk: str = "low") -> object:
    from caap.conflict_graph.relations import SituationVerdict
    from caap.models import Memory, RiskTier
    from caap.policy._analysis import Analysis

    texts = {
        "a": "On weekdays Lena drinks her coffee black.",
        "b": "At weekends Lena takes a big milky latte.",
    }
    return Analysis(
        query="How does Lena take her coffee?",
        memories={i: Memory(id=i, text=t, user_id="lena") for i, t in texts.items()},
        cluster=None,
        relevant=["a", "b"],
        relevance={"a": 0.8, "b": 0.75},
        risk=RiskTier(risk),
        situation=SituationVerdict(probs),
        attributed={"a": 0.0, "b": 0.0},
    )


def test_the_offline_policy_acts_on_the_situation_reading_the_graph_missed() -> None:
    from caap.policy.offline import decide_offline, realize_offline

    a = _analysis({"NONE": 0.2, "CPC": 0.7, "BOC": 0.1})
    d = decide_offline(a)  # type: ignore[arg-type]
    assert d.action is Action.CONDITIONALIZE
    assert "graph alone chose commit" in d.rationale
    r = realize_offline(a, d)  # type: ignore[arg-type]
    assert "says otherwise" not in r.text
    assert set(r.cited_memory_ids) == {"a", "b"} and r.questions
    # No memory states a condition the graph read, so the answer asks which situation this is,
    # naming both, instead of branching each memory on itself ("If it's like X: go with X").
    assert "black" in r.questions[0] and "latte" in r.questions[0]
    assert not r.branches


def test_the_offline_policy_commits_when_the_reading_agrees() -> None:
    from caap.policy.offline import decide_offline, realize_offline

    a = _analysis({"NONE": 0.9, "CPC": 0.1})
    d = decide_offline(a)  # type: ignore[arg-type]
    assert d.action is Action.COMMIT
    assert realize_offline(a, d).cited_memory_ids  # type: ignore[arg-type]


def test_a_stale_reading_answers_from_the_later_state_and_names_it_history() -> None:
    from datetime import UTC, datetime

    from caap.conflict_graph.relations import SituationVerdict
    from caap.models import ConflictType, Memory, RiskTier
    from caap.policy._analysis import Analysis
    from caap.policy.offline import decide_offline, realize_offline

    old = Memory(
        id="old",
        text="Renewed my Vodafone fibre for another year.",
        user_id="u",
        created_at=datetime(2024, 2, 10, tzinfo=UTC),
    )
    new = Memory(
        id="new",
        text="The Openreach engineer set up the new Zen line today.",
        user_id="u",
        created_at=datetime(2024, 6, 12, tzinfo=UTC),
    )
    a = Analysis(
        query="Am I still with Vodafone?",
        memories={"old": old, "new": new},
        cluster=None,
        relevant=["old", "new"],
        relevance={"old": 0.8, "new": 0.4},
        risk=RiskTier.LOW,
        situation=SituationVerdict({"STALE": 0.7, "NONE": 0.2, "BOC": 0.1}),
        attributed={"old": 0.0, "new": 0.0},
        successor="new",
    )
    d = decide_offline(a)
    assert d.action is Action.COMMIT and d.conflict_type is ConflictType.STALE
    r = realize_offline(a, d)
    assert r.cited_memory_ids[0] == "new"
    assert "replace" in r.text and "Zen line" in r.text
    assert "says otherwise" not in r.text


def test_a_stale_answer_also_quotes_the_turn_that_named_the_change() -> None:
    from datetime import UTC, datetime

    from caap.conflict_graph.relations import SituationVerdict
    from caap.models import Memory, RiskTier
    from caap.policy._analysis import Analysis
    from caap.policy.offline import decide_offline, realize_offline

    def m(i: str, text: str, month: int) -> Memory:
        when = datetime(2024, month, 10, tzinfo=UTC)
        return Memory(id=i, text=text, user_id="u", created_at=when)

    mems = {
        "old": m("old", "The Thoughtworks cafeteria has ragi dosa on Fridays now.", 1),
        "named": m("named", "My new manager at Zerodha put a sync on my calendar at 7pm.", 3),
        "salary": m("salary", "First salary from the fintech place came in today.", 5),
        "asks": m("asks", "Can you suggest a nifty index fund?", 5),
    }
    base = dict(
        query="Which company am I working at?",
        memories=mems,
        cluster=None,
        relevant=["old", "salary", "named", "asks"],
        relevance={"old": 0.6, "salary": 0.4, "named": 0.35, "asks": 0.1},
        risk=RiskTier.LOW,
        situation=SituationVerdict({"STALE": 0.7, "NONE": 0.2, "BOC": 0.1}),
        successor="salary",
    )
    a = Analysis(**base, changes_read=["named", "salary", "asks"])  # type: ignore[arg-type]
    r = realize_offline(a, decide_offline(a))
    assert "Zerodha" in r.text and "named" in r.cited_memory_ids
    # the turn that names the change is quoted as the change, not as what it replaces
    assert r.text.index("Zerodha") < r.text.index("may replace")
    assert "index fund" not in r.text  # a turn that only asks states nothing to quote
    # Without the reading, the answer quotes only the latest turn.
    plain = realize_offline(Analysis(**base), decide_offline(Analysis(**base)))  # type: ignore[arg-type]
    change_part = plain.text.split("may replace")[0]
    assert "named" not in plain.cited_memory_ids or "Zerodha" not in change_part


def test_an_agreeing_reading_never_commits_over_a_typed_source_contradiction() -> None:
    from caap.models import ConflictCluster, ConflictType
    from caap.policy.offline import decide_offline

    a = _analysis({"NONE": 0.95, "SCC": 0.05})
    a.memories["a"] = a.memories["a"].model_copy(update={"source": "her brother"})  # type: ignore[attr-defined]
    a.memories["b"] = a.memories["b"].model_copy(update={"source": "her sister"})  # type: ignore[attr-defined]
    a.cluster = ConflictCluster(  # type: ignore[attr-defined]
        id="c",
        user_id="lena",
        aspect="coffee",
        memory_ids=["a", "b"],
        conflict_type=ConflictType.SCC,
        unresolved="which source is authoritative: the school app vs her sister",
        sides={"her brother": ["a"], "her sister": ["b"]},
        source_count=2,
    )
    d = decide_offline(a)  # type: ignore[arg-type]
    assert d.conflict_type is ConflictType.SCC
    assert d.action is not Action.COMMIT and "fits the likely readings" not in d.rationale
    # Without the typed conflict, the same reading commits.
    a.cluster = None  # type: ignore[attr-defined]
    assert decide_offline(a).action is Action.COMMIT  # type: ignore[arg-type]


def test_a_reading_over_a_one_memory_view_lays_out_the_nearest_statements_in_time_order() -> None:
    # The graph's view holds one memory (a price), but the situation reading, which reads every
    # recalled memory, says the habit went back and forth: the answer shows what it read.
    from datetime import UTC, datetime

    from caap.conflict_graph.relations import SituationVerdict
    from caap.models import Memory, RiskTier
    from caap.policy._analysis import Analysis
    from caap.policy.offline import decide_offline, realize_offline

    texts = {
        "price": ("The battle pass costs about $10.", 5),
        "quit": ("Uninstalled the game after a toxic lobby.", 2),
        "back": ("Reinstalled it and got the Gold badge back.", 3),
        "start": ("Played Valorant every night at the start of term.", 1),
        "far": ("The Java project is due on Friday.", 4),
    }
    a = Analysis(
        query="Should I buy the new Valorant battle pass?",
        memories={
            i: Memory(id=i, text=t, user_id="eli", created_at=datetime(2024, m, 1, tzinfo=UTC))
            for i, (t, m) in texts.items()
        },
        cluster=None,
        relevant=["price"],
        relevance={"price": 0.8, "back": 0.6, "start": 0.55, "quit": 0.5, "far": 0.1},
        risk=RiskTier.LOW,
        situation=SituationVerdict({"BOC": 0.8, "NONE": 0.2}),
        attributed=dict.fromkeys(texts, 0.0),
    )
    d = decide_offline(a)
    assert d.action is not Action.COMMIT
    r = realize_offline(a, d)
    assert r.cited_memory_ids == ["start", "quit", "back", "price"]  # in time order
    assert "Java" not in r.text


def test_one_note_is_not_laid_out_as_a_contrast() -> None:
    from caap.policy.offline import decide_offline, realize_offline

    a = _analysis({"NONE": 0.2, "CPC": 0.7, "BOC": 0.1})
    # The situation reading leans on the only note recalled.
    del a.memories["b"]  # type: ignore[attr-defined]
    a.relevant = ["a"]  # type: ignore[attr-defined]
    d = decide_offline(a)  # type: ignore[arg-type]
    assert d.action is not Action.COMMIT
    r = realize_offline(a, d)  # type: ignore[arg-type]
    assert "each hold in a different situation" not in r.text
    assert "only one related note" in r.text and r.cited_memory_ids == ["a"] and r.questions
