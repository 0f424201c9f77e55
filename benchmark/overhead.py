"""Overhead of the conflict graph against its raw peers, measured in one run.

    python benchmark/overhead.py --sizes 1000 5000 --queries 30

For each size N (memories of one user, texts from the shipped TANGLE dataset, repeated with
a varying prefix to reach N):

- ingestion: ``Agent.remember_many`` (extract + embed value + graph + SQLite + chromadb) vs the
  raw builtin backend's ``add_many`` (embed + chromadb) on the same texts: ratio of seconds;
- answering: ``Agent.respond`` vs ``Agent.recall`` alone; the difference is what decide +
  realize add (p50 / p95 in ms).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from caap import Agent
from caap.adapters.builtin import BuiltinBackend
from caap.benchmark import load_dataset
from caap.models import Memory


def texts(n: int) -> list[str]:
    base = [m.text for inst in load_dataset() for m in inst.memories]
    out = []
    i = 0
    while len(out) < n:
        t = base[i % len(base)]
        out.append(t if i < len(base) else f"Round {i // len(base)}: {t}")
        i += 1
    return out


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000])
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    queries = [inst.query for inst in load_dataset()][: args.queries]
    print("N  ingest_agent_s  ingest_raw_s  ratio  recall_p50  recall_p95  respond_p50  respond_p95  added_p95 (ms)")
    for n in args.sizes:
        corpus = texts(n)
        with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
            agent = Agent(d1)
            raw = BuiltinBackend(d2, embedder=agent.embedder)
            t0 = time.perf_counter()
            for i in range(0, n, args.batch):
                raw.add_many([Memory(text=t, user_id="u") for t in corpus[i : i + args.batch]])
            raw_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            for i in range(0, n, args.batch):
                agent.remember_many(corpus[i : i + args.batch], "u")
            agent_s = time.perf_counter() - t0
            rec, res = [], []
            for q in queries:
                t = time.perf_counter()
                agent.recall(q, "u", k=8)
                rec.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                agent.respond(q, "u", k=8)
                res.append((time.perf_counter() - t) * 1000)
            added = [b - a for a, b in zip(rec, res, strict=True)]
            print(
                f"{n}  {agent_s:.1f}  {raw_s:.1f}  {agent_s / raw_s:.2f}  "
                f"{statistics.median(rec):.1f}  {pct(rec, 0.95):.1f}  "
                f"{statistics.median(res):.1f}  {pct(res, 0.95):.1f}  {pct(added, 0.95):.1f}"
            )
            agent.close()


if __name__ == "__main__":
    main()
