"""Conversation topics and budgeted recall: store chat turns, recall at most B memories.

    python examples/topic_recall.py            # a temporary data directory, removed afterwards

Each conversation is one ``remember_many`` batch of user turns (provenance ``turn``); the agent
splits conversations where they change subject, groups the segments into topics, and
``recall(query, user, budget=B)`` returns at most ``B`` memories on the query's subject: its best
matches, then the turns a walk from them over the nearest-neighbour graph reaches first (the
doctor's advice on caffeine below shares no word with the question).
"""

from __future__ import annotations

import tempfile

from caap import Agent

CONVERSATIONS = [
    (
        "2025-03-01",
        [
            "I usually drink two cups of coffee every morning before work.",
            "Coffee after 3pm keeps me awake, so I switch to decaf in the afternoon.",
        ],
    ),
    (
        "2025-03-04",
        [
            "I planted tomatoes and basil in the backyard this spring.",
            "The tomato plants need watering every evening when it is hot.",
        ],
    ),
    (
        "2025-03-09",
        [
            "My doctor told me to cut caffeine completely because of my blood pressure.",
            "By the way, the basil is growing much faster than the tomatoes.",
        ],
    ),
]


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp, Agent(tmp) as agent:
        user = "noor"
        for day, turns in CONVERSATIONS:
            agent.remember_many(
                [
                    {"text": t, "observed_at": day, "provenance": {"turn": str(i)}}
                    for i, t in enumerate(turns)
                ],
                user,
            )
        for m in agent.memories(user):
            print(f"[{m.aspect}] {m.text}")
        recall = agent.recall("Should I have a coffee this afternoon?", user, budget=3)
        print("\nrecall(budget=3):")
        for m in recall.memories:
            print(f"  {recall.scores[m.id]:.2f}  {m.text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
