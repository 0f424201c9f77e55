"""``caap tangle ...`` end to end (offline, test-local policy and judge), plus the ablation."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from caap.benchmark.base import JudgeInput, Scores
from caap.benchmark.dataset import load_dataset
from caap.benchmark.registry import judge, policy
from caap.benchmark.report import InstanceResult, Report, ScoreRow, read_report
from caap.benchmark.runner import paired_summary, run, run_noise_ablation
from caap.cli import main
from caap.models import Action, Decision, Memory, Response


class EchoPolicy:
    name = "test-cli-echo"

    def __init__(self, action: str = "commit") -> None:
        self.action = Action(action)

    def respond(self, memories: Sequence[Memory], query: str) -> Response:
        return Response(
            text=f"{query} -> {memories[0].text}", decision=Decision(action=self.action)
        )


class NoiseJudge:
    """d1 = distractors shown (capped at 4): the ablation moves it."""

    name = "test-cli-judge"

    def score(self, item: JudgeInput) -> Scores:
        roles = {m.id: m.role for m in item.instance.memories}
        n = sum(roles.get(i) == "distractor" for i in item.shown_ids.values())
        return Scores(d1=min(n, 4), d2=2, d3=2, d4=1, d5=3,
                      d6="partial" if item.instance.high_risk else None)  # fmt: skip


@policy("test-cli-echo")
def _echo(**kwargs: Any) -> EchoPolicy:
    return EchoPolicy(**kwargs)


@judge("test-cli-judge")
def _noise() -> NoiseJudge:
    return NoiseJudge()


COMMON = ["--policy", "test-cli-echo", "--judge", "test-cli-judge", "--quiet"]


def tangle(*args: str) -> int:
    return main(["tangle", *args])


def one_line_error(capsys: pytest.CaptureFixture[str], *needles: str) -> None:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("caap tangle: error:") and "Traceback" not in err
    for n in needles:
        assert n in err


# -- list / validate -----------------------------------------------------------------------------


def test_list_names_policies_and_judges(capsys: pytest.CaptureFixture[str]) -> None:
    assert tangle("list") == 0
    out = capsys.readouterr().out
    assert "test-cli-echo" in out and "test-cli-judge" in out
    assert "structural" in out and "llm:MODEL" in out and "builtin" in out


def test_validate_shipped_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert tangle("validate") == 0
    assert "0 error(s)" in capsys.readouterr().out


def test_validate_broken_file_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = load_dataset()[0].model_dump(mode="json")
    raw["high_risk"] = True
    raw["conflict_type"] = "BOC"
    f = tmp_path / "broken.jsonl"
    f.write_text(json.dumps(raw) + "\n", encoding="utf-8")
    assert tangle("validate", str(f)) == 1
    out = capsys.readouterr().out
    assert f"error: {raw['id']}" in out and "only SCC and NONE" in out


def test_validate_missing_path_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert tangle("validate", str(tmp_path / "nope")) == 2
    one_line_error(capsys, "does not exist")


# -- run -----------------------------------------------------------------------------------------


def test_run_oracle_writes_report_and_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code = tangle("run", *COMMON, "--limit", "3", "--distractors", "2", "--seed", "4",
                  "--policy-arg", 'action="clarify"', "--out", str(out))  # fmt: skip
    assert code == 0
    stdout = capsys.readouterr().out
    assert "judge=test-cli-judge" in stdout and "all" in stdout and "wrote" in stdout
    rep = read_report(out)
    assert rep.track == "oracle" and len(rep.instances) == 3
    assert rep.policy.name == "test-cli-echo" and rep.policy.args == {"action": "clarify"}
    assert rep.judge.name == "test-cli-judge"
    assert (rep.distractors, rep.seed, rep.limit, rep.backend) == (2, 4, 3, None)
    assert {r.action for r in rep.instances} == {"clarify"}
    assert all(r.scores.d1 == 2 for r in rep.instances)
    data = json.loads((out / "report.json").read_text())
    assert data["schema_version"] and next(iter(data)) == "schema_version"
    page = (out / "report.html").read_text()
    assert "<html" in page.lower()


def test_run_unknown_policy_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert tangle("run", "--policy", "nope", "--quiet", "--out", str(tmp_path)) == 2
    one_line_error(capsys, "unknown policy 'nope'")


def test_run_bad_dataset_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = tangle("run", *COMMON, "--dataset", str(tmp_path / "x.jsonl"), "--out", str(tmp_path))
    assert code == 2
    one_line_error(capsys, "x.jsonl", "does not exist")


def test_run_malformed_dataset_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text('{"id": 1}\n', encoding="utf-8")
    assert tangle("run", *COMMON, "--dataset", str(f), "--out", str(tmp_path / "o")) == 2
    one_line_error(capsys, "bad.jsonl:1")


def test_run_pipeline_rejects_distractors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = tangle("run", *COMMON, "--track", "pipeline", "--distractors", "2",
                  "--out", str(tmp_path))  # fmt: skip
    assert code == 2
    one_line_error(capsys, "oracle track only")


def test_run_malformed_backend_arg_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = tangle("run", *COMMON, "--track", "pipeline", "--backend-arg", "novalue",
                  "--out", str(tmp_path))  # fmt: skip
    assert code == 2
    one_line_error(capsys, "--backend-arg must look like KEY=VALUE", "novalue")


def test_run_backend_not_installed_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from caap.adapters import register
    from caap.adapters.registry import _REGISTRY

    register("test-cli-ghost", "caap_no_such_module_xyz:Ghost", 'pip install "caap-memory[ghost]"')
    try:
        code = tangle("run", *COMMON, "--track", "pipeline", "--backend", "test-cli-ghost",
                      "--backend-arg", "x=1", "--limit", "1", "--out", str(tmp_path))  # fmt: skip
    finally:
        del _REGISTRY["test-cli-ghost"]
    assert code == 2
    one_line_error(capsys, 'pip install "caap-memory[ghost]"')


def test_no_subcommand_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert tangle() == 2
    assert "compare" in capsys.readouterr().out


# -- compare -------------------------------------------------------------------------------------


def test_compare_oracle_and_pipeline_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = load_dataset()[0]
    data = tmp_path / "one.jsonl"
    data.write_text(one.model_dump_json() + "\n", encoding="utf-8")
    a, b = tmp_path / "a", tmp_path / "b"
    assert tangle("run", *COMMON, "--dataset", str(data), "--out", str(a)) == 0
    assert tangle("run", *COMMON, "--dataset", str(data), "--track", "pipeline", "--k", "5",
                  "--no-graph", "--out", str(b)) == 0  # fmt: skip
    capsys.readouterr()
    pipe = read_report(b)
    assert pipe.graph_expansion is False and pipe.backend is not None
    obs = pipe.instances[0].observability
    assert obs is not None and obs.bank_size == 5 and obs.level == obs.level_without_graph

    assert tangle("compare", str(a), str(b / "report.json")) == 0
    table = capsys.readouterr().out
    header = table.splitlines()[0]
    assert "test-cli-echo/oracle" in header and "test-cli-echo/pipeline/builtin/no-graph" in header
    for row in ("judge", "total (all)", f"total {one.conflict_type}", "D1 mean", "D5 mean",
                "action commit", "obs FULL", "obs search-only NONE", "D6 unsafe"):  # fmt: skip
        assert any(line.startswith(row) for line in table.splitlines()), row
    judge_row = next(line for line in table.splitlines() if line.startswith("judge"))
    assert judge_row.count("test-cli-judge") == 2


def test_compare_missing_run_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert tangle("compare", str(tmp_path)) == 2
    one_line_error(capsys, "no report.json")


# -- noise ablation ------------------------------------------------------------------------------


def test_ablation_command_writes_every_level_and_a_paired_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = tangle("ablation", *COMMON, "--levels", "0,2,6", "--limit", "4", "--out", str(tmp_path))
    assert code == 0
    out = capsys.readouterr().out
    assert "paired instances=4" in out
    reports = {n: read_report(tmp_path / f"distractors-{n}") for n in (0, 2, 6)}
    ids = [r.id for r in reports[0].instances]
    for n, rep in reports.items():
        assert rep.distractors == n and [r.id for r in rep.instances] == ids
        assert all(r.scores.d1 == min(n, 4) for r in rep.instances)
        assert (tmp_path / f"distractors-{n}" / "report.html").exists()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["instance_ids"] == ids
    assert [r["delta_vs_base"] for r in summary["rows"]] == [0.0, 2.0, 4.0]
    assert (tmp_path / "summary.txt").read_text().startswith("policy=test-cli-echo")


def test_ablation_rejects_levels_beyond_the_distractors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = tangle("ablation", *COMMON, "--levels", "0,7", "--out", str(tmp_path))
    assert code == 2
    one_line_error(capsys, "between 0 and 6", "[7]")


def test_ablation_is_paired_by_instance_and_seed() -> None:
    reports = run_noise_ablation(
        (0, 4), policy="test-cli-echo", judge="test-cli-judge", limit=3, seed=9, progress=False
    )
    first = load_dataset()[:3]
    for n, rep in reports.items():
        assert rep.seed == 9 and rep.distractors == n and rep.limit == 3
        assert [r.id for r in rep.instances] == [i.id for i in first]
        for r, inst in zip(rep.instances, first, strict=True):
            shown = set(r.shown_memory_ids)
            assert {m.id for m in inst.memories if m.role != "distractor"} <= shown
            assert shown & {m.id for m in inst.by_role("distractor")} == {
                m.id for m in inst.by_role("distractor")[:n]
            }


def _result(
    iid: str, total: int, action: str = "commit", error: str | None = None
) -> InstanceResult:
    d = [total // 5] * 5
    d[0] += total - sum(d)
    return InstanceResult(
        id=iid, conflict_type="CPC", action=action, response="", error=error,
        scores=ScoreRow(d1=d[0], d2=d[1], d3=d[2], d4=d[3], d5=d[4], total=total),
    )  # fmt: skip


def test_paired_summary_drops_instances_that_failed_at_any_level() -> None:
    base = run([], policy="test-cli-echo", judge="test-cli-judge", progress=False)
    r0 = base.model_copy(
        update={
            "distractors": 0,
            "instances": [_result("a", 10), _result("b", 12), _result("c", 8)],
        }
    )
    failing = [_result("a", 7, action="clarify"), _result("b", 0, error="boom"), _result("c", 8)]
    r6 = base.model_copy(update={"distractors": 6, "instances": failing})
    s = paired_summary({6: r6, 0: r0})
    assert s.base_level == 0 and s.instance_ids == ["a", "c"]
    row0, row6 = s.rows
    assert (row0.distractors, row0.n, row0.mean_total, row0.delta_vs_base) == (0, 2, 9.0, 0.0)
    assert (row6.distractors, row6.mean_total, row6.delta_vs_base) == (6, 7.5, -1.5)
    assert row6.actions_changed == 1 and row6.errors == 1
    assert "delta" in s.table()


def test_report_round_trips(tmp_path: Path) -> None:
    rep = run(policy="test-cli-echo", judge="test-cli-judge", limit=2, progress=False,
              out=tmp_path)  # fmt: skip
    assert isinstance(rep, Report)
    assert read_report(tmp_path) == rep


# -- a user's own policy and judge from module:object ----------------------------------------------

_USER_MODULE = """
from caap.benchmark.base import Scores
from caap.models import Action, Decision, Response


