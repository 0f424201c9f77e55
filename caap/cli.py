"""The ``caap`` command line: ``demo``, ``ask``, ``remember``, ``conflicts``, ``tangle ...``,
``reliability eval``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["build_parser", "main"]


def _agent(data: str, llm: str | None = None) -> Any:
    from caap import Agent

    # CAAP_STORE: a postgresql:// DSN (or SQLite path) for the graph store; see docs/deployment.md.
    return Agent(data, llm=llm, store=os.environ.get("CAAP_STORE") or None)


def _print_response(resp: Any, memories: dict[str, str], out: Any = None) -> None:
    out = out or sys.stdout
    d = resp.decision
    print(f"action:     {d.action.value}", file=out)
    print(f"conflict:   {d.conflict_type.value}  (risk: {d.risk.value})", file=out)
    print(f"unresolved: {d.unresolved or '-'}", file=out)
    if d.fallback_reason:
        print(f"fallback:   {d.fallback_reason}", file=out)
    print("response:", file=out)
    for line in resp.text.splitlines():
        print(f"  {line}", file=out)
    print("cites:", file=out)
    for i in resp.cited_memory_ids:
        print(f"  [{i[:8]}] {memories.get(i, '?')}", file=out)


def cmd_demo(args: argparse.Namespace) -> int:
    """Store an example persona's conflicting memories and answer four everyday queries."""
    persona = json.loads(
        (resources.files("caap") / "data" / "demo_persona.json").read_text(encoding="utf-8")
    )
    tmp = None
    data = args.data
    if data is None:
        tmp = tempfile.TemporaryDirectory(prefix="caap-demo-")
        data = tmp.name
    try:
        agent = _agent(data, args.llm)
        user = persona["user_id"]
        if not agent.memories(user):
            agent.remember_many(persona["memories"], user)
        texts = {m.id: m.text for m in agent.memories(user)}
        print(f"CAAP demo: {persona['name']} — {persona['summary']}")
        print(f"{len(texts)} memories stored with the builtin backend in {data}")
        clusters = agent.conflicts(user)
        kept = ", ".join(f"{c.aspect} ({c.conflict_type.value})" for c in clusters)
        print(f"conflicts kept: {kept}")
        results = []
        for q in persona["queries"]:
            resp = agent.respond(q, user)
            print("\n" + "=" * 78)
            print(f"query: {q}")
            _print_response(resp, texts)
            results.append({"query": q, **resp.model_dump(mode="json")})
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
        agent.close()
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


def cmd_remember(args: argparse.Namespace) -> int:
    """Store one memory."""
    agent = _agent(args.data)
    m = agent.remember(
        args.text,
        args.user,
        source=args.source,
        context=args.context,
        observed_at=args.observed_at,
    )
    print(json.dumps(m.model_dump(mode="json"), indent=2))
    agent.close()
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    """Answer a query from a user's memories."""
    agent = _agent(args.data, args.llm)
    texts = {m.id: m.text for m in agent.memories(args.user)}
    resp = agent.respond(args.query, args.user, k=args.k)
    if args.json:
        print(resp.model_dump_json(indent=2))
    else:
        _print_response(resp, texts)
    agent.close()
    return 0


def cmd_conflicts(args: argparse.Namespace) -> int:
    """List a user's conflict clusters."""
    agent = _agent(args.data)
    texts = {m.id: m.text for m in agent.memories(args.user)}
    for c in agent.conflicts(args.user):
        print(f"{c.aspect}: {c.conflict_type.value} (risk {c.risk.value}) — {c.unresolved}")
        for label, ids in c.sides.items():
            for i in ids:
                print(f"  [{label}] {texts.get(i, '?')}")
    agent.close()
    return 0


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
        seed=args.seed,
        progress=not args.quiet,
    )
    report = run_bench(cfg)
    out = write_report(report, args.out)
    print(render_markdown(report))
    print(f"wrote {out / 'bench.json'}, {out / 'bench.md'}, {out / 'bench.html'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``caap`` command."""
    parser = argparse.ArgumentParser(
        prog="caap", description="Conflict-aware memory and action policy for LLM agents."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="run the example agent on the embedded default backend")
    p.add_argument("--data", help="data directory to keep (default: a temporary one)")
    p.add_argument(
        "--llm", help="OpenAI-compatible model for the LLM backbone, e.g. openai:gpt-4o-mini"
    )
    p.add_argument("--json", help="also write the responses to this JSON file")
    p.set_defaults(handler=cmd_demo)

    p = sub.add_parser("remember", help="store one memory")
    p.add_argument("text")
    p.add_argument("--data", default=os.environ.get("CAAP_DATA", "caap-data"))
    p.add_argument("--user", required=True)
    p.add_argument("--source")
    p.add_argument("--context")
    p.add_argument("--observed-at")
    p.set_defaults(handler=cmd_remember)

    p = sub.add_parser("ask", help="answer a query from a user's memories")
    p.add_argument("query")
    p.add_argument("--data", default=os.environ.get("CAAP_DATA", "caap-data"))
    p.add_argument("--user", required=True)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--llm")
    p.add_argument("--json", action="store_true", help="print the response as JSON")
    p.set_defaults(handler=cmd_ask)

    p = sub.add_parser("conflicts", help="list a user's conflict clusters")
    p.add_argument("--data", default=os.environ.get("CAAP_DATA", "caap-data"))
    p.add_argument("--user", required=True)
    p.set_defaults(handler=cmd_conflicts)

    p = sub.add_parser(
        "bench", help="measure ingest / recall / respond cost against raw peers (and Mem0)"
    )
    p.add_argument(
        "--sizes",
        type=int,
        nargs="*",
        default=[1000, 10_000],
        help="end-to-end sizes, memories of one user (default: 1000 10000)",
    )
    p.add_argument(
        "--graph-sizes",
        type=int,
        nargs="*",
        default=[1000, 10_000, 100_000],
        help="graph-layer sizes with precomputed embeddings (e.g. add 1000000)",
    )
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--batch", type=int, default=64, help="memories per remember_many call")
    p.add_argument("--graph-writes", type=int, default=300)
    p.add_argument("--no-mem0", action="store_true", help="skip the Mem0 infer=False peer")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--out", default="bench-out", help="directory for bench.json/.md/.html")
    p.set_defaults(handler=cmd_bench)

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
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, ConnectionError) as exc:
        print(f"caap: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
