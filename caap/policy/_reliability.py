"""The policy's reading of source reliability for a source-contradiction cluster.

Each side of an SCC cluster is one source and its claim. Fused with the user's reliability
model (learned from outcomes the user confirmed), the claims give a posterior over which claim
is right; the policy commits on it only when the margin clears the model's threshold and the
stakes are low, and otherwise verifies, naming each source, its claim and its track record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from caap.conflict_graph.reliability import Posterior, ReliabilityModel, claim_of, source_key
from caap.models import ConflictCluster, ConflictType, Memory

__all__ = ["SourceView", "source_view"]


@dataclass(frozen=True)
class SourceView:
    """Which source the user's confirmed outcomes favour in one cluster."""

    posterior: Posterior
    """Posterior over the claims (answers are claims, sources are source keys)."""
    claims: dict[str, str]
    """Side label -> its claim."""
    track: dict[str, tuple[int, int]]
    """Side label -> (right, wrong) in the outcomes the user confirmed before."""

    @property
    def informed(self) -> bool:
        """Whether any source here has a confirmed outcome (else the view says nothing)."""
        return any(r + w for r, w in self.track.values())

    @property
    def favoured(self) -> str | None:
        """The side whose claim the posterior favours."""
        return next((s for s, c in self.claims.items() if c == self.posterior.answer), None)

    def describe(self) -> str:
        """The track record in words: "the app log was right 0 of 3 times; ..."."""
        return "; ".join(
            f"{side} was right {r} of {r + w} time{'s' if r + w != 1 else ''}"
            for side, (r, w) in self.track.items()
        )


def source_view(
    cluster: ConflictCluster | None,
    memories: Mapping[str, Memory],
    model: ReliabilityModel | None,
) -> SourceView | None:
    """The reliability reading of an SCC cluster, or ``None`` without a model or such a
    cluster (or with fewer than two distinct claims)."""
    if model is None or cluster is None or cluster.conflict_type is not ConflictType.SCC:
        return None
    claims: dict[str, str] = {}
    for side, ids in cluster.sides.items():
        present = [memories[i] for i in ids if i in memories]
        if present:
            claims[side] = claim_of(max(present, key=lambda m: m.created_at))
    if len(set(claims.values())) < 2:
        return None
    by_key = {source_key(side): claim for side, claim in claims.items()}
    posterior = model.posterior(cluster.aspect, by_key)
    track = {side: model.outcomes(source_key(side)) for side in claims}
    return SourceView(posterior, claims, track)
