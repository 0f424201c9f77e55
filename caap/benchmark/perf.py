"""``caap bench``: what the conflict graph and the policy cost, next to their raw peers.

Three measurements, one run, one machine (ratios matter more than absolute times):

- **end to end** at each size N (memories of one user): ingest through ``Agent.remember_many``
  against the raw builtin backend (same embedder, same chromadb) and, when installed, Mem0 with
  ``infer=False`` through its adapter; then ``recall`` / ``respond`` latency against a raw search.
  Every number is split by phase (embed, extract, graph, vector_store, sqlite, policy; see
  :mod:`caap._timing`).
- **graph layer alone** at sizes up to 1M: memories with precomputed embeddings and parsed
  facets are bulk-loaded into a :class:`~caap.conflict_graph.ConflictGraph`, then typed writes
  and answers (cluster expansion + decide + realize) are timed at that size, with the query
  embeddings already cached, so the numbers are the graph's and the policy's own cost.

The corpus is synthetic but shaped like the shipped dataset: the TANGLE memories and user turns,
then generated statements over many topics (habits, preferences, sources, dates), so aspects
stay topic-sized as N grows instead of one topic swallowing the whole memory.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from caap._timing import Timings, collect
from caap.benchmark.dataset import load_dataset

__all__ = [
    "BenchConfig",
    "aspect_sizes",
    "corpus",
    "describe_machine",
    "render_markdown",
    "run_bench",
]

_NAMES = ["Ana", "Ben", "Chen", "Dara", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lea"]
_VERBS = [
    "drinks", "cooks", "walks to", "cycles to", "reads about", "pays for", "books", "avoids",
    "plans", "skips", "takes", "tracks", "orders", "buys", "visits", "cleans", "practises",
    "records", "shares", "watches",
]  # fmt: skip
_OBJECTS = [
    "oat milk lattes", "the gym", "spicy ramen", "the farmers market", "jazz concerts",
    "her sister's kids", "the night bus", "evening yoga", "budget spreadsheets", "her inhaler",
    "weekend hikes", "the dentist", "late meetings", "vinyl records", "the rent", "sourdough",
    "the school run", "a standing desk", "pottery classes", "the allotment", "red wine",
    "language lessons", "the car insurance", "chess puzzles", "night shifts", "board games",
    "the book club", "meal prep", "her blood pressure", "the dog walker",
]  # fmt: skip
_CONTEXTS = [
    "", "", "", " on weekdays", " when travelling", " when it rains", " with friends",
    " after work", " during exams", " at her parents' house", " when money is tight",
]  # fmt: skip
_SOURCES = ["", "", "", "Her doctor says ", "Her calendar shows ", "Her partner says "]
_TIMES = ["", "", " in March", " since January", " this month", " again", " last summer"]


def corpus(n: int, seed: int = 0) -> list[str]:
    """``n`` memory texts: the shipped TANGLE texts first, then generated statements."""
    base: list[str] = []
    for inst in load_dataset():
        base += [m.text for m in inst.memories]
        base += [t.content for s in inst.sessions for t in s.turns if t.role == "user"]
    out = base[:n]
    rng = np.random.default_rng(seed)
    seen = set(out)
    while len(out) < n:
        name = _NAMES[int(rng.integers(len(_NAMES)))]
        src = _SOURCES[int(rng.integers(len(_SOURCES)))]
        verb = _VERBS[int(rng.integers(len(_VERBS)))]
        obj = _OBJECTS[int(rng.integers(len(_OBJECTS)))]
        ctx = _CONTEXTS[int(rng.integers(len(_CONTEXTS)))]
        when = _TIMES[int(rng.integers(len(_TIMES)))]
        freq = ["", " often", " rarely", " every day", " twice a week"][int(rng.integers(5))]
        text = f"{src}{name} {verb} {obj}{freq}{ctx}{when}."
        if src:
            text = text[0] + text[1:]
        if text in seen:
            text = text[:-1] + f" (note {len(out)})."
        seen.add(text)
        out.append(text)
    return out


def queries(n: int) -> list[str]:
    """``n`` questions: the shipped TANGLE queries, then questions over the generated topics."""
    out = [inst.query for inst in load_dataset()][:n]
    i = 0
    while len(out) < n:
        obj = _OBJECTS[i % len(_OBJECTS)]
        ctx = _CONTEXTS[(i // len(_OBJECTS)) % len(_CONTEXTS)]
        out.append(f"Should I plan around {obj}{ctx} this week?")
        i += 1
    return out


def describe_machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    import torch

    mem_gib = None
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        mem_gib = round(kb / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "gpu": bool(torch.cuda.is_available()),
    }


@dataclass
class BenchConfig:
    """What to measure."""

    sizes: Sequence[int] = (1000, 10_000)
    """End-to-end sizes (memories of one user)."""
    graph_sizes: Sequence[int] = (1000, 10_000, 100_000)
    """Graph-layer sizes (precomputed embeddings)."""
    queries: int = 50
    batch: int = 64
    graph_writes: int = 300
    """Typed writes timed at each graph-layer size."""
    k: int = 8
    mem0: bool = True
    """Also run the Mem0 ``infer=False`` peer when the ``mem0`` extra is installed."""
    relations: Sequence[str] = ("rules",)
    """Relation layers to run the agent with end to end (one row each, each with its own raw
    peer in the same run; the Mem0 peer runs with the first)."""
    seed: int = 0
    progress: bool = True
    conversation: bool = False
    """Also ingest each end-to-end size as conversation turns (sessions of
    ``session_turns`` dated turns), so topics are formed from conversation segments: reports
    topic upkeep per write and budgeted recall next to plain search at the same budget (with
    the first relation layer)."""
    session_turns: int = 8
    budget: int = 20


@dataclass
class _Series:
    seconds: list[float] = field(default_factory=list)
    phases: list[dict[str, float]] = field(default_factory=list)

    def add(self, seconds: float, t: Timings | None = None) -> None:
        self.seconds.append(seconds)
        self.phases.append(dict(t.seconds) if t else {})

    def summary(self) -> dict[str, Any]:
        ms = sorted(s * 1000 for s in self.seconds)
        phase_names = sorted({p for d in self.phases for p in d})
        mean_phase = {
            p: 1000 * statistics.fmean(d.get(p, 0.0) for d in self.phases) for p in phase_names
        }
        other = statistics.fmean(ms) - sum(mean_phase.values()) if ms else 0.0
        return {
            "n": len(ms),
            "p50_ms": _pct(ms, 0.50),
            "p95_ms": _pct(ms, 0.95),
            "p99_ms": _pct(ms, 0.99),
            "mean_ms": statistics.fmean(ms) if ms else 0.0,
            "mean_phase_ms": {**mean_phase, "other": max(other, 0.0)},
        }


def _pct(sorted_ms: list[float], q: float) -> float:
    if not sorted_ms:
        return 0.0
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]


def _timed(fn: Callable[[], Any]) -> tuple[float, Timings]:
    with collect() as t:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start, t


def _ingest(
    add: Callable[[list[str]], Any], texts: list[str], batch: int, label: str, show: bool
) -> dict[str, Any]:
    total = 0.0
    phases: dict[str, float] = {}
    for i in tqdm(range(0, len(texts), batch), desc=label, disable=not show, leave=False):
        chunk = texts[i : i + batch]
        sec, t = _timed(partial(add, chunk))
        total += sec
        for k, v in t.seconds.items():
            phases[k] = phases.get(k, 0.0) + v
    phases["other"] = max(total - sum(phases.values()), 0.0)
    return {
        "seconds": total,
        "memories_per_s": len(texts) / total if total else 0.0,
        "phase_seconds": phases,
    }


def _mem0_backend(path: str, embedder: Any) -> tuple[Any | None, str | None]:
    try:
        from caap.adapters.registry import get_backend

        return get_backend("mem0", path=path), None
    except Exception as exc:  # missing extra or the adapter itself
        return None, f"{type(exc).__name__}: {exc}"


def _end_to_end(
    n: int, cfg: BenchConfig, out: dict[str, Any], relations: str = "rules", mem0: bool = True
) -> None:
    from caap import Agent
    from caap.adapters.builtin import BuiltinBackend
    from caap.models import Memory

    texts = corpus(n, cfg.seed)
    qs = queries(cfg.queries)
    row: dict[str, Any] = {"n": n, "relations": relations}
    with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
        agent = Agent(d1, relations=relations)
        raw = BuiltinBackend(d2, embedder=agent.embedder)
        agent.embedder.encode(texts[:64])  # load and warm the model outside the timings
        show = cfg.progress
        row["ingest_raw"] = _ingest(
            lambda c: raw.add_many([Memory(text=t, user_id="u") for t in c]),
            texts,
            cfg.batch,
            f"raw ingest {n}",
            show,
        )
        row["ingest_agent"] = _ingest(
            lambda c: agent.remember_many(c, "u"), texts, cfg.batch, f"agent ingest {n}", show
        )
        if cfg.mem0 and mem0:
            with tempfile.TemporaryDirectory() as d3:
                m0, why = _mem0_backend(d3, agent.embedder)
                if m0 is None:
                    row["ingest_mem0"] = {"skipped": why}
                else:
                    row["ingest_mem0"] = _ingest(
                        lambda c: m0.add_many([Memory(text=t, user_id="u") for t in c]),
                        texts,
                        cfg.batch,
                        f"mem0 ingest {n}",
                        show,
                    )
                    s = _Series()
                    for q in qs:
                        s.add(*_timed(partial(m0.search, q, "u", k=cfg.k)))
                    row["search_mem0"] = s.summary()
                    m0.close()
        # The query embeddings are cached by the embedder after the first call; each path
        # below is timed on its second pass so all of them read the cached query vector.
        for q in qs:
            agent.respond(q, "u", k=cfg.k)
        series = {"search_raw": _Series(), "recall": _Series(), "respond": _Series()}
        for q in tqdm(qs, desc=f"queries {n}", disable=not show, leave=False):
            series["search_raw"].add(*_timed(partial(raw.search, q, "u", k=cfg.k)))
            series["recall"].add(*_timed(partial(agent.recall, q, "u", k=cfg.k)))
            series["respond"].add(*_timed(partial(agent.respond, q, "u", k=cfg.k)))
        for name, s in series.items():
            row[name] = s.summary()
        overhead = [
            sum(v for k, v in p.items() if k in ("graph", "extract", "policy")) * 1000
            for p in series["respond"].phases
        ]
        row["overhead_ms"] = {
            "p50": _pct(sorted(overhead), 0.5),
            "p95": _pct(sorted(overhead), 0.95),
            "p99": _pct(sorted(overhead), 0.99),
        }
        row["aspects"] = aspect_sizes(agent.graph("u"))
        agent.close()
    ri, ai = row["ingest_raw"]["seconds"], row["ingest_agent"]["seconds"]
    row["ingest_ratio_agent_raw"] = ai / ri if ri else None
    m0i = row.get("ingest_mem0", {})
    if "seconds" in m0i:
        row["ingest_ratio_agent_mem0"] = ai / m0i["seconds"] if m0i["seconds"] else None
    out.setdefault("end_to_end", []).append(row)


def _turns(texts: list[str], per_session: int) -> list[dict[str, Any]]:
    """The texts as conversation turns: sessions of ``per_session`` turns, one session a day."""
    start = datetime(2025, 1, 1, 9, tzinfo=timezone.utc)
    return [
        {
            "text": t,
            "observed_at": start + timedelta(days=i // per_session, minutes=i % per_session),
            "provenance": {"session": f"s{i // per_session}", "turn": str(i % per_session)},
        }
        for i, t in enumerate(texts)
    ]


def _conversation(n: int, cfg: BenchConfig, out: dict[str, Any], relations: str) -> None:
    """Ingest ``n`` memories as conversation turns: topic upkeep per write, topic sizes, and
    recall at a budget against plain search given the same number of results."""
    from caap import Agent

    items = _turns(corpus(n, cfg.seed), cfg.session_turns)
    qs = queries(cfg.queries)
    row: dict[str, Any] = {"n": n, "relations": relations, "session_turns": cfg.session_turns}
    with tempfile.TemporaryDirectory() as d:
        agent = Agent(d, relations=relations)
        agent.embedder.encode([str(i["text"]) for i in items[:64]])  # warm the model
        batches = _Series()
        total = 0.0
        phases: dict[str, float] = {}
        for i in tqdm(
            range(0, n, cfg.batch), desc=f"conversation ingest {n}", disable=not cfg.progress,
            leave=False,
        ):  # fmt: skip
            sec, t = _timed(partial(agent.remember_many, items[i : i + cfg.batch], "u"))
            batches.add(sec, t)
            total += sec
            for k, v in t.seconds.items():
                phases[k] = phases.get(k, 0.0) + v
        phases["other"] = max(total - sum(phases.values()), 0.0)
        topic_ms = sorted(1000 * p.get("topics", 0.0) for p in batches.phases)
        row["ingest"] = {
            "seconds": total,
            "memories_per_s": n / total if total else 0.0,
            "phase_seconds": phases,
            "batch": batches.summary(),
            # Topic upkeep of one batch (segmenting, joining topics, local re-clustering).
            "topics_ms_per_batch": {
                "p50": _pct(topic_ms, 0.5),
                "p95": _pct(topic_ms, 0.95),
                "max": topic_ms[-1] if topic_ms else 0.0,
            },
        }
        for q in qs:  # cache the query embeddings
            agent.recall(q, "u", budget=cfg.budget)
        plain, budgeted = _Series(), _Series()
        for q in qs:
            plain.add(*_timed(partial(agent.backend.search, q, "u", k=cfg.budget)))
            budgeted.add(*_timed(partial(agent.recall, q, "u", budget=cfg.budget)))
        row["search_plain"] = plain.summary()
        row["recall_budget"] = budgeted.summary()
        row["budget"] = cfg.budget
        row["aspects"] = aspect_sizes(agent.graph("u"))
        agent.close()
    out.setdefault("conversation", []).append(row)


def aspect_sizes(graph: Any) -> dict[str, Any]:
    """How a graph's memories spread over its aspects (topics): how many aspects, the largest
    one's size and its share of the memories, and the 99th-percentile size."""
    sizes = sorted(len(graph.aspect_members(a)) for a in graph.aspects())
    total = sum(sizes)
    return {
        "count": len(sizes),
        "largest": sizes[-1] if sizes else 0,
        "largest_share": sizes[-1] / total if total else 0.0,
        "p99": sizes[min(len(sizes) - 1, int(0.99 * len(sizes)))] if sizes else 0,
    }


