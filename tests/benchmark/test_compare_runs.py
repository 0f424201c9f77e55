"""benchmark/compare_runs.py: what a keep rule reads off two runs (gains, losses, actions)."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests._scripts import load_script

ROOT = Path(__file__).parents[2]


def _module() -> ModuleType:
    return load_script("benchmark/compare_runs.py")


def _probe(sid: str, ptype: str, passed: bool, style: str) -> dict[str, Any]:
    return {
        "scenario_id": sid,
        "kind": "direct",
        "held_out": True,
        "style": style,
        "probe_type": ptype,
        "query": "q",
        "action": "commit",
        "passed": passed,
        "checks": {"names_current": passed},
        "reason": "all checks hold" if passed else "failed: names_current",
        "shown_tags": [],
        "cited_tags": [],
        "response": "r",
    }


def _stale(path: Path, passed: dict[tuple[str, str], bool]) -> Path:
    results = [_probe(s, p, ok, "chatty") for (s, p), ok in passed.items()]
    report = {"policy": {}, "backend": "builtin", "k": 10, "dataset": "d", "results": results}
    path.mkdir()
    (path / "stale_report.json").write_text(json.dumps(report), encoding="utf-8")
    return path


def _cite_update(run: Path, sid: str) -> None:
    """Make the answers to scenario ``sid`` in a stale run cite one update turn."""
    path = run / "stale_report.json"
    report = json.loads(path.read_text(encoding="utf-8"))
    for r in report["results"]:
        if r["scenario_id"] == sid:
            r["cited_tags"] = ["update"]
    path.write_text(json.dumps(report), encoding="utf-8")


def _instance(
    iid: str, ctype: str, action: str, response: str, high_risk: bool = False
) -> dict[str, Any]:
    scores = {"d1": 2, "d2": 2, "d3": 2, "d4": 2, "d5": 2, "total": 10}
    return {
        "id": iid,
        "conflict_type": ctype,
        "high_risk": high_risk,
        "action": action,
        "scores": scores,
        "response": response,
    }


def _tangle(path: Path, instances: list[dict[str, Any]]) -> Path:
    spec = {"name": "x"}
    report = {
        "track": "oracle",
        "dataset": "d",
        "policy": spec,
        "judge": spec,
        "instances": instances,
    }
    path.mkdir()
    (path / "report.json").write_text(json.dumps(report), encoding="utf-8")
    return path


def _run_dirs(tmp_path: Path) -> tuple[Path, Path]:
    """Two empty `dev_sets.sh` output folders: the head's and a candidate's."""
    head, cand = tmp_path / "head", tmp_path / "cand"
    head.mkdir()
    cand.mkdir()
    return head, cand


def test_stale_gains_and_losses_are_counted_probe_by_probe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _module()
    a = _stale(
        tmp_path / "a",
        {
            ("s1", "state_resolution"): True,
            ("s1", "premise_resistance"): False,
            ("s2", "state_resolution"): False,
        },
    )
    b = _stale(
        tmp_path / "b",
        {
            ("s1", "state_resolution"): False,
            ("s1", "premise_resistance"): True,
            ("s2", "state_resolution"): True,
        },
    )
    assert mod.main(["stale", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    # one lost, two gained: the totals alone (1 -> 2) would hide the loss
    assert "gained 2 (0 citing a further update turn), lost 1" in out
    assert "- s1/state_resolution" in out and "+ s2/state_resolution" in out
    assert "premise 0/1" in out and "premise 1/1" in out
    # a look at the test split prints no scenario id
    assert mod.main(["stale", str(a), str(b), "--aggregate-only"]) == 0
    assert "s1" not in capsys.readouterr().out


def test_tangle_actions_changed_and_unsafe_commits_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _module()
    a = _tangle(
        tmp_path / "a",
        [
            _instance("c1", "NONE", "commit", "x"),
            _instance("h1", "SCC", "verify", "y", high_risk=True),
            _instance("k1", "CPC", "conditionalize", "z"),
        ],
    )
    b = _tangle(
        tmp_path / "b",
        [
            _instance("c1", "NONE", "commit", "x2"),
            _instance("h1", "SCC", "commit", "y", high_risk=True),
            _instance("k1", "CPC", "conditionalize", "z"),
        ],
    )
    assert mod.main(["tangle", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "unsafe 0/1" in out and "unsafe 1/1" in out
    assert "actions changed 1, responses reworded 1" in out
    # the unsafe commit is one acceptable action lost, and one move is no evidence either way
    assert "acceptable gained 0, lost 1 (exact paired p 1.00)" in out
    assert "action h1: verify -> commit" in out and "reworded c1" in out


def test_the_paired_p_value_counts_only_what_moved() -> None:
    p = _module().paired_p
    # 7 gained and none lost is unlikely by chance (2 * 0.5**7); an even split is not at all
    assert p(7, 0) == pytest.approx(2 / 128) and p(0, 7) == p(7, 0)
    assert p(3, 3) == 1.0 and p(0, 0) == 1.0
    # 20 gained, 5 lost: the two-sided tail of a fair coin over 25 moves
    assert p(20, 5) == pytest.approx(0.0041, abs=5e-5)


def test_runs_of_different_sets_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _module()
    a = _stale(tmp_path / "a", {("s1", "state_resolution"): True})
    b = _stale(tmp_path / "b", {("s9", "state_resolution"): True})
    assert mod.main(["stale", str(a), str(b)]) == 2
    assert "different scenarios" in capsys.readouterr().err
    assert mod.main(["tangle", str(a), str(tmp_path / "missing")]) == 2


def test_two_dev_set_runs_compare_set_by_set_with_the_stale_total(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _module()
    head, cand = _run_dirs(tmp_path)
    _stale(head / "stale_x", {("s1", "state_resolution"): False, ("s2", "state_resolution"): True})
    x = _stale(
        cand / "stale_x", {("s1", "state_resolution"): True, ("s2", "state_resolution"): False}
    )
    # the gain in stale_x cites an update turn the head's answer did not; stale_y's does not
    _cite_update(x, "s1")
    _stale(head / "stale_y", {("s3", "implicit_adaptation"): False})
    _stale(cand / "stale_y", {("s3", "implicit_adaptation"): True})
    control = _instance("c1", "NONE", "commit", "x")
    _tangle(head / "tangle_z", [control])
    _tangle(cand / "tangle_z", [{**control, "action": "verify"}])
    _stale(head / "stale_only_in_head", {("s9", "state_resolution"): True})
    assert mod.main(["sets", str(head), str(cand)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "stale_x: 1 -> 1/2 passed, gained 1 (1 citing a further update turn), lost 1" in out
    assert "stale_y: 0 -> 1/1 passed, gained 1 (0 citing a further update turn), lost 0" in out
    assert (
        "tangle_z: acceptable 1 -> 0/1, controls committed 1 -> 0/1, unsafe 0 -> 0, "
        "actions changed 1" in out
    )
    # the total counts every loss, and a set run on one side only is left out
    assert out[-1] == (
        "stale probes over these sets: gained 2 (1 citing a further update turn), lost 1 "
        "(exact paired p 1.00)"
    )
    assert not any("only_in_head" in line for line in out)
    # two folders with nothing in common is an error, not an empty comparison
    assert mod.main(["sets", str(head), str(tmp_path / "empty")]) == 2


def test_the_decision_path_names_the_reading_without_figures_or_memory_text() -> None:
    path = _module().decision_path
    assert (
        path("commit fits the likely readings best (situation reading: STALE 0.63, NONE 0.2)")
        == "situation reading, STALE first"
    )
    assert (
        path(
            "low stakes and one side is a record (the Bosch manual) again; act on it "
            "[guard] commit changed to verify: no positive evidence (memory mem-01 ...)"
        )
        == "low stakes and one side is a record again + guard"
    )
    assert path("") == "-"


def test_classes_count_failures_and_losses_by_class_with_no_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = _module()
    head, cand = _run_dirs(tmp_path)
    graph = "a later observation replaces an earlier one; act on the current state"
    probes = []
    for sid, passed, cited in (("s1", False, ["old"]), ("s2", False, ["old"]), ("s3", True, [])):
        p = _probe(sid, "state_resolution", passed, "chatty")
        probes.append(
            {**p, "shown_tags": ["old", "update"], "cited_tags": cited, "rationale": graph}
        )
    report = {"policy": {}, "backend": "builtin", "k": 10, "dataset": "d", "results": probes}
    for folder, results in (
        (head, probes),
        (cand, [*probes[:2], {**probes[2], "passed": False, "checks": {"names_current": False}}]),
    ):
        (folder / "stale_x").mkdir()
        data = {**report, "results": results}
        (folder / "stale_x" / "stale_report.json").write_text(json.dumps(data), encoding="utf-8")
    decision = {"action": "verify", "conflict_type": "SCC", "rationale": "sources disagree (x); y"}
    held = {**_instance("c2", "NONE", "verify", "r", high_risk=True), "decision": decision}
    _tangle(head / "tangle_z", [_instance("c1", "NONE", "commit", "x"), held])
    assert mod.main(["classes", str(head)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "stale_x: 2 failed; chatty 2"
    assert out[1] == (
        "    2  commit | failed names_current | update shown, not cited | "
        "a later observation replaces an earlier one"
    )
    assert out[2] == "tangle_z: 1 of 2 controls not committed"
    assert out[3] == "    1  high stakes | verify | sources disagree"
    assert not any(i in line for line in out for i in ("s1", "s2", "c1", "c2"))
    # against a candidate: what it lost, from which action to which
    assert mod.main(["classes", str(head), str(cand)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "lost by the candidate: 1 lost" in out
    assert "    1  commit -> commit | failed names_current" in out
    assert mod.main(["classes", str(tmp_path / "missing")]) == 2
    with pytest.raises(SystemExit):
        mod.main(["sets", str(head)])
