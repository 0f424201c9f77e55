"""Graph typing alone: time and fingerprint ``ConflictGraph.add_many`` over the bench corpus.

Embeds and parses the first ``N`` texts of :func:`caap.benchmark.perf.corpus` once, then types
them into fresh graphs in batches of 64 with those vectors and facets given (no model, no
store), ``--repeat`` times, and prints the milliseconds per memory of each repetition. With
``--fingerprint FILE`` it also writes every edge (kind, endpoints, evidence, active), aspect and
life-facet set as JSON: two checkouts that must read the same graph are compared with
``cmp`` on their files. Run it from each checkout, alternating, on an otherwise idle machine:

    PYTHONPATH=$PWD python benchmark/graph_writes.py 10000 --repeat 4 --fingerprint /tmp/a.json
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from caap._embeddings import get_embedder
from caap.benchmark.perf import corpus
from caap.conflict_graph.graph import ConflictGraph
from caap.models import Memory


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, help="memories (the first n texts of the bench corpus)")
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions")
    ap.add_argument("--fingerprint", default=None, help="write the typed graph here as JSON")
    args = ap.parse_args()
    if args.n < 1 or args.repeat < 1:
        ap.error("n and --repeat must be at least 1")
    embedder = get_embedder()
    mems = [Memory(id=f"m{i}", user_id="u", text=t) for i, t in enumerate(corpus(args.n, seed=0))]
    first = ConflictGraph("u", embedder)  # embeds and parses once
    for i in range(0, len(mems), 64):
        first.add_many(mems[i : i + 64])
    vectors = {m.id: first.vector(m.id) for m in mems}
    facets = {m.id: first.extraction(m.id) for m in mems}
    for _ in range(args.repeat):
        g = ConflictGraph("u", embedder)
        start = time.perf_counter()
        for i in range(0, len(mems), 64):
            batch = mems[i : i + 64]
            g.add_many(
                batch,
                vectors=np.stack([vectors[m.id] for m in batch]),
                extractions=[facets[m.id] for m in batch],
            )
        ms = (time.perf_counter() - start) / len(mems) * 1000
        print(f"graph typing {ms:.3f} ms per memory", flush=True)
    if args.fingerprint:
        edges = sorted(
            (e.kind.value, e.source_id, e.target_id, e.evidence, e.active)
            for e in first.edges(include_closed=True)
        )
        print(f"{len(edges)} edges")
        with open(args.fingerprint, "w") as fh:
            json.dump(
                {
                    "edges": edges,
                    "aspects": [first.memory(m.id).aspect for m in mems],
                    "facets": [sorted(first.life_facets(m.id)) for m in mems],
                },
                fh,
            )


if __name__ == "__main__":
    main()
