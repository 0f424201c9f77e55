"""``caap serve``: one long-running process that holds the model, behind HTTP and MCP.

* An HTTP JSON API (FastAPI; the OpenAPI schema at ``/openapi.json``, docs at ``/docs``) with
  ``remember``, ``add``, ``search``, ``recall``, ``conflicts``, ``respond``, ``resolve``,
  ``forget``, ``history``, ``get_all`` / ``get``, ``update`` and ``delete``.
* An MCP server (the ``mcp`` SDK) exposing the same as tools: over streamable HTTP at ``/mcp``
  of the same process, or over stdio (``caap serve --stdio``) for a host that starts it.

Users are isolated exactly as in the library: every call names its ``user_id`` and another
user's memory id is "not found". With an API key (``api_key=`` / ``--api-key`` /
``CAAP_API_KEY``) every route but ``/health`` and the schema needs ``Authorization: Bearer KEY``
(or ``X-API-Key: KEY``). Needs the ``server`` extra: ``pip install "caap-memory[server]"``.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

try:
    import anyio
    from fastapi import Depends, FastAPI, HTTPException, Query, Request
    from fastapi.responses import JSONResponse
    from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import BaseModel, ConfigDict, Field
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        f'caap serve needs the server extra ({exc.name or exc}): pip install "caap-memory[server]"'
    ) from exc

from caap.models import Decision, Response

if TYPE_CHECKING:
    from caap.agent import Agent

__all__ = ["DEFAULT_PORT", "create_app", "create_mcp", "run_server", "run_stdio"]

#: The port ``caap serve`` listens on by default.
DEFAULT_PORT = 8765

_OPEN_PATHS = frozenset({"/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})

ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]


# -- the operations, shared by HTTP and MCP -------------------------------------------------
def _texts(agent: Agent, user_id: str, ids: list[str]) -> dict[str, str]:
    graph = agent.graph(user_id)
    return {i: graph.memory(i).text for i in ids if i in graph}


class Operations:
    """What the server does, in JSON-ready values: one method per endpoint and tool."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def remember(
        self,
        text: str,
        user_id: str,
        source: str | None = None,
        context: str | None = None,
        observed_at: str | None = None,
        aspect: str | None = None,
        value: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Store one memory (always, as ``Agent.remember``)."""
        m = self.agent.remember(
            text,
            user_id,
            source=source,
            context=context,
            observed_at=observed_at,
            aspect=aspect,
            value=value,
            metadata=metadata,
        )
        return m.model_dump(mode="json")

    def add(
        self,
        messages: str | dict[str, Any] | list[str | dict[str, Any]],
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        infer: bool = True,
        source: str | None = None,
        context: str | None = None,
        observed_at: str | None = None,
    ) -> dict[str, Any]:
        """Store a text or a chat's user statements, deduplicated (``Agent.add``)."""
        return self.agent.add(
            messages,
            user_id,
            agent_id=agent_id,
            run_id=run_id,
            metadata=metadata,
            infer=infer,
            source=source,
            context=context,
            observed_at=observed_at,
        )

    def search(
        self,
        query: str,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: dict[str, Any] | None = None,
        limit: int = 10,
        threshold: float | None = None,
    ) -> dict[str, Any]:
        """Nearest memories matching scope and filters (``Agent.search``)."""
        return self.agent.search(
            query,
            user_id,
            agent_id=agent_id,
            run_id=run_id,
            filters=filters,
            limit=limit,
            threshold=threshold,
        )

    def recall(self, query: str, user_id: str, k: int = 8) -> dict[str, Any]:
        """Hits and their whole conflict clusters (``Agent.recall``)."""
        return self.agent.recall(query, user_id, k=k).model_dump(mode="json")

    def conflicts(self, user_id: str) -> dict[str, Any]:
        """The user's conflict clusters, with the text of every member."""
        clusters = self.agent.conflicts(user_id)
        ids = [i for c in clusters for i in c.memory_ids]
        return {
            "user_id": user_id,
            "memory_count": len(self.agent.memories(user_id)),
            "clusters": [c.model_dump(mode="json") for c in clusters],
            "memories": _texts(self.agent, user_id, ids),
        }

    def respond(self, query: str, user_id: str, k: int = 8) -> dict[str, Any]:
        """Answer from the user's memories: decision, text, questions, cited memories."""
        resp = self.agent.respond(query, user_id, k=k)
        out = resp.model_dump(mode="json")
        out["cited_memories"] = _texts(self.agent, user_id, resp.cited_memory_ids)
        return out

    def resolve(
        self,
        decision: dict[str, Any],
        answer: str,
        user_id: str,
        source: str = "the user",
        observed_at: str | None = None,
        confirms: str | None = None,
    ) -> dict[str, Any]:
        """Record the user's answer to a clarification (``Agent.resolve``).

        ``decision`` is the ``decision`` object of a ``respond`` result (or the whole result).
        """
        if not isinstance(decision, dict):
            raise TypeError(f"decision must be an object, got {type(decision).__name__}")
        settled: Response | Decision = (
            Response.model_validate(decision)
            if "decision" in decision
            else Decision.model_validate(decision)
        )
        m = self.agent.resolve(
            settled, answer, user_id, source=source, observed_at=observed_at, confirms=confirms
        )
        return m.model_dump(mode="json")

    def forget(self, memory_id: str, user_id: str) -> dict[str, Any]:
        """Delete a memory; ``KeyError`` when the user has none with that id."""
        if not self.agent.forget(memory_id, user_id):
            raise KeyError(f"user {user_id!r} has no memory {memory_id!r}")
        return {"id": memory_id, "deleted": True}

    def history(self, memory_id: str, user_id: str) -> list[dict[str, Any]]:
        """Every version of a memory, oldest first."""
        out = self.agent.history(memory_id, user_id)
        if not out:
            raise KeyError(f"user {user_id!r} has no memory {memory_id!r}")
        return out

    def get_all(
        self,
        user_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        filters: dict[str, Any] | None = None,
        limit: int = 100,
    ) -> dict[str, Any]:
        """Every current memory of the user matching scope and filters."""
        return self.agent.get_all(
            user_id, agent_id=agent_id, run_id=run_id, filters=filters, limit=limit
        )

    def get(self, memory_id: str, user_id: str) -> dict[str, Any]:
        """One memory's record."""
        out = self.agent.get(memory_id, user_id)
        if out is None:
            raise KeyError(f"user {user_id!r} has no memory {memory_id!r}")
        return out

    def update(
        self, memory_id: str, text: str, user_id: str, metadata: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """A new version of a memory that takes its place (never an overwrite)."""
        return self.agent.update(memory_id, text, user_id, metadata=metadata)


#: Errors a caller can fix (an unknown memory, a bad argument): answered over HTTP with 404 or
#: 422 and over MCP as a tool error, both with the library's message. Anything else is a crash.
_CALLER_ERRORS = (KeyError, ValueError, TypeError)


def _caller_error_of(exc: Exception) -> tuple[int, str]:
    """The HTTP status and the message of one of :data:`_CALLER_ERRORS`."""
    if isinstance(exc, KeyError):
        return 404, str(exc.args[0]) if exc.args else "not found"
    return 422, str(exc)


# -- HTTP -----------------------------------------------------------------------------------
class _Body(BaseModel):
    """A request body: a field the endpoint does not know is an error (422 naming it), not
    silently dropped, as the library's unknown keyword arguments are."""

    model_config = ConfigDict(extra="forbid")


class RememberIn(_Body):
    """One memory to store."""

    text: str
    user_id: str
    source: str | None = None
    context: str | None = None
    observed_at: str | None = Field(default=None, description="ISO date or datetime.")
    aspect: str | None = None
    value: str | None = None
    metadata: dict[str, Any] | None = None


class AddIn(_Body):
    """A text, one chat message or a list of them (Mem0's ``add``)."""

    messages: str | dict[str, Any] | list[str | dict[str, Any]]
    user_id: str
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None
    infer: bool = True
    source: str | None = None
    context: str | None = None
    observed_at: str | None = None


class SearchIn(_Body):
    """A search over one user's memories."""

    query: str
    user_id: str
    agent_id: str | None = None
    run_id: str | None = None
    filters: dict[str, Any] | None = None
    limit: int = 10
    threshold: float | None = None


class QueryIn(_Body):
    """A query about one user's memories."""

    query: str
    user_id: str
    k: int = 8


class ResolveIn(_Body):
    """The user's answer to a clarification or verification."""

    decision: dict[str, Any] = Field(description="The `decision` of a respond result.")
    answer: str
    user_id: str
    source: str = "the user"
    observed_at: str | None = None
    confirms: str | None = None


class UpdateIn(_Body):
    """The new text of a memory."""

    text: str
    user_id: str
    metadata: dict[str, Any] | None = None


class ListIn(_Body):
    """Scope and metadata filters for a listing."""

    user_id: str
    agent_id: str | None = None
    run_id: str | None = None
    filters: dict[str, Any] | None = None
    limit: int = 100


class MemoryRefIn(_Body):
    """A memory of a user."""

    memory_id: str
    user_id: str


def _auth_dependency(api_key: str | None) -> Callable[..., None]:
    bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer <API key>")
    header = APIKeyHeader(name="X-API-Key", auto_error=False)

    def check(
        credentials: HTTPAuthorizationCredentials | None = Depends(bearer),  # noqa: B008
        key: str | None = Depends(header),
    ) -> None:
        if api_key is None:
            return
        given = credentials.credentials if credentials is not None else key
        if given is None or not secrets.compare_digest(given.encode(), api_key.encode()):
            raise HTTPException(
                status_code=401,
                detail="missing or wrong API key (Authorization: Bearer KEY or X-API-Key: KEY)",
                headers={"WWW-Authenticate": "Bearer"},
            )

    return check


class _KeyGuard:
    """ASGI wrapper: the API key for the MCP endpoint (FastAPI's dependencies cover the rest)."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self.api_key = api_key.encode()

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        if scope["type"] == "http" and scope.get("path") not in _OPEN_PATHS:
            headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
            given = headers.get("x-api-key")
            auth = headers.get("authorization", b"")
            if auth[:7].lower() == b"bearer ":
                given = auth[7:].strip()
            if given is None or not secrets.compare_digest(given, self.api_key):
                response = JSONResponse(
                    {"detail": "missing or wrong API key"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(
    agent: Agent,
    *,
    api_key: str | None = None,
    mcp: bool = True,
    close_agent: bool = False,
) -> FastAPI:
    """The HTTP API (and, with ``mcp=True``, the MCP endpoint at ``/mcp``) over ``agent``.

    Args:
        agent: The agent every request uses (thread-safe; the model stays loaded).
        api_key: When given, every route but ``/health`` and the schema needs it.
        mcp: Also serve MCP (streamable HTTP) at ``/mcp``.
        close_agent: Close the agent when the app shuts down.
    """
    ops = Operations(agent)
    server = create_mcp(agent) if mcp else None

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            if server is not None:
                async with server.session_manager.run():
                    yield
            else:
                yield
        finally:
            if close_agent:
                agent.close()

    from caap import __version__

    app = FastAPI(
        title="CAAP",
        version=__version__,
        description="Conflict-aware memory for LLM agents. Every call names its `user_id`.",
        lifespan=lifespan,
    )
    auth = [Depends(_auth_dependency(api_key))]

    async def _caller_error(_: Request, exc: Exception) -> JSONResponse:
        status, detail = _caller_error_of(exc)
        return JSONResponse({"detail": detail}, status)

    for error in _CALLER_ERRORS:
        app.add_exception_handler(error, _caller_error)

    @app.get("/health", tags=["server"])
    def health() -> dict[str, Any]:
        """Liveness, version, whether an API key is required."""
        return {"status": "ok", "version": __version__, "auth": api_key is not None}

    @app.post("/v1/remember", tags=["memory"], dependencies=auth)
    def remember(body: RememberIn) -> dict[str, Any]:
        """Store one memory and link it into the user's conflict graph."""
        return ops.remember(**body.model_dump())

    @app.post("/v1/add", tags=["mem0"], dependencies=auth)
    def add(body: AddIn) -> dict[str, Any]:
        """Store a text or a chat's user statements; repeated statements are reported."""
        return ops.add(**body.model_dump())

    @app.post("/v1/search", tags=["mem0"], dependencies=auth)
    def search(body: SearchIn) -> dict[str, Any]:
        """Nearest memories matching scope and metadata filters."""
        return ops.search(**body.model_dump())

    @app.post("/v1/recall", tags=["memory"], dependencies=auth)
    def recall(body: QueryIn) -> dict[str, Any]:
        """Hits first, then the rest of every conflict cluster they touch."""
        return ops.recall(**body.model_dump())

    @app.get("/v1/conflicts", tags=["memory"], dependencies=auth)
    def conflicts(user_id: str = Query()) -> dict[str, Any]:
        """Every conflict cluster of the user, with the members' texts."""
        return ops.conflicts(user_id)

    @app.post("/v1/respond", tags=["memory"], dependencies=auth)
    def respond(body: QueryIn) -> dict[str, Any]:
        """Answer a query: recall whole clusters, decide an action, realize it."""
        return ops.respond(**body.model_dump())

    @app.post("/v1/resolve", tags=["memory"], dependencies=auth)
    def resolve(body: ResolveIn) -> dict[str, Any]:
        """Record the user's answer to a clarification as a memory that settles the cluster."""
        return ops.resolve(**body.model_dump())

    @app.post("/v1/forget", tags=["memory"], dependencies=auth)
    def forget(body: MemoryRefIn) -> dict[str, Any]:
        """Delete a memory (404 when the user has no such memory)."""
        return ops.forget(**body.model_dump())

    @app.get("/v1/history", tags=["mem0"], dependencies=auth)
    def history(memory_id: str = Query(), user_id: str = Query()) -> list[dict[str, Any]]:
        """Every version of a memory, oldest first."""
        return ops.history(memory_id, user_id)

    @app.get("/v1/memories", tags=["mem0"], dependencies=auth)
    def get_all(
        user_id: str = Query(),
        agent_id: str | None = Query(default=None),
        run_id: str | None = Query(default=None),
        limit: int = Query(default=100),
    ) -> dict[str, Any]:
        """Every current memory of the user (filters: POST /v1/memories/list)."""
        return ops.get_all(user_id, agent_id=agent_id, run_id=run_id, limit=limit)

    @app.post("/v1/memories/list", tags=["mem0"], dependencies=auth)
    def get_all_filtered(body: ListIn) -> dict[str, Any]:
        """Every current memory of the user matching scope and metadata filters."""
        return ops.get_all(**body.model_dump())

    @app.get("/v1/memories/{memory_id}", tags=["mem0"], dependencies=auth)
    def get(memory_id: str, user_id: str = Query()) -> dict[str, Any]:
        """One memory's record."""
        return ops.get(memory_id, user_id)

    @app.put("/v1/memories/{memory_id}", tags=["mem0"], dependencies=auth)
    def update(memory_id: str, body: UpdateIn) -> dict[str, Any]:
        """Store a new version of the memory that takes its place (never an overwrite)."""
        return ops.update(memory_id, body.text, body.user_id, metadata=body.metadata)

    @app.delete("/v1/memories/{memory_id}", tags=["mem0"], dependencies=auth)
    def delete(memory_id: str, user_id: str = Query()) -> dict[str, Any]:
        """Delete a memory (404 when the user has no such memory)."""
        return ops.forget(memory_id, user_id)

    if server is not None:
        mcp_app: ASGIApp = server.streamable_http_app(streamable_http_path="/mcp")
        if api_key is not None:
            mcp_app = _KeyGuard(mcp_app, api_key)
        # Last, so the API's routes match first; /mcp falls through to the MCP app.
        app.mount("/", mcp_app)
    return app


# -- MCP ------------------------------------------------------------------------------------
_TOOLS = (
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
)


def create_mcp(agent: Agent) -> MCPServer:
    """An MCP server whose tools are the API's operations (same arguments, same JSON)."""
    ops = Operations(agent)
    server = MCPServer(
        "caap",
        instructions=(
            "Conflict-aware memory. Store what the user says with `add` (or `remember`), answer "
            "with `respond`: it returns an action (commit, conditionalize, clarify, verify, "
            "defer, reversible_trial) and, when memories conflict, the question to ask. Record "
            "the user's answer with `resolve`. Every tool takes the user's `user_id`."
        ),
        log_level="WARNING",
    )
    for name in _TOOLS:
        server.add_tool(_threaded(getattr(ops, name)), name=name)
    return server


def _threaded(fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """The operation as an async tool that runs in a worker thread (the loop stays free).

    The errors the HTTP API answers with 404 or 422 (an unknown memory, a bad argument) reach
    the client as a tool error with the same message, which a host model can act on; anything
    else stays a crash (logged with its traceback, withheld from the client).
    """
    import functools

    @functools.wraps(fn)
    async def tool(*args: Any, **kwargs: Any) -> Any:
        try:
            return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
        except _CALLER_ERRORS as exc:
            raise ToolError(_caller_error_of(exc)[1]) from exc

    return tool


# -- running --------------------------------------------------------------------------------
def run_server(
    agent: Agent,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    api_key: str | None = None,
    mcp: bool = True,
    log_level: str = "warning",
    sock: socket.socket | None = None,
) -> None:
    """Serve the HTTP API (and MCP at ``/mcp``) until interrupted; closes the agent after.

    ``sock``: an already listening socket to serve on instead of ``host:port``.
    """
    import uvicorn

    app = create_app(agent, api_key=api_key, mcp=mcp, close_agent=True)
    if sock is None:
        uvicorn.run(app, host=host, port=port, log_level=log_level)
        return
    uvicorn.Server(uvicorn.Config(app, log_level=log_level)).run(sockets=[sock])


def run_stdio(agent: Agent) -> None:
    """Serve the MCP tools over stdin/stdout (for a host that starts ``caap serve --stdio``)."""
    try:
        create_mcp(agent).run("stdio")
    finally:
        agent.close()
