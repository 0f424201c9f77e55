"""Mem0-style memory calls on caap.Agent: add a chat, search with filters, update, history.

Runs offline on the embedded default backend, in a new temporary folder that is kept and named
at the end, so you can look at it (or in ``--data DIR``):

    python examples/mem0_style.py
"""

from __future__ import annotations

import argparse
import tempfile

from caap import Agent

CHAT = [
    {"role": "user", "content": "I skip alcohol when I have an early shift the next morning."},
    {"role": "assistant", "content": "Got it, no drinks before early shifts."},
    {"role": "user", "content": "I have a couple of beers when the next day is free."},
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="data folder to keep (default: a temporary one)")
    args = parser.parse_args()
    data = args.data or tempfile.mkdtemp(prefix="caap-mem0-style-")

    with Agent.from_config({"path": data}) as memory:
        added = memory.add(CHAT, user_id="ethan", agent_id="coach", metadata={"topic": "habits"})
        print("add:", [(r["event"], r["memory"]) for r in added["results"]])
        again = memory.add(
            CHAT[0]["content"], "ethan", agent_id="coach", metadata={"topic": "habits"}
        )
        print("add again:", again["results"][0]["event"], "(already stored, not stored twice)")

        print("\nsearch 'drinks tonight' (topic = habits):")
        hits = memory.search("drinks tonight", "ethan", filters={"topic": "habits"}, limit=3)
        for h in hits["results"]:
            conflict = h["conflict"]["type"] if h["conflict"] else "-"
            print(f"  {h['score']:.2f}  {h['memory']}  [conflict: {conflict}]")

        # The conflict stays; respond turns it into an action and a question.
        resp = memory.respond("Should I have a few drinks tonight?", "ethan")
        print("\nrespond:", resp.decision.action.value, "-", resp.questions)

        coffee = memory.add("I take my coffee black.", "ana")["results"][0]
        new = memory.update(coffee["id"], "I take my coffee with oat milk now.", "ana")
        print("\nupdate:", new["event"], new["memory"], "(previous:", new["previous_id"][:8] + ")")
        for v in memory.history(coffee["id"], "ana"):
            print(f"  history: {v['event']:<6} {v['memory']}  current={v['current']}")
        print("get_all:", [r["memory"] for r in memory.get_all("ana")["results"]])
        print("another user sees:", memory.search("coffee", "someone-else")["results"])
    print(f"\ndata kept in {data}")


if __name__ == "__main__":
    main()