def _graph_layer(n: int, cfg: BenchConfig, pool: Any, out: dict[str, Any]) -> None:
    """Bulk-load ``n`` memories, then time typed writes and answers at that size."""
    from caap.conflict_graph.graph import ConflictGraph
    from caap.models import Memory
    from caap.policy import CaapPolicy

    mems, vecs, exts, edges, embedder = pool
    rng = np.random.default_rng(cfg.seed)
    graph = ConflictGraph("u", embedder)
    p = len(mems)
    start = time.perf_counter()
    rotated = vecs
    for i in tqdm(range(n), desc=f"graph load {n}", disable=not cfg.progress, leave=False):
        j, copy = i % p, i // p
        if j == 0 and copy:
            # Copies beyond the pool are other topics: the pool turned by a random rotation
            # keeps every similarity inside the copy and is unrelated to the other copies.
            rot, _ = np.linalg.qr(rng.standard_normal((vecs.shape[1], vecs.shape[1])))
            rotated = (vecs @ rot.astype(np.float32)).astype(np.float32)
        m = mems[j].model_copy(update={"id": f"m{i}", "aspect": f"{mems[j].aspect}#{copy}"})
        graph.load(m, rotated[j], inferred=["aspect"], extraction=exts[j])
        if j == p - 1 or i == n - 1:
            # The pool's conflict edges, copied onto this copy's memories.
            base = copy * p
            graph.load_edges(
                e.model_copy(
                    update={
                        "id": f"e{copy}-{k}",
                        "source_id": f"m{base + a}",
                        "target_id": f"m{base + b}",
                    }
                )
                for k, (a, b, e) in enumerate(edges)
                if base + max(a, b) <= i
            )
    load_s = time.perf_counter() - start
    writes = _Series()
    idx = rng.choice(p, size=cfg.graph_writes, replace=True)
    for w in tqdm(idx, desc=f"graph writes {n}", disable=not cfg.progress, leave=False):
        j = int(w)
        m = Memory(user_id="u", text=mems[j].text, observed_at=mems[j].observed_at)
        v = vecs[j][None, :]
        writes.add(*_timed(partial(graph.add_many, [m], vectors=v, extractions=[exts[j]])))
    # The policy reads relations with the graph's own layer, so it reads the graph in place.
    policy = CaapPolicy(embedder=embedder, relations=graph.relations)
    qs = queries(cfg.queries)
    for q in qs:
        embedder.encode_one(q)
    answers = _Series()
    for q in tqdm(qs, desc=f"graph answers {n}", disable=not cfg.progress, leave=False):
        qv = embedder.encode_one(q)

        def answer(q: str = q, qv: Any = qv) -> Any:
            # What Agent.respond does past the vector store: expand the hits, read the
            # graph's clusters over them, decide, realize.
            hit_ids = [i for i, _ in graph.nearest(qv, cfg.k)]
            extra, _ = graph.expand(hit_ids, qv)
            ids = hit_ids + [i for i, _ in extra]
            mems = [graph.memory(i) for i in ids]
            a = policy.analyze(
                mems,
                q,
                vectors={i: graph.vector(i) for i in ids},
                extractions={i: graph.extraction(i) for i in ids},
                graph=graph,
            )
            return policy.realize(mems, q, policy.decide(mems, q, analysis=a), analysis=a)

        answer()  # warm this query's masked-embedding cache entry
        answers.add(*_timed(answer))
    out.setdefault("graph_layer", []).append(
        {
            "n": n,
            "load_seconds": load_s,
            "inverted_index": n > graph.config.exact_neighbours,
            "write": writes.summary(),
            "answer": answers.summary(),
            "aspects": aspect_sizes(graph),
        }
    )


