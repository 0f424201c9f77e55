"""What the stale-state answer treats as the change: a change happens in world time, and the
parts of one change told in one conversation are quoted together (issue 12)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from caap.models import (
    Action,
    ConflictCluster,
    ConflictEdge,
    ConflictType,
    Decision,
    EdgeKind,
    Memory,
    Response,
    RiskTier,
)
from caap.policy._analysis import Analysis, _stale_view
from caap.policy.offline import realize_offline

OLD_DAY = datetime(2023, 3, 2, tzinfo=UTC)
NEW_DAY = datetime(2023, 9, 27, tzinfo=UTC)


def _mem(i: str, text: str, day: datetime, minute: int) -> Memory:
    # The session date is the world time; turns of one session are written a minute apart.
    return Memory(
        id=i,
        text=text,
        user_id="u",
        observed_at=day,
        created_at=day + timedelta(minutes=minute),
    )


MEMORIES = {
    "old": _mem("old", "Just off my Friday shift on the yakitori grill at Hanamaru.", OLD_DAY, 0),
    "new": _mem("new", "I run the broth station at Menya Kaze in Umeda now.", NEW_DAY, 1),
    "also": _mem("also", "The ramen shop opens at 11 and I'm home by 9.", NEW_DAY, 2),
    "chat": _mem("chat", "ughhh so tired", NEW_DAY, 3),
}
QUERY = "Am I still on the yakitori grill at Hanamaru on Fridays?"
SIMS = {"old": 0.8, "new": 0.5, "also": 0.3, "chat": 0.1}


def _sup(later: str, earlier: str) -> ConflictEdge:
    return ConflictEdge(user_id="u", kind=EdgeKind.SUPERSEDES, source_id=later, target_id=earlier)


def _cluster(*edges: ConflictEdge) -> ConflictCluster:
    return ConflictCluster(
        id="c",
        user_id="u",
        aspect="work",
        memory_ids=list(MEMORIES),
        edges=list(edges),
        conflict_type=ConflictType.STALE,
    )


def test_an_edge_inside_one_conversation_is_not_a_change() -> None:
    # A layer that reads a later turn of the same conversation as replacing the new job (or a
    # second part of the update as replacing the first) does not make it the change.
    cluster = _cluster(_sup("new", "old"), _sup("chat", "new"), _sup("also", "new"))
    view = _stale_view(cluster, MEMORIES, SIMS, QUERY)
    assert view is not None
    assert view.changes[0] == "new" and view.superseded == ["old"]
    assert "chat" not in view.changes  # it replaces nothing of an earlier time


def test_edges_only_inside_one_conversation_give_no_stale_reading() -> None:
    assert _stale_view(_cluster(_sup("chat", "new")), MEMORIES, SIMS, QUERY) is None


def _analysis(
    mems: dict[str, Memory],
    cluster: ConflictCluster,
    sims: dict[str, float],
    risk: RiskTier = RiskTier.LOW,
    changes_read: list[str] | None = None,
) -> Analysis:
    """The analysis of ``QUERY`` over ``mems`` with the stale view of ``cluster``."""
    view = _stale_view(cluster, mems, sims, QUERY)
    assert view is not None
    return Analysis(
        query=QUERY,
        memories=dict(mems),
        cluster=cluster,
        relevant=sorted(mems, key=lambda i: -sims[i]),
        relevance=sims,
        risk=risk,
        stale=view,
        changes_read=changes_read or [],
    )


def _answer(mems: dict[str, Memory], cluster: ConflictCluster, sims: dict[str, float]) -> Response:
    """The offline commit on the stale view of ``cluster``, realized."""
    a = _analysis(mems, cluster, sims)
    view = a.stale
    assert view is not None
    d = Decision(
        action=Action.COMMIT,
        conflict_type=ConflictType.STALE,
        evidence={"answer": view.changes[:1]},
        rationale="a later observation replaces an earlier one",
    )
    return realize_offline(a, d)


def test_the_parts_of_a_change_told_together_are_quoted_together() -> None:
    cluster = _cluster(_sup("new", "old"), _sup("also", "old"))
    view = _stale_view(cluster, MEMORIES, SIMS, QUERY)
    assert view is not None and view.changes[:2] == ["new", "also"]
    r = _answer(MEMORIES, cluster, SIMS)
    assert "Menya Kaze" in r.text and "home by 9" in r.text
    assert {"new", "also"} <= set(r.cited_memory_ids)
    assert "so tired" not in r.text


def test_undated_memories_keep_the_order_the_layer_reads() -> None:
    # Without a world time (memories given all at once), the layer's reading of which one is
    # later is all there is: the edge stands.
    at = datetime(2024, 1, 1, tzinfo=UTC)
    undated = {
        i: m.model_copy(update={"observed_at": None, "created_at": at}) for i, m in MEMORIES.items()
    }
    view = _stale_view(_cluster(_sup("chat", "new")), undated, SIMS, QUERY)
    assert view is not None and view.changes == ["chat"] and view.superseded == ["new"]


def test_a_change_named_after_a_date_and_a_circumstance_is_quoted_far_enough() -> None:
    long = _mem(
        "long",
        "On Thursday 14 March 2024 the paediatric allergist at Starship did the skin-prick "
        "test after a long wait in the clinic corridor: a 9 mm wheal for egg white. We came "
        "home with an EpiPen Jr prescription and an action-plan sheet, which is on the fridge.",
        NEW_DAY,
        1,
    )
    mems = {"old": MEMORIES["old"], "long": long}
    answer = _answer(mems, _cluster(_sup("long", "old")), {"old": 0.8, "long": 0.4})
    assert "EpiPen" in answer.text


def test_a_later_supersession_of_the_change_is_a_chain_of_changes() -> None:
    # Moved to Portland, then to Seattle: the newest move leads, the first one is history.
    later = _mem("later", "I moved on again, to Seattle.", datetime(2024, 1, 9, tzinfo=UTC), 0)
    mems = {**MEMORIES, "later": later}
    cluster = _cluster(_sup("new", "old"), _sup("later", "new"))
    view = _stale_view(cluster, mems, {**SIMS, "later": 0.2}, QUERY)
    assert view is not None and view.changes == ["later"] and "new" in view.superseded


def test_the_change_that_brought_the_new_state_is_quoted_beside_the_latest() -> None:
    # Months after the new job, a turn about it no longer names it: the answer also quotes the
    # earliest change after the old state, where the new state came in.
    later_day = NEW_DAY + timedelta(days=90)
    mems = {
        **{i: MEMORIES[i] for i in ("old", "new")},
        "later": _mem(
            "later", "Did a double on Saturday, the queue went round the block.", later_day, 0
        ),
    }
    sims = {"old": 0.8, "new": 0.3, "later": 0.5}
    r = _answer(mems, _cluster(_sup("new", "old"), _sup("later", "old")), sims)
    assert "queue went round the block" in r.text and "Menya Kaze" in r.text
    assert r.text.index("queue") < r.text.index("Menya Kaze")  # the latest first
    assert {"new", "later"} <= set(r.cited_memory_ids)


def test_a_turn_the_graph_took_for_an_old_state_but_read_as_the_change_is_quoted() -> None:
    # The June turn names the new doctor; the graph reads the July turn (her receptionist) as
    # invalidating it, so it lists it among the old states, while the layer reads it as
    # replacing the old doctor. The answer quotes only the first old state as history, so it
    # quotes the June turn as part of the change, not nowhere.
    june = datetime(2024, 6, 8, tzinfo=UTC)
    july = datetime(2024, 7, 1, tzinfo=UTC)
    mems = {
        "owusu": _mem("owusu", "Dr Owusu at Ridge wants me back in 3 months.", OLD_DAY, 0),
        "asante": _mem("asante", "Dr Asante at East Legon checked my feet today.", june, 0),
        "desk": _mem("desk", "Her receptionist called: my next review is 12 August.", july, 0),
    }
    inv = EdgeKind.PROPAGATED_INVALIDATION
    cluster = ConflictCluster(
        id="c",
        user_id="u",
        aspect="doctor",
        memory_ids=list(mems),
        edges=[
            _sup("desk", "owusu"),
            ConflictEdge(user_id="u", kind=inv, source_id="desk", target_id="asante"),
        ],
        conflict_type=ConflictType.STALE,
    )
    sims = {"owusu": 0.5, "asante": 0.4, "desk": 0.45}
    view = _stale_view(cluster, mems, sims, QUERY)
    assert view is not None and view.old[0] == "owusu" and "asante" in view.old
    a = _analysis(mems, cluster, sims, changes_read=["asante", "desk"])
    d = Decision(
        action=Action.COMMIT,
        conflict_type=ConflictType.STALE,
        evidence={"answer": view.changes[:1]},
        rationale="a later observation replaces an earlier one",
    )
    r = realize_offline(a, d)
    assert "Dr Asante" in r.text and "asante" in r.cited_memory_ids
    # the old state quoted as history is not quoted again as part of the change
    assert r.text.count("Dr Owusu") == 1


def test_a_checked_replacement_says_the_stakes_are_high_only_when_they_are() -> None:
    # Below high stakes the check on a replaced state comes from the guard (the memories read
    # as sources that disagree): the answer gives that reason, not high stakes.
    cluster = _cluster(_sup("new", "old"))

    def close(risk: RiskTier) -> str:
        a = _analysis(MEMORIES, cluster, SIMS, risk)
        d = Decision(
            action=Action.VERIFY,
            conflict_type=ConflictType.STALE,
            evidence={"answer": ["new"]},
            rationale="held",
            risk=risk,
        )
        return realize_offline(a, d).text

    low, high = close(RiskTier.LOW), close(RiskTier.HIGH)
    assert "stakes are high" not in low and "Not everything on record agrees" in low
    assert "Because the stakes are high" in high
    for text in (low, high):
        assert "Menya Kaze" in text and "confirm the most recent information" in text
