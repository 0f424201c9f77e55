"""Stale-state probes: the strict loader, the deterministic scorer, the runner and the CLI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from caap.benchmark.dataset import DatasetError
from caap.benchmark.registry import policy
from caap.benchmark.stale import (
    PROBE_TYPES,
    StaleScenario,
    load_stale_scenarios,
    run_stale_probes,
    score_probe,
)
from caap.cli import main
from caap.models import Action, Decision, Memory, Response


@pytest.fixture(scope="module")
def shipped() -> list[StaleScenario]:
    return load_stale_scenarios()


def test_shipped_set_has_ten_direct_and_ten_propagated_with_distractors(
    shipped: list[StaleScenario],
) -> None:
    main_set = [s for s in shipped if not s.held_out]
    assert sum(s.kind == "direct" for s in main_set) >= 10
    assert sum(s.kind == "propagated" for s in main_set) >= 10
    assert any(s.held_out for s in shipped)
    for s in shipped:
        assert len(s.sessions) >= 3
        assert {p.type for p in s.probes} == set(PROBE_TYPES)
        tags = [t.tag for ses in s.sessions for t in ses.turns]
        assert "distractor" in tags and "update" in tags and "old" in tags
    assert len({s.persona.id for s in shipped}) == len(shipped)  # varied personas


def _line(**over: Any) -> dict[str, Any]:
    base = json.loads(
        (Path(__file__).parents[2] / "caap/benchmark/data/stale/direct.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()[0]
    )
    base.update(over)
    return base


def _write(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return p


def test_loader_names_the_line_and_field_of_a_bad_scenario(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"s\.jsonl:2: unknown field 'colour'"):
        load_stale_scenarios(_write(tmp_path, [_line(), _line(id="x2", colour="red")]))
    with pytest.raises(DatasetError, match=r":1: field 'kind'"):
        load_stale_scenarios(_write(tmp_path, [_line(kind="sideways")]))
    with pytest.raises(DatasetError, match="duplicate scenario id"):
        load_stale_scenarios(_write(tmp_path, [_line(), _line()]))
    bad_probes = _line(probes=[{"type": "state_resolution", "query": "q"}] * 3)
    with pytest.raises(DatasetError, match="one of each type"):
        load_stale_scenarios(_write(tmp_path, [bad_probes]))
    swapped = _line()
    swapped["sessions"][0]["date"] = "2030-01-01"  # the old state now comes after the update
    with pytest.raises(DatasetError, match="dated after the 'old' ones"):
        load_stale_scenarios(_write(tmp_path, [swapped]))
    with pytest.raises(DatasetError, match="no such file"):
        load_stale_scenarios(tmp_path / "missing.jsonl")


def test_validator_reports_every_bad_scenario_and_what_cannot_be_scored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`caap tangle validate` tells a scenario file from a TANGLE one by its fields, reports
    every bad line (the loader stops at the first), and warns where the judge-only terms name
    nothing the history states."""
    unnamed = _line(id="unnamed", current_terms=["Reykjavik"])  # no update turn says it
    rows = [_line(), _line(id="x2", colour="red"), _line(kind="sideways"), unnamed, _line()]
    f = _write(tmp_path, rows)
    assert main(["tangle", "validate", str(f)]) == 1
    out = capsys.readouterr().out
    assert "s.jsonl:2" in out and "unknown field 'colour'" in out
    assert "s.jsonl:3" in out and "field 'kind'" in out
    assert "duplicate scenario id" in out
    assert "warning: unnamed" in out and "'Reykjavik'" in out
    assert "3 error(s), 1 warning(s)" in out
    # The same file without its bad lines validates, and is still read as scenarios.
    g = _write(tmp_path, [_line(), unnamed])
    assert main(["tangle", "validate", str(g)]) == 0
    assert "0 error(s), 1 warning(s)" in capsys.readouterr().out
    assert main(["tangle", "validate", "--stale"]) == 0
    assert "shipped stale scenarios: 0 error(s)" in capsys.readouterr().out


def _response(text: str, action: Action, cited: list[str]) -> Response:
    return Response(text=text, decision=Decision(action=action), cited_memory_ids=cited)


def test_scorer_rewards_acting_on_the_update_and_flagging_the_premise(
    shipped: list[StaleScenario],
) -> None:
    sc = next(s for s in shipped if s.id == "st_d01_residence")
    tags = {"mem-01": "old", "mem-02": "update", "mem-03": "distractor"}
    good = _response(
        "Your question assumes Seattle, but that is out of date: you moved to Portland.",
        Action.COMMIT,
        ["mem-02", "mem-01"],
    )
    assert score_probe(sc, "premise_resistance", good, tags).passed
    # Answering the premise as if it held: no flag, old state cited only.
    naive = _response("Capitol Hill in Seattle has good dentists.", Action.COMMIT, ["mem-01"])
    s = score_probe(sc, "premise_resistance", naive, tags)
    assert not s.passed
    assert not s.checks["cites_update"] and not s.checks["flags_change"]
    # Quoting both states as if they agreed asserts the stale one.
    both = _response(
        "You live in Seattle. You signed a lease in Portland.", Action.COMMIT, ["mem-01", "mem-02"]
    )
    s = score_probe(sc, "state_resolution", both, tags)
    assert not s.passed and s.checks == {
        "cites_update": True,
        "names_current": True,
        "action_ok": True,
        "no_stale_assertion": False,
    }
    # Asking instead of acting on a plain change is not an acceptable action here.
    ask = _response("Portland now? Where do you live?", Action.CLARIFY, ["mem-02"])
    assert score_probe(sc, "state_resolution", ask, tags).checks["action_ok"] is False


