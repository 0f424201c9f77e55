"""The ``caap`` command line: ``demo``, ``ask``, ``remember``, ``conflicts``, ``forget``,
``resolve``, ``serve``, ``tangle ...``, ``reliability eval``, ``bench``.

``ask``, ``remember``, ``conflicts``, ``forget`` and ``resolve`` talk to a running ``caap serve``
when ``--server URL`` (or ``CAAP_SERVER``) is given: no model is loaded in the command then.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import sys
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from caap._argtypes import non_negative, positive
from caap.adapters.base import BackendError

__all__ = ["build_parser", "main"]


def _agent(data: str, llm: str | None = None, *, read: bool = False, existing: bool = False) -> Any:
    """The agent on ``data``; ``existing``: the command only reads or changes what is stored,
    so a data folder that does not exist is reported (exit 1), never created."""
    from caap import Agent

    store = os.environ.get("CAAP_STORE") or None
    if existing and store is None and not Path(data).exists():
        raise NotFound(f"no CAAP data in {data} (check --data or $CAAP_DATA)")
    # Whatever torch, transformers or a backend prints while loading is a diagnostic, not the
    # command's output: it goes to stderr, so stdout stays parseable.
    with contextlib.redirect_stdout(sys.stderr):
        # A read command on a directory this process cannot write opens it read-only.
        if read and _read_only_dir(data):
            return Agent(data, llm=llm, store=store, read_only=True)
        # CAAP_STORE: a postgresql:// DSN (or SQLite path) for the graph store; see
        # docs/deployment.md.
        return Agent(data, llm=llm, store=store)


def _read_only_dir(data: str) -> bool:
    path = Path(data)
    if not path.is_dir():
        return False
    store = path / "graph.sqlite"
    return not os.access(path, os.W_OK) or (store.exists() and not os.access(store, os.W_OK))


def _print_response(resp: Any, memories: dict[str, str], out: Any = None) -> None:
    """Print a response (a :class:`caap.Response` or its JSON form)."""
    out = out or sys.stdout
    r = resp if isinstance(resp, dict) else resp.model_dump(mode="json")
    d = r["decision"]
    print(f"action:     {d['action']}", file=out)
    print(f"conflict:   {d['conflict_type']}  (risk: {d['risk']})", file=out)
    print(f"unresolved: {d.get('unresolved') or '-'}", file=out)
    if d.get("fallback_reason"):
        print(f"fallback:   {d['fallback_reason']}", file=out)
    print("response:", file=out)
    for line in str(r["text"]).splitlines():
        print(f"  {line}", file=out)
    print("cites:", file=out)
    for i in r.get("cited_memory_ids", []):
        print(f"  [{i[:8]}] {memories.get(i, '?')}", file=out)


def _warn_fallback(resp: Any) -> None:
    """A stderr warning when the configured LLM was not used (unreachable, failed)."""
    d = resp["decision"] if isinstance(resp, dict) else resp.decision.model_dump(mode="json")
    if d.get("fallback_reason"):
        print(
            "caap: warning: the LLM backbone failed and the offline backbone answered "
            f"({d['fallback_reason']})",
            file=sys.stderr,
        )


class NotFound(Exception):
    """Nothing was found for what the user asked about: a message and exit status 1."""


def _client(args: argparse.Namespace) -> Any:
    """The server client when ``--server`` / ``CAAP_SERVER`` is set, else ``None``."""
    url = getattr(args, "server", None)
    if not url:
        return None
    from caap.client import Client

    return Client(url)


def _no_memories(user: str, where: str) -> NotFound:
    return NotFound(f"no memories for user {user!r} in {where} (check --user and --data)")


_GLOSSARY = """\
What the labels mean:
  CPC    context-dependent preference conflict: each memory holds in its own situation
         (an early shift vs a free day); the answer depends on which situation applies.
  BOC    behavioural oscillation: a habit that keeps switching back and forth over time;
         the latest phase is not a safe guess.
  SCC    source credibility conflict: sources disagree (a record, a relative, the user);
         which one governs has to be checked, and on health or safety it is never guessed.
  STALE  a later fact replaced an earlier one; the earlier one is kept as history.
  aspect ids ({example}) name the topic a conflict cluster is about, made from words
         its memories share; `caap conflicts` lists them with their memories."""


def cmd_demo(args: argparse.Namespace) -> int:
    """Store an example persona's conflicting memories and answer four everyday queries.

    The data folder is kept (a new temporary one unless ``--data`` names one), so the next
    commands it prints can look at it.
    """
    from caap._progress import spinner

    persona = json.loads(
        (resources.files("caap") / "data" / "demo_persona.json").read_text(encoding="utf-8")
    )
    data = args.data or tempfile.mkdtemp(prefix="caap-demo-")
    user = persona["user_id"]
    with spinner("Loading the embedding model and storing the example memories"):
        agent = _agent(data, args.llm)
        if not agent.memories(user):
            with contextlib.redirect_stdout(sys.stderr):
                agent.remember_many(persona["memories"], user)
    with agent:
        texts = {m.id: m.text for m in agent.memories(user)}
        print(f"CAAP demo: {persona['name']} — {persona['summary']}")
        print(f"{len(texts)} memories stored with the builtin backend in {data}")
        clusters = agent.conflicts(user)
        kept = ", ".join(f"{c.aspect} ({c.conflict_type.value})" for c in clusters)
        print(f"conflicts kept: {kept}")
        example = clusters[0].aspect if clusters else "couple_beer"
        print("\n" + _GLOSSARY.format(example=example))
        results = []
        for q in persona["queries"]:
            resp = agent.respond(q, user)
            print("\n" + "=" * 78)
            print(f"query: {q}")
            _print_response(resp, texts)
            results.append({"query": q, **resp.model_dump(mode="json")})
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    quoted = _shell_quote(data)
    print("\n" + "=" * 78)
    print(f"The demo's data is kept in {data} (delete the folder when done). Try next:")
    print(f'  caap ask "Should I have a beer tonight?" --user {user} --data {quoted}')
    print(
        f'  caap resolve "I have an early shift tomorrow." --query "Should I have a beer '
        f'tonight?" --user {user} --data {quoted}   # answer its question, then ask again'
    )
    print(f"  caap conflicts --user {user} --data {quoted}")
    print("  caap tangle run --out runs/first      # the TANGLE benchmark, oracle track")
    return 0


def _shell_quote(path: str) -> str:
    import shlex

    return shlex.quote(path)


def cmd_remember(args: argparse.Namespace) -> int:
    """Store one memory; the same statement twice is reported, not stored again."""
    facets = {"source": args.source, "context": args.context, "observed_at": args.observed_at}
    client = _client(args)
    if client is not None:
        out = client.add(args.text, args.user, **facets)
    else:
        with _agent(args.data) as agent:
            out = agent.add(args.text, args.user, **facets)
    record = out["results"][0]
    if record["event"] == "NONE":
        print(f"caap: already stored as {record['id']}; not stored again", file=sys.stderr)
    print(json.dumps(record, indent=2))
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    """Answer a query from a user's memories."""
    client = _client(args)
    if client is not None:
        resp = client.respond(args.query, args.user, k=args.k)
        texts = dict(resp.get("cited_memories") or {})
        if not resp.get("cited_memory_ids") and not client.get_all(args.user, limit=1)["results"]:
            raise _no_memories(args.user, args.server)
    else:
        with _agent(args.data, args.llm, read=True, existing=True) as agent:
            texts = {m.id: m.text for m in agent.memories(args.user)}
            if not texts:
                raise _no_memories(args.user, args.data)
            resp = agent.respond(args.query, args.user, k=args.k).model_dump(mode="json")
    _warn_fallback(resp)
    if args.json:
        print(json.dumps(resp, indent=2))
    else:
        _print_response(resp, texts)
    return 0


