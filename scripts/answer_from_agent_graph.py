"""Does reading the agent's own graph at answer time change the policy's decisions?

Pipeline banks (each persona's conversations stored through the builtin backend, the agent's
``recall`` per instance query), then the same ``agent.policy`` answers twice: from the recalled
memories as the TANGLE pipeline track shows them (re-identified, a graph built per answer) and
the way ``Agent.respond`` does (``analyze(..., graph=agent.graph(user))``: the agent's aspects,
edges and facets over the recalled memories). Prints how many actions agree, the
acceptable-action counts per type (shared EVALUATION.md), and commits on high-risk source
conflicts, for each.

Usage::

    PYTHONPATH=. python scripts/answer_from_agent_graph.py \\
        --data caap/benchmark/data/blind/dev/tangle --relations rules

Never point it at the blind test split while developing.
"""

from __future__ import annotations

import argparse
from collections import Counter

from caap.benchmark.dataset import load_dataset
from caap.benchmark.presentation import user_id_for
from caap.benchmark.report import is_action_ok
from caap.benchmark.tracks import PipelineBank, _for_policy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="TANGLE instances (file or directory)")
    ap.add_argument("--relations", default=None, help="relation layer (default: the default)")
    args = ap.parse_args()
    instances = load_dataset(args.data)
    bank = PipelineBank(instances, relations=args.relations)
    policy = bank.agent.policy
    ok: Counter[tuple[str, str]] = Counter()
    unsafe: Counter[str] = Counter()
    same = 0
    try:
        for inst in instances:
            recalled = bank.retrieve(inst).with_graph or []
            per_answer = policy.respond(_for_policy(recalled), inst.query)
            a = policy.analyze(recalled, inst.query, graph=bank.agent.graph(user_id_for(inst)))
            decision = policy.decide(recalled, inst.query, analysis=a)
            from_graph = policy.realize(recalled, inst.query, decision, analysis=a)
            ctype = str(getattr(inst.conflict_type, "value", inst.conflict_type))
            for name, r in (("per-answer graph", per_answer), ("agent graph", from_graph)):
                action = r.decision.action.value
                good = is_action_ok(ctype, inst.high_risk, action)
                ok[name, ctype] += good
                ok[name, "all"] += good
                unsafe[name] += inst.high_risk and ctype == "SCC" and action == "commit"
            same += per_answer.decision.action is from_graph.decision.action
    finally:
        bank.close()
    print(f"relations={args.relations or 'default'} instances={len(instances)} same action={same}")
    for name in ("per-answer graph", "agent graph"):
        counts = ", ".join(f"{k[1]} {v}" for k, v in sorted(ok.items()) if k[0] == name)
        print(f"{name}: acceptable {counts}; high-risk SCC commits {unsafe[name]}")


if __name__ == "__main__":
    main()
