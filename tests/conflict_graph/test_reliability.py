"""Source-reliability fusion: learning, posteriors, selective answering, the eval command."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from caap.cli import main
from caap.conflict_graph.reliability import (
    AnswerSpace,
    LabelledCase,
    ReliabilityModel,
    best_threshold,
    f_beta,
)

LEVELS = AnswerSpace(
    id="sleep",
    labels=("low", "mid", "high", "no_data"),
    ordered=("low", "mid", "high"),
    edge=("no_data",),
)


def test_a_source_that_keeps_being_wrong_loses_weight() -> None:
    m = ReliabilityModel([LEVELS])
    claims = {"planner": "high", "device_log": "low"}
    before = m.posterior("sleep", claims)
    # Without outcomes the two sources are trusted alike: no clear winner.
    assert before.margin < 0.05
    for _ in range(12):
        m.observe("sleep", {"planner": "high", "device_log": "low"}, "low")
    assert m.source_accuracy("planner") < 0.15 < 0.85 < m.source_accuracy("device_log")
    assert m.outcomes("planner") == (0, 12)
    after = m.posterior("sleep", claims)
    assert after.answer == "low"
    assert after.margin > 0.5


def test_pooled_accuracy_carries_to_a_question_never_seen() -> None:
    m = ReliabilityModel()
    for n in range(10):
        m.observe(f"q{n}", {"record": f"a{n}", "friend": f"b{n}"}, f"b{n}")
    post = m.posterior("fresh", {"record": "x", "friend": "y"})
    assert post.answer == "y"
    assert post.probs["y"] > post.probs["x"]


def test_a_silent_source_teaches_and_says_nothing() -> None:
    m = ReliabilityModel([LEVELS])
    m.fit(LabelledCase("sleep", {"a": "mid", "b": None}, "mid") for _ in range(5))
    assert m.outcomes("b") == (0, 0)
    with_silent = m.posterior("sleep", {"a": "low", "b": None})
    without = m.posterior("sleep", {"a": "low"})
    assert with_silent.probs == without.probs
    assert "b" not in with_silent.used


def test_edge_answer_is_an_answer_not_an_abstention() -> None:
    m = ReliabilityModel([LEVELS], threshold=0.3)
    for _ in range(8):
        m.observe("sleep", {"a": "no_data", "b": "no_data"}, "no_data")
    post = m.posterior("sleep", {"a": "no_data", "b": "no_data"})
    assert post.answer == "no_data"
    assert not post.abstain


def test_unseen_values_closed_space_ignores_claim_and_rejects_truth() -> None:
    m = ReliabilityModel([LEVELS])
    post = m.posterior("sleep", {"a": "lots", "b": "mid"})
    assert post.ignored == {"a": "lots"}
    assert set(post.probs) == set(LEVELS.labels)
    with pytest.raises(ValueError, match="truth 'lots' is not an answer of question 'sleep'"):
        m.observe("sleep", {"a": "mid"}, "lots")
    m.observe("sleep", {"a": "lots"}, "mid")  # the unknown claim is skipped, not counted
    assert m.outcomes("a") == (0, 0)


def test_open_space_admits_new_answers() -> None:
    m = ReliabilityModel()
    post = m.posterior("diet", {"a": "vegan", "b": "vegetarian"})
    assert set(post.probs) == {"vegan", "vegetarian"}
    m.observe("diet", {"a": "vegan"}, "pescatarian")
    assert m.labels("diet") == ["pescatarian", "vegan"]
    assert m.posterior("diet", {}).answer == "pescatarian"
    assert ReliabilityModel().posterior("empty", {}).answer is None


def test_ordinal_errors_land_near_the_claim() -> None:
    # One outcome says the source is only half right; its wrong mass goes mostly next door.
    m = ReliabilityModel([LEVELS])
    m.observe("other", {"s": "x"}, "x")
    post = m.posterior("sleep", {"s": "high"})
    assert post.answer == "high"
    assert post.probs["mid"] > post.probs["low"]
    flat = ReliabilityModel([LEVELS], ordinal_decay=0.0).posterior("sleep", {"s": "high"})
    assert flat.probs["mid"] == pytest.approx(flat.probs["low"])


def test_best_threshold_matches_brute_force() -> None:
    rng = random.Random(3)
    scored = [(round(rng.random(), 2), rng.random() < 0.7) for _ in range(60)]

    def f(t: float) -> float:
        ans = [ok for m, ok in scored if m >= t]
        return f_beta(sum(ans) / len(ans), len(ans) / len(scored)) if ans else 0.0

    t = best_threshold(scored)
    assert f(t) == pytest.approx(max(f(m) for m, _ in scored))
    target = best_threshold(scored, target_accuracy=0.8)
    answered = [ok for m, ok in scored if m >= target]
    assert sum(answered) / len(answered) >= 0.8
    lower = max((m for m, _ in scored if m < target), default=None)
    if lower is not None:
        more = [ok for m, ok in scored if m >= lower]
        assert sum(more) / len(more) < 0.8


def test_calibration_cools_an_overconfident_model() -> None:
    # Three copies of one noisy source look like three independent witnesses to naive Bayes.
    rng = random.Random(0)
    space = AnswerSpace(id="q", labels=("a", "b", "c"))

    def case() -> LabelledCase:
        truth = rng.choice("abc")
        said = truth if rng.random() < 0.7 else rng.choice([v for v in "abc" if v != truth])
        return LabelledCase("q", {"s1": said, "s2": said, "s3": said}, truth)

    m = ReliabilityModel([space]).fit(case() for _ in range(300))
    threshold = m.calibrate([case() for _ in range(300)])
    assert m.temperature["q"] > 1.5
    assert 0 <= threshold <= 1
    assert m.posterior("q", {"s1": "a", "s2": "a", "s3": "a"}).probs["a"] < 0.85


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.observe("sleep", ["a"], "mid"), "claims must be a mapping"),
        (lambda m: m.observe("sleep", {"a": 3}, "mid"), r"claims\['a'\] must be a string"),
        (lambda m: m.observe("", {}, "mid"), "question must be a non-empty string"),
        (lambda m: m.observe("sleep", {}, "mid", weight=0), "weight must be > 0"),
        (lambda m: m.calibrate([]), "at least one labelled case"),
    ],
)
def test_bad_input_names_the_field(call: object, message: str) -> None:
    m = ReliabilityModel([LEVELS])
    with pytest.raises((ValueError, TypeError), match=message):
        call(m)  # type: ignore[operator]


def test_bad_settings_and_spaces_are_rejected() -> None:
    with pytest.raises(ValueError, match="alpha"):
        ReliabilityModel(alpha=0)
    with pytest.raises(ValueError, match="threshold"):
        ReliabilityModel(threshold=2)
    with pytest.raises(ValueError, match="edge value 'none' is not among its labels"):
        AnswerSpace(id="q", labels=("a",), edge=("none",))


# -- the eval command ----------------------------------------------------------------------

SOURCES = ["planner", "self_report", "device_log"]


def _fixture(tmp_path: Path, personas: int = 90, seed: int = 7) -> tuple[Path, Path]:
    """A tiny file of the msmb format: the planner and the self-report over-state the same way
    (so a vote is often wrong), the device log is right but drops out."""
    rng = random.Random(seed)
    questions = {
        "sources": SOURCES,
        "questions": [
            {
                "id": "Q1",
                "reasoning_type": "arbitration",
                "topic": "sleep",
                "answer_space": ["low", "mid", "high"],
                "answer_space_type": "ordinal",
                "ordered_labels": ["low", "mid", "high"],
                "edge_options": [],
            },
            {
                "id": "Q2",
                "reasoning_type": "plan_reality",
                "topic": "social",
                "answer_space": ["below", "above", "no_plans"],
                "answer_space_type": "nominal",
                "ordered_labels": None,
                "edge_options": ["no_plans"],
            },
        ],
    }
    up = {"low": "mid", "mid": "high", "high": "high", "below": "above", "above": "above"}
    lines = []
    for n in range(personas):
        split = ("train", "train", "cal", "test", "dev")[n % 5]
        atoms, truth = {}, {}
        for q, labels in (("Q1", ["low", "mid", "high"]), ("Q2", ["below", "above", "no_plans"])):
            t = rng.choice(labels)
            optimistic = up.get(t, t) if rng.random() < 0.7 else t
            atoms[q] = {
                "planner": optimistic,
                "self_report": optimistic if rng.random() < 0.8 else t,
                "device_log": (t if rng.random() < 0.85 else rng.choice(labels))
                if rng.random() < 0.7
                else None,
            }
            truth[q] = t
        lines.append(
            json.dumps(
                {
                    "seed": "s1",
                    "persona": f"p{n:03d}",
                    "split": split,
                    "difficulty": "stable",
                    "atoms": atoms,
                    "truth": truth,
                }
            )
        )
    atoms_path = tmp_path / "atoms.jsonl"
    atoms_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    q_path = tmp_path / "questions.json"
    q_path.write_text(json.dumps(questions), encoding="utf-8")
    return atoms_path, q_path


def test_eval_command_scores_model_and_baselines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    atoms, questions = _fixture(tmp_path)
    out = tmp_path / "out" / "report.json"
    rc = main(
        ["reliability", "eval", "--atoms", str(atoms), "--questions", str(questions),
         "--selective", "--bootstrap", "50", "--quiet", "--out", str(out)]
    )  # fmt: skip
    assert rc == 0
    printed = capsys.readouterr().out
    assert "macro accuracy" in printed and "selective" in printed
    report = json.loads(out.read_text(encoding="utf-8"))
    o = report["overall"]
    assert report["data"]["personas"] == {"fit": 36, "cal": 18, "test": 18}
    assert o["items"] == 36
    # The two optimistic sources outvote the log, so a vote is worse than a learned model.
    assert o["naive_bayes"] > o["plurality"]
    assert 0 < o["coverage"] <= 1
    assert set(report["per_question"]) == {"Q1", "Q2"}
    assert set(report["per_reasoning_type"]) == {"arbitration", "plan_reality"}
    assert set(report["per_difficulty"]) == {"stable"}
    assert report["best_single_source_choice"]["Q1"] == "device_log"
    iv = report["bootstrap"]["intervals_95"]["naive_bayes"]
    assert iv["low"] <= o["naive_bayes"] <= iv["high"]
    assert report["command"].startswith("caap reliability eval --atoms")


def test_eval_command_runs_on_the_shipped_seed_by_default(tmp_path: Path) -> None:
    # The documented command needs no data path: the seed ships as package data (gzip).
    out = tmp_path / "rel.json"
    assert main(["reliability", "eval", "--quiet", "--out", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["data"]["personas"] == {"fit": 216, "cal": 96, "test": 120}
    assert report["overall"]["naive_bayes"] == pytest.approx(0.831, abs=0.0006)  # docs' figure
    assert report["command"] == f"caap reliability eval --out {out}"


def test_eval_command_other_splits_and_no_selective(tmp_path: Path) -> None:
    atoms, questions = _fixture(tmp_path)
    out = tmp_path / "r.json"
    rc = main(
        ["reliability", "eval", "--atoms", str(atoms), "--questions", str(questions),
         "--fit-splits", "train,dev", "--quiet", "--out", str(out)]
    )  # fmt: skip
    assert rc == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["data"]["personas"]["fit"] == 54
    assert "coverage" not in report["overall"]
    assert report["model"]["threshold"] is None


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda row: row["truth"].pop("Q2"), "truth has no answer for question 'Q2'"),
        (lambda row: row.pop("split"), "missing field 'split'"),
        (lambda row: row["atoms"]["Q1"].update(planner=3), "must be a string or null"),
    ],
)
def test_eval_command_names_the_bad_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: object, message: str
) -> None:
    atoms, questions = _fixture(tmp_path, personas=10)
    rows = [json.loads(line) for line in atoms.read_text(encoding="utf-8").splitlines()]
    edit(rows[3])  # type: ignore[operator]
    atoms.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    rc = main(
        ["reliability", "eval", "--atoms", str(atoms), "--questions", str(questions),
         "--out", str(tmp_path / "x.json")]
    )  # fmt: skip
    assert rc == 2
    err = capsys.readouterr().err
    assert "atoms.jsonl:4" in err and message in err


def test_eval_command_rejects_an_empty_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    atoms, questions = _fixture(tmp_path, personas=10)
    rc = main(
        ["reliability", "eval", "--atoms", str(atoms), "--questions", str(questions),
         "--test-splits", "holdout", "--out", str(tmp_path / "x.json")]
    )  # fmt: skip
    assert rc == 2
    assert "--test-splits holdout: no persona has that split" in capsys.readouterr().err


def test_fusion_is_order_independent() -> None:
    m = ReliabilityModel([LEVELS])
    for a, b in itertools.product(["low", "mid", "high"], repeat=2):
        m.observe("sleep", {"x": a, "y": b}, b)
    p1 = m.posterior("sleep", {"x": "low", "y": "high"}).probs
    p2 = m.posterior("sleep", {"y": "high", "x": "low"}).probs
    assert p1 == pytest.approx(p2)


def test_online_calibration_scores_each_case_before_learning_it() -> None:
    rng = random.Random(5)
    space = AnswerSpace(id="q", labels=("a", "b", "c"))
    cases = []
    for _ in range(40):
        truth = rng.choice("abc")
        good = truth if rng.random() < 0.8 else rng.choice("abc")
        cases.append(LabelledCase("q", {"good": good, "noise": rng.choice("abc")}, truth))
    online = ReliabilityModel([space], recalibrate_after=20)
    for c in cases[:19]:
        online.observe(c.question, c.claims, c.truth)
    assert online.threshold == 0.5  # the default until 20 predictions exist
    with pytest.raises(ValueError, match="truth"):
        online.observe("q", {"good": "a"}, "zzz")
    assert len(online.predictions) == 19  # a rejected case is not scored
    for c in cases[19:]:
        online.observe(c.question, c.claims, c.truth)
    # The same predictions, made by replaying with a model that saw only the earlier cases.
    replay = ReliabilityModel([space])
    expected = []
    for c in cases:
        p = replay.posterior(c.question, c.claims)
        expected.append((p.margin, p.answer == c.truth))
        replay.observe(c.question, c.claims, c.truth)
    assert online.predictions == expected
    assert online.threshold == best_threshold(expected)
    assert online.threshold != 0.5


def test_online_calibration_in_an_open_space_does_not_peek_at_the_truth() -> None:
    m = ReliabilityModel(recalibrate_after=1)
    m.observe("diet", {"a": "vegan"}, "pescatarian")
    # Before this case the model knew only the claim "vegan": it predicted that, wrongly.
    assert m.predictions == [(1.0, False)]