def cmd_conflicts(args: argparse.Namespace) -> int:
    """List a user's conflict clusters."""
    client = _client(args)
    if client is not None:
        out = client.conflicts(args.user)
        where = args.server
    else:
        with _agent(args.data, read=True, existing=True) as agent:
            memories = agent.memories(args.user)
            clusters = agent.conflicts(args.user)
            out = {
                "memory_count": len(memories),
                "clusters": [c.model_dump(mode="json") for c in clusters],
                "memories": {m.id: m.text for m in memories},
            }
        where = args.data
    if not out["memory_count"]:
        raise _no_memories(args.user, where)
    texts = out["memories"]
    if not out["clusters"]:
        print(f"no conflicts among the {out['memory_count']} memories of user {args.user!r}")
    for c in out["clusters"]:
        print(f"{c['aspect']}: {c['conflict_type']} (risk {c['risk']}) — {c['unresolved']}")
        for label, ids in c["sides"].items():
            for i in ids:
                print(f"  [{label}] {texts.get(i, '?')}")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    """Delete one memory of a user (its conflict edges are closed and kept)."""
    client = _client(args)
    if client is not None:
        from caap.client import ServerError

        try:
            client.forget(args.memory_id, args.user)
        except ServerError as exc:
            if exc.status == 404:
                raise NotFound(exc.detail) from None
            raise
    else:
        with _agent(args.data, existing=True) as agent:
            if not agent.forget(args.memory_id, args.user):
                raise NotFound(f"user {args.user!r} has no memory {args.memory_id!r}")
    print(f"forgot {args.memory_id}")
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    """Record the user's answer to the question an ``ask`` raised."""
    if args.response:
        decision = json.loads(Path(args.response).read_text(encoding="utf-8"))
        decision = decision.get("decision", decision)
    else:
        decision = None
    client = _client(args)
    if client is not None:
        if decision is None:
            decision = client.respond(args.query, args.user)["decision"]
        memory = client.resolve(decision, args.answer, args.user, source=args.source)
    else:
        from caap.models import Decision

        with _agent(args.data, existing=True) as agent:
            if not agent.memories(args.user):
                raise _no_memories(args.user, args.data)
            settled = (
                Decision.model_validate(decision)
                if decision is not None
                else agent.respond(args.query, args.user).decision
            )
            memory = agent.resolve(settled, args.answer, args.user, source=args.source)
            memory = memory.model_dump(mode="json")
    print(json.dumps(memory, indent=2))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the HTTP API and the MCP server with the model loaded."""
    import contextlib

    from caap import Agent

    # The port is taken before the model loads: a port in use fails at once, with one line,
    # and the banner below names the port really served (--port 0 picks a free one).
    sock = None if args.stdio else _listen(args.host, args.port)
    # Over stdio, stdout is the MCP channel: anything a library prints while the model loads
    # goes to stderr instead.
    with contextlib.redirect_stdout(sys.stderr if args.stdio else sys.stdout):
        if args.config:
            agent = Agent.from_config(args.config)
        else:
            agent = Agent(
                args.data,
                llm=args.llm,
                store=os.environ.get("CAAP_STORE") or None,
                relations=args.relations,
            )
    if args.stdio:
        from caap.server import run_stdio

        run_stdio(agent)
        return 0
    from caap.server import run_server

    assert sock is not None
    api_key = args.api_key or os.environ.get("CAAP_API_KEY") or None
    port = sock.getsockname()[1]
    print(
        f"caap serve: http://{args.host}:{port} (API docs /docs, MCP /mcp"
        f"{', API key required' if api_key else ''}); Ctrl-C stops",
        file=sys.stderr,
    )
    run_server(agent, sock=sock, api_key=api_key, mcp=not args.no_mcp)
    return 0


def _listen(host: str, port: int) -> Any:
    """A listening socket on ``host:port`` (IPv4 or IPv6, as the host resolves)."""
    import socket

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def cmd_bench(args: argparse.Namespace) -> int:
    """Measure ingest, recall and respond cost against raw peers; write the tables."""
    from caap.benchmark.perf import BenchConfig, render_markdown, run_bench, write_report

    cfg = BenchConfig(
        sizes=args.sizes,
        graph_sizes=args.graph_sizes,
        queries=args.queries,
        batch=args.batch,
        graph_writes=args.graph_writes,
        mem0=not args.no_mem0,
        relations=args.relations,
        seed=args.seed,
        progress=not args.quiet,
        conversation=args.conversation,
        budget=args.budget,
    )
    report = run_bench(cfg)
    out = write_report(report, args.out)
    print(render_markdown(report))
    print(f"wrote {out / 'bench.json'}, {out / 'bench.md'}, {out / 'bench.html'}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """Check a data directory (store, index, their agreement); rebuild what can be rebuilt."""
    from caap._doctor import diagnose

    report = diagnose(args.data, repair=args.repair)
    for line in report.lines():
        print(line)
    return 0 if report.ok else 1


def _add_doctor_parser(sub: Any) -> None:
    p = sub.add_parser(
        "doctor", help="check a data directory; --repair rebuilds the store or the index"
    )
    p.add_argument("--data", default=os.environ.get("CAAP_DATA", "caap-data"))
    p.add_argument(
        "--repair",
        action="store_true",
        help="move damaged files aside and rebuild them from the other copy",
    )
    p.set_defaults(handler=cmd_doctor)


#: Commands whose parser needs neither the benchmark harness nor the reliability tools:
#: ``caap ask --server URL`` then imports no more than the standard library.
_LIGHT_COMMANDS = frozenset(
    {"demo", "remember", "ask", "conflicts", "forget", "resolve", "serve", "doctor"}
)


def build_parser(*, full: bool = True) -> argparse.ArgumentParser:
    """The argument parser of the ``caap`` command (``full=False``: without the ``tangle`` and
    ``reliability`` commands, whose parsers import the benchmark harness)."""
    parser = argparse.ArgumentParser(
        prog="caap", description="Conflict-aware memory and action policy for LLM agents."
    )
    from caap import __version__

    parser.add_argument("--version", action="version", version=f"caap {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="run the example agent on the embedded default backend")
    p.add_argument(
        "--data", help="data directory (default: a new temporary one); kept after the demo"
    )
    p.add_argument(
        "--llm", help="OpenAI-compatible model for the LLM backbone, e.g. openai:gpt-4o-mini"
    )
    p.add_argument("--json", help="also write the responses to this JSON file")
    p.set_defaults(handler=cmd_demo)

    data_default = os.environ.get("CAAP_DATA", "caap-data")
    server_help = "URL of a running `caap serve` to talk to (default: $CAAP_SERVER)"
    data_help = f"data folder (default: $CAAP_DATA, else caap-data; now {data_default})"
    user_help = "the user whose memories these are"

    p = sub.add_parser("remember", help="store one memory (a repeated statement is reported)")
    p.add_argument("text")
    p.add_argument("--data", default=data_default, help=data_help)
    p.add_argument("--user", required=True, help=user_help)
    p.add_argument("--source")
    p.add_argument("--context")
    p.add_argument("--observed-at")
    p.add_argument("--server", default=os.environ.get("CAAP_SERVER"), help=server_help)
    p.set_defaults(handler=cmd_remember)

    p = sub.add_parser("ask", help="answer a query from a user's memories")
    p.add_argument("query")
    p.add_argument("--data", default=data_default, help=data_help)
    p.add_argument("--user", required=True, help=user_help)
    p.add_argument(
        "--k", type=positive, default=8, help="memories recalled for the answer (default 8)"
    )
    p.add_argument("--llm", help="OpenAI-compatible model for the LLM backbone (default: offline)")
    p.add_argument("--json", action="store_true", help="print the response as JSON")
    p.add_argument("--server", default=os.environ.get("CAAP_SERVER"), help=server_help)
    p.set_defaults(handler=cmd_ask)

    p = sub.add_parser("conflicts", help="list a user's conflict clusters")
    p.add_argument("--data", default=data_default, help=data_help)
    p.add_argument("--user", required=True, help=user_help)
    p.add_argument("--server", default=os.environ.get("CAAP_SERVER"), help=server_help)
    p.set_defaults(handler=cmd_conflicts)

    p = sub.add_parser("forget", help="delete one memory of a user")
    p.add_argument("memory_id")
    p.add_argument("--data", default=data_default, help=data_help)
    p.add_argument("--user", required=True, help=user_help)
    p.add_argument("--server", default=os.environ.get("CAAP_SERVER"), help=server_help)
    p.set_defaults(handler=cmd_forget)

    p = sub.add_parser(
        "resolve",
        help="record the user's answer to the question `caap ask` raised",
        description="Record the user's answer to a clarification: give the query that was "
        "asked (--query, asked again) or the JSON of `caap ask --json` (--response).",
    )
    p.add_argument("answer")
    p.add_argument("--data", default=data_default, help=data_help)
    p.add_argument("--user", required=True, help=user_help)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--query", help="the query whose clarification this answers")
    what.add_argument("--response", help="a file with the output of `caap ask --json`")
    p.add_argument("--source", default="the user", help="who gave the answer")
    p.add_argument("--server", default=os.environ.get("CAAP_SERVER"), help=server_help)
    p.set_defaults(handler=cmd_resolve)

    p = sub.add_parser(
        "serve",
        help="run the HTTP API and MCP server with the model loaded",
        description="One long-running process: HTTP JSON API (/docs), MCP at /mcp, or MCP over "
        "stdio with --stdio. Needs the server extra.",
    )
    p.add_argument("--data", default=data_default, help=data_help)
    p.add_argument("--config", help="JSON or TOML file of Agent arguments (Agent.from_config)")
    p.add_argument("--llm", help="OpenAI-compatible model for the LLM backbone")
    p.add_argument(
        "--relations",
        metavar="LAYER",
        help="relation layer that reads the memories (rules, learned, llm; default rules)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=non_negative, default=8765, help="TCP port (default 8765)")
    p.add_argument("--api-key", help="require this key (default: $CAAP_API_KEY; none: open)")
    p.add_argument("--no-mcp", action="store_true", help="do not serve MCP at /mcp")
    p.add_argument("--stdio", action="store_true", help="serve MCP over stdin/stdout instead")
    p.set_defaults(handler=cmd_serve)

    p = sub.add_parser(
        "bench", help="measure ingest / recall / respond cost against raw peers (and Mem0)"
    )
    p.add_argument(
        "--sizes",
        type=positive,
        nargs="*",
        default=[1000, 10_000],
        help="end-to-end sizes, memories of one user (default: 1000 10000)",
    )
    p.add_argument(
        "--graph-sizes",
        type=positive,
        nargs="*",
        default=[1000, 10_000, 100_000],
        help="graph-layer sizes with precomputed embeddings (e.g. add 1000000)",
    )
    p.add_argument("--queries", type=positive, default=50)
    p.add_argument("--batch", type=positive, default=64, help="memories per remember_many call")
    p.add_argument("--graph-writes", type=positive, default=300)
    p.add_argument("--no-mem0", action="store_true", help="skip the Mem0 infer=False peer")
    p.add_argument(
        "--relations",
        nargs="+",
        default=["rules"],
        metavar="LAYER",
        help="relation layers to run the agent with end to end, one row each (default: rules; "
        "e.g. --relations rules learned)",
    )
    p.add_argument(
        "--conversation",
        action="store_true",
        help="also ingest each size as dated conversation turns: topic upkeep per write and "
        "recall at --budget next to plain search",
    )
    p.add_argument("--budget", type=positive, default=20, help="recall budget for --conversation")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--out", default="bench-out", help="directory for bench.json/.md/.html")
    p.set_defaults(handler=cmd_bench)
    _add_doctor_parser(sub)

    if not full:
        return parser
    try:
        from caap.benchmark.cli import add_tangle_parser
    except ImportError:  # pragma: no cover - the harness ships with caap
        pass
    else:
        add_tangle_parser(sub)

    from caap.conflict_graph._reliability_eval import add_reliability_parser

    add_reliability_parser(sub)

    from caap.conflict_graph._relations_train import add_relations_parser

    add_relations_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from caap._dist_check import conflict_message, foreign_caap

    found = foreign_caap()
    if found is not None:
        print(f"caap: error: {conflict_message(found)}", file=sys.stderr)
        return 2
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(full=not (argv and argv[0] in _LIGHT_COMMANDS))
    args = parser.parse_args(argv)
    from caap.client import ServerError

    try:
        return int(args.handler(args) or 0)
    except NotFound as exc:
        print(f"caap: {exc}", file=sys.stderr)
        return 1
    except ServerError as exc:
        print(f"caap: error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, TypeError, KeyError, OSError, sqlite3.Error, BackendError) as exc:
        # OSError covers FileNotFoundError, ConnectionError and PermissionError.
        print(f"caap: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
