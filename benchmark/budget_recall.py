"""FULL observability of budgeted recall, without the policy or the judge (issue 13).

Stores every persona's dialogue through :class:`caap.benchmark.tracks.PipelineBank` exactly as
``caap tangle run --track pipeline`` does, then for every instance and budget observes the bank
of ``Agent.recall(query, user, budget=B)`` and of a plain backend search with ``k = B``.
The counts equal the ``budget B: FULL search .., graph ..`` lines of the pipeline track, in a
fraction of its time (no policy, no judge).

    PYTHONPATH=$PWD python benchmark/budget_recall.py [--dataset PATH] [--interleave 3]
        [--budgets 10,20,40] [--no-search] [--noise N] [--sentences]

``--noise N`` stores, before each persona's own dialogue, about N user turns of other people's
conversations (sessions of the blind train split, shuffled with a fixed seed, dated a year
earlier, without session provenance so they can represent no instance memory except by the
semantic rule) under the same user: a user with a long unrelated history.

``--sentences`` stores one memory per sentence of a user turn (the pipeline track's
``--sentences``) instead of one per turn; a sentence keeps its turn's session provenance.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from typing import Any

from tqdm import tqdm

from caap.benchmark.dataset import load_dataset
from caap.benchmark.observability import observe
from caap.benchmark.presentation import user_id_for
from caap.benchmark.tracks import PipelineBank

NOISE_DATASET = "caap/benchmark/data/blind/train/tangle"


def noise_batches(turns: int, seed: int = 0) -> list[list[dict[str, Any]]]:
    """About ``turns`` user turns of other people's sessions, one batch per session."""
    sessions = [s for inst in load_dataset(NOISE_DATASET) for s in inst.sessions]
    random.Random(seed).shuffle(sessions)
    out: list[list[dict[str, Any]]] = []
    taken = 0
    for k, s in enumerate(sessions):
        if taken >= turns:
            break
        items = [
            {
                "text": t.content,
                "observed_at": f"2023-{1 + k % 12:02d}-{1 + k % 28:02d}",
                "provenance": {"turn": str(j)},
            }
            for j, t in enumerate(s.turns)
            if t.role == "user"
        ]
        out.append(items)
        taken += len(items)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default=None, help="dataset file or folder (default: shipped)")
    ap.add_argument("--interleave", type=int, default=0, help="mix this many sessions per talk")
    ap.add_argument("--budgets", default="10,20,40", help="comma-separated recall budgets")
    ap.add_argument("--no-search", action="store_true", help="skip the plain-search rows")
    ap.add_argument(
        "--noise", type=int, default=0, help="store about N unrelated turns per persona first"
    )
    ap.add_argument(
        "--sentences", action="store_true", help="store one memory per sentence of a turn"
    )
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    instances = load_dataset(args.dataset)
    started = time.perf_counter()
    graph = dict.fromkeys(budgets, 0)
    search = dict.fromkeys(budgets, 0)
    # Per writing style (the judge-only label; recall never sees it): style -> budget -> counts.
    by_style: dict[str, dict[int, list[int]]] = {}
    noise = noise_batches(args.noise) if args.noise > 0 else []
    noisy: set[str] = set()
    with PipelineBank(instances, interleave=args.interleave, sentences=args.sentences) as bank:
        bar = tqdm(instances, desc="budget recall", unit="inst", file=sys.stderr, leave=False)
        for inst in bar:
            user = user_id_for(inst)
            if noise and user not in noisy:
                noisy.add(user)
                for batch in noise:
                    bank.agent.remember_many(batch, user)
            bank.ingest(inst.persona.id)
            style = by_style.setdefault(inst.style or "unlabelled", {})
            for b in budgets:
                got = bank.agent.recall(inst.query, user, budget=b).memories
                g = observe(inst, got, encoder=bank.encoder).level == "FULL"
                graph[b] += g
                s = False
                if not args.no_search:
                    hits = bank.agent.backend.search(inst.query, user, k=b)
                    found = [h.memory for h in hits]
                    s = observe(inst, found, encoder=bank.encoder).level == "FULL"
                    search[b] += s
                counts = style.setdefault(b, [0, 0, 0])
                counts[0] += g
                counts[1] += s
                counts[2] += 1
        agreement = bank.topic_agreement()
    n = len(instances)
    print(
        f"{n} instances, interleave {args.interleave}, noise {args.noise}"
        f"{', one memory per sentence' if args.sentences else ''}, "
        f"{time.perf_counter() - started:.0f} s"
    )
    for b in budgets:
        row = f"budget {b}: FULL graph {graph[b]}"
        if not args.no_search:
            row += f", plain search {search[b]}"
        print(row + f" of {n}")
        if len(by_style) > 1 or "unlabelled" not in by_style:
            parts = [
                f"{name} {c[b][0]}" + ("" if args.no_search else f"/{c[b][1]}") + f" of {c[b][2]}"
                for name, c in sorted(by_style.items())
            ]
            label = "graph" if args.no_search else "graph/search"
            print(f"  by style ({label}): " + ", ".join(parts))
    if agreement:
        print(
            f"topic agreement (adjusted Rand vs instances): median "
            f"{statistics.median(agreement.values()):.2f}, min {min(agreement.values()):.2f}"
        )


if __name__ == "__main__":
    main()