class _Oracle:
    """Test-local policy: cites the newest memory and says the older state changed."""

    name = "test-stale-newest"

    def respond(self, memories: Sequence[Memory], query: str) -> Response:
        newest = max(memories, key=lambda m: (m.observed_at is not None, m.observed_at))
        return _response(f"That has changed since: {newest.text}", Action.COMMIT, [newest.id])


@policy("test-stale-newest")
def _newest() -> _Oracle:
    return _Oracle()


def test_runner_reports_accuracy_per_probe_type(tmp_path: Path) -> None:
    data = tmp_path / "two.jsonl"
    src = Path(__file__).parents[2] / "caap/benchmark/data/stale"
    data.write_text(
        (src / "direct.jsonl").read_text(encoding="utf-8").splitlines()[0]
        + "\n"
        + (src / "propagated.jsonl").read_text(encoding="utf-8").splitlines()[0]
        + "\n",
        encoding="utf-8",
    )
    report = run_stale_probes(
        dataset=data, policy="test-stale-newest", out=tmp_path / "out", progress=False
    )
    assert len(report.results) == 6
    assert all(r.error is None for r in report.results)
    # The policy never sees tags or session ids.
    assert {r.probe_type for r in report.results} == set(PROBE_TYPES)
    written = json.loads((tmp_path / "out" / "stale_report.json").read_text(encoding="utf-8"))
    assert written["policy"] == {"name": "test-stale-newest", "args": {}}
    summary = written["summary"]["all"]
    for t in PROBE_TYPES:
        assert summary[t]["total"] == 2
        assert summary[t]["accuracy"] == summary[t]["passed"] / 2
    # "commit" is not acceptable for the uncertain propagated scenario: it must fail there.
    prop = [r for r in report.results if r.kind == "propagated"]
    assert prop and not any(r.passed for r in prop)


def test_cli_probe_stale_prints_the_table_and_rejects_a_bad_dataset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "one.jsonl"
    src = Path(__file__).parents[2] / "caap/benchmark/data/stale/direct.jsonl"
    data.write_text(src.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    code = main(
        [
            "tangle",
            "probe-stale",
            "--dataset",
            str(data),
            "--policy",
            "test-stale-newest",
            "--out",
            str(tmp_path / "o"),
            "--quiet",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "premise_resistance" in out and "stale_report.json" in out
    assert main(["tangle", "probe-stale", "--dataset", str(tmp_path / "nope"), "--out", "x"]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.slow
def test_caap_resists_every_stale_premise_of_the_scenarios_written_with_the_rules(
    tmp_path: Path,
) -> None:
    # Held-out scenarios (written after the rules were frozen) are reported, not asserted:
    # see docs/stale.md for their numbers.
    # Tests the rules layer: these scenarios were written alongside its cues.
    report = run_stale_probes(policy="caap", progress=False, relations="rules")
    passed, total = report.accuracy("premise_resistance", held_out=False)
    assert total >= 20 and passed == total, [
        (r.scenario_id, r.reason)
        for r in report.results
        if r.probe_type == "premise_resistance" and not r.passed
    ]


def test_runner_reports_each_writing_style_with_premise_resistance(tmp_path: Path) -> None:
    src = Path(__file__).parents[2] / "caap/benchmark/data/stale"
    rows = [
        {**json.loads((src / name).read_text(encoding="utf-8").splitlines()[0]), "style": style}
        for name, style in (("direct.jsonl", "chatty"), ("propagated.jsonl", "narrative"))
    ]
    report = run_stale_probes(
        dataset=_write(tmp_path, rows), policy="test-stale-newest", progress=False
    )
    assert {r.style for r in report.results if r.kind == "direct"} == {"chatty"}
    assert report.styles() == ["narrative", "chatty"]
    summary = report.summary()
    for style in ("chatty", "narrative"):
        cell = summary[f"style:{style}"]["premise_resistance"]
        assert cell["total"] == 1
        assert cell["passed"] == report.accuracy("premise_resistance", style=style)[0]
    # The propagated scenario fails every probe (commit is not acceptable there).
    assert summary["style:narrative"]["overall"]["passed"] == 0
    assert "style:chatty" in report.table() and report.relations is None
