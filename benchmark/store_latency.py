"""What the conflict-graph store itself costs, SQLite against PostgreSQL, in one run.

    python benchmark/store_latency.py --sizes 1000 10000 --writes 300 \\
        --postgres postgresql://caap@127.0.0.1:5432/caap

Store only: no embedder, no vector index, no graph. For each size N (memories of one user,
random 384-d vectors, one open edge per memory):

- fill the user to N memories in batches of 100 (one transaction each);
- write: ``--writes`` single transactions of one memory and one edge, as one ``remember`` makes
  (p50 / p95 in ms; each waits for the commit to be durable);
- load: ``memories(user)`` + ``edges(user)``, what an agent reads the first time it touches a
  user (ms, best of 3);
- get: ``get(user, id)`` of one memory (p50 in ms over 200 lookups).

Each store starts empty (a temp file; a fresh schema, dropped afterwards).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from caap.conflict_graph import ConflictGraphStore, GraphStore, PostgresGraphStore
from caap.conflict_graph.testing import make_edge, make_stored


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def measure(store: ConflictGraphStore[Any], sizes: list[int], writes: int) -> list[dict[str, Any]]:
    user, rows, out = "bench", 0, []
    prev = make_stored(user, "seed", seed=0)
    store.write([prev])
    rows = 1
    for n in sizes:
        while rows < n:
            batch = [
                make_stored(user, f"m{rows + i}", seed=rows + i) for i in range(min(100, n - rows))
            ]
            store.write(
                batch, [make_edge(a, b) for a, b in zip([prev, *batch[:-1]], batch, strict=True)]
            )
            prev, rows = batch[-1], rows + len(batch)
        lat = []
        for i in range(writes):
            m = make_stored(user, f"w{rows + i}", seed=rows + i)
            t = time.perf_counter()
            store.write([m], [make_edge(prev, m)])
            lat.append((time.perf_counter() - t) * 1000)
            prev = m
        rows += writes
        loads = []
        for _ in range(3):
            t = time.perf_counter()
            mems, edges = store.memories(user), store.edges(user)
            loads.append((time.perf_counter() - t) * 1000)
        assert len(mems) == rows and len(edges) == rows - 1
        ids = [m.memory.id for m in mems]
        gets = []
        for i in range(200):
            t = time.perf_counter()
            store.get(user, ids[(i * 7919) % len(ids)])
            gets.append((time.perf_counter() - t) * 1000)
        out.append(
            {
                "n": rows,
                "write_p50": statistics.median(lat),
                "write_p95": pct(lat, 0.95),
                "load": min(loads),
                "get_p50": statistics.median(gets),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--writes", type=int, default=300)
    ap.add_argument("--postgres", default=os.environ.get("CAAP_TEST_POSTGRES_DSN"))
    args = ap.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    stores: list[tuple[str, Callable[[], ConflictGraphStore[Any]], Callable[[], None]]] = []
    tmp = tempfile.TemporaryDirectory()
    stores.append(("sqlite", lambda: GraphStore(os.path.join(tmp.name, "g.sqlite")), lambda: None))
    if args.postgres:
        import psycopg

        schema = f"caap_bench_{uuid.uuid4().hex[:8]}"

        def drop() -> None:
            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

        stores.append(("postgres", lambda: PostgresGraphStore(args.postgres, schema=schema), drop))
    else:
        print("no --postgres DSN (or CAAP_TEST_POSTGRES_DSN): SQLite only")
    print(f"{'store':9} {'N':>7} {'write p50':>10} {'write p95':>10} {'load ms':>9} {'get p50':>8}")
    try:
        for name, make, cleanup in stores:
            with make() as store:
                for r in measure(store, args.sizes, args.writes):
                    print(
                        f"{name:9} {r['n']:>7} {r['write_p50']:>10.2f} {r['write_p95']:>10.2f} "
                        f"{r['load']:>9.1f} {r['get_p50']:>8.3f}",
                        flush=True,
                    )
            cleanup()
    finally:
        tmp.cleanup()


if __name__ == "__main__":
    main()
