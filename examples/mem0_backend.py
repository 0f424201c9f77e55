"""CAAP on top of Mem0: what Mem0's search returns vs what the conflict graph adds.

Needs ``pip install "caap-memory[mem0]"``; runs offline (Mem0 with ``infer=False``, a local qdrant
store and the packaged all-MiniLM-L6-v2).

    python examples/mem0_backend.py --data ./mem0-demo
"""

from __future__ import annotations

import argparse
from pathlib import Path

from caap import Agent

MEMORIES = [
    "Maya's clinic record lists ibuprofen as contraindicated for her.",
    "Maya's father says the pediatrician approved ibuprofen for her fevers last year.",
    "Maya's pharmacy shows repeated ibuprofen purchases this winter.",
    "Maya plays the cello in the school orchestra.",
]
QUERY = "Can I give Maya ibuprofen for her fever tonight?"


def run(data: str | Path, k: int = 1) -> dict[str, list[str]]:
    """Store the memories through Mem0, then search raw and recall through the graph."""
    with Agent(data, backend="mem0") as agent:
        user = "maya-family"
        if not agent.memories(user):
            agent.remember_many(MEMORIES, user)
        raw = [h.memory.text for h in agent.backend.search(QUERY, user, k=k)]
        recalled = [m.text for m in agent.recall(QUERY, user, k=k).memories]
        answer = agent.respond(QUERY, user, k=k)
        return {"mem0_search": raw, "with_conflict_graph": recalled, "answer": [answer.text]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="mem0-demo")
    parser.add_argument("--k", type=int, default=1, help="search results (default 1)")
    args = parser.parse_args()
    out = run(args.data, args.k)
    for title, lines in out.items():
        print(f"== {title}")
        for line in lines:
            print(f"- {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
