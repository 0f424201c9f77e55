"""The policy reads the agent's own graph at answer time instead of typing the recall again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from caap import Agent, ConflictType
from caap.policy import CaapPolicy
from tests.scenarios import BUDGET, DRINKING, UNRELATED


@pytest.fixture
def agent(tmp_path: Path, embedder: Any) -> Agent:
    a = Agent(tmp_path / "data", embedder=embedder)
    a.remember_many(DRINKING + BUDGET + UNRELATED, "ethan")
    return a


@pytest.fixture
def rules_agent(tmp_path: Path, embedder: Any) -> Agent:
    """The same agent over the hand-written rules layer, for readings specific to it."""
    a = Agent(tmp_path / "rules-data", embedder=embedder, relations="rules")
    a.remember_many(DRINKING + BUDGET + UNRELATED, "ethan")
    return a


QUERY = "Should I skip drinking before my early shift?"


def test_analysis_over_the_agent_graph_uses_its_aspects_and_edges(rules_agent: Agent) -> None:
    # Tests the rules layer: the context partition it reads in these rules-tuned examples.
    graph = rules_agent.graph("ethan")
    recalled = rules_agent.recall(QUERY, "ethan").memories
    a = rules_agent.policy.analyze(recalled, QUERY, graph=graph)
    assert a.cluster is not None and a.cluster.conflict_type is ConflictType.CPC
    # The cluster is the agent graph's own aspect, with the edges the agent stored.
    drinking_ids = {m.id for m in recalled if m.text in DRINKING}
    aspect = graph.memory(next(iter(drinking_ids))).aspect
    assert a.cluster.aspect == aspect
    stored = {e.id for e in graph.cluster(aspect).edges}
    assert {e.id for e in a.cluster.edges} <= stored and a.cluster.edges
    # Only recalled memories (and what a cluster pulls in) are visible to the policy.
    assert set(a.memories) <= {m.id for m in graph.memories()}
    assert drinking_ids <= set(a.memories)


def test_agent_graph_answer_matches_a_fresh_analysis(rules_agent: Agent) -> None:
    # Tests the rules layer: the context partition it reads in these rules-tuned examples.
    graph = rules_agent.graph("ethan")
    recalled = rules_agent.recall(QUERY, "ethan").memories
    policy = rules_agent.policy
    reused = policy.analyze(recalled, QUERY, graph=graph)
    fresh = policy.analyze(recalled, QUERY)
    assert reused.conflict_type is fresh.conflict_type is ConflictType.CPC
    assert set(reused.cluster.memory_ids) == set(fresh.cluster.memory_ids)  # type: ignore[union-attr]
    assert rules_agent.respond(QUERY, "ethan").decision.conflict_type is ConflictType.CPC


def test_a_graph_that_lacks_a_memory_or_reads_with_another_layer_is_not_used(
    agent: Agent, embedder: Any
) -> None:
    graph = agent.graph("ethan")
    recalled = agent.recall(QUERY, "ethan").memories
    # A memory edited since it was recalled: the graph does not hold it as given.
    edited = [
        recalled[0].model_copy(update={"text": recalled[0].text + " (edited)"}),
        *recalled[1:],
    ]
    a = agent.policy.analyze(edited, QUERY, graph=graph)
    assert a.memories[recalled[0].id].text.endswith("(edited)")
    # Another policy's layer instance: it types the memories itself (edges of its own).
    other = CaapPolicy(embedder=embedder, relations="rules")
    b = other.analyze(recalled, QUERY, graph=graph)
    assert b.cluster is not None and b.cluster.edges
    stored = {e.id for e in graph.edges(include_closed=True)}
    assert not {e.id for e in b.cluster.edges} & stored
