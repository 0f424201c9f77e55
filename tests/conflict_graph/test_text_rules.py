"""Pure lexical cues and rules: no model needed."""

from __future__ import annotations

from datetime import datetime, timezone

from caap.conflict_graph import _text
from caap.conflict_graph.extractor import OfflineExtractor
from caap.conflict_graph.rules import (
    GraphConfig,
    Node,
    dominant_type,
    pair_edge,
    read_timeline,
    risk_tier,
)
from caap.models import ConflictType, EdgeKind, RiskTier


def _dt(y: int, m: int, d: int = 1) -> datetime:
    return datetime(y, m, d, tzinfo=timezone.utc)


def test_find_time_reads_month_year_and_duration() -> None:
    cue = _text.find_time("In March 2025 Ethan logged every expense for three weeks.")
    assert cue.when == _dt(2025, 3, 1)
    assert cue.duration == "three weeks"


def test_find_time_reads_iso_and_day_month_year() -> None:
    assert _text.find_time("Seen on 2024-11-05 at the clinic.").when == _dt(2024, 11, 5)
    assert _text.find_time("On 5 June 2023 she moved.").when == _dt(2023, 6, 5)
    assert _text.find_time("Late April 2025 he stopped.").when == _dt(2025, 4, 25)


def test_find_time_ignores_relative_time() -> None:
    assert _text.find_time("Last spring he ran daily.").when is None


def test_find_source_names_records_people_and_attribution() -> None:
    assert _text.find_source("Maya's clinic record lists ibuprofen as contraindicated.") == (
        "Maya's clinic record"
    )
    assert _text.find_source("Maya's father says the pediatrician approved it.") == "Maya's father"
    # Two readings start at the name: the longer one, a record, not "Maya's GP" with an
    # appositive "record".
    assert _text.find_source("Maya's GP record says she is allergic.") == "Maya's GP record"
    assert _text.find_source("According to the school nurse, Lily has no allergies.") == (
        "the school nurse"
    )


def test_subject_saying_something_is_a_self_report() -> None:
    assert _text.find_source("Ethan says he only drinks on Fridays.", {"Ethan"}) == "self-report"


def test_plain_statement_has_no_source() -> None:
    assert _text.find_source("Ethan skips alcohol before an early shift.") is None


def test_find_context_reads_condition_clauses() -> None:
    ctx = _text.find_context("Ethan skips alcohol entirely when he has an early shift.")
    assert ctx is not None and ctx.startswith("when he has an early shift")
    assert _text.find_context("Ethan plays guitar.") is None


def test_subject_names_are_frequent_capitalised_tokens() -> None:
    texts = ["Ethan runs.", "Ethan cooks.", "Ethan met Lily.", "Ethan sleeps."]
    assert _text.subject_names(texts) == {"Ethan"}
    assert "Ethan" not in _text.mask_names("Ethan met Lily at noon.", {"Ethan"})


def test_extractor_strips_time_and_attribution_from_value() -> None:
    ext = OfflineExtractor().extract(
        "According to his planner, in May 2025 Ethan logged expenses daily.", subject={"Ethan"}
    )
    assert ext.source == "his planner"
    assert "2025" not in ext.value and "planner" not in ext.value and "Ethan" not in ext.value
    assert ext.observed_at == _dt(2025, 5, 1)


def _node(
    i: str,
    *,
    source: str | None = None,
    context: str | None = None,
    when: datetime | None = None,
    text: str = "",
) -> Node:
    ext = OfflineExtractor().extract(text or i)
    order = when.timestamp() if when else 0.0
    return Node(i, text or i, source, context, when, order, ext)


def test_pair_edge_prefers_sources_then_contexts() -> None:
    cfg = GraphConfig()
    a = _node("a", source="clinic record")
    b = _node("b", source="father")
    found = pair_edge(a, b, 0.4, None, cfg)
    assert found is not None and found[0] is EdgeKind.SOURCE_CONTRADICTION
    c = _node("c", context="when the next day is off")
    d = _node("d", context="when he has an early shift")
    found = pair_edge(c, d, 0.5, 0.1, cfg)
    assert found is not None and found[0] is EdgeKind.CONTEXT_PARTITION
    assert pair_edge(_node("e"), _node("f"), 0.5, None, cfg) is None


def test_pair_edge_same_value_corroborates() -> None:
    found = pair_edge(_node("a", source="x"), _node("b", source="y"), 0.95, None, GraphConfig())
    assert found is not None and found[0] is EdgeKind.CORROBORATES


