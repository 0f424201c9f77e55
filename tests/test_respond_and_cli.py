"""Agent.respond / resolve and the ``caap`` command line, end to end offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from caap import Action, Agent
from caap.cli import main
from tests.scenarios import DRINKING, MEDICATION, UNRELATED


def test_respond_then_resolve_settles_the_cluster(tmp_path: Path, embedder: Any) -> None:
    agent = Agent(tmp_path / "d", embedder=embedder)
    agent.remember_many(DRINKING + UNRELATED, "ethan")
    first = agent.respond("Should I have a few drinks tonight?", "ethan")
    assert first.decision.action is Action.CONDITIONALIZE
    answer = agent.resolve(first, "Tomorrow I have an early shift at the lab.", "ethan")
    assert answer.source == "the user"
    assert (
        answer.metadata["caap_resolves"]
        == agent.graph("ethan").memory(first.cited_memory_ids[0]).aspect
    )
    second = agent.respond("Should I have a few drinks tonight?", "ethan")
    assert second.decision.action is Action.COMMIT
    assert answer.id in second.cited_memory_ids
    assert "early shift" in second.text
    # Read back to the user in the second person: the first-person answer does not make the
    # third-person notes about Ethan read as someone else's.
    assert "you told me: tomorrow you have an early shift" in second.text.lower()
    assert "Ethan" not in second.text


def test_a_query_that_names_its_situation_is_not_settled_by_an_earlier_answer(
    tmp_path: Path, embedder: Any
) -> None:
    agent = Agent(tmp_path / "d", embedder=embedder)
    agent.remember_many(DRINKING + UNRELATED, "ethan")
    first = agent.respond("Should I have a few drinks tonight?", "ethan")
    answer = agent.resolve(first, "Tomorrow I have an early shift at the lab.", "ethan")
    # That answer settled tonight; a night the user describes otherwise is another occasion.
    other = agent.respond(
        "It's Friday night and I have nothing scheduled the next day. A couple of beers?", "ethan"
    )
    assert other.decision.action is Action.COMMIT
    assert answer.id not in other.cited_memory_ids
    assert "couple of beers" in other.text and "settled" not in other.text


def test_resolve_rejects_a_decision_about_someone_else(tmp_path: Path, embedder: Any) -> None:
    agent = Agent(tmp_path / "d", embedder=embedder)
    agent.remember_many(MEDICATION, "maya")
    r = agent.respond("Can Maya take ibuprofen?", "maya")
    with pytest.raises(ValueError, match="cites no memory"):
        agent.resolve(r, "The clinic confirmed the record is current.", "ethan")


def test_resolve_refuses_a_commit_and_files_the_answer_to_nothing_on_record_on_its_own(
    tmp_path: Path, embedder: Any
) -> None:
    agent = Agent(tmp_path / "d", embedder=embedder)
    agent.remember("I like tea", "bob")
    agent.remember("I take the 8:15 train to work on weekdays.", "bob")
    committed = agent.respond("Which train do I take?", "bob")
    assert committed.decision.action is Action.COMMIT
    with pytest.raises(ValueError, match="nothing was left unresolved"):
        agent.resolve(committed, "yes", "bob")
    # Nothing on record about the car: the answer is new information, settling nothing (it
    # was filed as settling the tea memory's aspect, and later answers called it settled).
    asked = agent.respond("What colour is my car?", "bob")
    assert asked.decision.action is Action.CLARIFY
    answer = agent.resolve(asked, "My car is dark green.", "bob")
    assert "caap_resolves" not in answer.metadata
    later = agent.respond("What do I drink?", "bob")
    assert "settled" not in later.text


@pytest.mark.parametrize("relations", ["rules", "learned"])
def test_a_stored_question_is_not_an_answer(tmp_path: Path, embedder: Any, relations: str) -> None:
    # Under ``learned`` the layer's reading of the situation reads what memories state too:
    # a stored question is not one side of a source conflict.
    agent = Agent(tmp_path / "d", embedder=embedder, relations=relations)
    agent.add(
        [
            {"role": "user", "content": "Is it true that I'm allergic to peanuts?"},
            {"role": "assistant", "content": "I don't know."},
            {"role": "user", "content": "I take the 8:15 train to work on weekdays."},
        ],
        user_id="lena",
    )
    r = agent.respond("Am I allergic to peanuts?", "lena")
    assert r.decision.action is Action.CLARIFY
    assert "allergic" not in r.text.split("\n")[0]


def test_demo_shows_each_kind_of_action(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "demo"
    assert main(["demo", "--data", str(data)]) == 0
    captured = capsys.readouterr()
    out = captured.out
    # A progress line while the model loads, on stderr (stdout is the demo's output).
    assert "Loading the embedding model" in captured.err
    # Nothing a library prints while loading comes before the demo's own first line.
    assert out.splitlines()[0].startswith("CAAP demo:"), out[:300]
    # The labels are explained, the folder is kept, and the next commands are given.
    for term in ("CPC", "BOC", "SCC", "aspect ids"):
        assert any(line.lstrip().startswith(term) for line in out.splitlines()), term
    assert data.is_dir() and any(data.iterdir())
    assert f"kept in {data}" in out
    assert "caap ask " in out and f"--data {data}" in out and "caap conflicts" in out
    actions = [line.split()[1] for line in out.splitlines() if line.startswith("action:")]
    assert len(actions) == 4
    assert actions[0] == "commit"
    assert actions[1] in {"conditionalize", "clarify"}
    assert actions[2] in {"reversible_trial", "conditionalize", "clarify"}
    assert actions[3] in {"verify", "defer"}
    assert "cites:" in out
    # The next steps it prints work as printed: answering the beer question's clarification
    # with `caap resolve` makes the same question commit to the branch that answer picks.
    import shlex

    steps = [shlex.split(line.split("#")[0]) for line in out.splitlines() if "caap " in line]
    ask = next(s for s in steps if s[:2] == ["caap", "ask"])
    resolve = next(s for s in steps if s[:2] == ["caap", "resolve"])
    assert main(resolve[1:]) == 0
    capsys.readouterr()
    assert main(ask[1:]) == 0
    after = capsys.readouterr().out
    assert "action:     commit" in after and "skip alcohol" in after


def test_remember_ask_and_conflicts_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = str(tmp_path / "cli")
    for text in MEDICATION:
        assert main(["remember", text, "--data", data, "--user", "maya"]) == 0
    assert main(["conflicts", "--data", data, "--user", "maya"]) == 0
    assert main(["ask", "Can Maya take ibuprofen tonight?", "--data", data, "--user", "maya"]) == 0
    out = capsys.readouterr().out
    assert "SCC" in out and "action:     verify" in out


def test_cli_reports_bad_input_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["remember", "hello", "--data", str(f), "--user", "u"]) == 2
    assert "path" in capsys.readouterr().err
