"""Serve many users from PostgreSQL shards and a Chroma server, routing each user to one shard.

    CAAP_SHARDS="postgresql://caap@pg-0:5432/caap postgresql://caap@pg-1:5432/caap" \\
    CAAP_CHROMA_URL=http://chroma.internal:8000 python examples/sharded_deployment.py

Each shard is one PostgreSQL database (the conflict graph's source of truth) and one Chroma
collection (the search index). A user always lands on the same shard, so every statement for a
user hits one database, and a process keeps that user's graph warm in memory. Needs
``pip install 'caap-memory[postgres]'`` and a running Chroma server (``chroma run --port 8000``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import zlib

from caap import Agent


def shard_of(user_id: str, n_shards: int) -> int:
    """A stable shard number for a user (the same in every process, unlike ``hash()``)."""
    return zlib.crc32(user_id.encode("utf-8")) % n_shards


def open_shards(dsns: list[str], chroma_url: str, workdir: str) -> list[Agent]:
    """One agent per shard; the data directory only holds what nothing else needs to see."""
    return [
        Agent(
            os.path.join(workdir, f"shard-{i}"),
            store=dsn,
            backend_options={"chroma_url": chroma_url, "collection": f"caap-shard-{i}"},
        )
        for i, dsn in enumerate(dsns)
    ]


def main() -> int:
    dsns = os.environ.get("CAAP_SHARDS", "").split()
    chroma_url = os.environ.get("CAAP_CHROMA_URL", "")
    if not dsns or not chroma_url:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory() as workdir:
        shards = open_shards(dsns, chroma_url, workdir)
        try:
            for user, memories in {
                "ethan": [
                    "Ethan skips alcohol when he has an early shift the next morning.",
                    "Ethan has a couple of beers when the next day is free.",
                ],
                "maya": [
                    "Maya's clinic record lists ibuprofen as contraindicated for her.",
                    "Maya's father says the pediatrician approved ibuprofen for her fevers.",
                ],
                "lena": [
                    "Lena runs before work on weekdays.",
                    "Lena says she stopped running after her knee injury in March.",
                ],
            }.items():
                shard = shard_of(user, len(shards))
                agent = shards[shard]
                if not agent.memories(user):
                    agent.remember_many(memories, user)
                resp = agent.respond("What should I keep in mind tonight?", user)
                print(f"{user} -> shard {shard}: {resp.decision.action.value}")
        finally:
            for agent in shards:
                agent.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
