"""Conflict observability: how much of an instance's conflict survived into a retrieved bank.

The matching rule decides which instance memory (if any) each retrieved memory represents:

1. **Provenance**, when the retrieved memory carries ``provenance["session"]`` (the pipeline
   track ingests every user turn with ``provenance={"session": session_id, "turn": index}``).
   A memory from session ``S`` can represent only the instance memories listed in
   ``S.memory_ids``; it represents the one of those with the highest cosine similarity to its
   text, provided that similarity is at least :data:`PROVENANCE_FLOOR` (0.30). A session that
   is not one of the instance's sessions (another instance of the same persona, say) makes the
   memory represent nothing; provenance, when present, is never overridden by rule 2.
2. **Semantic**, when it carries no session provenance (backends that rewrite or drop
   metadata): it represents the instance memory with the highest cosine similarity to its
   text, provided that similarity is at least :data:`SEMANTIC_THRESHOLD` (0.60).

A retrieved memory represents **every** instance memory it expresses: under rule 1 every
memory its session lists whose similarity reaches the floor, under rule 2 every memory whose
similarity reaches the threshold (a turn that states two memories, or a background memory that
ties a core one, counts for each). Its single ``memory_id`` (what the judge is told it shows)
is then chosen, in bank order, to cover the most core memories: the most similar core memory
not yet covered, else its most similar memory. ``single=True`` gives the earlier rule (one
memory each, the most similar). Candidates include background and distractor memories, so a
turn about a distractor is not credited to a core memory; only core memories count toward the
level:

- ``FULL``: every core memory is represented;
- ``PARTIAL``: at least two core memories are represented (some tension survives, but a side or
  relation is missing);
- ``NONE``: fewer than two.

Similarities are cosine similarities of :func:`caap._embeddings.get_embedder` embeddings
(all-MiniLM-L6-v2 by default). On the shipped set a user turn's best similarity to a memory its
session lists has median 0.61, while a turn's similarity to a core memory its session does not
list has 95th percentile 0.48 (0.6% of such pairs reach 0.60); hence the two thresholds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from caap.benchmark.dataset import Instance
from caap.models import Memory

__all__ = [
    "PROVENANCE_FLOOR",
    "SEMANTIC_THRESHOLD",
    "CachingEncoder",
    "Encoder",
    "Level",
    "Match",
    "Observability",
    "level_for",
    "match_bank",
    "observe",
]

#: Minimum similarity for a provenance match (the session already narrows the candidates).
PROVENANCE_FLOOR = 0.30
#: Minimum similarity for a semantic match (no provenance to narrow the candidates).
SEMANTIC_THRESHOLD = 0.60

Level = Literal["FULL", "PARTIAL", "NONE"]
Rule = Literal["provenance", "semantic"]


class Encoder(Protocol):
    """Embeds texts into the rows of a matrix, like :class:`caap._embeddings.Embedder`."""

    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``; one row per text."""
        ...


class Match(BaseModel):
    """What one retrieved memory represents, and which rule decided it."""

    model_config = ConfigDict(extra="forbid")

    retrieved_id: str = Field(description="Id of the retrieved memory.")
    memory_id: str = Field(default="", description="Instance memory it represents; '' if none.")
    memory_ids: list[str] = Field(
        default_factory=list,
        description="Every instance memory it expresses (memory_id among them), best first.",
    )
    role: str | None = Field(default=None, description="Role of that instance memory.")
    rule: Rule = Field(description="Which rule applied to this retrieved memory.")
    similarity: float = Field(default=0.0, description="Cosine similarity of the best candidate.")
    reason: str = Field(default="", description="Why nothing matched, when nothing did.")

    @property
    def core(self) -> bool:
        """True when it represents a core memory."""
        return self.role == "core"


class Observability(BaseModel):
    """The observability of one instance's conflict in one retrieved bank."""

    model_config = ConfigDict(extra="forbid")

    level: Level
    matched_core: list[str] = Field(
        default_factory=list, description="Core ids represented, in instance order."
    )
    core_total: int = 0
    bank_size: int = 0
    rules: dict[str, Rule] = Field(
        default_factory=dict,
        description="Core id -> rule of the first retrieved memory (bank order) matching it.",
    )
    matches: list[Match] = Field(default_factory=list, description="One per retrieved memory.")

    def mapping(self) -> dict[str, str]:
        """Retrieved id -> instance memory id it represents ('' when none)."""
        return {m.retrieved_id: m.memory_id for m in self.matches}

    def rule_summary(self) -> str:
        """``"m1=provenance; m3=semantic"``: which rule matched each core memory."""
        return "; ".join(f"{cid}={self.rules[cid]}" for cid in self.matched_core)


