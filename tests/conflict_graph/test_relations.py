"""The relation-layer interface: registry, verdict arithmetic, the rules layer, wiring."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

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
from caap.conflict_graph.rules import Node, VerdictLookup, newer_older, verdict_timeline
from caap.conflict_graph.stale import verdict_stale_edges
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


def test_pairwise_layer_invalidates_without_a_dependency_map(embedder: object) -> None:
    layer = _Scripted("invalidates")
    layer.pairwise = True  # type: ignore[attr-defined]
    g = ConflictGraph("u", embedder, relations=layer)  # type: ignore[arg-type]
    old = Memory(user_id="u", text="I cycle to work every day.", observed_at=datetime(2024, 3, 1))
    new = Memory(
        user_id="u", text="The doctor found a heart condition.", observed_at=datetime(2024, 9, 1)
    )
    g.add_many([old, new])
    [e] = [e for e in g.edges() if e.kind is EdgeKind.PROPAGATED_INVALIDATION]
    assert (e.source_id, e.target_id) == (new.id, old.id)
    assert g.validity(old.id).invalidated_by == (new.id,)


def test_registered_factory_is_used_by_name(embedder: object) -> None:
    register_relation_layer("scripted-agree", lambda **_: _Scripted("agree"))
    g = ConflictGraph("u", embedder, config=GraphConfig(relations="scripted-agree"))  # type: ignore[arg-type]
    assert g.relations.name == "scripted"


# -- pure decisions over verdicts ---------------------------------------------------------
def _n(i: str, day: int | None = None, order: float = 0.0) -> Node:
    when = datetime(2024, 1, day, tzinfo=timezone.utc) if day else None
    return Node(i, i, None, None, when, when.timestamp() if when else order)


def _lookup(table: dict[frozenset[str], PairVerdict]) -> VerdictLookup:
    return lambda a, b: table.get(frozenset((a, b)))


def test_newer_older_uses_world_time_then_write_order() -> None:
    a, b = _n("a", day=5), _n("b", day=2)
    assert newer_older(b, a) == (a, b)
    c, d = _n("c", order=1.0), _n("d", order=2.0)
    assert newer_older(c, d) == (d, c)


def test_verdict_timeline_reads_oscillation_and_supersession() -> None:
    nodes = [_n("a", 1), _n("b", 2), _n("c", 3)]
    cfg = GraphConfig()
    osc = _lookup(
        {
            frozenset("ab"): PairVerdict.certain("temporal_change"),
            frozenset("bc"): PairVerdict.certain("temporal_change"),
            frozenset("ac"): PairVerdict.certain("agree"),
        }
    )
    r = verdict_timeline(nodes, osc, cfg)
    assert r.oscillates and not r.superseded
    assert {(e.source_id, e.target_id) for e in r.edges} == {("b", "a"), ("c", "b")}
    assert [p.members for p in r.phases] == [("a",), ("b",), ("c",)]
    sup = _lookup({frozenset("ac"): PairVerdict.certain("supersedes")})
    r = verdict_timeline(nodes, sup, cfg)
    assert r.superseded and not r.oscillates
    [e] = r.edges
    assert (e.kind, e.source_id, e.target_id) == (EdgeKind.SUPERSEDES, "c", "a")
    assert e.invalid_at == nodes[2].when
    # Below the confidence threshold nothing is read.
    weak = _lookup({frozenset("ac"): PairVerdict.from_probs({"supersedes": 0.4, "agree": 0.3})})
    assert verdict_timeline(nodes, weak, cfg).edges == ()


def test_verdict_stale_edges_cross_aspect_only_and_directed_by_time() -> None:
    change, habit, same = _n("change", 9), _n("habit", 1), _n("same", 2)
    aspects = {"change": "health", "habit": "diet", "same": "health"}
    table = {
        frozenset(("change", "habit")): PairVerdict.certain("invalidates", "rules it out"),
        frozenset(("change", "same")): PairVerdict.certain("supersedes"),
    }
    out = verdict_stale_edges(habit, [change, same], _lookup(table), aspects, GraphConfig())
    assert [(e.kind, e.source_id, e.target_id) for e in out] == [
        (EdgeKind.PROPAGATED_INVALIDATION, "change", "habit")
    ]
    out = verdict_stale_edges(change, [habit, same], _lookup(table), aspects, GraphConfig())
    # "same" shares the change's aspect: its timeline reads that supersession, not this.
    assert [e.target_id for e in out] == ["habit"]
    aspects["habit"] = "health"
    out = verdict_stale_edges(change, [habit], _lookup(table), aspects, GraphConfig())
    assert [e.kind for e in out] == [EdgeKind.PROPAGATED_INVALIDATION]


# -- the learned layer -----------------------------------------------------------------------
def test_learned_layer_loads_shipped_weights_and_gives_distributions(embedder: object) -> None:
    layer = get_relation_layer("learned", embedder=embedder)
    assert layer.name == "learned"
    assert layer.card["relations"] == list(RELATIONS)  # type: ignore[attr-defined]
    fs = layer.facets(["My GP says I should take 5 mg.", "On workdays I skip breakfast."])
    assert all(0.0 <= f.source_confidence <= 1.0 for f in fs)
    a = MemoryView("a", "I take the bus to work every day.")
    b = MemoryView("b", "My sister collects vintage stamps.")
    [v] = layer.relate([(a, b)])
    assert sum(v.probs.values()) == pytest.approx(1.0, abs=1e-4)
    assert v.relation in RELATIONS and v.evidence.startswith("pair model")
    r = layer.risk("Can you book my flight?", [])
    assert r.tier in set(RiskTier) and 0.0 <= r.confidence <= 1.0


def test_learned_layer_rejects_incomplete_weights(tmp_path: Path, embedder: object) -> None:
    bad = tmp_path / "w.npz"
    np.savez(bad, pair_w=np.zeros((3, 7)))
    with pytest.raises(ValueError, match="lack arrays"):
        get_relation_layer("learned", weights=bad, embedder=embedder)


def test_learned_layer_rejects_weights_of_another_feature_layout(
    tmp_path: Path, embedder: object
) -> None:
    from caap.conflict_graph._relations_learned import default_weights_path

    with np.load(default_weights_path()) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["pair_mu"] = arrays["pair_mu"][:-7]  # as written before the surface comparisons
    old = tmp_path / "old.npz"
    np.savez(old, **arrays)
    with pytest.raises(ValueError, match=r"pair features.*retrain"):
        get_relation_layer("learned", weights=old, embedder=embedder)


def _copied_weights(tmp_path: Path, reader_entry: dict[str, str]) -> Path:
    """The shipped weights copied to ``tmp_path`` with a card naming ``reader_entry``, as
    weights written elsewhere and then moved keep the reader path of where they were written."""
    import json
    import shutil

    from caap.conflict_graph._relations_learned import default_weights_path

    src = default_weights_path()
    dst = tmp_path / "moved" / "relations.npz"
    dst.parent.mkdir(parents=True)
    shutil.copy(src, dst)
    card = json.loads(src.with_suffix(".json").read_text())
    card["pair_reader"] = reader_entry
    dst.with_suffix(".json").write_text(json.dumps(card))
    return dst


def test_moved_weights_find_their_reader_by_checksum(tmp_path: Path, embedder: object) -> None:
    import hashlib

    from caap.conflict_graph._pair_reader import default_reader_path

    shipped = default_reader_path()
    digest = hashlib.sha256(shipped.read_bytes()).hexdigest()
    gone = {"file": "../../elsewhere/pair_reader.npz", "sha256": digest}
    layer = get_relation_layer(
        "learned", weights=_copied_weights(tmp_path, gone), embedder=embedder
    )
    assert layer.reader.weights_path.resolve() == shipped.resolve()
    # a reader the card does not vouch for is not taken in its place
    wrong = {"file": "../../elsewhere/pair_reader.npz", "sha256": "0" * 64}
    with pytest.raises(ValueError, match="checksum"):
        get_relation_layer(
            "learned", weights=_copied_weights(tmp_path / "b", wrong), embedder=embedder
        )


def test_pair_surface_reads_one_value_in_two_wordings() -> None:
    from caap.conflict_graph._relations_features import N_PAIR_SURFACE, pair_surface

    texts_a = ["The tenancy sets my share at £475 a month.", "Training starts at 19:00."]
    texts_b = ["My standing order is 475.00 each month.", "The website says 20:00."]
    v = np.eye(2, 4, dtype=np.float32)  # orthogonal: cosine 0, no near-duplicate
    out = pair_surface(v, v[::-1].copy(), texts_a, texts_b)
    assert out.shape == (2, N_PAIR_SURFACE)
    cos, near_dup, _, _, share_value, same_values, no_shared_value = out[0]
    assert cos == 0.0 and near_dup == 0.0
    assert (share_value, same_values, no_shared_value) == (1.0, 1.0, 0.0)  # 475 == 475.00
    assert tuple(out[1][4:]) == (0.0, 0.0, 1.0)  # two different clock times


def test_learned_risk_reads_the_query_not_a_sensitive_memory_nearby(embedder: object) -> None:
    layer = get_relation_layer("learned", embedder=embedder)
    memories = [
        "Ethan orders a flat white with oat milk at the cafe near the hospital.",
        "Ethan always asks for oat milk because dairy upsets his stomach.",
        "Maya's clinic record lists ibuprofen as contraindicated for her.",
    ]
    assert layer.risk("What's my usual coffee order?", memories).tier is not RiskTier.HIGH
    assert layer.risk("Can I give Maya ibuprofen tonight?", memories).tier is RiskTier.HIGH


def test_learned_edges_discount_a_contradiction_between_nested_values(embedder: object) -> None:
    # Two accounts stating the same value in other forms rarely contradict each other: the edge
    # reading lowers the source-contradiction odds of such a pair; a pair stating different
    # values keeps the pair model's reading.
    from caap.conflict_graph._relations_features import NESTED_VALUES_CONTRADICTION

    layer = get_relation_layer("learned", embedder=embedder)
    layer.agree_weight = 1.0  # type: ignore[attr-defined]  # the discount alone
    scc = RELATIONS.index("source_contradiction")
    lease = "The tenancy sets my share at £475 a month."
    same = (lease, "My flatmate says it's four seventy-five.")
    other = (lease, "My flatmate says it's five twenty.")
    raw = layer.probabilities([same, other])  # type: ignore[attr-defined]
    got = layer.relate([(MemoryView("a", a), MemoryView("b", b)) for a, b in (same, other)])
    p, q = raw[0, scc], got[0].probs["source_contradiction"]
    odds = (q / (1 - q)) / (p / (1 - p))
    assert odds == pytest.approx(NESTED_VALUES_CONTRADICTION, rel=1e-3)
    assert got[1].probs["source_contradiction"] == pytest.approx(raw[1, scc], abs=1e-6)
    assert sum(got[0].probs.values()) == pytest.approx(1.0, abs=1e-4)


def test_speaker_head_clears_first_hand_claims_not_other_peoples(embedder: object) -> None:
    # The guard's first-hand reading: without the head, a plain statement is "don't know"
    # (0.5, not first-hand); with it, a plain statement or a record reads below one half while
    # a relative's or a rumour's account stays someone else's.
    layer = get_relation_layer("learned", embedder=embedder)
    assert layer.speaker is not None  # type: ignore[attr-defined]
    texts = [
        "Pickup is at 2:45 for both kids.",
        "The pharmacy label on the box reads 5 mg, one tablet each morning.",
        "My sister insists the dose is 10 mg.",
        "Apparently the fee went up to 220 this year.",
    ]
    head = layer.speaker  # type: ignore[attr-defined]
    fh = head.first_hand(layer._embed(texts))  # type: ignore[attr-defined]
    assert min(fh[0], fh[1]) > max(fh[2], fh[3])
    # Clear at a share below both first-hand readings: the layer follows the head.
    head.threshold = float(min(fh[0], fh[1])) - 1e-3
    own, record, sister, rumour = (f.source_confidence for f in layer.facets(texts))
    assert own < 0.5 and record < 0.5
    assert sister >= 0.5 and rumour >= 0.5
    layer.speaker = None  # type: ignore[attr-defined]
    assert layer.facets(texts[:1])[0].source_confidence >= 0.5


def test_train_speaker_head_writes_weights_the_layer_reads(tmp_path: Path) -> None:
    from caap.conflict_graph._speaker import SPEAKERS, SpeakerHead, train_speaker_head

    rng = np.random.default_rng(0)
    centres = rng.normal(size=(len(SPEAKERS), 8)).astype(np.float32)

    def rows(n: int) -> list[dict[str, str]]:
        return [{"text": f"{s}-{i}", "speaker": s} for i in range(n) for s in SPEAKERS]

    def embed(texts: list[str]) -> np.ndarray:
        out = np.stack([centres[SPEAKERS.index(t.split("-")[0])] for t in texts])
        out = out + 0.1 * rng.normal(size=out.shape).astype(np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    card = train_speaker_head(rows(20), rows(5), embed, tmp_path / "s.npz")
    assert card["dev_first_hand_cleared"] == 10  # user and record, 5 each
    head = SpeakerHead(tmp_path / "s.npz", dimension=8)
    fh = head.first_hand(embed(["user-x", "record-x", "person-x", "hearsay-x"]))
    assert fh[0] >= head.threshold and fh[1] >= head.threshold
    assert fh[2] < head.threshold and fh[3] < head.threshold
    with pytest.raises(ValueError, match="shape"):
        SpeakerHead(tmp_path / "s.npz", dimension=384)


def test_agreement_weight_shifts_the_edge_verdicts_odds_only_for_agreement(
    embedder: object,
) -> None:
    from caap.conflict_graph._relations_learned import AGREE_WEIGHT

    layer = get_relation_layer("learned", embedder=embedder)
    assert layer.agree_weight == AGREE_WEIGHT > 1.0  # type: ignore[attr-defined]
    pairs = [
        (
            MemoryView("a", "The letter says the plot fee is 180 zł, due by 31 March."),
            MemoryView("b", "The treasurer's notice at the gate: 180 złotych per plot."),
        ),
        (
            MemoryView("c", "Mum says the dentist moved to Thursdays."),
            MemoryView("d", "The dentist's website lists Tuesday appointments only."),
        ),
    ]
    layer.agree_weight = 1.0  # type: ignore[attr-defined]
    own = [v.probs for v in layer.relate(pairs)]
    layer.agree_weight = 4.0  # type: ignore[attr-defined]
    shifted = [v.probs for v in layer.relate(pairs)]

    def odds(p: float) -> float:
        return p / (1.0 - p)

    for base, moved in zip(own, shifted, strict=True):
        assert odds(moved["agree"]) == pytest.approx(4.0 * odds(base["agree"]), rel=1e-3)
        ratio = base["source_contradiction"] / base["temporal_change"]
        moved_ratio = moved["source_contradiction"] / moved["temporal_change"]
        assert moved_ratio == pytest.approx(ratio, rel=1e-3)


def _frozen_pairs(name: str) -> list[dict[str, str]]:
    """The labelled pairs of a blind pair set's frozen ``test/`` files."""
    import json

    root = Path(__file__).resolve().parents[2] / "caap/benchmark/data/blind" / name / "test"
    return [
        json.loads(line)
        for f in sorted(root.glob("*.jsonl"))
        for line in f.read_text().splitlines()
        if line.strip()
    ]


