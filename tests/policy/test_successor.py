"""Which memory the offline answer takes as the latest state when the situation reading says
a later state replaced an earlier one: the layer's pair readings decide, read from several of
the nearest memories and followed along a chain of replacements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from caap.conflict_graph.relations import RELATIONS, MemoryView, PairVerdict
from caap.models import Memory
from caap.policy._analysis import TOLD_NEAR, _later_state, _successor, _told_changes


class _Scripted:
    """A relation layer whose pair readings are given per (earlier id, later id), or with
    ``by_text`` per later memory's text as it is shown to the layer."""

    def __init__(self, table: Mapping[Any, dict[str, float]], *, by_text: bool = False) -> None:
        self.table = table
        self.by_text = by_text
        self.read: list[tuple[str, str]] = []
        self.texts: set[str] = set()

    def relate(self, pairs: Sequence[tuple[MemoryView, MemoryView]]) -> list[PairVerdict]:
        out = []
        for a, b in pairs:
            self.read.append((a.id, b.id))
            self.texts |= {a.text, b.text}
            key = b.text if self.by_text else (a.id, b.id)
            probs = dict.fromkeys(RELATIONS, 0.0)
            probs.update(self.table.get(key, {"unrelated": 0.9, "agree": 0.1}))
            top = max(probs, key=lambda r: probs[r])
            out.append(PairVerdict(probs=probs, relation=top, confidence=probs[top]))  # type: ignore[arg-type]
        return out


def _same_topic(memory_id: str) -> np.ndarray:
    """Every memory's vector the same: all on one topic."""
    return np.ones(4, dtype=np.float32) / 2.0


def _memories(months: dict[str, int]) -> dict[str, Memory]:
    return {
        i: Memory(id=i, text=i, user_id="u", created_at=datetime(2024, m, 1, tzinfo=UTC))
        for i, m in months.items()
    }


def test_the_change_is_read_against_every_near_saying_of_the_old_state() -> None:
    # The nearest memory is the old state said a second time; the change reads as replacing
    # only the first saying, and a later side note reads faintly against the nearest.
    filled = _memories({"old_again": 2, "old": 1, "change": 5, "side_note": 12})
    sims = {"old_again": 0.6, "old": 0.55, "change": 0.3, "side_note": 0.1}
    layer = _Scripted(
        {
            ("old", "change"): {"invalidates": 0.3, "supersedes": 0.2, "agree": 0.3},
            ("old_again", "change"): {"unrelated": 0.6, "agree": 0.3, "temporal_change": 0.05},
            ("old_again", "side_note"): {"unrelated": 0.55, "temporal_change": 0.08},
        }
    )
    # the step into the change reads as ruling the old state out more than as a new value
    assert _successor(layer, filled, sims, _same_topic)[:2] == ("change", True)  # type: ignore[arg-type]


def test_a_chain_of_replacements_ends_at_the_newest_state() -> None:
    filled = _memories({"first": 1, "second": 4, "third": 8, "aside": 10})
    sims = {"first": 0.7, "second": 0.5, "third": 0.4, "aside": 0.2}
    layer = _Scripted(
        {
            ("first", "second"): {"supersedes": 0.7, "agree": 0.2},
            ("first", "third"): {"supersedes": 0.4, "unrelated": 0.5},
            ("second", "third"): {"supersedes": 0.6, "agree": 0.3},
            # read more as unrelated than as replacing: the chain stops before it
            ("third", "aside"): {"invalidates": 0.3, "unrelated": 0.6},
        }
    )
    # a new value of the state, not a change that rules it out
    assert _successor(layer, filled, sims, _same_topic)[:2] == ("third", False)  # type: ignore[arg-type]
    # every later memory read as replacing an anchor is kept for the answer to quote; the
    # aside, read as unrelated more than as a change, is not
    told = _successor(layer, filled, sims, _same_topic)[2]  # type: ignore[arg-type]
    assert sorted(told) == ["second", "third"]


