"""The learned layer's situation reading, and training it (on the dev split: never test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from caap.conflict_graph._relations_learned import LearnedRelations, default_weights_path
from caap.conflict_graph.relations import SITUATIONS, SituationVerdict, situation_of

BLIND = Path(__file__).resolve().parents[2] / "caap" / "benchmark" / "data" / "blind"

MEMORIES = [
    "On weekdays Lena drinks her coffee black, no sugar.",
    "At weekends with her sister Lena always takes a big milky latte.",
    "Lena's bike has a flat tyre since Tuesday.",
]


@pytest.fixture(scope="module")
def layer(embedder: Any) -> LearnedRelations:
    return LearnedRelations(embedder=embedder)


def test_the_shipped_weights_read_situations(layer: LearnedRelations) -> None:
    verdict = layer.situation("How does Lena take her coffee?", MEMORIES)
    assert isinstance(verdict, SituationVerdict)
    assert set(verdict.probs) == set(SITUATIONS)
    assert sum(verdict.probs.values()) == pytest.approx(1.0, abs=1e-4)
    assert situation_of(layer, "How does Lena take her coffee?", MEMORIES) == verdict


def test_no_query_or_no_memory_gives_no_reading(layer: LearnedRelations) -> None:
    assert layer.situation("", MEMORIES) is None
    assert layer.situation("How does Lena take her coffee?", []) is None


def test_one_memory_has_no_situation(layer: LearnedRelations) -> None:
    """One memory stands in no relation to another: the model (fitted on five or more
    memories) is not asked to read a conflict into it; two memories are read."""
    query = "Am I allergic to penicillin? My doctor wants to prescribe medication."
    assert layer.situation(query, ["I am allergic to penicillin."]) is None
    assert (
        layer.situation(query, ["I am allergic to penicillin.", "I am allergic to penicillin."])
        is None
    )
    both = ["I am allergic to penicillin.", "My GP's record says I have no drug allergies."]
    assert isinstance(layer.situation(query, both), SituationVerdict)


def test_weights_without_a_situation_model_still_load(tmp_path: Path, embedder: Any) -> None:
    with np.load(default_weights_path()) as z:
        arrays = {k: z[k] for k in z.files if not k.startswith("sit_")}
    old = tmp_path / "old.npz"
    np.savez(old, **arrays)
    layer = LearnedRelations(weights=old, embedder=embedder)
    assert not layer.reads_situations
    assert layer.situation("How does Lena take her coffee?", MEMORIES) is None
    assert situation_of(layer, "How does Lena take her coffee?", MEMORIES) is None


def test_rules_read_no_situation() -> None:
    from caap.conflict_graph.relations import get_relation_layer

    assert situation_of(get_relation_layer("rules"), "q?", MEMORIES) is None


def test_a_verdict_must_be_a_distribution() -> None:
    with pytest.raises(ValueError, match="sum to 1"):
        SituationVerdict({"NONE": 0.7, "CPC": 0.7})
    with pytest.raises(ValueError, match="unknown situations"):
        SituationVerdict({"STALEISH": 1.0})
    with pytest.raises(ValueError, match="unshifted"):
        SituationVerdict({"NONE": 1.0}, unshifted={"NONE": 0.5})
    plain = SituationVerdict({"NONE": 0.6, "SCC": 0.4})
    assert plain.evidence_probs == plain.probs
    shifted = SituationVerdict({"NONE": 0.8, "SCC": 0.2}, unshifted={"NONE": 0.6, "SCC": 0.4})
    assert shifted.evidence_probs == {"NONE": 0.6, "SCC": 0.4}


def _dev_controls() -> list[str]:
    """The no-conflict instances of blind dev, as JSONL lines."""
    return [
        line
        for f in sorted((BLIND / "dev" / "tangle").glob("*.jsonl"))
        for line in f.read_text().splitlines()
        if line.strip() and json.loads(line)["conflict_type"] == "NONE"
    ]


def _unshifted_copy(path: Path) -> Path:
    """The shipped weights written to ``path`` without any calibration shift."""
    with np.load(default_weights_path()) as z:
        np.savez(path, **{k: z[k] for k in z.files if k != "sit_prior"})
    return path


def test_calibration_shifts_the_reading_towards_the_data_and_keeps_the_models_own(
    tmp_path: Path, embedder: Any
) -> None:
    import shutil

    from caap.conflict_graph._relations_train import calibrate_situations

    # Controls only (agreeing memories): a shift fitted on them can only lower the source
    # contradiction reading.
    controls = _dev_controls()[:4]
    data = tmp_path / "controls.jsonl"
    data.write_text("\n".join(controls) + "\n")
    weights = _unshifted_copy(tmp_path / "w.npz")
    shutil.copy(default_weights_path().with_suffix(".json"), weights.with_suffix(".json"))
    query = json.loads(controls[0])["query"]
    texts = [m["text"] for m in json.loads(controls[0])["memories"]]
    before = LearnedRelations(weights=weights, embedder=embedder).situation(query, texts)
    assert before is not None and before.unshifted is None
    lines: list[str] = []
    entry = calibrate_situations(
        data, weights, shift=["SCC"], embedder=embedder, progress=lines.append
    )
    assert set(entry["weights"]) == {"SCC"} and entry["weights"]["SCC"] < 1.0
    assert entry["log_loss_after"] < entry["log_loss_before"] and entry["queries"] == 8
    assert json.loads(weights.with_suffix(".json").read_text())["situation_prior"] == entry
    assert lines[0] == "reading 8 situations" and lines[-1].startswith("shift: SCC x ")
    after = LearnedRelations(weights=weights, embedder=embedder).situation(query, texts)
    assert after is not None and after.unshifted is not None
    assert after.unshifted == pytest.approx(before.probs, abs=1e-6)
    assert after.probs["SCC"] < before.probs["SCC"]
    assert after.probs["NONE"] > before.probs["NONE"]
    # Calibrating again fits the model's own reading, not the shifted one: the same shift.
    again = calibrate_situations(data, weights, shift=["SCC"], embedder=embedder)
    assert again["weights"]["SCC"] == pytest.approx(entry["weights"]["SCC"], rel=1e-4)
    with pytest.raises(ValueError, match="unknown situations"):
        calibrate_situations(data, weights, shift=["STALEISH"], embedder=embedder)


def test_the_calibrate_command_writes_the_shift(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from caap.cli import main

    data = tmp_path / "one.jsonl"
    data.write_text(_dev_controls()[0] + "\n")
    weights = _unshifted_copy(tmp_path / "w.npz")
    argv = ["relations", "calibrate", "--data", str(data), "--weights", str(weights)]
    assert main([*argv, "--shift", "SCC", "--shift", "SCC", "--shift", "NONE"]) == 0
    out = capsys.readouterr()
    assert "wrote the situation prior into" in out.out and "over 2 queries" in out.out
    assert "reading 2 situations" in out.err
    with np.load(weights) as z:
        prior = z["sit_prior"]
    moved = {SITUATIONS[i] for i in np.flatnonzero(prior)}
    assert moved <= {"SCC", "NONE"} and moved
    with pytest.raises(SystemExit):
        main([*argv, "--shift", "STALEISH"])


def test_training_writes_a_situation_model(tmp_path: Path, embedder: Any) -> None:
    from caap.conflict_graph._relations_train import train_relations

    out = tmp_path / "w.npz"
    # Several data paths train one model; the card names each.
    parts = [BLIND / "dev" / "tangle", BLIND / "dev" / "stale"]
    lines: list[str] = []
    card = train_relations(parts, out, embedder=embedder, seed=1, progress=lines.append)
    assert card["train_data"] == [str(p) for p in parts]
    # Each stage reports as it ends, in order, with what it measured.
    assert lines[0].startswith("data: ") and lines[1].startswith("embedding ")
    stages = [line.split(":")[0] for line in lines]
    first = [stages.index(s) for s in ("facet model", "pair model", "risk model")]
    assert first == sorted(first) and stages[-1] == "situation model"
    accuracy = card["situation_model"]["dev_accuracy"]
    assert lines[-1].startswith(f"situation model: dev accuracy {accuracy:.3f}")
    pm = card["pair_model"]
    assert f"pair model: dev macro F1 {pm['dev_macro_f1']:.3f} (C={pm['C']}" in "\n".join(lines)
    sm = card["situation_model"]
    assert sm["trained"] and sm["classes"] == list(SITUATIONS)
    assert sm["train_queries"] > 0 and sm["dev_queries"] > 0
    assert json.loads(out.with_suffix(".json").read_text())["situation_model"] == sm
    layer = LearnedRelations(weights=out, embedder=embedder)
    verdict = layer.situation("How does Lena take her coffee?", MEMORIES)
    assert verdict is not None and set(verdict.probs) == set(SITUATIONS)


def test_the_users_own_words_offer_no_name_for_the_user() -> None:
    from caap.conflict_graph import _text

    chat = [
        "Renewed my Vodafone fibre today.",
        "The Vodafone router needed another reset, I'm fed up.",
        "Speed test on my laptop: Vodafone gives me 600 Mb.",
    ]
    assert _text.subject_names(chat) == set()
    told = ["Maya takes her tea black.", "Maya's GP is Dr Osei.", "Maya walks to work."]
    assert _text.subject_names(told) == {"Maya"}
    assert _text.user_names_of(told) == {"Maya"}
    # In a conversation the user tells in their own words, a name frequent in the turns
    # without "I" is a provider, not the user: still masked from similarities (it says nothing
    # about the topic), never written as "you". A month is nobody's name.
    mixed = [
        "Renewed my Vodafone fibre today: 600 Mb for another year.",
        "Lola is refusing her new cat food.",
        "My students' exams start on 20 May.",
        "On 12 September the Digi technician came and installed the fibre.",
        "Digi's September bill arrived: 20 euros.",
        "Thinking about a weekend in Asturias.",
    ]
    assert "Digi" in _text.subject_names(mixed)
    assert _text.user_names_of(mixed) == set()
    assert _text.user_names_of(mixed[3:5] + told[:1]) == {"Digi"}  # nothing says otherwise
    # A month's abbreviation can be a person: "Jan" stays a candidate, "January" does not.
    assert _text.name_tokens("Jan walks the dog in January.") == {"Jan"}
    # A request to the assistant is not the user's account: the notes still name the user.
    assert _text.user_names_of(["Can you give me a recipe?", *told]) == {"Maya"}


def test_chat_in_lower_case_is_the_users_own_words_too() -> None:
    from caap.conflict_graph import _text

    # A parent chatting in lower case about their daughter: "i" is the user, so the
    # daughter's frequent name is never taken for the user (and written as "you").
    chat = [
        "bought Nadia bigger ballet shoes, size 31, she grows so fast",
        "wed class runs 4-5.30 so i get home at 7 with Nadia",
        "i'm so tired of the Kemang traffic",
        "Nadia came home proud of her silat bruise lol",
    ]
    assert "Nadia" in _text.subject_names(chat)  # still masked from similarities
    assert _text.user_names_of(chat) == set()
    assert not _text.spoken_by_user("i.e. Nadia does ballet")


class _Counting:
    """The real embedder, counting what it is asked to embed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.dimension = inner.dimension
        self.model_name = inner.model_name
        self.seen: list[str] = []

    def encode(self, texts: Any, **kw: Any) -> Any:
        self.seen += list(texts)
        return self.inner.encode(texts, **kw)

    def encode_one(self, text: str) -> Any:
        self.seen.append(text)
        return self.inner.encode_one(text)


