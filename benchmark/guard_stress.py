"""The commit guard against a backbone that commits on everything.

The replay itself is :func:`caap.benchmark.guard_stress.guard_stress`. The guard
(``caap/policy/_guard.py``) must stop an unjustified high-stakes commit whatever chose
it. This replays that worst case: for every high-risk instance of a TANGLE dataset (oracle
presentation, seed 0), a decision that commits and cites the one, then the three, memories
nearest the query (as a model reply might) goes through the guard over the offline analysis.
It counts the high-risk conflicts the guard lets through (each one an unsafe answer any
backbone could give) and the high-risk controls it lets stand (a commit there is the right
action; the guard holding it is caution, not safety).

    PYTHONPATH=$PWD python benchmark/guard_stress.py \\
        [--dataset caap/benchmark/data/blind/dev/tangle] [--relations learned] [--ids]

``--relations harmless-llm`` reads the memories with the ``llm`` relation layer over a fake
model that reads everything as harmless (:func:`caap.llm.testing.harmless_relations_reply`:
every statement the user's own, every pair and every situation agreeing, every question low
stakes), with the shipped ``learned`` layer as its fallback: the worst a relation model
steered by the memories' text could answer, on top of a backbone committing on everything.

``--relations llm`` reads them with your model, named by the environment as for every ``llm``
command (``CAAP_RELATIONS_MODEL``, ``CAAP_LLM_BASE_URL``, ``CAAP_LLM_API_KEY``; docs/llm.md),
over the shipped ``learned`` layer as its fallback: how far the guard holds with that model
reading the memories, before it reads your users' ones.
"""

from __future__ import annotations

import argparse
from typing import Any

from caap.benchmark.dataset import load_dataset
from caap.benchmark.guard_stress import guard_stress
from caap.policy.policy import CaapPolicy


def _layer(name: str) -> Any:
    """The relation layer ``--relations`` names (a registry name, the model the environment
    names, or the harmless model)."""
    if name == "llm":
        from caap.conflict_graph.relations import get_relation_layer

        return get_relation_layer("llm")
    if name != "harmless-llm":
        return name
    from caap.conflict_graph._relations_llm import LLMRelations
    from caap.llm import FunctionModel
    from caap.llm.testing import harmless_relations_reply

    return LLMRelations(FunctionModel(harmless_relations_reply), fallback="learned")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", action="append", help="a TANGLE file or folder (repeats)")
    ap.add_argument(
        "--relations", default="learned", choices=("rules", "learned", "llm", "harmless-llm")
    )
    ap.add_argument(
        "--ids", action="store_true", help="name the conflicts let through (not on test data)"
    )
    args = ap.parse_args()
    paths = args.dataset or [
        f"caap/benchmark/data/blind/{s}/tangle" for s in ("dev", "extra", "train")
    ]
    instances = [i for p in paths for i in load_dataset(p)]
    try:
        layer = _layer(args.relations)
    except ValueError as exc:  # no model named for `llm`
        ap.error(str(exc))
    r = guard_stress(instances, CaapPolicy(relations=layer), progress=True)
    print(f"{r.instances} high-risk instances ({', '.join(paths)}), relations {args.relations}")
    for cite in (1, 3):
        through = r.let_through[cite]
        print(
            f"commit citing the {cite} nearest: high-risk conflicts let through "
            f"{len(through)}/{r.conflicts}"
            + (f" ({', '.join(through)})" if args.ids and through else "")
            + f"; high-risk controls left standing {r.left_standing[cite]}/{r.controls}"
        )


if __name__ == "__main__":
    main()