def test_nothing_later_than_the_nearest_memory_has_no_successor() -> None:
    filled = _memories({"latest": 9, "older": 3})
    layer = _Scripted({})
    sims = {"latest": 0.8, "older": 0.4}
    assert _successor(layer, filled, sims, _same_topic) == (None, False, [])  # type: ignore[arg-type]
    assert layer.read == []


def test_a_turn_is_read_for_what_it_states_not_what_it_asks() -> None:
    # The new prescription is told in a turn that goes on to ask for a recipe; the reading of
    # the turn as a whole would be of the recipe question, and a later side note would win.
    texts = {
        "old": "My GP started me on amlodipine.",
        "change": "The doctor put me on losartan instead. Anyway, what can I make with rhubarb?",
        "side_note": "The blood test came back fine.",
        "question": "Is there an app to track prescriptions?",
    }
    when = {"old": 1, "change": 5, "side_note": 5, "question": 6}
    filled = {
        i: Memory(id=i, text=t, user_id="u", created_at=datetime(2024, when[i], 1, tzinfo=UTC))
        for i, t in texts.items()
    }
    sims = {"old": 0.6, "change": 0.3, "side_note": 0.25, "question": 0.2}
    layer = _Scripted(
        {
            "The doctor put me on losartan instead.": {"supersedes": 0.7, "agree": 0.2},
            "The blood test came back fine.": {"supersedes": 0.3, "unrelated": 0.6},
        },
        by_text=True,
    )
    assert _successor(layer, filled, sims, _same_topic)[0] == "change"  # type: ignore[arg-type]
    # A turn that only asks is read as it is: there is no statement to read instead.
    assert texts["question"] in layer.texts
    assert texts["change"] not in layer.texts


def test_a_later_turn_replacing_the_graphs_change_is_the_state_as_it_stands() -> None:
    # The graph linked the car sale to the carpool; a later turn reads as replacing the sale
    # (the commute as it now is), and a side note after it does not.
    filled = _memories({"carpool": 1, "sold": 4, "jeep": 5, "aside": 6})
    sims = {"carpool": 0.6, "sold": 0.4, "jeep": 0.3, "aside": 0.2}
    layer = _Scripted(
        {
            ("sold", "jeep"): {"temporal_change": 0.5, "agree": 0.3},
            ("sold", "aside"): {"unrelated": 0.8},
            ("jeep", "aside"): {"unrelated": 0.8},
        }
    )
    assert _later_state(layer, filled, sims, "sold", _same_topic) == "jeep"  # type: ignore[arg-type]
    # Nothing later read as replacing it: the graph's change stands.
    quiet = _Scripted({("sold", "jeep"): {"agree": 0.6, "supersedes": 0.3}})
    assert _later_state(quiet, filled, sims, "sold", _same_topic) is None  # type: ignore[arg-type]
    # Nothing later than the change at all: no reading is asked for.
    late = _Scripted({})
    assert _later_state(late, filled, sims, "aside", _same_topic) is None  # type: ignore[arg-type]
    assert late.read == []


def test_a_later_turn_off_the_topic_never_replaces_the_state() -> None:
    # The pair reading says the rainy-Saturday request replaces the pacemaker news; their
    # vectors say it is about something else, so the chain stops at the news.
    filled = _memories({"welding": 1, "pacemaker": 5, "rainy": 6})
    sims = {"welding": 0.6, "pacemaker": 0.4, "rainy": 0.3}
    layer = _Scripted({("pacemaker", "rainy"): {"supersedes": 0.7, "unrelated": 0.2}})
    topic = {
        "welding": np.array([1.0, 0.0], dtype=np.float32),
        "pacemaker": np.array([0.98, 0.2], dtype=np.float32),
        "rainy": np.array([0.0, 1.0], dtype=np.float32),
    }
    assert _later_state(layer, filled, sims, "pacemaker", topic.__getitem__) is None  # type: ignore[arg-type]
    # On one topic, the same reading is followed.
    assert _later_state(layer, filled, sims, "pacemaker", _same_topic) == "rainy"  # type: ignore[arg-type]