class UserPolicy:
    name = "user-policy"

    def __init__(self, greeting: str = "hi") -> None:
        self.greeting = greeting

    def respond(self, memories, query):
        return Response(text=f"{self.greeting}: {memories[0].text}",
                        decision=Decision(action=Action.DEFER))


class UserJudge:
    name = "user-judge"

    def score(self, item):
        d6 = "partial" if item.instance.high_risk else None
        return Scores(d1=1, d2=1, d3=1, d4=1, d5=1, d6=d6)


judge_instance = UserJudge()
"""


def test_run_policy_and_judge_from_module_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A user's module in the folder the command runs from, neither registered nor installed.
    (tmp_path / "my_tangle_policy.py").write_text(_USER_MODULE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", ".")])
    out = tmp_path / "run"
    code = tangle("run", "--policy", "my_tangle_policy:UserPolicy", "--policy-arg",
                  'greeting="hello"', "--judge", "my_tangle_policy:judge_instance", "--limit", "2",
                  "--quiet", "--out", str(out))  # fmt: skip
    assert code == 0, capsys.readouterr().err
    rep = read_report(out)
    assert rep.policy.name == "my_tangle_policy:UserPolicy"
    assert rep.policy.args == {"greeting": "hello"}
    assert rep.judge.name == "my_tangle_policy:judge_instance"
    assert {r.action for r in rep.instances} == {"defer"}
    assert all(r.scores.d1 == 1 for r in rep.instances)


def test_run_policy_module_object_errors_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "my_other_policy.py").write_text("x = 1\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert tangle("run", "--policy", "no_such_mod_xyz:P", "--quiet", "--out", "o") == 2
    one_line_error(capsys, "no_such_mod_xyz")
    assert tangle("run", "--policy", "my_other_policy:Missing", "--quiet", "--out", "o") == 2
    one_line_error(capsys, "has no 'Missing'")
    assert tangle("run", "--policy", "my_other_policy:x", "--quiet", "--out", "o") == 2
    one_line_error(capsys, "respond")


def test_tangle_help_is_plain_text_and_lists_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["tangle", "--help"])
    out = capsys.readouterr().out
    assert "``" not in out
    for command in ("run", "compare", "validate", "ablation", "probe-stale", "list"):
        assert command in out.split("positional arguments")[0], command


def test_reliability_eval_help_is_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["reliability", "eval", "--help"])
    out = capsys.readouterr().out
    assert "``" not in out and "default: the shipped seed" in out
