"""Supersession and propagated invalidation in the conflict graph (real offline embeddings)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from caap import Agent
from caap.conflict_graph import ConflictGraph
from caap.conflict_graph.stale import DependencyMap
from caap.models import ConflictType, EdgeKind, Memory
from tests.scenarios import BUDGET


def _dt(y: int, m: int = 1) -> datetime:
    return datetime(y, m, 1, tzinfo=timezone.utc)


HISTORY = [
    ("sea", "I live in Seattle, near Green Lake.", _dt(2024, 1)),
    ("bike", "I cycle to work every day, about 25 minutes each way.", _dt(2024, 2)),
    ("bass", "I play bass in a band on Sundays.", _dt(2024, 3)),
    ("text", "I prefer texting over phone calls.", _dt(2024, 3)),
    ("veg", "I'm vegetarian and cook a lot of lentils.", _dt(2024, 3)),
    ("leg", "I broke my leg playing basketball last weekend.", _dt(2025, 1)),
    ("pdx", "I signed a lease and set up utilities in Portland.", _dt(2025, 2)),
]


def _graph(embedder: Any, rows: list[tuple[str, str, datetime]], **kw: Any) -> ConflictGraph:
    g = ConflictGraph("u", embedder, **kw)
    g.add_many([Memory(id=i, user_id="u", text=t, observed_at=w) for i, t, w in rows])
    return g


def _pairs(g: ConflictGraph, kind: EdgeKind) -> set[tuple[str, str]]:
    return {(e.source_id, e.target_id) for e in g.edges() if e.kind is kind}


def test_a_move_supersedes_the_old_home_which_stays_as_history(embedder: Any) -> None:
    # Tests the rules layer: the supersession it reads in this history.
    g = _graph(embedder, HISTORY, relations="rules")
    assert ("pdx", "sea") in _pairs(g, EdgeKind.SUPERSEDES)
    v = g.validity("sea")
    assert v.superseded_by == ("pdx",) and v.invalid_at == _dt(2025, 2)
    assert "sea" in g  # closed in world time, never deleted
    assert g.validity("pdx").current
    cluster = g.cluster_of("sea")
    assert cluster is not None and cluster.conflict_type is ConflictType.STALE
    assert cluster.sides["superseded"] == ["sea"] and "pdx" in cluster.sides["current"]


def test_an_injury_invalidates_the_bike_commute_and_nothing_unrelated(embedder: Any) -> None:
    # Tests the rules layer: the default dependency map proposes these edges only under it.
    g = _graph(embedder, HISTORY, relations="rules")
    invalidated = _pairs(g, EdgeKind.PROPAGATED_INVALIDATION)
    assert ("leg", "bike") in invalidated
    # Music, communication and diet do not depend on a leg or a home.
    touched = {t for _, t in invalidated} | {t for _, t in _pairs(g, EdgeKind.SUPERSEDES)}
    assert not touched & {"bass", "text", "veg"}
    cluster = g.cluster_of("bike")
    assert cluster is not None and cluster.conflict_type is ConflictType.STALE
    # The change lives in another aspect but joins the habit's cluster.
    assert "leg" in cluster.memory_ids and cluster.sides["invalidated"] == ["bike"]


def test_a_later_observation_lifts_the_invalidation_and_keeps_the_closed_edge(
    embedder: Any,
) -> None:
    # Tests the rules layer: the default dependency map proposes these edges only under it.
    g = _graph(embedder, HISTORY, relations="rules")
    result = g.add(
        Memory(
            id="back",
            user_id="u",
            text="I cycle to work every day again now that my leg has healed.",
            observed_at=_dt(2025, 6),
            aspect=g.memory("bike").aspect,
        )
    )
    assert ("leg", "bike") not in _pairs(g, EdgeKind.PROPAGATED_INVALIDATION)
    closed = [e for e in result.closed_edges if e.kind is EdgeKind.PROPAGATED_INVALIDATION]
    assert {(e.source_id, e.target_id) for e in closed} >= {("leg", "bike")}
    kept = g.edges(include_closed=True)
    assert any(e.source_id == "leg" and e.target_id == "bike" and not e.active for e in kept)


def test_a_graph_put_back_from_storage_still_lifts_the_invalidation(embedder: Any) -> None:
    # The lifting rule reads an index of the open invalidations; a reloaded graph (memories
    # and edges put back, nothing re-typed) must rebuild it, and a removal must leave it.
    g = _graph(embedder, HISTORY, relations="rules")
    back = g.memory("bike")
    h = ConflictGraph("u", embedder, relations="rules")
    for m in g.memories():
        h.load(m, g.vector(m.id), extraction=g.extraction(m.id))
    h.load_edges(g.edges(include_closed=True))
    assert ("leg", "bike") in _pairs(h, EdgeKind.PROPAGATED_INVALIDATION)
    later = Memory(
        id="back",
        user_id="u",
        text="I cycle to work every day again now that my leg has healed.",
        observed_at=_dt(2025, 6),
        aspect=back.aspect,
    )
    result = h.add(later)
    lifted = {(e.source_id, e.target_id) for e in result.closed_edges}
    assert ("leg", "bike") in lifted
    # Removing the change closes its invalidation; a later observation lifts only what is
    # still open (the move's), not the removed change's edge a second time.
    g.remove("leg")
    assert ("leg", "bike") not in _pairs(g, EdgeKind.PROPAGATED_INVALIDATION)
    again = g.add(later)
    relifted = {e.source_id for e in again.closed_edges}
    assert "leg" not in relifted and ("pdx", "bike") not in _pairs(
        g, EdgeKind.PROPAGATED_INVALIDATION
    )


def test_the_dependency_map_is_the_only_way_one_aspect_invalidates_another(
    embedder: Any,
) -> None:
    no_injury = DependencyMap({"residence": ["commute"]})
    g = _graph(embedder, HISTORY, dependencies=no_injury)
    assert ("leg", "bike") not in _pairs(g, EdgeKind.PROPAGATED_INVALIDATION)
    extended = no_injury.extended({"injury": ["commute"]})
    g2 = _graph(embedder, HISTORY, dependencies=extended)
    assert ("leg", "bike") in _pairs(g2, EdgeKind.PROPAGATED_INVALIDATION)


def test_oscillation_stays_an_oscillation(embedder: Any) -> None:
    # Tests the rules layer: the oscillation it reads in these rules-tuned examples.
    g = ConflictGraph("u", embedder, relations="rules")
    g.add_many([Memory(user_id="u", text=t) for t in BUDGET])
    (aspect,) = {m.aspect for m in g.memories()}
    assert aspect is not None
    cluster = g.cluster(aspect)
    assert cluster.conflict_type is ConflictType.BOC
    assert not _pairs(g, EdgeKind.SUPERSEDES)


def test_agent_persists_stale_edges_and_recall_brings_the_change(
    embedder: Any, tmp_path: Path
) -> None:
    # Tests the rules layer: its supersession reading and the default dependency map, which
    # proposes edges only under it.
    with Agent(tmp_path / "a", embedder=embedder, relations="rules") as agent:
        for _, text, when in HISTORY:
            agent.remember(text, "u", observed_at=when)
    with Agent(tmp_path / "a", embedder=embedder, relations="rules") as agent:
        g = agent.graph("u")
        kinds = {e.kind for e in g.edges()}
        assert {EdgeKind.SUPERSEDES, EdgeKind.PROPAGATED_INVALIDATION} <= kinds
        recall = agent.recall("plan my bike maintenance for my daily ride to work", "u", k=1)
        texts = [m.text for m in recall.memories]
        assert any("bike" in t or "cycle" in t for t in texts)
        assert any("broke my leg" in t for t in texts)


def _classifier(reply: str | Exception) -> Any:
    from caap.conflict_graph.stale_llm import LLMInvalidationClassifier
    from caap.llm import FunctionModel

    def fn(messages: Any, schema: Any) -> str:
        if isinstance(reply, Exception):
            raise reply
        return reply

    return LLMInvalidationClassifier(FunctionModel(fn, name="scripted"))


def test_classifier_can_veto_a_proposed_edge_but_not_add_one(embedder: Any) -> None:
    # Tests the rules layer: the classifier judges the edges its cues and the default
    # dependency map propose.
    veto = _classifier('{"relation": "none", "certain": false, "reason": "unrelated"}')
    g = _graph(embedder, HISTORY, classifier=veto, relations="rules")
    assert not _pairs(g, EdgeKind.PROPAGATED_INVALIDATION)
    assert not any(e.kind is EdgeKind.SUPERSEDES and e.source_id == "pdx" for e in g.edges())
    # Every question named both statements, older and newer.
    calls = veto.model.calls
    assert calls and all(
        "OLDER:" in c[-1]["content"] and "NEWER:" in c[-1]["content"] for c in calls
    )
    # A "yes" on everything adds nothing the rules did not propose.
    yes = _classifier('{"relation": "propagated_invalidation", "certain": false, "reason": "r"}')
    g2 = _graph(embedder, HISTORY, classifier=yes, relations="rules")
    assert _pairs(g2, EdgeKind.PROPAGATED_INVALIDATION) == _pairs(
        _graph(embedder, HISTORY, relations="rules"), EdgeKind.PROPAGATED_INVALIDATION
    )
    assert all(
        "confirmed by the classifier" in e.evidence
        for e in g2.edges()
        if e.kind is EdgeKind.PROPAGATED_INVALIDATION
    )


def test_classifier_failure_keeps_the_rules_answer(embedder: Any) -> None:
    from caap.llm import LLMTimeout

    # Tests the rules layer: its answer (the default dependency map's edge) is what is kept.
    broken = _classifier(LLMTimeout("no answer in 5 s"))
    g = _graph(embedder, HISTORY, classifier=broken, relations="rules")
    edges = [e for e in g.edges() if e.kind is EdgeKind.PROPAGATED_INVALIDATION]
    assert ("leg", "bike") in {(e.source_id, e.target_id) for e in edges}
    assert all("classifier unavailable" in e.evidence for e in edges)
    assert broken.last_error is not None and broken.last_error.kind == "timeout"


def test_agent_hands_its_dependency_map_to_graph_and_policy(embedder: Any, tmp_path: Path) -> None:
    rows = [r for r in HISTORY if r[0] in ("bike", "bass", "leg")]
    query = "Since I ride my bike to work every day, plan my bike maintenance for next month."
    # Tests the rules layer: only it applies the default dependency map unasked.
    with Agent(tmp_path / "d", embedder=embedder, relations="rules") as agent:
        for _, text, when in rows:
            agent.remember(text, "u", observed_at=when)
        linked = agent.respond(query, "u")
    no_injury = DependencyMap({"residence": ["commute"]})
    with Agent(
        tmp_path / "n", embedder=embedder, dependencies=no_injury, relations="rules"
    ) as agent:
        for _, text, when in rows:
            agent.remember(text, "u", observed_at=when)
        assert not any(e.kind is EdgeKind.PROPAGATED_INVALIDATION for e in agent.graph("u").edges())
        unlinked = agent.respond(query, "u")
    assert linked.decision.conflict_type is ConflictType.STALE
    assert unlinked.decision.conflict_type is not ConflictType.STALE


def test_a_new_job_does_not_replace_a_move_filed_under_the_same_topic(embedder: Any) -> None:
    # A first memory about both home and work joins the two later changes in one topic; each
    # change replaces its own part of it, not the other change.
    rows = [
        ("lyon", "I live in Lyon and work at a bakery.", _dt(2023, 5)),
        ("mrs", "I moved to Marseille in 2025 and signed a lease there.", _dt(2025, 2)),
        ("job", "I quit the bakery and now work as a software tester.", _dt(2025, 3)),
    ]
    g = _graph(embedder, rows, relations="rules")
    assert g.memory("mrs").aspect == g.memory("job").aspect
    assert ("job", "mrs") not in _pairs(g, EdgeKind.SUPERSEDES)
    assert g.validity("mrs").current and g.validity("job").current
    assert set(g.validity("lyon").superseded_by) == {"mrs", "job"}
