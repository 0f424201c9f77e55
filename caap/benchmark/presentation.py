"""What a policy sees of an instance: memory texts in a seeded shuffle, under opaque ids.

Policies never see roles, conflict types, structure, domain, ``high_risk`` or
``missing_information``; the harness keeps the mapping from shown ids back to instance ids for
the judge.
"""

from __future__ import annotations

import hashlib
import random
from datetime import datetime, timezone

from pydantic import BaseModel, ConfigDict, Field

from caap.benchmark.dataset import Instance, InstanceMemory
from caap.models import Memory

__all__ = ["PRESENTED_AT", "Presented", "present", "shown_id", "user_id_for"]

#: ``created_at`` of every presented memory: one fixed instant, so record times carry no
#: order (and no role) information.
PRESENTED_AT = datetime(2025, 1, 1, tzinfo=timezone.utc)


class Presented(BaseModel):
    """The memories one policy call sees, and how to map them back for the judge."""

    model_config = ConfigDict(extra="forbid")

    memories: list[Memory] = Field(description="Memories in shown order, ids 'mem-01', ...")
    shown_ids: dict[str, str] = Field(description="Shown id -> instance memory id.")
    shown_texts: dict[str, str] = Field(description="Shown id -> the text shown.")

    @property
    def instance_ids(self) -> list[str]:
        """Instance memory ids in shown order."""
        return [self.shown_ids[m.id] for m in self.memories]


def user_id_for(instance: Instance) -> str:
    """The user id the harness files an instance's memories under."""
    return f"tangle:{instance.persona.id}"


def shown_id(position: int) -> str:
    """The opaque id of the memory shown at 0-based ``position`` (``mem-01`` first)."""
    return f"mem-{position + 1:02d}"


def _rng(seed: int, instance_id: str) -> random.Random:
    # hashlib, not hash(): Python salts str hashes per process, and a shuffle must be the
    # same in every process for runs to be paired and reproducible.
    digest = hashlib.sha256(f"{seed}\x00{instance_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def present(instance: Instance, *, distractors: int | None = None, seed: int = 0) -> Presented:
    """The memories a policy sees for ``instance`` on the oracle track.

    Core and background memories, plus the first ``distractors`` distractors in file order
    (``None``: all of them), shuffled with a seed derived from ``(seed, instance.id)`` and
    re-identified ``mem-01``, ``mem-02``, ... in shown order, so ids reveal no role.

    Args:
        instance: The benchmark instance.
        distractors: How many distractors to include, ``0..len(distractors)``; ``None`` for all.
        seed: Run seed; the same seed gives the same order in every process.

    Raises:
        ValueError: ``distractors`` is out of range (the message names it and the range).
    """
    pool = instance.by_role("distractor")
    if distractors is None:
        n = len(pool)
    else:
        if isinstance(distractors, bool) or not isinstance(distractors, int):
            raise ValueError(f"distractors must be an int or None, got {distractors!r}")
        if not 0 <= distractors <= len(pool):
            raise ValueError(
                f"distractors must be between 0 and {len(pool)} for instance "
                f"{instance.id!r}, got {distractors}"
            )
        n = distractors
    chosen: list[InstanceMemory] = [
        *instance.by_role("core"),
        *instance.by_role("background"),
        *pool[:n],
    ]
    _rng(seed, instance.id).shuffle(chosen)
    user = user_id_for(instance)
    memories: list[Memory] = []
    shown_ids: dict[str, str] = {}
    shown_texts: dict[str, str] = {}
    for pos, m in enumerate(chosen):
        sid = shown_id(pos)
        memories.append(Memory(id=sid, user_id=user, text=m.text, created_at=PRESENTED_AT))
        shown_ids[sid] = m.id
        shown_texts[sid] = m.text
    return Presented(memories=memories, shown_ids=shown_ids, shown_texts=shown_texts)