def test_the_turns_read_as_replacing_the_graphs_old_state_are_the_change_told() -> None:
    # The new employer is named in one turn, the first salary in the next; a trip in between
    # reads as unrelated, and a turn from before the old state is never read against it.
    filled = _memories({"before": 1, "old": 2, "named": 4, "trip": 5, "salary": 6})
    sims = {"before": 0.3, "old": 0.7, "named": 0.5, "trip": 0.4, "salary": 0.2}
    layer = _Scripted(
        {
            ("old", "named"): {"supersedes": 0.55, "unrelated": 0.3},
            ("old", "trip"): {"supersedes": 0.4, "unrelated": 0.5},
            ("old", "salary"): {"supersedes": 0.3, "invalidates": 0.25, "agree": 0.4},
        }
    )
    assert _told_changes(layer, filled, sims, "old") == ["named", "salary"]  # type: ignore[arg-type]
    assert ("old", "before") not in layer.read and ("before", "old") not in layer.read
    # Outside the nearest memories nothing is read.
    assert _told_changes(layer, filled, sims, "old", near=2) == ["named"]  # type: ignore[arg-type]


def test_a_turn_far_from_the_query_that_reads_as_the_change_is_told_not_followed() -> None:
    # Nine memories: the turn naming the new job is the least like the query ("stocktake at
    # the bookshop til 10" for "where am I working"), outside the nearest eight.
    months = {"old": 1, **{f"chat{k}": 1 + k for k in range(1, 8)}, "named": 11}
    filled = _memories(months)
    sims = {"old": 0.9, **{f"chat{k}": 0.8 - k / 20 for k in range(1, 8)}, "named": 0.1}
    layer = _Scripted({("old", "named"): {"supersedes": 0.7, "agree": 0.1}})
    latest, _, told = _successor(layer, filled, sims, _same_topic)  # type: ignore[arg-type]
    assert "named" in told
    # Told as part of the change, but the chain is followed only among the nearest.
    assert latest != "named"
    # The far memory is read once against each of the three anchors, and only as the later
    # memory of a pair.
    assert sorted(a for a, b in layer.read if b == "named") == ["chat1", "chat2", "old"]
    assert all(a != "named" for a, _ in layer.read)
    # With the far turn read as unrelated, it is not told.
    quiet = _Scripted({})
    assert "named" not in _successor(quiet, filled, sims, _same_topic)[2]  # type: ignore[arg-type]


def test_a_recall_of_a_large_cluster_is_read_for_the_change_only_up_to_a_bound() -> None:
    # A recall that brought a large conflict cluster whole: the nearest TOLD_NEAR memories are
    # read for the turns of a change, the rest never (the pair readings stay bounded).
    n = TOLD_NEAR + 12
    filled = {
        f"m{k:02d}": Memory(
            id=f"m{k:02d}",
            text=f"m{k:02d}",
            user_id="u",
            created_at=datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=k),
        )
        for k in range(n)
    }
    sims = {f"m{k:02d}": 1.0 - k / (2 * n) for k in range(n)}
    change = f"m{TOLD_NEAR - 1:02d}"  # the last memory within the bound
    beyond = f"m{TOLD_NEAR:02d}"  # the first beyond it
    layer = _Scripted(
        {
            ("m00", change): {"supersedes": 0.7, "agree": 0.1},
            ("m00", beyond): {"supersedes": 0.7, "agree": 0.1},
        }
    )
    told = _successor(layer, filled, sims, _same_topic)[2]  # type: ignore[arg-type]
    assert change in told and beyond not in told
    read = {b for _, b in layer.read} | {a for a, _ in layer.read}
    assert all(int(i[1:]) < TOLD_NEAR for i in read)
    # The graph's old state is read against the same nearest memories.
    layer.read.clear()
    assert _told_changes(layer, filled, sims, "m00", near=TOLD_NEAR) == [change]  # type: ignore[arg-type]