def test_a_graph_over_the_learned_layer_embeds_each_text_once(embedder: Any) -> None:
    from caap.conflict_graph.graph import ConflictGraph
    from caap.models import Memory

    counting = _Counting(embedder)
    layer = LearnedRelations(embedder=counting)  # type: ignore[arg-type]
    graph = ConflictGraph("lena", counting, relations=layer)  # type: ignore[arg-type]
    # Texts whose value is the whole text: the facet reading's embedding is the value's.
    texts = [
        "The bike has a flat tyre since Tuesday.",
        "Coffee tastes better black.",
        "The garden fence needs painting.",
    ]
    graph.add_many([Memory(id=f"m{i}", text=t, user_id="lena") for i, t in enumerate(texts)])
    assert len(graph.memories()) == 3
    for text in texts:
        assert counting.seen.count(text) == 1, text


def test_a_relative_named_by_a_role_is_never_taken_for_the_user() -> None:
    from caap.conflict_graph import _text

    gran = [
        "Sunday roast at Gran's bungalow in Wymondham.",
        "Gran's bungalow again for Sunday lunch.",
        "Gran has moved into Rosewood House.",
    ]
    assert _text.user_names_of(gran) == set()
    assert "Gran" not in _text.name_tokens(gran[0]) and "Mum" not in _text.name_tokens(
        "Mum said so."
    )
    # a role that is also a given name stays a candidate
    assert _text.user_names_of(["Dean walks to work.", "Dean's lease ends in May."]) == {"Dean"}
    # a name beside the role is still a candidate
    assert _text.user_names_of(["Chloe took Gran the crumble.", "Chloe drove to Gran's."]) == {
        "Chloe"
    }


def test_a_name_given_a_title_or_an_honorific_is_never_taken_for_the_user() -> None:
    from caap.conflict_graph import _text

    told = [
        "Hiroshi has bought his tuna from Mr Nakamura's stall for years.",
        "These days the bluefin comes from Nakamura-san.",
        "Sato, his head chef, says every tuna order goes through Nakamura.",
        "Hiroshi moved his sea-urchin orders to a Hokkaido supplier.",
    ]
    assert _text.user_names_of(told) == {"Hiroshi"}
    assert _text.name_tokens("Dr. Osei moved the appointment.") == set()