def _pool(cfg: BenchConfig, size: int = 4000) -> Any:
    from caap._embeddings import get_embedder
    from caap.conflict_graph.graph import ConflictGraph

    embedder = get_embedder()
    texts = corpus(size, cfg.seed)
    graph = ConflictGraph("u", embedder)
    from caap.models import Memory

    for i in tqdm(range(0, size, 256), desc="graph pool", disable=not cfg.progress, leave=False):
        graph.add_many([Memory(user_id="u", text=t) for t in texts[i : i + 256]])
    mems = graph.memories()
    vecs = np.stack([graph.vector(m.id) for m in mems])
    exts = [graph.extraction(m.id) for m in mems]
    pos = {m.id: n for n, m in enumerate(mems)}
    edges = [(pos[e.source_id], pos[e.target_id], e) for e in graph.edges()]
    return mems, vecs, exts, edges, embedder


def run_bench(cfg: BenchConfig) -> dict[str, Any]:
    """Run every measurement of ``cfg``; returns the report (``schema_version`` 1)."""
    for n in (*cfg.sizes, *cfg.graph_sizes):
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"sizes must be positive integers, got {n!r}")
    if min(cfg.queries, cfg.batch, cfg.graph_writes, cfg.session_turns, cfg.budget) < 1:
        raise ValueError("queries, batch, graph_writes, session_turns and budget must be positive")
    from caap.conflict_graph.relations import relation_layer_names

    unknown = [r for r in cfg.relations if r not in relation_layer_names()]
    if not cfg.relations or unknown:
        raise ValueError(
            f"relations must name layers from {relation_layer_names()}, got {list(cfg.relations)}"
        )
    out: dict[str, Any] = {"schema_version": "1", "machine": describe_machine()}
    out["config"] = {
        "sizes": list(cfg.sizes),
        "graph_sizes": list(cfg.graph_sizes),
        "queries": cfg.queries,
        "batch": cfg.batch,
        "graph_writes": cfg.graph_writes,
        "k": cfg.k,
        "seed": cfg.seed,
        "relations": list(cfg.relations),
        "conversation": cfg.conversation,
        "session_turns": cfg.session_turns,
        "budget": cfg.budget,
    }
    for n in cfg.sizes:
        for j, layer in enumerate(cfg.relations):
            _end_to_end(n, cfg, out, relations=layer, mem0=j == 0)
        if cfg.conversation:
            _conversation(n, cfg, out, cfg.relations[0])
    if cfg.graph_sizes:
        pool = _pool(cfg, min(4000, max(cfg.graph_sizes)))
        for n in cfg.graph_sizes:
            _graph_layer(n, cfg, pool, out)
    return out