def test_learned_layer_reads_which_memories_a_life_change_touches(embedder: object) -> None:
    """On the frozen blind change pairs (``pairs_changes/test``: a life change against earlier
    memories it rules out or replaces, and tempting ones it does not touch), the shipped layer
    ranks the first above the second: P(supersedes) + P(invalidates), the later memory the
    change. Weights that read a change as touching anything of the person (0.65, the layer
    before these pairs were written) fail."""
    rows = _frozen_pairs("pairs_changes")
    layer = get_relation_layer("learned", embedder=embedder)
    verdicts = layer.relate(
        [(MemoryView("a", r["a"], order=2.0), MemoryView("b", r["b"], order=1.0)) for r in rows]
    )
    score = np.array([v.probs["supersedes"] + v.probs["invalidates"] for v in verdicts])
    changed = np.array([r["relation"] in ("supersedes", "invalidates") for r in rows])
    pos, neg = score[changed], score[~changed]
    auc = float(np.mean(pos[:, None] > neg[None, :]) + 0.5 * np.mean(pos[:, None] == neg[None, :]))
    assert auc >= 0.72, auc


def test_pair_verdicts_multiply_in_the_pair_readers_reading(embedder: object) -> None:
    # The edge verdicts are the pair model's probabilities times the reader's, with the
    # reader weighted by ``reader_blend``: 0 is the pair model alone, 1 the reader alone. The
    # situation model reads the pair model's own probabilities, as it was fitted.
    from caap.conflict_graph._relations_features import N_READER
    from caap.conflict_graph._relations_learned import READER_BLEND

    layer = get_relation_layer("learned", embedder=embedder)
    assert layer.reader_blend == READER_BLEND > 0.0  # type: ignore[attr-defined]
    pairs = [
        (
            "Ethan has a couple of beers on Friday nights when he has nothing scheduled.",
            "Ethan skips alcohol entirely when he has an early shift the next morning.",
        ),
        ("The clinic record says 5 mg each morning.", "The pharmacy label says 10 mg."),
    ]
    model, tail = layer._pair_reading(pairs)  # type: ignore[attr-defined]
    reader = tail[:, :N_READER]
    query, texts = "Should Ethan have a beer tonight?", [t for p in pairs for t in p]
    blended_situation = layer.situation(query, texts)
    blended = layer.probabilities(pairs)  # type: ignore[attr-defined]
    layer.reader_blend = 0.0  # type: ignore[attr-defined]
    np.testing.assert_allclose(layer.probabilities(pairs), model, atol=1e-6)  # type: ignore[attr-defined]
    assert layer.situation(query, texts).probs == blended_situation.probs
    layer.reader_blend = 1.0  # type: ignore[attr-defined]
    np.testing.assert_allclose(
        layer.probabilities(pairs),  # type: ignore[attr-defined]
        reader / reader.sum(axis=1, keepdims=True),
        atol=1e-4,
    )
    # In between, each relation's log-odds against another are the weighted mix of both.
    w = READER_BLEND
    i, j = RELATIONS.index("context_partition"), RELATIONS.index("agree")
    for row in range(len(pairs)):
        got = np.log(blended[row, i] / blended[row, j])
        want = (1 - w) * np.log(model[row, i] / model[row, j]) + w * np.log(
            reader[row, i] / reader[row, j]
        )
        assert got == pytest.approx(want, abs=1e-3)


def test_learned_layer_reads_conditions_written_out_with_the_reader(embedder: object) -> None:
    """On the frozen conditions pairs (``pairs_conditions/test``: conditions and dated phases
    written out, the same surface forms on both sides of the label), the pair model alone
    reads most conflicting pairs as agreeing (30 of 48); with the reader's reading multiplied
    in, fewer (24), without reading more agreeing pairs as conflicts than 7 of 51."""
    from caap.conflict_graph._relations_train import evaluate_pairs

    root = Path(__file__).resolve().parents[2] / "caap/benchmark/data/blind/pairs_conditions/test"
    layer = get_relation_layer("learned", embedder=embedder)

    def misread() -> tuple[int, int]:
        report = evaluate_pairs(root, layer, embedder=embedder)  # type: ignore[arg-type]
        return report["conflict_read_as_agree"][0], report["agree_read_as_conflict"][0]

    with_reader = misread()
    layer.reader_blend = 0.0  # type: ignore[attr-defined]
    alone = misread()
    assert with_reader[0] < alone[0], (with_reader, alone)
    assert with_reader[1] <= 7, with_reader
