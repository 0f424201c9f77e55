"""Talk to ``caap serve`` over HTTP (``caap.client.Client``) and MCP (the ``mcp`` SDK).

With ``CAAP_SERVER`` set (and ``CAAP_API_KEY`` when the server needs one) it uses that server;
otherwise it starts one itself on a free port of 127.0.0.1, with a throwaway data folder.
Needs the server extra (``pip install "caap-memory[server]"``):

    python examples/server_client.py
    caap serve --api-key s3cret &  CAAP_SERVER=http://127.0.0.1:8765 CAAP_API_KEY=s3cret \\
        python examples/server_client.py
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from caap.client import Client

QUERY = "Should I have a few drinks tonight?"


@contextmanager
def server() -> Iterator[str]:
    """The configured server, or one started here (the model loads once, in this process)."""
    configured = os.environ.get("CAAP_SERVER")
    if configured:
        yield configured
        return
    import uvicorn

    from caap import Agent
    from caap.server import create_app

    agent = Agent(tempfile.mkdtemp(prefix="caap-server-example-"))
    app = create_app(agent, close_agent=True)
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    while not srv.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{srv.servers[0].sockets[0].getsockname()[1]}"
    srv.should_exit = True
    thread.join(30)


async def over_mcp(url: str, api_key: str | None) -> None:
    import httpx2
    from mcp import Client as McpClient
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        McpClient(streamable_http_client(url + "/mcp", http_client=http)) as mcp,
    ):
        tools = sorted(t.name for t in (await mcp.list_tools()).tools)
        print("MCP tools:", ", ".join(tools))
        result = await mcp.call_tool("conflicts", {"user_id": "ethan"})
        clusters = (result.structured_content or {}).get("clusters", [])
        print("MCP conflicts:", [(c["aspect"], c["conflict_type"]) for c in clusters])


def main() -> None:
    with server() as url:
        memory = Client(url)
        print("server:", url, memory.health())
        memory.add(
            [
                {"role": "user", "content": "I skip alcohol when I have an early shift."},
                {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": "I have a couple of beers when the next day is free."},
            ],
            user_id="ethan",
        )
        resp = memory.respond(QUERY, user_id="ethan")
        print("respond:", resp["decision"]["action"], resp["questions"])
        memory.resolve(resp["decision"], "I have an early shift tomorrow.", user_id="ethan")
        after = memory.respond(QUERY, user_id="ethan")
        print("after the answer:", after["decision"]["action"], "-", after["text"].splitlines()[0])
        asyncio.run(over_mcp(url, memory.api_key))


if __name__ == "__main__":
    main()