class CachingEncoder:
    """Wraps an encoder and embeds each distinct text once (banks of one persona overlap)."""

    def __init__(self, encoder: Encoder, max_items: int = 50_000) -> None:
        self.encoder = encoder
        self.max_items = max_items
        self._cache: dict[str, npt.NDArray[np.float32]] = {}

    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Embed ``texts``, reusing earlier results; one row per text."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            if len(self._cache) + len(todo) > self.max_items:
                self._cache.clear()
            rows = np.asarray(self.encoder.encode(todo), dtype=np.float32)
            for t, row in zip(todo, rows, strict=True):
                self._cache[t] = row
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])


def level_for(matched: int, core_total: int) -> Level:
    """FULL when every core memory is represented, PARTIAL from two, NONE below two."""
    if core_total > 0 and matched >= core_total:
        return "FULL"
    if matched >= 2:
        return "PARTIAL"
    return "NONE"


def _unit(rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    rows = np.asarray(rows, dtype=np.float32)
    if rows.ndim != 2:
        rows = rows.reshape(len(rows), -1)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: npt.NDArray[np.float32] = (rows / norms).astype(np.float32)
    return unit


def _default_encoder() -> Encoder:
    from caap._embeddings import get_embedder

    return get_embedder()


def match_bank(
    instance: Instance,
    bank: Sequence[Memory],
    *,
    encoder: Encoder | None = None,
    provenance_floor: float = PROVENANCE_FLOOR,
    semantic_threshold: float = SEMANTIC_THRESHOLD,
    single: bool = False,
) -> list[Match]:
    """Apply the matching rule (module docstring) to every memory of ``bank``, in bank order."""
    if not bank:
        return []
    enc = encoder if encoder is not None else _default_encoder()
    mems = instance.memories
    ids = [m.id for m in mems]
    role = {m.id: m.role for m in mems}
    vecs = _unit(enc.encode([m.text for m in mems] + [b.text for b in bank]))
    sims = vecs[len(mems) :] @ vecs[: len(mems)].T  # (bank, instance memories)
    sessions = {s.id: s for s in instance.sessions}

    out: list[Match] = []
    covered: set[str] = set()
    rule: Rule
    for row, b in enumerate(bank):
        session_id = b.provenance.get("session")
        if session_id:
            session = sessions.get(session_id)
            if session is None:
                out.append(
                    Match(
                        retrieved_id=b.id,
                        rule="provenance",
                        reason=f"session {session_id!r} is not one of this instance's sessions",
                    )
                )
                continue
            cols = [ids.index(i) for i in session.memory_ids]
            if not cols:
                out.append(
                    Match(
                        retrieved_id=b.id,
                        rule="provenance",
                        reason=f"session {session_id!r} lists no memories",
                    )
                )
                continue
            best = max(cols, key=lambda c: (float(sims[row, c]), -c))
            floor, rule = provenance_floor, "provenance"
        else:
            cols = list(range(len(ids)))
            best = int(np.argmax(sims[row]))
            floor, rule = semantic_threshold, "semantic"
        sim = float(sims[row, best])
        if sim >= floor:
            expressed = sorted(
                (c for c in cols if float(sims[row, c]) >= floor),
                key=lambda c: (-float(sims[row, c]), c),
            )
            if single:
                expressed = [best]
            else:
                # Cover the most core memories: a core memory not yet covered comes first.
                fresh = [c for c in expressed if role[ids[c]] == "core" and ids[c] not in covered]
                best = fresh[0] if fresh else best
                covered.update(ids[c] for c in expressed)
            out.append(
                Match(
                    retrieved_id=b.id,
                    memory_id=ids[best],
                    memory_ids=[ids[c] for c in expressed],
                    role=role[ids[best]],
                    rule=rule,
                    similarity=float(sims[row, best]),
                )
            )
        else:
            out.append(
                Match(
                    retrieved_id=b.id,
                    rule=rule,
                    similarity=sim,
                    reason=f"best similarity {sim:.2f} ({ids[best]}) is below {floor:.2f}",
                )
            )
    return out


def observe(
    instance: Instance,
    bank: Sequence[Memory],
    *,
    encoder: Encoder | None = None,
    provenance_floor: float = PROVENANCE_FLOOR,
    semantic_threshold: float = SEMANTIC_THRESHOLD,
    single: bool = False,
) -> Observability:
    """The FULL / PARTIAL / NONE observability of ``instance``'s conflict in ``bank``.

    ``single=True`` lets each retrieved memory represent one instance memory only.
    """
    matches = match_bank(
        instance,
        bank,
        encoder=encoder,
        provenance_floor=provenance_floor,
        semantic_threshold=semantic_threshold,
        single=single,
    )
    roles = {m.id: m.role for m in instance.memories}
    rules: dict[str, Rule] = {}
    for m in matches:
        for mid in m.memory_ids or ([m.memory_id] if m.memory_id else []):
            if roles.get(mid) == "core" and mid not in rules:
                rules[mid] = m.rule
    core = instance.core_ids
    matched = [cid for cid in core if cid in rules]
    return Observability(
        level=level_for(len(matched), len(core)),
        matched_core=matched,
        core_total=len(core),
        bank_size=len(bank),
        rules={cid: rules[cid] for cid in matched},
        matches=matches,
    )
