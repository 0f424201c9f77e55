"""The observability matching rule, on hand-made banks with a controllable encoder."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from caap.benchmark.dataset import Instance
from caap.benchmark.observability import (
    PROVENANCE_FLOOR,
    SEMANTIC_THRESHOLD,
    CachingEncoder,
    level_for,
    match_bank,
    observe,
)
from caap.models import Memory

VOCAB = ["tea", "coffee", "water", "juice", "gym", "soda"]


class WordEncoder:
    """Counts of a few vocabulary words: cosine similarities are easy to reason about."""

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        rows = [[float(t.lower().split().count(w)) for w in VOCAB] for t in texts]
        return np.asarray(rows, dtype=np.float32)


def instance() -> Instance:
    """Three core memories (tea, coffee, water), one background, one distractor."""
    return Instance.model_validate(
        {
            "id": "p90_drinks",
            "persona": {"id": "p90", "name": "Sam"},
            "aspect": "drinks",
            "domain": "food",
            "conflict_type": "CPC",
            "query": "What should I drink?",
            "memories": [
                {"id": "m1", "text": "tea", "role": "core"},
                {"id": "m2", "text": "coffee", "role": "core"},
                {"id": "m3", "text": "water", "role": "core"},
                {"id": "b1", "text": "juice", "role": "background"},
                {"id": "d1", "text": "gym", "role": "distractor"},
            ],
            "missing_information": "which context",
            "sessions": [
                {
                    "id": "s1",
                    "date": "2025-01-01",
                    "turns": [{"role": "user", "content": "tea"}],
                    "memory_ids": ["m1", "d1"],
                },
                {
                    "id": "s2",
                    "date": "2025-01-02",
                    "turns": [{"role": "user", "content": "coffee"}],
                    "memory_ids": ["m2"],
                },
                {
                    "id": "s3",
                    "date": "2025-01-03",
                    "turns": [{"role": "user", "content": "water"}],
                    "memory_ids": ["m3", "b1"],
                },
            ],
        }
    )


def mem(mid: str, text: str, session: str | None = None) -> Memory:
    prov = {"session": session, "turn": "0"} if session else {}
    return Memory(id=mid, user_id="tangle:p90", text=text, provenance=prov)


@pytest.fixture()
def enc() -> WordEncoder:
    return WordEncoder()


def test_thresholds_are_the_documented_ones() -> None:
    assert pytest.approx(0.30) == PROVENANCE_FLOOR
    assert pytest.approx(0.60) == SEMANTIC_THRESHOLD


def test_provenance_match_accepts_weak_similarity_within_the_session(enc: WordEncoder) -> None:
    # cos("tea soda soda", "tea") = 1/sqrt(5) = 0.447: above the floor, below the threshold.
    bank = [mem("r1", "tea soda soda", session="s1")]
    [m] = match_bank(instance(), bank, encoder=enc)
    assert (m.memory_id, m.rule, m.role) == ("m1", "provenance", "core")
    assert m.similarity == pytest.approx(1 / np.sqrt(5), abs=1e-4)
    # The same text without provenance falls to the semantic rule and does not match.
    [m] = match_bank(instance(), [mem("r1", "tea soda soda")], encoder=enc)
    assert (m.memory_id, m.rule) == ("", "semantic")
    assert "below 0.60" in m.reason


def test_provenance_never_represents_a_memory_its_session_does_not_list(
    enc: WordEncoder,
) -> None:
    # Identical to m1, but session s2 lists only m2 (similarity 0): represents nothing.
    [m] = match_bank(instance(), [mem("r1", "tea", session="s2")], encoder=enc)
    assert m.memory_id == "" and m.rule == "provenance"
    obs = observe(instance(), [mem("r1", "tea", session="s2")], encoder=enc)
    assert obs.matched_core == []


def test_provenance_from_another_instance_session_matches_nothing(enc: WordEncoder) -> None:
    [m] = match_bank(instance(), [mem("r1", "tea", session="other_s9")], encoder=enc)
    assert m.memory_id == "" and m.rule == "provenance"
    assert "other_s9" in m.reason


def test_provenance_single_picks_the_most_similar_listed_memory(enc: WordEncoder) -> None:
    # s1 lists m1 (tea) and d1 (gym): with one memory each, a gym turn is the distractor.
    bank = [mem("r1", "gym gym tea", session="s1")]
    [m] = match_bank(instance(), bank, encoder=enc, single=True)
    assert (m.memory_id, m.role) == ("d1", "distractor")
    assert not m.core
    assert observe(instance(), bank, encoder=enc, single=True).matched_core == []


def test_a_turn_represents_every_memory_it_expresses(enc: WordEncoder) -> None:
    # cos("gym gym tea", "tea") = 0.45 >= 0.30: the turn also states m1, and the core memory
    # is the one it is shown as (it covers the most core memories).
    bank = [mem("r1", "gym gym tea", session="s1")]
    [m] = match_bank(instance(), bank, encoder=enc)
    assert m.memory_ids == ["d1", "m1"]
    assert (m.memory_id, m.role) == ("m1", "core")
    assert observe(instance(), bank, encoder=enc).matched_core == ["m1"]


def test_a_covered_core_memory_is_not_chosen_again(enc: WordEncoder) -> None:
    # Both turns express m1 and d1; once m1 is covered the second is shown as its best match.
    bank = [mem("r1", "gym gym tea", session="s1"), mem("r2", "gym gym tea", session="s1")]
    first, second = match_bank(instance(), bank, encoder=enc)
    assert (first.memory_id, second.memory_id) == ("m1", "d1")


def test_provenance_below_the_floor_matches_nothing(enc: WordEncoder) -> None:
    # cos("tea soda x5", "tea") = 1/sqrt(26) = 0.196 < 0.30.
    [m] = match_bank(instance(), [mem("r1", "tea " + "soda " * 5, session="s1")], encoder=enc)
    assert m.memory_id == ""


def test_semantic_match_and_no_match(enc: WordEncoder) -> None:
    # cos("coffee soda", "coffee") = 0.707 >= 0.60; cos("coffee soda soda", ...) = 0.447.
    matches = match_bank(
        instance(), [mem("r1", "coffee soda"), mem("r2", "coffee soda soda")], encoder=enc
    )
    assert [(m.memory_id, m.rule) for m in matches] == [("m2", "semantic"), ("", "semantic")]


def test_semantic_prefers_the_closest_memory_even_when_not_core(enc: WordEncoder) -> None:
    [m] = match_bank(instance(), [mem("r1", "juice")], encoder=enc)
    assert (m.memory_id, m.role) == ("b1", "background")
    obs = observe(instance(), [mem("r1", "juice")], encoder=enc)
    assert obs.matched_core == [] and obs.level == "NONE"


def test_levels_full_partial_none(enc: WordEncoder) -> None:
    inst = instance()
    full = [mem("a", "tea", "s1"), mem("b", "coffee", "s2"), mem("c", "water")]
    partial = full[:2]
    one = full[:1]
    dup = [mem("a", "tea", "s1"), mem("a2", "tea")]  # one core memory twice is still one
    assert observe(inst, full, encoder=enc).level == "FULL"
    assert observe(inst, partial, encoder=enc).level == "PARTIAL"
    assert observe(inst, one, encoder=enc).level == "NONE"
    assert observe(inst, dup, encoder=enc).level == "NONE"
    assert observe(inst, [], encoder=enc).level == "NONE"


def test_result_records_which_rule_matched_each_core_memory(enc: WordEncoder) -> None:
    bank = [
        mem("x", "gym"),
        mem("a", "water"),
        mem("b", "tea", "s1"),
        mem("c", "tea"),
        mem("d", "coffee", "s9"),
    ]
    obs = observe(instance(), bank, encoder=enc)
    assert obs.matched_core == ["m1", "m3"]  # instance order
    assert obs.rules == {"m1": "provenance", "m3": "semantic"}
    assert obs.rule_summary() == "m1=provenance; m3=semantic"
    assert obs.mapping() == {"x": "d1", "a": "m3", "b": "m1", "c": "m1", "d": ""}
    assert (obs.core_total, obs.bank_size, obs.level) == (3, 5, "PARTIAL")


@pytest.mark.parametrize(
    ("matched", "total", "level"),
    [(0, 7, "NONE"), (1, 7, "NONE"), (2, 7, "PARTIAL"), (6, 7, "PARTIAL"), (7, 7, "FULL"),
     (1, 1, "FULL"), (0, 0, "NONE")],
)  # fmt: skip
def test_level_boundaries(matched: int, total: int, level: str) -> None:
    assert level_for(matched, total) == level


def test_caching_encoder_embeds_each_text_once(enc: WordEncoder) -> None:
    cached = CachingEncoder(enc)
    first = cached.encode(["tea", "coffee", "tea"])
    again = cached.encode(["coffee", "tea"])
    assert enc.calls == 1
    assert np.allclose(first[1], again[0]) and np.allclose(first[0], again[1])


def test_real_embedder_matches_paraphrases_not_unrelated_text() -> None:
    from caap._embeddings import get_embedder

    inst = Instance.model_validate(
        {
            **instance().model_dump(mode="json", exclude={"memories", "sessions"}),
            "memories": [
                {"id": "m1", "text": "Sam logs every purchase in a spreadsheet each evening.",
                 "role": "core"},
                {"id": "m2", "text": "Sam only checks the bank balance on Sunday mornings.",
                 "role": "core"},
                {"id": "d1", "text": "Sam has a cat called Pixel.", "role": "distractor"},
            ],
        }
    )  # fmt: skip
    bank = [
        mem("r1", "Every evening Sam records each purchase in a spreadsheet."),
        mem("r2", "The weather in Lisbon was sunny all week."),
    ]
    matches = match_bank(inst, bank, encoder=get_embedder())
    assert matches[0].memory_id == "m1" and matches[0].rule == "semantic"
    assert matches[1].memory_id == ""
