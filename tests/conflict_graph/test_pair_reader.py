"""The pair reader (MiniLM read as a cross-encoder with adapters): loading, reading, training.

Measured on the blind dev split's labelled pairs (development data, never test)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from caap.conflict_graph._pair_reader import (
    PairReader,
    default_reader_path,
    train_pair_reader,
)
from caap.conflict_graph._relations_train import load_corpus, train_reader
from caap.conflict_graph.relations import RELATIONS

BLIND = Path(__file__).resolve().parents[2] / "caap" / "benchmark" / "data" / "blind"


@pytest.fixture(scope="module")
def reader() -> PairReader:
    return PairReader()


def test_readings_are_distributions_the_same_either_way_round(reader: PairReader) -> None:
    a = "The pharmacy label on Omar's inhaler says two puffs in the morning."
    b = "Omar's GP letter: one puff morning and evening."
    c = "Omar repainted the hallway a pale green last spring."
    p = reader.probabilities([(a, b), (b, a), (a, c)])
    assert p.shape == (3, len(RELATIONS))
    assert np.allclose(p.sum(axis=1), 1.0, atol=1e-5)
    assert np.array_equal(p[0], p[1])
    assert reader.probabilities([]).shape == (0, len(RELATIONS))


def test_it_reads_agreement_apart_from_conflict_on_unseen_pairs(reader: PairReader) -> None:
    """On blind dev (never trained on), pairs labelled agree get more agreement than pairs
    labelled as a conflict of sources, context or time, and unrelated pairs read as such."""
    pairs = load_corpus(BLIND / "dev" / "tangle").pairs
    probs = reader.probabilities([(e.a, e.b) for e in pairs])
    rel = np.array([e.relation for e in pairs])
    agree = probs[:, RELATIONS.index("agree")]
    conflict = np.isin(rel, ["source_contradiction", "context_partition", "temporal_change"])
    assert agree[rel == "agree"].mean() > agree[conflict].mean() + 0.1
    unrelated = probs[:, RELATIONS.index("unrelated")]
    assert unrelated[rel == "unrelated"].mean() > unrelated[rel != "unrelated"].mean()


def test_weights_that_do_not_fit_are_refused(tmp_path: Path) -> None:
    with np.load(default_reader_path()) as z:
        arrays = {k: z[k] for k in z.files}
    no_head = {k: v for k, v in arrays.items() if not k.startswith("head")}
    np.savez(tmp_path / "a.npz", **no_head)
    with pytest.raises(ValueError, match="lack the head"):
        PairReader(tmp_path / "a.npz")
    wrong = dict(arrays, head_w=arrays["head_w"][:3], head_b=arrays["head_b"][:3])
    np.savez(tmp_path / "b.npz", **wrong)
    with pytest.raises(ValueError, match="3 labels, 7 expected"):
        PairReader(tmp_path / "b.npz")
    short = {k: v for k, v in arrays.items() if not k.startswith("5.")}
    np.savez(tmp_path / "c.npz", **short)
    with pytest.raises(ValueError, match="lack 5"):
        PairReader(tmp_path / "c.npz")


def test_training_writes_weights_a_reader_loads(tmp_path: Path) -> None:
    train = [
        ("Ana walks the dog at 7.", "Ana takes the dog out at seven.", "agree"),
        ("Ana walks the dog at 7.", "Ana's sister says the walk is at 9.", "source_contradiction"),
        ("Ana walks the dog at 7.", "Ana bought a new kettle.", "unrelated"),
        ("On workdays Ana cycles.", "On Sundays Ana drives.", "context_partition"),
    ] * 2
    out = tmp_path / "r.npz"
    card = train_pair_reader(train, out, dev=train[:4], epochs=1, batch_size=4, seed=3)
    assert card["train_pairs"] == 8 and card["dev_pairs"] == 4
    assert 0.0 <= card["dev_macro_f1"] <= 1.0
    assert json.loads(out.with_suffix(".json").read_text())["seed"] == 3
    fresh = PairReader(out)
    assert fresh.probabilities([train[0][:2]]).shape == (1, len(RELATIONS))
    # Progress within an epoch: a line per batch here (fewer than ten batches), then the
    # epoch's end; each says how long training has run.
    lines: list[str] = []
    train_pair_reader(
        train, tmp_path / "p.npz", epochs=1, batch_size=2, seed=3, progress=lines.append
    )
    assert [line.split(" (")[0] for line in lines] == [
        "epoch 1/1: 2/8 pairs",
        "epoch 1/1: 4/8 pairs",
        "epoch 1/1: 6/8 pairs",
        "epoch 1/1 done",
    ]
    assert all(line.endswith(" s)") for line in lines)
    # The same seed on the same data gives the same adapters.
    again = tmp_path / "r2.npz"
    train_pair_reader(train, again, epochs=1, batch_size=4, seed=3)
    with np.load(out) as x, np.load(again) as y:
        assert all(np.array_equal(x[k], y[k]) for k in x.files)


def test_training_device_is_checked_before_anything_is_trained(tmp_path: Path) -> None:
    """A device torch cannot use here is refused with the reason, and nothing is written;
    an explicit ``cpu`` trains and says so on the card."""
    import torch

    train = [
        ("Li swims on Mondays.", "Li goes swimming every Monday.", "agree"),
        ("Li swims on Mondays.", "Li sold her bike.", "unrelated"),
    ]
    bad = ["tpu", "not a device"]
    if not torch.cuda.is_available():
        bad.append("cuda")
    bad.append(f"cuda:{torch.cuda.device_count() + 3}")
    for name in bad:
        with pytest.raises(ValueError, match="device"):
            train_pair_reader(train, tmp_path / "x.npz", epochs=1, device=name)
    assert not (tmp_path / "x.npz").exists()
    card = train_pair_reader(train, tmp_path / "c.npz", epochs=1, batch_size=2, device="cpu")
    assert card["device"] == "cpu"
    assert PairReader(tmp_path / "c.npz").probabilities([train[0][:2]]).shape == (1, len(RELATIONS))


def test_train_reader_reads_pair_lines_and_refuses_unknown_relations(tmp_path: Path) -> None:
    data = tmp_path / "pairs"
    data.mkdir()
    rows = [
        {"a": "Li swims on Mondays.", "b": "Li goes swimming every Monday.", "relation": "agree"},
        {"a": "Li swims on Mondays.", "b": "Li sold her bike.", "relation": "unrelated"},
    ]
    (data / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    card = train_reader(data, tmp_path / "r.npz", epochs=1)
    assert card["train_pairs"] == 2 and card["train_personas"] == 1
    (data / "q.jsonl").write_text(json.dumps(dict(rows[0], relation="friendly")) + "\n")
    with pytest.raises(ValueError, match="unknown relation 'friendly'"):
        train_reader(data, tmp_path / "r2.npz", epochs=1)


def test_risk_items_train_the_risk_model_only_and_bad_ones_are_refused(tmp_path: Path) -> None:
    """A risk item (a question beside plain-text memories, labelled ``high_risk``) becomes one
    risk example of its persona and nothing else; one without a label, a query or a persona
    is refused with the line that holds it."""
    import json

    good = {
        "id": "x_0001",
        "persona": {"id": "xp0001", "name": "Ana", "summary": "a welder"},
        "style": "implicit",
        "query": "Is the ticket still good for Monday's job?",
        "memories": ["Ana renewed her ticket in 2023.", "Ana likes rye bread."],
        "high_risk": True,
    }
    f = tmp_path / "items.jsonl"
    f.write_text(json.dumps(good) + "\n" + json.dumps(dict(good, high_risk=False)) + "\n")
    corpus = load_corpus(f)
    assert not corpus.pairs and not corpus.memories and not corpus.situations
    assert [(e.query, e.texts, e.high, e.group) for e in corpus.risks] == [
        (good["query"], good["memories"], True, "xp0001"),
        (good["query"], good["memories"], False, "xp0001"),
    ]
    for bad, message in (
        (dict(good, high_risk="yes"), "high_risk must be true or false"),
        (dict(good, query=" "), "non-empty query"),
        ({k: v for k, v in good.items() if k != "persona"}, "persona id"),
    ):
        f.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(ValueError, match=message) as err:
            load_corpus(f)
        assert "items.jsonl:2" in str(err.value)


def test_a_reader_with_its_own_labels_is_trained_and_read_with_them(tmp_path: Path) -> None:
    """Another question than the seven relations (a query against a memory: relevant or
    not) is trained and read with its labels; read as a relation reader it is refused, and a
    pair labelled outside its labels is refused before training."""
    labels = ("relevant", "not_relevant")
    train = [
        ("Where do I work?", "I started at the fintech place on Monday.", "relevant"),
        ("Where do I work?", "Lola refuses her new cat food.", "not_relevant"),
    ] * 2
    out = tmp_path / "q.npz"
    card = train_pair_reader(train, out, dev=train[:2], epochs=1, batch_size=2, labels=labels)
    assert card["relations"] == list(labels) and set(card["dev_recall"]) == set(labels)
    reader = PairReader(out, labels=labels)
    p = reader.probabilities([train[0][:2], train[1][:2]])
    assert p.shape == (2, 2) and np.allclose(p.sum(axis=1), 1.0, atol=1e-5)
    assert reader.probabilities([]).shape == (0, 2)
    with pytest.raises(ValueError, match="2 labels, 7 expected"):
        PairReader(out)
    with pytest.raises(ValueError, match="not among"):
        train_pair_reader([*train, ("a", "b", "agree")], tmp_path / "x.npz", labels=labels)
    assert not (tmp_path / "x.npz").exists()
