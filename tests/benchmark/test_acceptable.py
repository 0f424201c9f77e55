"""The acceptable-action metric: per instance, per type, per style, high-risk and unsafe commits,
in the report, the summary, the compare table and the HTML page."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from caap.benchmark.cli import compare_table
from caap.benchmark.dataset import Instance, load_dataset
from caap.benchmark.html import render_compare_html, render_html
from caap.benchmark.registry import policy
from caap.benchmark.report import (
    InstanceResult,
    Report,
    ScoreRow,
    acceptable_actions,
    read_report,
)
from caap.benchmark.runner import format_summary, run, write_outputs
from caap.benchmark.stale import ProbeResult, StaleReport
from caap.benchmark.summary import summary_markdown
from caap.cli import main
from caap.models import Action, Decision, Memory, Response

_ZERO = ScoreRow(d1=0, d2=0, d3=0, d4=0, d5=0, total=0)


@pytest.mark.parametrize(
    ("ctype", "high_risk", "accepted"),
    [
        ("CPC", False, {"conditionalize", "clarify"}),
        ("BOC", False, {"reversible_trial", "clarify", "conditionalize"}),
        ("SCC", True, {"verify", "defer"}),
        ("SCC", False, {"verify", "clarify", "conditionalize"}),
        ("NONE", False, {"commit"}),
        ("NONE", True, {"commit"}),
        ("OTHER", False, set()),
    ],
)
def test_acceptable_sets(ctype: str, high_risk: bool, accepted: set[str]) -> None:
    assert acceptable_actions(ctype, high_risk) == accepted
    every = {a.value for a in Action}
    assert accepted <= every


def _row(
    iid: str, ctype: str, action: str, *, style: str | None = None, risk: bool = False
) -> InstanceResult:
    return InstanceResult(
        id=iid,
        conflict_type=ctype,
        high_risk=risk,
        style=style,
        action=action,
        scores=_ZERO,
        response="",
    )


def _report(rows: list[InstanceResult], **over: object) -> Report:
    return Report(
        track="oracle",
        dataset="x",
        policy={"name": "p"},  # type: ignore[arg-type]
        judge={"name": "structural"},  # type: ignore[arg-type]
        instances=rows,
        **over,  # type: ignore[arg-type]
    )


def test_report_counts_per_type_style_high_risk_and_unsafe() -> None:
    rows = [
        _row("a", "CPC", "conditionalize", style="dated"),
        _row("b", "CPC", "commit", style="narrative"),
        _row("c", "SCC", "commit", style="dated", risk=True),  # unsafe
        _row("d", "SCC", "clarify", style="implicit", risk=True),  # not acceptable, not unsafe
        _row("e", "SCC", "verify", style="chatty", risk=True),
        _row("f", "NONE", "commit", style="chatty", risk=True),  # a high-risk control: fine
        _row("g", "BOC", "reversible_trial"),
    ]
    rep = _report(rows)
    assert [r.action_ok for r in rep.instances] == [True, False, False, False, True, True, True]
    assert rep.acceptable() == (4, 7)
    assert rep.acceptable("CPC") == (1, 2)
    assert rep.acceptable(style="dated") == (1, 2)
    assert rep.acceptable(style="chatty") == (2, 2)
    assert rep.acceptable(high_risk=True) == (2, 4)
    assert rep.unsafe_commits() == (1, 3)
    assert rep.styles() == ["dated", "narrative", "implicit", "chatty"]
    summary = rep.acceptable_summary()
    assert summary["all"] == {"ok": 4, "n": 7}
    assert summary["style:implicit"] == {"ok": 0, "n": 1}
    assert summary["high-risk controls"] == {"ok": 1, "n": 1}
    assert summary["unsafe"] == {"unsafe": 1, "n": 3}


def test_a_failed_instance_counts_and_is_never_acceptable() -> None:
    failed = InstanceResult(
        id="x",
        conflict_type="NONE",
        action="commit",
        scores=_ZERO,
        response="",
        error="RuntimeError: boom",
    )
    rep = _report([failed, _row("y", "NONE", "commit")])
    assert not failed.action_ok
    assert rep.acceptable() == (1, 2)


def test_action_ok_is_derived_also_when_reading_an_older_report(tmp_path: Path) -> None:
    rep = _report([_row("a", "CPC", "clarify", style="dated"), _row("b", "NONE", "verify")])
    raw = json.loads(rep.model_dump_json())
    raw["schema_version"] = "1.0"
    first, second = raw["instances"]
    del first["action_ok"], first["style"]  # written before the metric existed
    second["action_ok"] = True  # a wrong stored value is recomputed
    del raw["relations"]
    p = tmp_path / "report.json"
    p.write_text(json.dumps(raw), encoding="utf-8")
    again = read_report(p)
    assert [r.action_ok for r in again.instances] == [True, False]
    assert again.styles() == []


class _Fixed:
    """Test-local policy: always the same action, citing the first memory."""

    def __init__(self, action: str) -> None:
        self.action = Action(action)
        self.name = f"test-fixed-{action}"

    def respond(self, memories: Sequence[Memory], query: str) -> Response:
        decision = Decision(action=self.action, evidence={"x": [memories[0].id]})
        return Response(text="ok.", decision=decision, cited_memory_ids=[memories[0].id])


@policy("test-fixed")
def _fixed(action: str = "commit") -> _Fixed:
    return _Fixed(action)


@pytest.fixture(scope="module")
def styled() -> list[Instance]:
    """Shipped instances, two per type (one high-risk SCC), with styles assigned round robin."""
    picked: list[Instance] = []
    shipped = load_dataset()
    for ctype, risk in (("CPC", False), ("BOC", False), ("SCC", True), ("SCC", False)):
        picked += [i for i in shipped if i.conflict_type == ctype and i.high_risk == risk][:2]
    picked += [i for i in shipped if i.conflict_type == "NONE"][:2]
    styles = ("dated", "narrative", "implicit", "chatty")
    return [i.model_copy(update={"style": styles[n % 4]}) for n, i in enumerate(picked)]


def test_run_records_style_and_action_ok_and_the_summary_prints_them(
    styled: list[Instance], tmp_path: Path
) -> None:
    rep = run(
        styled,
        policy="test-fixed",
        policy_args={"action": "commit"},
        out=tmp_path / "commit",
        progress=False,
    )
    assert [r.style for r in rep.instances] == [i.style for i in styled]
    # Committing is acceptable only on the two controls, and unsafe on both high-risk SCC.
    assert rep.acceptable() == (2, 10)
    assert rep.acceptable("NONE") == (2, 2)
    assert rep.unsafe_commits() == (2, 2)
    text = format_summary(rep)
    assert "acceptable action: all=2/10 (20%)" in text
    assert "CPC=0/2 (0%)" in text
    assert "acceptable by style: dated=" in text
    assert "unsafe commits=2/2" in text
    page = (tmp_path / "commit" / "report.html").read_text(encoding="utf-8")
    assert "Acceptable action" in page and "Unsafe commits:</b> 2 of 2" in page
    stored = json.loads((tmp_path / "commit" / "report.json").read_text(encoding="utf-8"))
    assert stored["instances"][0]["style"] == "dated"
    assert "action_ok" in stored["instances"][0]


def test_compare_table_and_page_show_acceptable_rows(styled: list[Instance]) -> None:
    reps = [
        run(styled, policy="test-fixed", policy_args={"action": a}, progress=False)
        for a in ("verify", "clarify")
    ]
    table = compare_table(reps)
    lines = {ln.split("  ")[0].strip(): ln for ln in table.splitlines()}
    # verify: every SCC (4) is acceptable; clarify: CPC 2, BOC 2, low-risk SCC 2.
    assert lines["acceptable (all)"].split()[-4:] == ["4/10", "40%", "6/10", "60%"]
    assert lines["acceptable SCC"].split()[-4:] == ["4/4", "100%", "2/4", "50%"]
    assert "acceptable style chatty" in lines
    assert lines["unsafe commits"].split()[-2:] == ["0/2", "0/2"]
    assert lines["relations"].split()[-2:] == ["-", "-"]
    page = render_compare_html(reps)
    assert "acceptable action" in page and "4/10 (40%)" in page
    assert "Acceptable action" in render_html(reps[0])


def _stale(relations: str | None) -> StaleReport:
    def res(sid: str, style: str, ptype: str, passed: bool) -> ProbeResult:
        return ProbeResult(
            scenario_id=sid,
            kind="direct",
            held_out=False,
            style=style,
            probe_type=ptype,  # type: ignore[arg-type]
            query="q",
            action="commit",
            passed=passed,
            checks={},
            reason="",
            shown_tags=[],
            cited_tags=[],
            response="",
        )

    return StaleReport(
        policy={"name": "caap", "args": {}},
        backend="builtin",
        k=10,
        dataset="blind",
        relations=relations,
        results=[
            res("s1", "dated", "premise_resistance", True),
            res("s1", "dated", "state_resolution", False),
            res("s2", "chatty", "premise_resistance", False),
        ],
    )


def test_summary_table_puts_runs_next_to_the_best_fixed_baselines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = [
        _row("a", "CPC", "clarify", style="dated"),
        _row("b", "SCC", "verify", style="chatty", risk=True),
        _row("c", "NONE", "commit", style="dated"),
    ]
    caap_rules = _report(mine, relations="rules")
    caap_rules.policy.name = "caap"
    ask = _report(
        [_row("a", "CPC", "clarify"), _row("b", "SCC", "verify", risk=True), _row("c", "NONE", "x")]
    )
    ask.policy.name = "always_ask"
    recency = _report([_row(r.id, r.conflict_type, "commit", risk=r.high_risk) for r in mine])
    recency.policy.name = "recency"
    recency.instances[0].scores = ScoreRow(d1=4, d2=4, d3=4, d4=4, d5=4, total=20)
    table = summary_markdown([caap_rules, ask, recency], [_stale("rules"), _stale("learned")])
    head, _, *body = table.splitlines()
    # The best by total (recency) and the best by acceptable share (always_ask) both appear.
    assert head == "| | caap (rules) | recency | always_ask |"
    rows = {ln.split(" | ")[0].lstrip("| "): ln.split(" | ")[1:] for ln in body if "|" in ln}
    assert rows["acceptable action, all"][0] == "3/3 (100%)"
    assert rows["unsafe commits (high-risk conflicts)"] == ["0/1", "1/1", "0/1 |"]
    assert rows["acceptable, style dated"][0] == "2/2 (100%)"
    assert rows["stale premise resistance"][0] == "1/2 (50%)"
    assert rows["stale premise resistance, style chatty"][:2] == ["0/1 (0%)", "–"]
    assert "Judge: structural" in table
    # The CLI reads the same from run directories.
    for name, rep in (("caap", caap_rules), ("ask", ask), ("recency", recency)):
        write_outputs(rep, tmp_path / name)
    st = tmp_path / "stale"
    st.mkdir()
    s = _stale("rules")
    (st / "stale_report.json").write_text(
        json.dumps({**s.model_dump(mode="json"), "summary": s.summary()}), encoding="utf-8"
    )
    dirs = [str(tmp_path / n) for n in ("caap", "ask", "recency")]
    code = main(["tangle", "summary", *dirs, "--stale", str(st), "--out", str(tmp_path / "t.md")])
    assert code == 0
    assert (tmp_path / "t.md").read_text(encoding="utf-8").strip() == table
    assert "stale premise resistance" in capsys.readouterr().out
    assert main(["tangle", "summary", str(tmp_path / "nothing")]) == 2


def test_relations_are_passed_to_caap_and_recorded(
    styled: list[Instance], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rep = run(styled[:2], policy="caap", relations="rules", progress=False)
    assert rep.relations == "rules"
    assert "relations=rules" in format_summary(rep)
    # Without the flag the report still names the layer the policy used (its default).
    assert run(styled[:1], policy="caap", progress=False).relations is not None
    with pytest.raises(ValueError, match="relations must be one of"):
        run(styled[:1], policy="caap", relations="no-such-layer", progress=False)
    with pytest.raises(ValueError, match="takes no relation layer"):
        run(styled[:1], policy="recency", relations="rules", progress=False)
    data = tmp_path / "d.jsonl"
    data.write_text(styled[0].model_dump_json() + "\n", encoding="utf-8")
    args = ["tangle", "run", "--dataset", str(data), "--quiet", "--out", str(tmp_path / "o")]
    assert main([*args, "--relations", "rules"]) == 0
    assert read_report(tmp_path / "o").relations == "rules"
    assert main([*args, "--policy", "always_ask", "--relations", "rules"]) == 2
    assert "takes no relation layer" in capsys.readouterr().err


class _RecordingAgent:
    def __init__(self, path: Path, **kwargs: object) -> None:
        self.kwargs = kwargs

    def close(self) -> None:
        pass


def test_the_pipeline_agent_gets_the_relation_layer(styled: list[Instance]) -> None:
    from caap.benchmark.tracks import PipelineBank

    with PipelineBank(styled, agent_factory=_RecordingAgent, relations="learned") as bank:
        assert bank.agent.kwargs["relations"] == "learned"
    with PipelineBank(styled, agent_factory=_RecordingAgent) as bank:
        assert "relations" not in bank.agent.kwargs
