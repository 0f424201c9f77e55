"""Which memory the offline answer takes as the latest state when the situation reading says
a later state replaced an earlier one: the layer's pair readings decide, read from several of
the nearest memories and followed along a chain of replacements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from caap.conflict_graph.relations import RELATIONS, MemoryView, PairVerdict
from caap.models import Memory
from caap.policy._analysis import _successor


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
    assert _successor(layer, filled, sims) == "change"  # type: ignore[arg-type]


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
    assert _successor(layer, filled, sims) == "third"  # type: ignore[arg-type]


def test_nothing_later_than_the_nearest_memory_has_no_successor() -> None:
    filled = _memories({"latest": 9, "older": 3})
    layer = _Scripted({})
    assert _successor(layer, filled, {"latest": 0.8, "older": 0.4}) is None  # type: ignore[arg-type]
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
    assert _successor(layer, filled, sims) == "change"  # type: ignore[arg-type]
    # A turn that only asks is read as it is: there is no statement to read instead.
    assert texts["question"] in layer.texts
    assert texts["change"] not in layer.texts
