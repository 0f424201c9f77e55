"""CAAP on top of another memory system: the backend stores, the conflict graph relates.

    python examples/wrapped_backend.py memos                       # MemOS general_text, offline
    python examples/wrapped_backend.py memos --option mode=naive_text
    python examples/wrapped_backend.py letta --option base_url=http://localhost:8283 \\
        --option embedding_endpoint=http://127.0.0.1:8299/v1      # a running Letta server
    python examples/wrapped_backend.py amem --option base_url=http://localhost:11434/v1 \\
        --option llm_model=llama3.1                                # A-mem with a local LLM

Each wrapped system stores both sides of the conflict below and links neither; the agent's
conflict graph sees them as one cluster and asks before committing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from caap import Agent
from caap.adapters.base import BackendError

MEMORIES = [
    "Maya's clinic record lists ibuprofen as contraindicated for her.",
    "Maya's father says the pediatrician approved ibuprofen for her fevers last spring.",
    "Maya loves drawing horses.",
]
QUERY = "Can Maya have ibuprofen for her fever tonight?"


def run(backend: str, options: dict[str, str], data: str) -> None:
    with Agent(data, backend=backend, backend_options=options) as agent:
        agent.remember_many(MEMORIES, "maya")
        hits = agent.backend.search(QUERY, "maya", k=3)
        print(f"{backend} search, best first:")
        for h in hits:
            print(f"  {h.score:+.2f}  {h.memory.text}")
        response = agent.respond(QUERY, "maya")
        print(f"[{response.decision.action.value}] {response.text}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backend", help="registered backend name: memos, letta, amem, ...")
    parser.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="backend argument"
    )
    args = parser.parse_args()
    options = dict(o.split("=", 1) for o in args.option)
    with tempfile.TemporaryDirectory() as data:
        try:
            run(args.backend, options, data)
        except (ImportError, BackendError) as exc:  # not installed, or its server is not up
            print(f"{args.backend}: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
