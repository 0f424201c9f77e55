"""The conflict graph with real embeddings (offline model)."""

from __future__ import annotations

from typing import Any

from caap.conflict_graph import ConflictGraph
from caap.models import ConflictType, EdgeKind, Memory
from tests.scenarios import BUDGET, DRINKING, MEDICATION, UNRELATED


def _graph(embedder: Any, texts: list[str], user: str = "u", **kw: Any) -> ConflictGraph:
    g = ConflictGraph(user, embedder, **kw)
    g.add_many([Memory(text=t, user_id=user) for t in texts])
    return g


def _aspect_of(g: ConflictGraph, text: str) -> str | None:
    return next(m.aspect for m in g.memories() if m.text == text)


def test_context_rules_form_one_context_partition_cluster(embedder: Any) -> None:
    # Tests the rules layer: these rules-tuned examples' exact clusters are its reading.
    g = _graph(embedder, DRINKING + UNRELATED, relations="rules")
    aspects = {_aspect_of(g, t) for t in DRINKING}
    assert len(aspects) == 1
    (aspect,) = aspects
    assert aspect is not None
    cluster = g.cluster(aspect)
    assert cluster.conflict_type is ConflictType.CPC
    assert {e.kind for e in cluster.edges} == {EdgeKind.CONTEXT_PARTITION}
    assert len(cluster.sides) == 4  # four distinct next-day conditions
    assert all(_aspect_of(g, t) != aspect for t in UNRELATED)


def test_alternating_phases_form_an_oscillation_with_reversals(embedder: Any) -> None:
    # Tests the rules layer: these rules-tuned examples' exact clusters are its reading.
    g = _graph(embedder, BUDGET + UNRELATED, relations="rules")
    (aspect,) = {_aspect_of(g, t) for t in BUDGET}
    assert aspect is not None
    cluster = g.cluster(aspect)
    assert cluster.conflict_type is ConflictType.BOC
    assert EdgeKind.TEMPORAL_OSCILLATION in {e.kind for e in cluster.edges}
    assert cluster.reversal_count == 2
    assert cluster.phase_durations == ["three weeks", "two weeks"]


def test_record_and_parent_form_a_source_contradiction(embedder: Any) -> None:
    # Tests the rules layer: these rules-tuned examples' exact clusters are its reading.
    g = _graph(embedder, MEDICATION + UNRELATED, relations="rules")
    (aspect,) = {_aspect_of(g, t) for t in MEDICATION}
    assert aspect is not None
    cluster = g.cluster(aspect)
    assert cluster.conflict_type is ConflictType.SCC
    assert set(cluster.sides) == {"Maya's clinic record", "Maya's father"}
    assert cluster.source_count == 2
    assert cluster.risk.value == "high"


def test_unrelated_memories_are_not_linked(embedder: Any) -> None:
    g = _graph(embedder, DRINKING + BUDGET + MEDICATION + UNRELATED)
    for e in g.edges():
        a, b = g.memory(e.source_id), g.memory(e.target_id)
        assert a.aspect == b.aspect
    groups = [DRINKING, BUDGET, MEDICATION]
    for i, first in enumerate(groups):
        for second in groups[i + 1 :]:
            assert _aspect_of(g, first[0]) != _aspect_of(g, second[0])


def test_caller_facets_win(embedder: Any) -> None:
    g = ConflictGraph("u", embedder)
    (r,) = g.add_many(
        [
            Memory(
                text="Maya's clinic record lists ibuprofen.",
                user_id="u",
                source="the GP",
                aspect="pain_relief",
            )
        ]
    )
    assert r.memory.source == "the GP" and r.memory.aspect == "pain_relief"
    assert "source" not in r.inferred and "aspect" not in r.inferred


def test_removing_a_memory_closes_its_edges(embedder: Any) -> None:
    g = _graph(embedder, MEDICATION)
    victim = g.memories()[0].id
    closed = g.remove(victim)
    assert closed and all(e.expired_at is not None for e in closed)
    assert all(victim not in e.endpoints() for e in g.edges())
    assert any(victim in e.endpoints() for e in g.edges(include_closed=True))


