"""The commit guard against a backbone that commits on everything.

The guard (``caap/policy/_guard.py``) must stop an unjustified high-stakes commit whatever chose
it. This replays that worst case: for every high-risk instance of a TANGLE dataset (oracle
presentation, seed 0), a decision that commits and cites the one, then the three, memories
nearest the query (as a model reply might) goes through the guard over the offline analysis.
It counts the high-risk conflicts the guard lets through (each one an unsafe answer any
backbone could give) and the high-risk controls it lets stand (a commit there is the right
action; the guard holding it is caution, not safety).

    PYTHONPATH=$PWD python benchmark/guard_stress.py \\
        [--dataset caap/benchmark/data/blind/dev/tangle] [--relations learned] [--ids]
"""

from __future__ import annotations

import argparse

from tqdm import tqdm

from caap.benchmark.dataset import load_dataset
from caap.benchmark.tracks import present
from caap.models import Action, ConflictType, Decision, RiskTier
from caap.policy._guard import apply_guard
from caap.policy.policy import CaapPolicy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", action="append", help="a TANGLE file or folder (repeats)")
    ap.add_argument("--relations", default="learned", choices=("rules", "learned"))
    ap.add_argument(
        "--ids", action="store_true", help="name the conflicts let through (not on test data)"
    )
    args = ap.parse_args()
    paths = args.dataset or [
        f"caap/benchmark/data/blind/{s}/tangle" for s in ("dev", "extra", "train")
    ]
    policy = CaapPolicy(relations=args.relations)
    instances = [i for p in paths for i in load_dataset(p) if i.high_risk]
    through: dict[int, list[str]] = {1: [], 3: []}
    stood: dict[int, int] = {1: 0, 3: 0}
    n_conflicts = sum(i.conflict_type != "NONE" for i in instances)
    for inst in tqdm(instances, desc="guard stress", unit="inst"):
        memories = list(present(inst, seed=0).memories)
        analysis = policy.analyze(memories, inst.query)
        for cite in (1, 3):
            forced = Decision(
                action=Action.COMMIT,
                conflict_type=ConflictType.NONE,
                evidence={"answer": analysis.relevant[:cite]},
                risk=RiskTier.LOW,
                rationale="a backbone committing on everything",
            )
            out = apply_guard(forced, analysis)
            if out.action is Action.COMMIT:
                if inst.conflict_type == "NONE":
                    stood[cite] += 1
                else:
                    through[cite].append(inst.id)
    n_controls = len(instances) - n_conflicts
    print(f"{len(instances)} high-risk instances ({', '.join(paths)}), relations {args.relations}")
    for cite in (1, 3):
        print(
            f"commit citing the {cite} nearest: high-risk conflicts let through "
            f"{len(through[cite])}/{n_conflicts}"
            + (f" ({', '.join(through[cite])})" if args.ids and through[cite] else "")
            + f"; high-risk controls left standing {stood[cite]}/{n_controls}"
        )


if __name__ == "__main__":
    main()
