"""Structural validation: the shipped set passes; each broken instance fails by name."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from caap.benchmark.dataset import DatasetError, Instance, default_dataset_path, load_dataset
from caap.benchmark.validate import (
    Problem,
    check_instance,
    distinctive_words,
    validate_dataset,
    validate_instances,
)


@pytest.fixture(scope="module")
def raw() -> list[dict[str, Any]]:
    return [i.model_dump(mode="json") for i in load_dataset()]


def base(raw: list[dict[str, Any]], conflict_type: str = "CPC") -> dict[str, Any]:
    return copy.deepcopy(next(r for r in raw if r["conflict_type"] == conflict_type))


def errors(problems: list[Problem]) -> list[Problem]:
    return [p for p in problems if p.severity == "error"]


def test_shipped_dataset_has_no_problems() -> None:
    assert validate_dataset() == []
    assert validate_dataset(default_dataset_path()) == []


def test_every_shipped_instance_passes_alone(raw: list[dict[str, Any]]) -> None:
    for r in raw:
        assert check_instance(Instance.model_validate(r)) == [], r["id"]


def _drop_core(d: dict[str, Any]) -> None:
    core = [m for m in d["memories"] if m["role"] == "core"]
    d["memories"] = [m for m in d["memories"] if m not in core[5:]]
    for s in d["sessions"]:
        s["memory_ids"] = [i for i in s["memory_ids"] if i not in {m["id"] for m in core[5:]}]


def _add_core(d: dict[str, Any]) -> None:
    d["memories"] += [{"id": f"x{i}", "text": f"extra {i}", "role": "core"} for i in range(3)]
    d["sessions"][0]["memory_ids"] += ["x0", "x1", "x2"]


def _no_background(d: dict[str, Any]) -> None:
    d["memories"] = [m for m in d["memories"] if m["role"] != "background"]
    keep = {m["id"] for m in d["memories"]}
    for s in d["sessions"]:
        s["memory_ids"] = [i for i in s["memory_ids"] if i in keep]


def _five_distractors(d: dict[str, Any]) -> None:
    last = [m for m in d["memories"] if m["role"] == "distractor"][-1]
    d["memories"].remove(last)
    for s in d["sessions"]:
        s["memory_ids"] = [i for i in s["memory_ids"] if i != last["id"]]


def _unlisted_core(d: dict[str, Any]) -> None:
    for s in d["sessions"]:
        s["memory_ids"] = [i for i in s["memory_ids"] if i != "m1"]


def _dates_backwards(d: dict[str, Any]) -> None:
    d["sessions"][-1]["date"] = "2001-01-01"


def _starts_with_assistant(d: dict[str, Any]) -> None:
    d["sessions"][0]["turns"].insert(0, {"role": "assistant", "content": "Hi!"})


def _no_alternation(d: dict[str, Any]) -> None:
    d["sessions"][1]["turns"].insert(1, {"role": "user", "content": "Also this."})


def _no_missing_information(d: dict[str, Any]) -> None:
    d["missing_information"] = None


def _leak(d: dict[str, Any]) -> None:
    word = sorted(distinctive_words(Instance.model_validate(d)))[0]
    d["query"] = d["query"].rstrip("?") + f" given the {word}?"


def _high_risk_boc(d: dict[str, Any]) -> None:
    d["high_risk"] = True


def _dup_session(d: dict[str, Any]) -> None:
    d["sessions"][1]["id"] = d["sessions"][0]["id"]


CASES: list[tuple[str, str, Callable[[dict[str, Any]], None], str]] = [
    ("CPC", "too few core", _drop_core, "5 core memories; expected 6-8"),
    ("CPC", "too many core", _add_core, "core memories; expected 6-8"),
    ("CPC", "no background", _no_background, "0 background memories; expected 1-2"),
    ("CPC", "five distractors", _five_distractors, "5 distractor memories; expected 6"),
    ("CPC", "core in no session", _unlisted_core, "core memories ['m1'] appear in no session"),
    ("CPC", "dates backwards", _dates_backwards, "session dates go backwards"),
    (
        "CPC",
        "assistant first",
        _starts_with_assistant,
        "must start with a user turn (turn 0 is assistant)",
    ),
    ("CPC", "no alternation", _no_alternation, "turns do not alternate"),
    ("SCC", "no missing info", _no_missing_information, "missing_information is required"),
    ("BOC", "query leaks", _leak, "query leaks words of missing_information"),
    ("BOC", "high risk BOC", _high_risk_boc, "only SCC and NONE"),
    ("CPC", "duplicate session", _dup_session, "duplicate session ids"),
]


@pytest.mark.parametrize(("ctype", "label", "breaker", "message"), CASES, ids=[c[1] for c in CASES])
def test_broken_instance_fails_naming_instance_and_problem(
    raw: list[dict[str, Any]],
    ctype: str,
    label: str,
    breaker: Callable[[dict[str, Any]], None],
    message: str,
) -> None:
    d = base(raw, ctype)
    breaker(d)
    inst = Instance.model_validate(d)
    problems = errors(check_instance(inst))
    assert problems, label
    assert any(message in p.message for p in problems), [str(p) for p in problems]
    assert all(p.instance == inst.id for p in problems)
    assert all(inst.id in str(p) for p in problems)


def test_none_instances_need_no_missing_information(raw: list[dict[str, Any]]) -> None:
    d = base(raw, "NONE")
    d["missing_information"] = None
    assert check_instance(Instance.model_validate(d)) == []


def test_distinctive_words_skip_name_aspect_and_short_words(raw: list[dict[str, Any]]) -> None:
    d = base(raw, "BOC")
    d["persona"]["name"] = "Margarita"
    d["aspect"] = "budget_tracking"
    d["missing_information"] = "Whether Margarita's budget tracking phase uses receipts now."
    assert distinctive_words(Instance.model_validate(d)) == {"receipt"}


def test_dataset_wide_ids_and_count_minimums(raw: list[dict[str, Any]]) -> None:
    a, b = base(raw, "CPC"), base(raw, "SCC")
    b_dup = copy.deepcopy(a)
    b["sessions"][0]["id"] = a["sessions"][0]["id"]
    insts = [Instance.model_validate(x) for x in (a, b, b_dup)]
    problems = validate_instances(insts)
    msgs = [str(p) for p in errors(problems)]
    assert any("duplicate instance id" in m and a["id"] in m for m in msgs)
    assert any(f"session id {a['sessions'][0]['id']!r} is also used" in m for m in msgs)
    # Three instances are far below the minimums: warnings for a custom set.
    warnings = [p for p in problems if p.severity == "warning"]
    assert any("personas; expected at least 15" in p.message for p in warnings)
    assert any("CPC instances; expected at least 20" in p.message for p in warnings)
    assert all(p.instance is None for p in warnings)
    strict = validate_instances(insts[:2], counts="error")
    assert any("high-risk SCC" in p.message and p.severity == "error" for p in strict)
    assert validate_instances(insts[:1], counts=None) == []


def test_file_problems_name_file_and_line(tmp_path: Path, raw: list[dict[str, Any]]) -> None:
    good = base(raw, "CPC")
    unknown = {**base(raw, "BOC"), "colour": "blue"}
    lines = [json.dumps(good), "{not json", json.dumps(unknown)]
    f = tmp_path / "mine.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    problems = validate_dataset(f)
    errs = [str(p) for p in errors(problems)]
    assert any(f"{f}:2" in e and "not valid JSON" in e for e in errs)
    assert any(f"{f}:3" in e and "unknown field 'colour'" in e and unknown["id"] in e for e in errs)
    assert len(errs) == 2  # the good line passes; count minimums are only warnings here


def test_missing_path_raises(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such file"):
        validate_dataset(tmp_path / "nope.jsonl")
    with pytest.raises(DatasetError, match=r"no \.jsonl files"):
        validate_dataset(tmp_path)


def _resize(d: dict[str, Any], core: int, distractors: int) -> dict[str, Any]:
    """Keep the first ``core`` core memories and ``distractors`` distractors (sessions too)."""
    keep_core = [m for m in d["memories"] if m["role"] == "core"][:core]
    keep_dis = [m for m in d["memories"] if m["role"] == "distractor"][:distractors]
    others = [m for m in d["memories"] if m["role"] not in ("core", "distractor")]
    d["memories"] = keep_core + others + keep_dis
    keep = {m["id"] for m in d["memories"]}
    for s in d["sessions"]:
        s["memory_ids"] = [i for i in s["memory_ids"] if i in keep]
    for key in ("core_ids", "evidence_ids"):
        if isinstance(d.get(key), list):
            d[key] = [i for i in d[key] if i in keep]
    return d


def test_custom_dataset_with_other_sizes_validates_with_warnings(
    tmp_path: Path, raw: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    # A user's own set: 3 core memories and 4 distractors is fine, only unlike the shipped set.
    from caap.cli import main

    d = _resize(base(raw, "CPC"), core=3, distractors=4)
    f = tmp_path / "mine.jsonl"
    f.write_text(json.dumps(d) + "\n", encoding="utf-8")
    problems = validate_dataset(f)
    assert errors(problems) == [], [str(p) for p in errors(problems)]
    sizes = [p.message for p in problems if p.instance == d["id"]]
    assert any("3 core memories; the shipped set has 6-8" in m for m in sizes), sizes
    assert any("4 distractor memories; the shipped set has 6" in m for m in sizes), sizes
    assert main(["tangle", "validate", str(f)]) == 0
    assert "0 error(s)" in capsys.readouterr().out
    # Beyond the sizes any dataset may use it is still an error, and the shipped set is strict.
    too_few = _resize(base(raw, "CPC"), core=1, distractors=4)
    f.write_text(json.dumps(too_few) + "\n", encoding="utf-8")
    assert any("expected 2-8" in p.message for p in errors(validate_dataset(f)))
    strict = check_instance(Instance.model_validate(_resize(base(raw, "CPC"), 3, 4)))
    assert any("expected 6-8" in p.message for p in errors(strict))


def test_a_high_risk_control_is_valid(raw: list[dict[str, Any]]) -> None:
    # A high-stakes matter whose sources agree is a high-risk control (the guard must let a
    # justified commit stand there); only context and oscillation instances cannot be high-risk.
    d = base(raw, "NONE")
    d["missing_information"] = None
    d["high_risk"] = True
    assert check_instance(Instance.model_validate(d)) == []
