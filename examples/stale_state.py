"""Stale state: a move supersedes the old home, a broken leg puts the bike commute in doubt.

    python examples/stale_state.py            # a temporary data directory, removed afterwards

Shows the supersedes / propagated_invalidation edges the graph draws, the old memories kept as
history (closed in world time, never deleted), and how the policy answers a query that
presupposes the old state.
"""

from __future__ import annotations

import tempfile

from caap import Agent
from caap.conflict_graph.stale import DEFAULT_DEPENDENCIES


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp, Agent(tmp) as agent:
        user = "ethan"
        for text, when in [
            ("I live in Seattle, near Green Lake.", "2024-01-10"),
            ("I cycle to work every day, about 25 minutes each way.", "2024-02-03"),
            ("I play bass in a band on Sundays.", "2024-03-01"),
            ("I broke my leg playing basketball last weekend.", "2025-01-12"),
            ("I signed a lease and set up utilities in Portland.", "2025-02-02"),
        ]:
            agent.remember(text, user, observed_at=when)

        graph = agent.graph(user)
        print("Stale-state edges:")
        for e in graph.edges():
            if e.kind.value in ("supersedes", "propagated_invalidation"):
                new, old = graph.memory(e.source_id).text, graph.memory(e.target_id).text
                print(f"  {e.kind.value}: {new!r} -> {old!r} (invalid_at {e.invalid_at:%Y-%m-%d})")

        for m in graph.memories():
            v = graph.validity(m.id)
            state = "current" if v.current else f"history since {v.invalid_at:%Y-%m-%d}"
            print(f"  [{state}] {m.text}")

        for query in (
            "Since I ride my bike to work every day, plan my bike maintenance for next month.",
            "Recommend a good Seattle cafe near my place in Green Lake.",
            "Where do I live now?",
        ):
            r = agent.respond(query, user)
            print(f"\n> {query}\n[{r.decision.action.value}] {r.text}")

        # The dependency map is data: extend it for your own domain.
        deps = DEFAULT_DEPENDENCIES.extended(
            {"boat": ["travel"]}, descriptions={"boat": "owning or selling a sailing boat"}
        )
        print("\nboat -> travel linked:", deps.depends("boat", "travel"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
