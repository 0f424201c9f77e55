"""The command line says when something failed: --version, forget / resolve, non-zero exits for
an unknown user or an all-failed judged run, and a warning when the LLM is unreachable."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from caap import Agent, __version__
from caap.cli import main
from caap.llm.testing import ChatCompletionsServer, Reply

ETHAN = [
    "I skip alcohol when I have an early shift the next morning.",
    "I have a couple of beers when the next day is free.",
]
QUERY = "Should I have a few drinks tonight?"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"caap {__version__}"


def test_local_commands_report_what_was_not_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = str(tmp_path / "d")
    for text in ETHAN:
        assert main(["remember", text, "--data", data, "--user", "ethan"]) == 0
    assert main(["remember", ETHAN[0], "--data", data, "--user", "ethan"]) == 0
    assert "already stored" in capsys.readouterr().err
    assert main(["conflicts", "--data", data, "--user", "ethn"]) == 1
    assert "no memories for user 'ethn'" in capsys.readouterr().err
    assert main(["ask", QUERY, "--data", data, "--user", "ethn"]) == 1
    assert main(["ask", QUERY, "--data", data, "--user", "ethan", "--json"]) == 0
    asked = json.loads(capsys.readouterr().out)
    assert asked["decision"]["action"] == "conditionalize"
    answer = tmp_path / "asked.json"
    answer.write_text(json.dumps(asked), encoding="utf-8")
    resolve = ["resolve", "The next day is free.", "--data", data, "--user", "ethan"]
    assert main([*resolve, "--response", str(answer)]) == 0
    stored = json.loads(capsys.readouterr().out)
    assert stored["text"] == "The next day is free."
    assert main(["ask", QUERY, "--data", data, "--user", "ethan"]) == 0
    assert "action:     commit" in capsys.readouterr().out
    assert main(["forget", stored["id"], "--data", data, "--user", "someone"]) == 1
    assert main(["forget", stored["id"], "--data", data, "--user", "ethan"]) == 0
    with Agent(data) as agent:
        assert len(agent.memories("ethan")) == 2


def test_no_conflicts_is_said_not_silent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = str(tmp_path / "d")
    assert main(["remember", "I take my coffee black.", "--data", data, "--user", "ana"]) == 0
    capsys.readouterr()
    assert main(["conflicts", "--data", data, "--user", "ana"]) == 0
    assert "no conflicts among the 1 memories of user 'ana'" in capsys.readouterr().out


def test_unreachable_llm_warns(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = str(tmp_path / "d")
    for text in ETHAN:
        assert main(["remember", text, "--data", data, "--user", "ethan"]) == 0
    capsys.readouterr()
    # A port nothing listens on: the client cannot connect.
    with ChatCompletionsServer() as server:
        dead = server.base_url
    monkeypatch.setenv("CAAP_LLM_BASE_URL", dead)
    monkeypatch.setenv("CAAP_LLM_API_KEY", "test")
    with caplog.at_level(logging.WARNING, logger="caap.policy.policy"):
        code = main(["ask", QUERY, "--data", data, "--user", "ethan", "--llm", "openai:test-model"])
    assert code == 0  # answered by the offline backbone
    out, err = capsys.readouterr()
    assert "caap: warning: the LLM backbone failed" in err
    assert "fallback:" in out
    assert any("offline" in r.getMessage() for r in caplog.records)


def test_a_judged_run_where_every_instance_failed_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_: dict[str, Any]) -> Reply:
        return Reply(status=503)

    with ChatCompletionsServer(broken) as server:
        monkeypatch.setenv("CAAP_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("CAAP_LLM_API_KEY", "test")
        code = main(
            [
                "tangle",
                "run",
                "--track",
                "oracle",
                "--policy",
                "caap",
                "--judge",
                "llm:openai:judge",
                "--limit",
                "2",
                "--quiet",
                "--out",
                str(tmp_path / "out"),
            ]
        )
    err = capsys.readouterr().err
    assert code == 1
    assert "every one of the 2 instances failed" in err and "llm:openai:judge" in err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["ask", QUERY, "--user", "ethan", "--k", "0"], "expected a positive integer, got 0"),
        (["ask", QUERY, "--user", "ethan", "--k", "many"], "expected an integer, got 'many'"),
        (["bench", "--sizes", "-5"], "expected a non-negative integer, got -5"),
        (["bench", "--budget", "0"], "expected a positive integer, got 0"),
        (["serve", "--port", "-1"], "expected a non-negative integer, got -1"),
        (["relations", "train-reader", "--out", "r.npz", "--lr", "0"], "expected a positive"),
    ],
)
def test_bad_numbers_stop_at_parse_time(
    argv: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d"
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--data", str(data)] if argv[0] == "ask" else argv)
    assert exit_.value.code == 2
    assert expected in capsys.readouterr().err
    assert not data.exists()  # nothing was opened or created before the check


@pytest.mark.parametrize(
    "argv",
    [
        ["ask", QUERY, "--user", "ethan"],
        ["conflicts", "--user", "ethan"],
        ["forget", "m1", "--user", "ethan"],
        ["resolve", "It is the weekend.", "--query", QUERY, "--user", "ethan"],
    ],
)
def test_commands_on_stored_data_do_not_create_a_data_folder(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.delenv("CAAP_STORE", raising=False)
    data = tmp_path / "typo"
    assert main([*argv, "--data", str(data)]) == 1
    assert f"no CAAP data in {data}" in capsys.readouterr().err
    assert not data.exists()


def test_serve_on_a_port_in_use_fails_at_once_without_a_banner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        code = main(["serve", "--data", str(tmp_path / "d"), "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 2 and f"cannot listen on 127.0.0.1:{port}" in err
    assert "caap serve: http" not in err  # no "ready" line for a server that never ran
    assert not (tmp_path / "d").exists()  # failed before the model or the store was opened