def _f(x: Any, nd: int = 1) -> str:
    return "—" if x is None else f"{x:.{nd}f}"


def _label(row: dict[str, Any], layers: bool) -> str:
    """``N``, and the agent's relation layer when the report compares several."""
    return f"{row['n']} ({row['relations']})" if layers and row.get("relations") else str(row["n"])


def render_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown tables."""
    m = report["machine"]
    lines = [
        f"Machine: {m['cores']} cores, {m['memory_gib']} GiB, {m['cpu']}, "
        f"Python {m['python']}, torch threads {m['torch_threads']}, GPU: {m['gpu']}.",
        "",
    ]
    rows = report.get("end_to_end", [])
    layers = len({r.get("relations") for r in rows}) > 1
    if rows:
        lines += [
            "| N | ingest agent mem/s | raw mem/s | mem0 mem/s | agent/raw time | agent/mem0 time "
            "| agent ingest split (s): embed / extract / graph / sqlite / vector_store / other |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            a, raw = r["ingest_agent"], r["ingest_raw"]
            m0 = r.get("ingest_mem0", {})
            ph = a["phase_seconds"]
            split = " / ".join(
                _f(ph.get(k, 0.0))
                for k in ("embed", "extract", "graph", "sqlite", "vector_store", "other")
            )
            lines.append(
                f"| {_label(r, layers)} | {_f(a['memories_per_s'])} | "
                f"{_f(raw['memories_per_s'])} | "
                f"{_f(m0.get('memories_per_s')) if 'seconds' in m0 else 'skipped'} | "
                f"{_f(r['ingest_ratio_agent_raw'], 2)} | "
                f"{_f(r.get('ingest_ratio_agent_mem0'), 2)} | {split} |"
            )
        lines += [
            "",
            "| N | raw search p50/p95/p99 ms | recall p50/p95/p99 | respond p50/p95/p99 "
            "| graph+policy overhead p50/p95/p99 | mem0 search p50/p95 "
            "| aspects: count, largest (share), p99 size |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in rows:

            def t(s: dict[str, Any]) -> str:
                return f"{_f(s['p50_ms'])} / {_f(s['p95_ms'])} / {_f(s['p99_ms'])}"

            o = r["overhead_ms"]
            m0s = r.get("search_mem0")
            lines.append(
                f"| {_label(r, layers)} | {t(r['search_raw'])} | {t(r['recall'])} | "
                f"{t(r['respond'])} | "
                f"{_f(o['p50'])} / {_f(o['p95'])} / {_f(o['p99'])} | "
                f"{(_f(m0s['p50_ms']) + ' / ' + _f(m0s['p95_ms'])) if m0s else '—'} | "
                f"{_aspects(r)} |"
            )
        for r in rows:
            if "skipped" in r.get("ingest_mem0", {}):
                lines += ["", f"Mem0 peer skipped: {r['ingest_mem0']['skipped']}"]
                break
    conv = report.get("conversation", [])
    if conv:
        lines += [
            "",
            "Conversation turns (sessions of dated turns; topics from conversation segments):",
            "",
            "| N | ingest mem/s | batch p50/p95/p99 s | topic upkeep per batch p50/p95/max ms "
            "| ingest split (s): embed / extract / graph / topics / sqlite / vector_store / other "
            "| plain search k=B p50/p95 ms | recall budget=B p50/p95 ms "
            "| topics: count, largest (share), p99 size |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in conv:
            ing, b, tp = r["ingest"], r["ingest"]["batch"], r["ingest"]["topics_ms_per_batch"]
            ph = ing["phase_seconds"]
            split = " / ".join(
                _f(ph.get(k, 0.0))
                for k in ("embed", "extract", "graph", "topics", "sqlite", "vector_store", "other")
            )
            sp, rb = r["search_plain"], r["recall_budget"]
            lines.append(
                f"| {r['n']} ({r['relations']}, B={r['budget']}) | {_f(ing['memories_per_s'])} | "
                f"{_f(b['p50_ms'] / 1000, 2)} / {_f(b['p95_ms'] / 1000, 2)} / "
                f"{_f(b['p99_ms'] / 1000, 2)} | "
                f"{_f(tp['p50'])} / {_f(tp['p95'])} / {_f(tp['max'])} | {split} | "
                f"{_f(sp['p50_ms'])} / {_f(sp['p95_ms'])} | "
                f"{_f(rb['p50_ms'])} / {_f(rb['p95_ms'])} | {_aspects(r)} |"
            )
    g = report.get("graph_layer", [])
    if g:
        lines += [
            "",
            "| N (graph layer) | load s | inverted index | typed write p50/p95/p99 ms "
            "| answer (expand + decide + realize) p50/p95/p99 ms "
            "| aspects: count, largest (share), p99 size |",
            "|---|---|---|---|---|---|",
        ]
        for r in g:
            w, a = r["write"], r["answer"]
            lines.append(
                f"| {r['n']} | {_f(r['load_seconds'])} | {r['inverted_index']} | "
                f"{_f(w['p50_ms'], 2)} / {_f(w['p95_ms'], 2)} / {_f(w['p99_ms'], 2)} | "
                f"{_f(a['p50_ms'], 2)} / {_f(a['p95_ms'], 2)} / {_f(a['p99_ms'], 2)} | "
                f"{_aspects(r)} |"
            )
    return "\n".join(lines) + "\n"


def _aspects(row: dict[str, Any]) -> str:
    a = row.get("aspects")
    if not a:
        return "—"
    return f"{a['count']}, {a['largest']} ({100 * a['largest_share']:.1f}%), {a['p99']}"


def _markdown_to_html(markdown: str) -> str:
    """The Markdown of :func:`render_markdown` as HTML: tables as ``<table>``, lines as ``<p>``."""
    from html import escape

    out: list[str] = []
    table: list[list[str]] = []

    def flush() -> None:
        if not table:
            return
        head, *body = table
        rows = [r for r in body if not all(set(c) <= {"-", ":"} for c in r)]
        out.append(
            "<table><thead><tr>"
            + "".join(f"<th>{escape(c)}</th>" for c in head)
            + "</tr></thead><tbody>"
            + "".join(
                "<tr>" + "".join(f'<td class="num">{escape(c)}</td>' for c in r) + "</tr>"
                for r in rows
            )
            + "</tbody></table>"
        )
        table.clear()

    for line in markdown.splitlines():
        if line.startswith("|"):
            table.append([c.strip() for c in line.strip().strip("|").split("|")])
            continue
        flush()
        if line.strip():
            out.append(f"<p>{escape(line)}</p>")
    flush()
    return "\n".join(out)


def render_html(report: dict[str, Any]) -> str:
    """A self-contained page styled like ``report.html``: HTML tables and titled charts."""
    from caap.benchmark._svg import grouped_bars, stacked_bars
    from caap.benchmark.html import _card, _page

    parts = [
        '<header><h1>caap bench</h1><p class="muted">Ingest, recall and respond cost by '
        "phase, against the raw backend and Mem0; the graph layer alone up to large N.</p>"
        "</header>",
        _card("Tables", _markdown_to_html(render_markdown(report))),
    ]
    rows = report.get("end_to_end", [])
    if rows:
        cats = [str(r["n"]) for r in rows]
        series = [
            ("raw search", [r["search_raw"]["p95_ms"] for r in rows]),
            ("recall", [r["recall"]["p95_ms"] for r in rows]),
            ("respond", [r["respond"]["p95_ms"] for r in rows]),
            ("graph+policy", [r["overhead_ms"]["p95"] for r in rows]),
        ]
        top = max(max(v) for _, v in series) or 1.0
        title = "p95 latency (ms) by number of memories N"
        parts.append(_card(title, grouped_bars(cats, series, max_value=top * 1.1, title=title)))
        keys = ("embed", "extract", "graph", "sqlite", "vector_store", "other")
        title = "Agent ingest time by phase (share of the total), by N"
        parts.append(
            _card(
                title,
                stacked_bars(
                    cats,
                    list(keys),
                    [[r["ingest_agent"]["phase_seconds"].get(k, 0.0) for k in keys] for r in rows],
                    title=title,
                ),
            )
        )
    g = report.get("graph_layer", [])
    if g:
        cats = [str(r["n"]) for r in g]
        series = [
            ("typed write", [r["write"]["p95_ms"] for r in g]),
            ("answer", [r["answer"]["p95_ms"] for r in g]),
        ]
        top = max(max(v) for _, v in series) or 1.0
        title = "Graph layer p95 (ms) by number of memories N"
        parts.append(_card(title, grouped_bars(cats, series, max_value=top * 1.1, title=title)))
    return _page("caap bench", "\n".join(parts))


def write_report(report: dict[str, Any], out_dir: str | Path) -> Path:
    """Write ``bench.json``, ``bench.md`` and ``bench.html`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.json").write_text(json.dumps(report, indent=2))
    (out / "bench.md").write_text(render_markdown(report))
    (out / "bench.html").write_text(render_html(report))
    return out
