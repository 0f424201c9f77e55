"""The relation-layer interface: registry, verdict arithmetic, the rules layer, wiring."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from caap.benchmark.dataset import PAIR_RELATIONS
from caap.conflict_graph import ConflictGraph, GraphConfig
from caap.conflict_graph.relations import (
    RELATIONS,
    Facets,
    MemoryView,
    PairVerdict,
    RelationLayer,
    RiskVerdict,
    edge_of,
    get_relation_layer,
    register_relation_layer,
    relation_layer_names,
    resolve_relations,
)
from caap.models import EdgeKind, Memory, RiskTier


def test_vocabulary_is_the_datasets_pair_labels() -> None:
    assert RELATIONS == PAIR_RELATIONS


def test_from_probs_takes_the_argmax_and_fills_missing_relations() -> None:
    v = PairVerdict.from_probs({"agree": 0.2, "supersedes": 0.7}, "newer job")
    assert v.relation == "supersedes"
    assert v.confidence == pytest.approx(0.7)
    assert set(v.probs) == set(RELATIONS)
    assert v.probs["unrelated"] == 0.0
    with pytest.raises(ValueError, match="unknown relations"):
        PairVerdict.from_probs({"contradicts": 1.0})


def test_edge_of_is_a_pure_threshold() -> None:
    sure = PairVerdict.from_probs({"context_partition": 0.8, "agree": 0.2}, "home vs office")
    assert edge_of(sure) == (EdgeKind.CONTEXT_PARTITION, "home vs office")
    assert edge_of(sure, minimum=0.9) is None
    # Temporal and stale relations need time order: not decided pairwise here.
    assert edge_of(PairVerdict.certain("supersedes")) is None
    assert edge_of(PairVerdict.certain("unrelated")) is None


def test_registry_names_and_errors() -> None:
    assert {"rules", "learned", "llm"} <= set(relation_layer_names())
    with pytest.raises(ValueError, match="not a relation layer"):
        get_relation_layer("nope")
    with pytest.raises(TypeError, match="relations must be"):
        resolve_relations(42)  # type: ignore[arg-type]
    layer = get_relation_layer("rules")
    assert resolve_relations(layer) is layer
    assert isinstance(layer, RelationLayer)


def test_rules_layer_reads_sources_contexts_and_risk() -> None:
    layer = get_relation_layer("rules")
    facets = layer.facets(
        ["According to her GP, Dana takes 5 mg daily.", "When it rains Dana stays in."]
    )
    assert all(isinstance(f, Facets) for f in facets)
    assert facets[0].source is not None and facets[0].source_confidence == 1.0
    assert facets[1].context is not None and facets[1].context_confidence == 1.0
    a = MemoryView("a", "x", source="her GP")
    b = MemoryView("b", "y", source="the pharmacy label")
    c = MemoryView("c", "z", context="at home")
    d = MemoryView("d", "w", context="at the office")
    verdicts = layer.relate([(a, b), (c, d), (MemoryView("e", "p"), MemoryView("f", "q"))])
    assert [v.relation for v in verdicts] == [
        "source_contradiction",
        "context_partition",
        "unrelated",
    ]
    tier, conf = layer.risk("What dose of insulin should I take?", [])
    assert tier is RiskTier.HIGH and conf == 1.0
    assert layer.risk("", ["likes jazz"]).tier is RiskTier.LOW


def test_rules_layer_agrees_on_near_identical_values() -> None:
    layer = get_relation_layer("rules")
    v = np.ones(4, dtype=np.float32) / 2
    a = MemoryView("a", "x", source="her GP", vector=v)
    b = MemoryView("b", "y", source="the pharmacy", vector=v)
    assert layer.relate([(a, b)])[0].relation == "agree"


class _Scripted:
    """A layer that says one relation for every pair and counts its calls."""

    name = "scripted"

    def __init__(self, relation: str) -> None:
        self.relation = relation
        self.calls: list[int] = []
        self._rules = get_relation_layer("rules")

    def facets(self, texts: Sequence[str], *, subject: set[str] | None = None) -> list[Facets]:
        return self._rules.facets(texts, subject=subject)

    def relate(self, pairs: Sequence[tuple[MemoryView, MemoryView]]) -> list[PairVerdict]:
        self.calls.append(len(pairs))
        return [PairVerdict.certain(self.relation, "scripted") for _ in pairs]  # type: ignore[arg-type]

    def risk(self, query: str, texts: Sequence[str]) -> RiskVerdict:
        return RiskVerdict(RiskTier.HIGH, 0.9, ("scripted",))


def test_graph_types_edges_only_from_the_layers_verdicts(embedder: object) -> None:
    layer = _Scripted("source_contradiction")
    g = ConflictGraph("u", embedder, relations=layer)  # type: ignore[arg-type]
    g.add_many(
        [
            Memory(user_id="u", text="Sam drinks black coffee every morning.", source="Sam"),
            Memory(user_id="u", text="Sam drinks coffee with oat milk.", source="his sister"),
        ]
    )
    kinds = {e.kind for e in g.edges()}
    assert kinds == {EdgeKind.SOURCE_CONTRADICTION}
    assert layer.calls == [1]
    cluster = g.clusters()[0]
    assert cluster.risk is RiskTier.HIGH  # the layer's risk, not keyword rules


def test_registered_factory_is_used_by_name(embedder: object) -> None:
    register_relation_layer("scripted-agree", lambda **_: _Scripted("agree"))
    g = ConflictGraph("u", embedder, config=GraphConfig(relations="scripted-agree"))  # type: ignore[arg-type]
    assert g.relations.name == "scripted"