def test_graph_rejects_another_users_memory(embedder: Any) -> None:
    g = ConflictGraph("alice", embedder)
    try:
        g.add(Memory(text="x", user_id="bob"))
    except ValueError as exc:
        assert "bob" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected ValueError")


def test_cached_cluster_follows_every_write_and_removal(embedder: Any) -> None:
    # Tests the rules layer: these rules-tuned examples' exact clusters are its reading.
    g = _graph(embedder, BUDGET[:1] + UNRELATED, relations="rules")
    aspect = _aspect_of(g, BUDGET[0])
    assert aspect is not None
    before = g.cluster(aspect)
    assert g.cluster(aspect) is before  # unchanged aspect: served from the cache
    g.add_many([Memory(text=t, user_id="u") for t in BUDGET[1:]])
    aspect = _aspect_of(g, BUDGET[0])
    assert aspect is not None
    after = g.cluster(aspect)
    assert after.conflict_type is ConflictType.BOC
    assert len(after.memory_ids) == len(BUDGET)
    last = next(m.id for m in g.memories() if m.text == BUDGET[-1])
    g.remove(last)
    assert last not in g.cluster(aspect).memory_ids


def test_expand_returns_the_rest_of_a_hit_cluster_nearest_first(embedder: Any) -> None:
    # Tests the rules layer: these rules-tuned examples' exact clusters are its reading.
    g = _graph(embedder, MEDICATION + UNRELATED, relations="rules")
    first = next(m for m in g.memories() if m.text == MEDICATION[0])
    query = embedder.encode_one("What dose should Maya take?")
    extra, clusters = g.expand([first.id], query)
    ids = [i for i, _ in extra]
    assert first.id not in ids
    assert {g.memory(i).text for i in ids} == set(MEDICATION[1:])
    assert [s for _, s in extra] == sorted((s for _, s in extra), reverse=True)
    assert [c.conflict_type for c in clusters] == [ConflictType.SCC]
    unrelated = next(m for m in g.memories() if m.text == UNRELATED[0])
    assert g.expand([unrelated.id, "no-such-id"], query) == ([], [])


def test_reusing_extractions_and_vectors_gives_the_same_graph(embedder: Any) -> None:
    first = _graph(embedder, DRINKING + UNRELATED)
    mems = first.memories()
    again = ConflictGraph("u", embedder)
    again.add_many(
        [Memory(text=m.text, user_id="u", id=m.id) for m in mems],
        vectors=first.vectors([m.id for m in mems]),
        extractions=[first.extraction(m.id) for m in mems],
    )
    assert [m.aspect for m in again.memories()] == [m.aspect for m in mems]
    assert {(e.kind, e.source_id, e.target_id) for e in again.edges()} == {
        (e.kind, e.source_id, e.target_id) for e in first.edges()
    }


def test_inferred_aspects_stop_growing_at_the_cap(embedder: Any) -> None:
    from caap.benchmark.perf import aspect_sizes, corpus
    from caap.conflict_graph.rules import GraphConfig

    # A hundred statements from many people and topics: loose joins chain them into one.
    texts = corpus(120, 0)[-100:]
    graphs = {}
    for cap in (10**9, 10):
        g = ConflictGraph("u", embedder, config=GraphConfig(aspect_cap=cap, aspect_cap_share=0.0))
        g.add_many([Memory(text=t, user_id="u") for t in texts])
        graphs[cap] = g
    assert aspect_sizes(graphs[10**9])["largest"] > 50
    capped = graphs[10]
    assert len(capped) == 100
    assert aspect_sizes(capped)["largest"] <= 10
    # A memory that names its aspect is never capped.
    named = ConflictGraph("u", embedder, config=GraphConfig(aspect_cap=3, aspect_cap_share=0.0))
    named.add_many([Memory(text=t, user_id="u", aspect="diary") for t in texts[:6]])
    assert len(named.aspect_members("diary")) == 6
    assert aspect_sizes(capped)["count"] > aspect_sizes(graphs[10**9])["count"]