def test_same_source_twice_is_not_a_contradiction() -> None:
    a, b = _node("a", source="Maya's clinic record"), _node("b", source="the clinic record")
    assert pair_edge(a, b, 0.3, None, GraphConfig()) is None


def _sims(groups: dict[str, str]) -> dict[tuple[str, str], float]:
    return {(x, y): (0.9 if groups[x] == groups[y] else 0.1) for x in groups for y in groups}


def test_timeline_alternation_is_oscillation_with_reversals() -> None:
    nodes = [
        _node("p1", when=_dt(2025, 1)),
        _node("p2", when=_dt(2025, 2)),
        _node("p3", when=_dt(2025, 3)),
        _node("p4", when=_dt(2025, 4)),
    ]
    reading = read_timeline(
        nodes, _sims({"p1": "A", "p2": "B", "p3": "A", "p4": "B"}), GraphConfig()
    )
    assert reading.oscillates and not reading.superseded
    assert reading.reversals == 3
    assert {e.kind for e in reading.edges} == {EdgeKind.TEMPORAL_OSCILLATION}
    # A switch is dated at the later phase and leaves the earlier one open: it may come back.
    assert [(e.source_id, e.valid_at, e.invalid_at) for e in reading.edges] == [
        ("p2", _dt(2025, 2), None),
        ("p3", _dt(2025, 3), None),
        ("p4", _dt(2025, 4), None),
    ]


def test_timeline_single_change_is_supersession() -> None:
    nodes = [_node("old", when=_dt(2024, 1)), _node("new", when=_dt(2025, 1))]
    reading = read_timeline(nodes, _sims({"old": "A", "new": "B"}), GraphConfig())
    assert reading.superseded and not reading.oscillates
    (edge,) = reading.edges
    assert (edge.kind, edge.source_id, edge.target_id) == (EdgeKind.SUPERSEDES, "new", "old")
    assert edge.invalid_at == _dt(2025, 1)


class _MatrixSims:
    """A similarity lookup that hands over its whole matrix (as the graph's does)."""

    def __init__(self, sims: dict[tuple[str, str], float]) -> None:
        self._sims = sims

    def get(self, key: tuple[str, str], default: float = 0.0) -> float:
        return self._sims.get(key, default)

    def matrix(self, ids: list[str]) -> list[list[float]]:
        return [[self._sims.get((a, b), 0.0) for b in ids] for a in ids]


def test_timeline_reads_the_same_from_a_matrix_as_pair_by_pair() -> None:
    # Phases A B A C with a return: the grouping must match whichever way sims are read.
    groups = {"p1": "A", "p2": "B", "p3": "A", "p4": "C", "p5": "B"}
    nodes = [_node(i, when=_dt(2025, n + 1)) for n, i in enumerate(groups)]
    sims = _sims(groups)
    by_pair = read_timeline(nodes, sims, GraphConfig())
    by_matrix = read_timeline(nodes, _MatrixSims(sims), GraphConfig())
    assert by_matrix == by_pair
    assert [p.label for p in by_matrix.phases] == [0, 1, 0, 2, 1]


def test_timeline_without_dates_says_nothing() -> None:
    assert read_timeline([_node("a"), _node("b")], {}, GraphConfig()).edges == ()


def test_dominant_type_counts_edges_and_breaks_ties_by_cost() -> None:
    assert dominant_type([]) is ConflictType.NONE
    assert dominant_type([EdgeKind.CORROBORATES]) is ConflictType.NONE
    assert dominant_type([EdgeKind.CONTEXT_PARTITION] * 2 + [EdgeKind.SOURCE_CONTRADICTION]) is (
        ConflictType.CPC
    )
    assert dominant_type([EdgeKind.CONTEXT_PARTITION, EdgeKind.SOURCE_CONTRADICTION]) is (
        ConflictType.SCC
    )


def test_risk_tier() -> None:
    assert risk_tier(["likes jazz", "likes metal"])[0] is RiskTier.LOW
    tier, cats = risk_tier(["clinic record: ibuprofen contraindicated", "the doctor approved it"])
    assert tier is RiskTier.HIGH and "medical" in cats
    assert risk_tier([], "Can grandpa pick up Lily from school?")[0] is RiskTier.HIGH
    assert risk_tier(["pays rent by bank transfer", "loan payment due"])[0] is RiskTier.MEDIUM
