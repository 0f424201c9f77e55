"""Source reliability: learn which source to trust from confirmed outcomes (offline).

Part 1 fits the fusion model directly: a planner that is optimistic and a device log that is
right when it reports, on an ordinal question; the posterior follows the log, and selective
answering abstains when the margin is thin.

Part 2 runs the agent: a gym app and a climbing partner disagree on low-stakes questions. Before
any outcome the policy goes with the app (a record); each time the user confirms the partner
was right, the agent updates the user's source reliability, so the policy first stops
committing on the app (verify) and then commits on the partner.

    python examples/source_reliability.py [--data DIR]
"""

from __future__ import annotations

import argparse
import tempfile

from caap import Agent
from caap.conflict_graph import AnswerSpace, ReliabilityModel


def fusion() -> None:
    sleep = AnswerSpace(
        id="sleep_7h_nights",
        labels=("fewer_than_10", "10_to_19", "20_or_more"),
        ordered=("fewer_than_10", "10_to_19", "20_or_more"),
    )
    model = ReliabilityModel([sleep], threshold=0.3)
    outcomes = [  # (planner, device_log, truth)
        ("20_or_more", "10_to_19", "10_to_19"),
        ("20_or_more", "fewer_than_10", "fewer_than_10"),
        ("20_or_more", None, "10_to_19"),
        ("10_to_19", "10_to_19", "10_to_19"),
        ("20_or_more", "20_or_more", "20_or_more"),
        ("20_or_more", "10_to_19", "10_to_19"),
    ]
    for planner, device, truth in outcomes:
        model.observe(sleep.id, {"planner": planner, "device_log": device}, truth)
    for claims in (
        {"planner": "20_or_more", "device_log": "10_to_19"},
        {"planner": "20_or_more", "device_log": None},
    ):
        post = model.posterior(sleep.id, claims)
        probs = ", ".join(f"{a} {p:.2f}" for a, p in post.probs.items())
        verdict = "abstain" if post.abstain else f"answer {post.answer}"
        print(f"{claims} -> {probs}; margin {post.margin:.2f}: {verdict}")


TOPICS = [
    ("climbing", "Ethan's gym app logged 12 climbing sessions in March.",
     "Ethan's climbing partner says Ethan only climbed twice in March.",
     "How much did I climb in March?"),
    ("running", "Ethan's gym app logged 10 runs in April.",
     "Ethan's climbing partner says Ethan went running only once in April.",
     "How often did I run in April?"),
    ("swimming", "Ethan's gym app logged 9 swimming sessions in May.",
     "Ethan's climbing partner says Ethan swam only once in May.",
     "How often did I swim in May?"),
]  # fmt: skip


def agent_loop(data: str) -> None:
    with Agent(data) as agent:
        for aspect, app, partner, query in TOPICS:
            agent.remember_many(
                [
                    {"text": app, "aspect": aspect, "source": "Ethan's gym app"},
                    {"text": partner, "aspect": aspect, "source": "Ethan's climbing partner"},
                ],
                "ethan",
            )
            resp = agent.respond(query, "ethan")
            print(f"\n{query}\n  {resp.decision.action.value}: {resp.decision.rationale}")
            agent.resolve(
                resp, "My partner had it right.", "ethan", confirms="Ethan's climbing partner"
            )
        rel = agent.reliability("ethan")
        for source in rel.sources:
            right, wrong = rel.outcomes(source)
            accuracy = rel.source_accuracy(source)
            print(f"{source}: right {right}, wrong {wrong}, accuracy {accuracy:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="data directory to keep (default: a temporary one)")
    args = parser.parse_args()
    fusion()
    if args.data:
        agent_loop(args.data)
    else:
        with tempfile.TemporaryDirectory(prefix="caap-reliability-") as tmp:
            agent_loop(tmp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
