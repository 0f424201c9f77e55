"""Stale-state time rules and dependency propagation as pure functions (no model)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from caap.conflict_graph.extractor import OfflineExtractor
from caap.conflict_graph.rules import GraphConfig, Node
from caap.conflict_graph.stale import (
    DEFAULT_DEPENDENCIES,
    DependencyMap,
    about_someone_else,
    entities,
    entity_supersessions,
    exclusive_supersessions,
    facets_of,
    invalidation_certain,
    is_change_event,
    is_later,
    propagated_invalidations,
    state_supersessions,
    validity,
)
from caap.models import ConflictEdge, EdgeKind


def _dt(y: int, m: int = 1) -> datetime:
    return datetime(y, m, 1, tzinfo=timezone.utc)


def _node(
    i: str,
    text: str,
    when: datetime | None = None,
    *,
    order: float | None = None,
    source: str | None = None,
    context: str | None = None,
) -> Node:
    o = order if order is not None else (when.timestamp() if when else 0.0)
    return Node(i, text, source, context, when, o, OfflineExtractor().extract(text))


# -- time ---------------------------------------------------------------------------------------


def test_is_later_compares_world_time_when_both_are_dated() -> None:
    old, new = _node("a", "x", _dt(2024)), _node("b", "y", _dt(2025))
    assert is_later(new, old) is True
    assert is_later(old, new) is False
    assert is_later(new, _node("c", "z", _dt(2025))) is False  # equal is not later


def test_is_later_uses_write_order_only_when_neither_is_dated() -> None:
    a, b = _node("a", "x", order=1.0), _node("b", "y", order=2.0)
    assert is_later(b, a) is True
    # One dated, one undated: world time and system time are not comparable.
    assert is_later(_node("c", "z", _dt(2030)), a) is None
    assert is_later(a, _node("c", "z", _dt(2030))) is None


def test_change_events_and_certainty() -> None:
    assert is_change_event("I broke my leg playing basketball.")
    assert is_change_event("We moved to Denver last month.")
    assert is_change_event("I was laid off on Friday.")
    assert not is_change_event("I cycle to work every day.")
    assert not is_change_event("My favourite spot is the ramen bar on Pike Street.")
    assert not invalidation_certain("I broke my leg playing basketball.")
    assert invalidation_certain("I'm in a cast for six weeks, no cycling.")
    assert invalidation_certain("I sold my car last week.")


def test_statements_about_someone_else() -> None:
    assert about_someone_else("My brother moved to Denver.")
    assert not about_someone_else("My wife and I moved to Denver.")
    assert not about_someone_else("My cat Miso sleeps on my keyboard.")
    assert not about_someone_else("I moved to Denver.")


def test_entities_skip_function_words_months_and_weekdays() -> None:
    assert entities("Miso passed away in January. We adopted Toast on Monday.") == {
        "miso",
        "toast",
    }


# -- the dependency map -------------------------------------------------------------------------


def test_default_map_links_the_documented_facets() -> None:
    deps = DEFAULT_DEPENDENCIES
    assert deps.depends("injury", "commute") and deps.depends("injury", "exercise")
    assert deps.depends("residence", "local_services")
    assert deps.depends("employment", "work_schedule")
    assert deps.depends("family_status", "childcare")
    # Direction matters, and unrelated facets are not linked.
    assert not deps.depends("commute", "injury")
    assert not deps.depends("injury", "communication")
    assert not deps.depends("hobbies", "diet")
    assert "injury" in deps.triggers and "commute" in deps.linked


def test_map_rejects_unknown_facets_self_loops_and_bad_cues() -> None:
    with pytest.raises(ValueError, match="'boat' has no description"):
        DependencyMap({"boat": ["travel"]})
    with pytest.raises(ValueError, match="cannot depend on itself"):
        DependencyMap({"injury": ["injury"]})
    with pytest.raises(ValueError, match="collection of facet names"):
        DependencyMap({"injury": "commute"})
    with pytest.raises(ValueError, match="not a valid pattern"):
        DependencyMap({"injury": ["commute"]}, cues={"commute": "("})
    with pytest.raises(ValueError, match="non-empty string"):
        DependencyMap({}, descriptions={"x": " "})


def test_extended_map_adds_without_changing_the_original() -> None:
    deps = DEFAULT_DEPENDENCIES.extended(
        {"boat": ["travel"], "pets": ["residence"]},
        descriptions={"boat": "owning or selling a sailing boat"},
    )
    assert deps.depends("boat", "travel") and deps.depends("pets", "residence")
    assert deps.depends("injury", "commute")  # the defaults stay
    assert not DEFAULT_DEPENDENCIES.depends("pets", "residence")
    assert "boat" in deps.descriptions and "boat" not in DEFAULT_DEPENDENCIES.descriptions


def test_facets_need_the_floor_and_a_near_tie_with_the_best() -> None:
    names = ["commute", "exercise", "hobbies"]
    assert facets_of([0.67, 0.37, 0.1], names) == {"commute"}
    assert facets_of([0.60, 0.55, 0.1], names) == {"commute", "exercise"}
    assert facets_of([0.30, 0.29, 0.1], names) == frozenset()  # nothing reaches the floor
    with pytest.raises(ValueError, match="similarities for"):
        facets_of([0.5], names)


def test_commute_cue_places_a_memory_whatever_the_embedding() -> None:
    assert "commute" in DEFAULT_DEPENDENCIES.cued_facets("I drive to the warehouse every day.")
    assert not DEFAULT_DEPENDENCIES.cued_facets("I drive a 2012 Honda Civic.")


# -- Type II: propagated invalidation ------------------------------------------------------------

_LEG = "I broke my leg playing basketball."
_CYCLE = "I cycle to work every day."


def _prop(
    nodes: list[Node], aspects: dict[str, str], facets: dict[str, set[str]]
) -> list[tuple[str, str]]:
    edges = propagated_invalidations(
        nodes, aspects, {k: frozenset(v) for k, v in facets.items()}, DEFAULT_DEPENDENCIES
    )
    assert all(e.kind is EdgeKind.PROPAGATED_INVALIDATION for e in edges)
    return [(e.source_id, e.target_id) for e in edges]


def test_a_later_injury_invalidates_the_dependent_habit_with_its_time() -> None:
    nodes = [_node("bike", _CYCLE, _dt(2024)), _node("leg", _LEG, _dt(2025))]
    edges = propagated_invalidations(
        nodes,
        {"bike": "commute", "leg": "injury"},
        {"bike": frozenset({"commute"}), "leg": frozenset({"injury"})},
        DEFAULT_DEPENDENCIES,
    )
    (e,) = edges
    assert (e.source_id, e.target_id) == ("leg", "bike")
    assert e.invalid_at == _dt(2025) and "injury" in e.evidence


def test_unrelated_facets_never_invalidate_each_other() -> None:
    # Every pair of facets the default map does not link, both ways, with a dated change.
    facets = sorted(DEFAULT_DEPENDENCIES.descriptions)
    for trig in facets:
        for dep in facets:
            if trig == dep or DEFAULT_DEPENDENCIES.depends(trig, dep):
                continue
            nodes = [_node("old", _CYCLE, _dt(2024)), _node("new", _LEG, _dt(2025))]
            got = _prop(nodes, {"old": "a", "new": "b"}, {"old": {dep}, "new": {trig}})
            assert got == [], (trig, dep)


def test_no_invalidation_without_a_later_change() -> None:
    aspects = {"bike": "commute", "leg": "injury"}
    facets = {"bike": {"commute"}, "leg": {"injury"}}
    # The injury came first: the habit was reported after it.
    assert (
        _prop([_node("bike", _CYCLE, _dt(2025)), _node("leg", _LEG, _dt(2024))], aspects, facets)
        == []
    )
    # Not a change at all ("has a bad knee" is a standing state).
    standing = _node("leg", "I have a bad knee.", _dt(2025))
    assert _prop([_node("bike", _CYCLE, _dt(2024)), standing], aspects, facets) == []
    # Undated against dated: cannot be ordered.
    assert _prop([_node("bike", _CYCLE), _node("leg", _LEG, _dt(2025))], aspects, facets) == []
    # Someone else's injury is not the user's.
    brother = _node("leg", "My brother broke his leg.", _dt(2025))
    assert _prop([_node("bike", _CYCLE, _dt(2024)), brother], aspects, facets) == []
    # A named source's report is a source conflict, not the user's own change.
    reported = _node("leg", _LEG, _dt(2025), source="the clinic record")
    assert _prop([_node("bike", _CYCLE, _dt(2024)), reported], aspects, facets) == []


def test_a_later_observation_of_the_dependent_aspect_lifts_the_invalidation() -> None:
    nodes = [
        _node("bike", _CYCLE, _dt(2024)),
        _node("leg", _LEG, _dt(2025, 1)),
        _node("back", "Back on the bike to work after the cast came off.", _dt(2025, 6)),
    ]
    aspects = {"bike": "commute", "back": "commute", "leg": "injury"}
    facets = {"bike": {"commute"}, "back": {"commute"}, "leg": {"injury"}}
    assert _prop(nodes, aspects, facets) == []


def test_same_aspect_is_left_to_supersession() -> None:
    nodes = [_node("bike", _CYCLE, _dt(2024)), _node("leg", _LEG, _dt(2025))]
    assert _prop(nodes, {"bike": "x", "leg": "x"}, {"bike": {"commute"}, "leg": {"injury"}}) == []


def test_primary_facets_restrict_what_a_change_triggers_on() -> None:
    nodes = [_node("bike", _CYCLE, _dt(2024)), _node("job", "I got a new job downtown.", _dt(2025))]
    aspects = {"bike": "commute", "job": "job"}
    facets = {"bike": frozenset({"commute"}), "job": frozenset({"employment", "residence"})}
    both = propagated_invalidations(nodes, aspects, facets, DEFAULT_DEPENDENCIES)
    assert {e.evidence.split("(")[1].split(")")[0] for e in both} == {"employment, residence"}
    only_hobby = propagated_invalidations(
        nodes, aspects, facets, DEFAULT_DEPENDENCIES, {"job": frozenset({"hobbies"})}
    )
    assert only_hobby == []


def test_focus_returns_only_pairs_with_the_focus_node() -> None:
    nodes = [
        _node("bike", _CYCLE, _dt(2024)),
        _node("run", "I run 5k every morning.", _dt(2024)),
        _node("leg", _LEG, _dt(2025)),
    ]
    aspects = {"bike": "c", "run": "e", "leg": "i"}
    facets = {
        "bike": frozenset({"commute"}),
        "run": frozenset({"exercise"}),
        "leg": frozenset({"injury"}),
    }
    full = propagated_invalidations(nodes, aspects, facets, DEFAULT_DEPENDENCIES)
    assert {e.target_id for e in full} == {"bike", "run"}
    focused = propagated_invalidations(nodes, aspects, facets, DEFAULT_DEPENDENCIES, focus="run")
    assert [(e.source_id, e.target_id) for e in focused] == [("leg", "run")]


# -- Type I: supersession ------------------------------------------------------------------------


def _sims(same: set[frozenset[str]]) -> dict[tuple[str, str], float]:
    class _S(dict[tuple[str, str], float]):
        def get(self, key: tuple[str, str], default: float = 0.0, /) -> float:  # type: ignore[override]
            return 0.95 if frozenset(key) in same else 0.2

    return _S()


def test_single_reported_change_supersedes_a_standing_state() -> None:
    nodes = [
        _node("sea", "I live in Seattle near Green Lake.", _dt(2024)),
        _node("pdx", "I signed a lease and moved to Portland.", _dt(2025)),
    ]
    (e,) = state_supersessions(nodes, _sims(set()), GraphConfig())
    assert (e.kind, e.source_id, e.target_id) == (EdgeKind.SUPERSEDES, "pdx", "sea")
    assert e.invalid_at == _dt(2025)


def test_oscillation_and_returns_are_not_supersession() -> None:
    nodes = [
        _node("a", "I log every expense in a spreadsheet.", _dt(2024, 1)),
        _node("b", "I stopped the spreadsheet and check my balance weekly.", _dt(2024, 2)),
        _node("c", "I went back to logging every purchase.", _dt(2024, 3)),
    ]
    assert state_supersessions(nodes, _sims(set()), GraphConfig(), oscillates=True) == []
    # Even when the timeline did not call it an oscillation, a return is a reversal.
    assert state_supersessions(nodes, _sims(set()), GraphConfig()) == []


def test_supersession_spares_agreeing_conditioned_and_sourced_memories() -> None:
    nodes = [
        _node("same", "I live in Portland.", _dt(2024)),
        _node("cond", "When it rains I work from home.", _dt(2024), context="when it rains"),
        _node("rec", "The lease record shows a Seattle address.", _dt(2024), source="the lease"),
        _node("new", "I moved to Portland.", _dt(2025)),
    ]
    edges = state_supersessions(nodes, _sims({frozenset({"same", "new"})}), GraphConfig())
    assert edges == []


def test_exclusive_facet_supersedes_across_aspects_but_not_other_facets() -> None:
    nodes = [
        _node("sea", "I live in Seattle.", _dt(2024)),
        _node("gym", "I go to the gym on Main Street.", _dt(2024)),
        _node("pdx", "I moved to Portland.", _dt(2025)),
    ]
    aspects = {"sea": "a1", "gym": "a2", "pdx": "a3"}
    facets = {
        "sea": frozenset({"residence"}),
        "gym": frozenset({"exercise"}),
        "pdx": frozenset({"residence"}),
    }
    edges = exclusive_supersessions(nodes, aspects, facets, _sims(set()), GraphConfig())
    assert [(e.source_id, e.target_id) for e in edges] == [("pdx", "sea")]


def test_a_change_naming_the_same_thing_supersedes_it() -> None:
    nodes = [
        _node("cat", "My cat Miso sleeps on my keyboard.", _dt(2023)),
        _node("gone", "Miso passed away; we adopted a puppy.", _dt(2024)),
        _node("other", "Miso is also the name of my favourite soup.", _dt(2023)),
    ]
    aspects = {"cat": "a", "gone": "b", "other": "c"}
    facets = {
        "cat": frozenset({"pets"}),
        "gone": frozenset({"pets"}),
        "other": frozenset({"diet"}),
    }
    edges = entity_supersessions(nodes, aspects, facets, _sims(set()), GraphConfig())
    # The soup shares the name but no facet: untouched.
    assert [(e.source_id, e.target_id) for e in edges] == [("gone", "cat")]
    # The user's own name names nothing.
    assert (
        entity_supersessions(
            nodes, aspects, facets, _sims(set()), GraphConfig(), frozenset({"Miso"})
        )
        == []
    )


def test_validity_reads_active_incoming_edges_only() -> None:
    live = ConflictEdge(
        user_id="u",
        kind=EdgeKind.SUPERSEDES,
        source_id="new",
        target_id="old",
        invalid_at=_dt(2025),
    )
    closed = ConflictEdge(
        user_id="u",
        kind=EdgeKind.PROPAGATED_INVALIDATION,
        source_id="x",
        target_id="old",
        invalid_at=_dt(2024),
        expired_at=_dt(2025),
    )
    v = validity("old", _dt(2023), [live, closed])
    assert v.superseded_by == ("new",) and v.invalidated_by == ()
    assert v.invalid_at == _dt(2025) and v.valid_at == _dt(2023) and not v.current
    assert validity("new", None, [live, closed]).current
