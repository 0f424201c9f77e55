"""`caap serve` end to end on 127.0.0.1: the HTTP API, the MCP tools (streamable HTTP and an
in-process session), API-key auth, per-user isolation, concurrent clients, and the CLI talking
to a running server."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason='needs the server extra: pip install "caap-memory[server]"')
pytest.importorskip("mcp", reason='needs the server extra: pip install "caap-memory[server]"')

import uvicorn

from caap import Agent
from caap.client import Client, ServerError
from caap.server import create_app, create_mcp

ROOT = Path(__file__).resolve().parents[1]
KEY = "test-key-123"
ETHAN = [
    "I skip alcohol when I have an early shift the next morning.",
    "I have a couple of beers when the next day is free.",
]
QUERY = "Should I have a few drinks tonight?"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[tuple[str, Agent]]:
    """A real uvicorn server on a random free port of 127.0.0.1, in a thread of this process."""
    agent = Agent(tmp_path_factory.mktemp("served"), embedder=embedder)
    config = uvicorn.Config(
        create_app(agent, api_key=KEY, close_agent=True),
        host="127.0.0.1",
        port=0,
        log_level="warning",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", agent
    server.should_exit = True
    thread.join(30)


def test_openapi_schema_lists_every_endpoint(served: tuple[str, Agent]) -> None:
    url, _ = served
    schema = Client(url)._call("GET", "/openapi.json")
    paths = set(schema["paths"])
    for p in (
        "/v1/remember",
        "/v1/add",
        "/v1/search",
        "/v1/recall",
        "/v1/conflicts",
        "/v1/respond",
        "/v1/resolve",
        "/v1/forget",
        "/v1/history",
        "/v1/memories",
        "/v1/memories/{memory_id}",
    ):
        assert p in paths, p
    assert "HTTPBearer" in schema["components"]["securitySchemes"]


def test_api_key_is_required(served: tuple[str, Agent]) -> None:
    url, _ = served
    assert Client(url, api_key="").health()["auth"] is True  # /health stays open
    for key in ("", "wrong"):
        with pytest.raises(ServerError) as err:
            Client(url, api_key=key).conflicts("ethan")
        assert err.value.status == 401
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url + "/mcp", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as http:
        urllib.request.urlopen(req, timeout=30)
    assert http.value.code == 401


def test_http_round_trip_with_isolation(served: tuple[str, Agent]) -> None:
    url, _ = served
    c = Client(url, api_key=KEY)
    added = c.add([{"role": "user", "content": t} for t in ETHAN], "http-ethan")["results"]
    assert [r["event"] for r in added] == ["ADD", "ADD"]
    assert c.add(ETHAN[0], "http-ethan")["results"][0]["event"] == "NONE"
    resp = c.respond(QUERY, "http-ethan")
    assert resp["decision"]["action"] == "conditionalize"
    assert set(resp["cited_memories"].values()) == set(ETHAN)
    clusters = c.conflicts("http-ethan")["clusters"]
    assert [cl["conflict_type"] for cl in clusters] == ["CPC"]
    settled = c.resolve(resp["decision"], "I have an early shift tomorrow.", "http-ethan")
    assert settled["metadata"]["caap_resolves"]
    assert c.respond(QUERY, "http-ethan")["decision"]["action"] == "commit"
    recall = c.recall("beer", "http-ethan", k=1)
    assert len(recall["memories"]) >= 2  # the hit and the rest of its cluster
    # Another user sees nothing of this one, and cannot touch its memories.
    mid = added[0]["id"]
    assert c.search("beer", "http-other")["results"] == []
    for call in (
        lambda: c.forget(mid, "http-other"),
        lambda: c.get(mid, "http-other"),
        lambda: c.history(mid, "http-other"),
        lambda: c.update(mid, "changed", "http-other"),
        lambda: c.delete(mid, "http-other"),
    ):
        with pytest.raises(ServerError) as err:
            call()
        assert err.value.status == 404
    new = c.update(mid, "I skip alcohol before any work day.", "http-ethan")
    assert [h["memory"] for h in c.history(mid, "http-ethan")] == [ETHAN[0], new["memory"]]
    assert c.get(new["id"], "http-ethan")["memory"] == new["memory"]
    listed = c.get_all("http-ethan", filters={"role": "*"})["results"]
    assert listed == []  # no stored turn has a role (infer=True keeps the user's statements)
    assert len(c.get_all("http-ethan")["results"]) == 3
    assert c.forget(new["id"], "http-ethan")["deleted"] is True
    with pytest.raises(ServerError) as bad:
        c.search("x", "http-ethan", limit=0)
    assert bad.value.status == 422 and "limit" in bad.value.detail
    # A field the endpoint does not know is refused, naming it, and nothing is stored.
    import json
    import urllib.error
    import urllib.request

    body = {"text": "I like tea.", "user_id": "http-extra", "mood": "happy"}
    req = urllib.request.Request(
        url + "/v1/remember",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as extra:
        urllib.request.urlopen(req, timeout=30)
    assert extra.value.code == 422 and "mood" in extra.value.read().decode()
    assert c.get_all("http-extra")["results"] == []


def test_concurrent_clients_stay_isolated(served: tuple[str, Agent]) -> None:
    url, _ = served
    errors: list[BaseException] = []

    def client(n: int) -> None:
        try:
            c = Client(url, api_key=KEY)
            user = f"conc-{n}"
            for i in range(3):
                c.remember(f"User {n} likes colour number {i}.", user)
            c.add(f"User {n} drinks tea.", user)
            hits = c.search("what do they like", user, limit=10)["results"]
            assert len(hits) == 4
            assert all(h["user_id"] == user and f"User {n} " in h["memory"] for h in hits)
            c.respond("What colour do I like?", user)
        except BaseException as exc:  # reported below, from the main thread
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors


def test_mcp_tools_over_streamable_http(served: tuple[str, Agent]) -> None:
    url, _ = served
    httpx2 = pytest.importorskip("httpx2")
    from mcp import Client as McpClient
    from mcp.client.streamable_http import streamable_http_client

    async def session() -> None:
        headers = {"Authorization": f"Bearer {KEY}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            McpClient(streamable_http_client(url + "/mcp", http_client=http)) as mcp,
        ):
            names = {t.name for t in (await mcp.list_tools()).tools}
            assert names >= {
                "remember",
                "add",
                "search",
                "recall",
                "conflicts",
                "respond",
                "resolve",
                "forget",
                "history",
                "get_all",
                "update",
            }
            added = await mcp.call_tool("add", {"messages": ETHAN, "user_id": "mcp-ethan"})
            assert not added.is_error, added
            result = await mcp.call_tool("respond", {"query": QUERY, "user_id": "mcp-ethan"})
            assert not result.is_error
            out = result.structured_content
            assert out is not None and out["decision"]["action"] == "conditionalize"
            settled = await mcp.call_tool(
                "resolve",
                {
                    "decision": out["decision"],
                    "answer": "The next day is free.",
                    "user_id": "mcp-ethan",
                },
            )
            assert not settled.is_error
            again = await mcp.call_tool("respond", {"query": QUERY, "user_id": "mcp-ethan"})
            assert again.structured_content["decision"]["action"] == "commit"  # type: ignore[index]
            missing = await mcp.call_tool("forget", {"memory_id": "nope", "user_id": "mcp-ethan"})
            assert missing.is_error
            # The reason reaches the client, as the HTTP API's 404 / 422 detail does.
            assert "no memory 'nope'" in str(missing.content)
            empty = await mcp.call_tool("remember", {"text": " ", "user_id": "mcp-ethan"})
            assert empty.is_error and "text must be a non-empty string" in str(empty.content)

    asyncio.run(session())


def test_mcp_in_process_session(tmp_path: Path, embedder: Any) -> None:
    from mcp import Client as McpClient

    async def session(agent: Agent) -> None:
        async with McpClient(create_mcp(agent)) as mcp:
            await mcp.call_tool("remember", {"text": "I take my coffee black.", "user_id": "u"})
            res = await mcp.call_tool("search", {"query": "coffee", "user_id": "u"})
            assert res.structured_content["results"][0]["memory"] == "I take my coffee black."  # type: ignore[index]

    with Agent(tmp_path / "d", embedder=embedder) as agent:
        asyncio.run(session(agent))


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "caap.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )


def test_cli_talks_to_the_running_server(served: tuple[str, Agent], tmp_path: Path) -> None:
    url, agent = served
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CAAP_SERVER": url,
        "CAAP_API_KEY": KEY,
        # A data folder the commands must not touch: they go to the server.
        "CAAP_DATA": str(tmp_path / "unused"),
    }
    for text in ETHAN:
        r = _cli("remember", text, "--user", "cli-ethan", env=env)
        assert r.returncode == 0, r.stderr
    dup = _cli("remember", ETHAN[0], "--user", "cli-ethan", env=env)
    assert dup.returncode == 0 and "already stored" in dup.stderr
    assert len(agent.memories("cli-ethan")) == 2
    ask = _cli("ask", QUERY, "--user", "cli-ethan", env=env)
    assert ask.returncode == 0 and "action:     conditionalize" in ask.stdout
    assert ETHAN[1] in ask.stdout  # cited with its text
    conflicts = _cli("conflicts", "--user", "cli-ethan", env=env)
    assert conflicts.returncode == 0 and "CPC" in conflicts.stdout
    typo = _cli("conflicts", "--user", "cli-ethn", env=env)
    assert typo.returncode == 1 and "no memories for user 'cli-ethn'" in typo.stderr
    res = _cli(
        "resolve",
        "I have an early shift tomorrow.",
        "--user",
        "cli-ethan",
        "--query",
        QUERY,
        env=env,
    )
    assert res.returncode == 0, res.stderr
    assert "action:     commit" in _cli("ask", QUERY, "--user", "cli-ethan", env=env).stdout
    mid = agent.memories("cli-ethan")[0].id
    assert _cli("forget", mid, "--user", "cli-other", env=env).returncode == 1
    assert _cli("forget", mid, "--user", "cli-ethan", env=env).returncode == 0
    assert not (tmp_path / "unused").exists()
    wrong = _cli("ask", QUERY, "--user", "cli-ethan", env={**env, "CAAP_API_KEY": "bad"})
    assert wrong.returncode == 2 and "401" in wrong.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_caap_serve_command(tmp_path: Path) -> None:
    """The `caap serve` process itself: starts, answers, stops on SIGTERM."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "caap.cli",
            "serve",
            "--data",
            str(tmp_path / "d"),
            "--port",
            str(port),
            "--api-key",
            KEY,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        c = Client(f"http://127.0.0.1:{port}", api_key=KEY, timeout=30)
        deadline = time.monotonic() + 300
        while True:
            try:
                c.health()
                break
            except ServerError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "caap serve did not start"
                time.sleep(0.5)
        c.add(ETHAN, "ethan")
        assert c.respond(QUERY, "ethan")["decision"]["action"] == "conditionalize"
    finally:
        proc.terminate()
        proc.wait(60)
    assert proc.returncode == 0 or proc.returncode == -15


@pytest.mark.slow
def test_mcp_over_stdio(tmp_path: Path) -> None:
    """`caap serve --stdio`, started by an MCP client as a host would."""
    from mcp import Client as McpClient
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "caap.cli", "serve", "--stdio", "--data", str(tmp_path / "d")],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )

    async def session() -> None:
        async with McpClient(params, read_timeout_seconds=300) as mcp:
            added = await mcp.call_tool("add", {"messages": ETHAN, "user_id": "ethan"})
            assert not added.is_error, added
            result = await mcp.call_tool("respond", {"query": QUERY, "user_id": "ethan"})
            assert result.structured_content["decision"]["action"] == "conditionalize"  # type: ignore[index]

    asyncio.run(session())
