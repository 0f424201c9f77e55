"""Seeded, bounded fuzzing of the public API, the CLI and model replies (issue 14).

Nothing may escape ``remember``, ``recall``, ``respond``, ``conflicts`` or ``forget`` but the
documented input errors (``TypeError``, ``ValueError``); nothing may escape ``respond`` for any
model reply. Examples are derandomised and few, so the suite runs in CI in bounded time.
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caap import Agent
from caap.cli import main
from caap.llm import OpenAIChatModel
from caap.llm.testing import ChatCompletionsServer, Reply
from caap.models import Memory
from caap.policy import CaapPolicy
from tests.scenarios import MEDICATION

FUZZ = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
DOCUMENTED = (TypeError, ValueError)

json_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
anything = st.recursive(
    json_leaf | st.binary(max_size=8) | st.sets(st.integers(), max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=3)
        | st.tuples(inner)
    ),
    max_leaves=8,
)
json_values = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
texts = st.text(max_size=200) | st.sampled_from(["", " ", "\x00", "\ud800x", "é" * 17000])


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from caap._embeddings import get_embedder

    a = Agent(tmp_path_factory.mktemp("fuzz") / "d", embedder=get_embedder())
    a.remember_many(MEDICATION, "fuzz")
    yield a
    a.close()


@FUZZ
@given(text=texts | anything, metadata=anything, provenance=anything, source=texts | anything)
def test_remember_rejects_or_round_trips(
    agent: Agent, text: Any, metadata: Any, provenance: Any, source: Any
) -> None:
    try:
        m = agent.remember(text, "fuzz-w", metadata=metadata, provenance=provenance, source=source)
    except DOCUMENTED:
        return
    # Whatever was accepted comes back unchanged from the store.
    back = agent.store.get("fuzz-w", m.id)
    assert back is not None and back.memory.text == text
    assert back.memory.metadata == metadata or (metadata is None and back.memory.metadata == {})
    assert json.dumps(back.memory.metadata)  # JSON-safe
    assert not any(isinstance(v, float) and not math.isfinite(v) for v in m.metadata.values())


@FUZZ
@given(query=texts | anything, k=st.integers(-2, 50) | anything)
def test_recall_and_respond_raise_only_documented_errors(agent: Agent, query: Any, k: Any) -> None:
    for call in (agent.recall, agent.respond):
        with contextlib.suppress(*DOCUMENTED):
            call(query, "fuzz", k=k)


@FUZZ
@given(memory_id=texts | anything, user=texts | anything)
def test_forget_and_conflicts_raise_only_documented_errors(
    agent: Agent, memory_id: Any, user: Any
) -> None:
    with contextlib.suppress(*DOCUMENTED):
        assert agent.forget(memory_id, user) in (True, False)
    with contextlib.suppress(*DOCUMENTED):
        agent.conflicts(user)


@settings(FUZZ, max_examples=10)
@given(args=st.lists(st.text(max_size=12) | st.sampled_from(["--user", "--k", "-1"]), max_size=5))
def test_cli_never_shows_a_traceback(tmp_path: Path, args: list[str], capsys: Any) -> None:
    for command in ("ask", "conflicts", "remember", "doctor"):
        argv = [command, *args, "--data", str(tmp_path / "cli")]
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 2
        assert code in (0, 1, 2)
    assert "Traceback" not in capsys.readouterr().err


replies = (
    st.text(max_size=300)
    | st.builds(lambda d: "[" * d, st.integers(50, 3000))
    | st.builds(json.dumps, json_values)
    | st.builds(
        lambda a, r: json.dumps({"action": a, "conflict_type": "SCC", "risk": r, "rationale": ""}),
        st.text(max_size=10) | st.sampled_from(["commit", "verify", "defer"]),
        st.text(max_size=6) | st.sampled_from(["low", "high"]),
    )
)
bodies = st.text(max_size=200) | st.builds(lambda d: '{"choices": ' + "[" * d, st.integers(1, 5000))


@settings(FUZZ, max_examples=8)
@given(decide=replies, realize=replies, body=bodies, status=st.sampled_from([200, 400, 500]))
def test_no_model_reply_escapes_respond(
    embedder: Any, decide: str, realize: str, body: str, status: int
) -> None:
    mems = [Memory(id=f"m{i}", text=t, user_id="maya") for i, t in enumerate(MEDICATION)]
    query = "Can I give Maya ibuprofen tonight?"
    script = [Reply(content=decide), Reply(raw_body=body, status=status), Reply(content=realize)]
    with ChatCompletionsServer(script) as server:
        model = OpenAIChatModel("fuzz", base_url=server.base_url, max_retries=0, timeout=5)
        policy = CaapPolicy(model, embedder=embedder)
        for _ in range(2):
            r = policy.respond(mems, query)
            # Whatever the model said, the high-risk source conflict is never committed on.
            assert r.decision.action.value != "commit"
