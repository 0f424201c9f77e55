"""Ingest cost per memory of the conflict graph with each relation layer.

Writes the memory texts of the shipped TANGLE set into one user's graph, in batches (one
``add_many`` per batch, as ``Agent.remember_many`` does), and reports wall time per memory.
The embedder is warmed first; each layer starts with an empty text cache.

Usage::

    PYTHONPATH=. python scripts/time_relations_ingest.py --n 300 --batch 20
"""

from __future__ import annotations

import argparse
import time

from caap._embeddings import get_embedder
from caap.benchmark.dataset import load_dataset
from caap.conflict_graph import ConflictGraph
from caap.conflict_graph.relations import get_relation_layer
from caap.models import Memory


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--relations", nargs="+", default=["rules", "learned"])
    args = ap.parse_args()
    texts = [m.text for inst in load_dataset() for m in inst.memories][: args.n]
    emb = get_embedder()
    emb.encode(texts[:8])
    for name in args.relations:
        layer = get_relation_layer(name)
        g = ConflictGraph("u", emb, relations=layer)
        mems = [Memory(user_id="u", text=t) for t in texts]
        started = time.perf_counter()
        for i in range(0, len(mems), args.batch):
            g.add_many(mems[i : i + args.batch])
        per = (time.perf_counter() - started) / len(mems) * 1000
        print(f"{name:8s} {len(mems)} memories, batch {args.batch}: {per:.1f} ms per memory")


if __name__ == "__main__":
    main()
