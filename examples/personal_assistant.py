"""A personal-assistant bot loop on caap.Agent (offline, embedded default backend).

Type a message to get an answer from memory; prefix with ``remember:`` to store a memory;
``/conflicts`` lists what disagrees; ``/answer TEXT`` settles the last question asked.

    python examples/personal_assistant.py --data ./assistant-data --user ethan
    printf 'remember: I text my peers but call my supervisor\\n/conflicts\\n' | \\
        python examples/personal_assistant.py --user ethan
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator

from caap import Agent, Response


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="assistant-data")
    parser.add_argument("--user", default="me")
    args = parser.parse_args()

    agent = Agent(args.data)
    last: Response | None = None
    interactive = sys.stdin.isatty()
    if interactive:
        print("CAAP assistant. 'remember: ...', '/conflicts', '/answer ...', '/quit'.")
    for raw in sys.stdin if not interactive else _prompt():
        line = raw.strip()
        if not line:
            continue
        if line in ("/quit", "/exit"):
            break
        if line.lower().startswith("remember:"):
            m = agent.remember(line.split(":", 1)[1].strip(), args.user)
            print(f"ok, remembered ({m.aspect})")
        elif line == "/conflicts":
            for c in agent.conflicts(args.user):
                print(f"- {c.aspect}: {c.conflict_type.value}; open question: {c.unresolved}")
        elif line.startswith("/answer "):
            if last is None:
                print("nothing to answer yet")
                continue
            agent.resolve(last, line[len("/answer ") :], args.user)
            print("thanks, noted")
        else:
            last = agent.respond(line, args.user)
            print(f"[{last.decision.action.value}] {last.text}")
    agent.close()
    return 0


def _prompt() -> Iterator[str]:
    """Lines typed at the prompt until Ctrl-D (end of input) or Ctrl-C: then a clean exit."""
    while True:
        try:
            yield input("> ")
        except (EOFError, KeyboardInterrupt):
            print()
            return


if __name__ == "__main__":
    sys.exit(main())
