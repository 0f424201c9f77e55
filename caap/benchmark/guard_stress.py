"""The commit guard against a backbone that commits on everything.

The guard (``caap/policy/_guard.py``) must stop an unjustified high-stakes commit whatever
chose it. :func:`guard_stress` replays that worst case: for every high-risk instance (oracle
presentation, seed 0), a decision that commits and cites the one (and the three) memories
nearest the query, as a model reply might, goes through the guard over the offline analysis.
A high-risk conflict whose commit still stands is let through: an unsafe answer any backbone
could give. A high-risk control whose commit stands is the right action left standing (the
guard holding it is caution, not safety).

Its reading of agreement comes from the relation layer, so a layer that reads disagreeing
accounts as agreeing weakens the guard; this is the cheap first check for a new layer or new
weights (about 20 seconds on the 89 high-risk development instances of ``blind/guard``,
``blind/extra`` and ``blind/dev``). Command line: ``benchmark/guard_stress.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from caap.benchmark.dataset import Instance
from caap.benchmark.presentation import present
from caap.models import Action, ConflictType, Decision, RiskTier
from caap.policy._guard import apply_guard
from caap.policy.policy import CaapPolicy

__all__ = ["GuardStress", "guard_stress"]


@dataclass
class GuardStress:
    """What the guard let through and left standing, per number of memories cited."""

    instances: int
    conflicts: int
    controls: int
    #: Ids of the high-risk conflicts whose forced commit stood, per memories cited.
    let_through: dict[int, list[str]] = field(default_factory=dict)
    #: How many high-risk controls' forced commits stood, per memories cited.
    left_standing: dict[int, int] = field(default_factory=dict)


def guard_stress(
    instances: Iterable[Instance],
    policy: CaapPolicy,
    *,
    cites: Sequence[int] = (1, 3),
    progress: bool = False,
) -> GuardStress:
    """Force a commit on every high-risk instance of ``instances`` (the others are skipped)
    and count what ``policy``'s analysis lets the guard keep (see the module doc).

    Raises:
        ValueError: no high-risk instance, or a number of memories to cite below 1.
    """
    if not cites or min(cites) < 1:
        raise ValueError(f"cites must be positive numbers of memories, got {list(cites)}")
    chosen = [i for i in instances if i.high_risk]
    if not chosen:
        raise ValueError("no high-risk instance to stress the guard with")
    conflicts = sum(i.conflict_type != "NONE" for i in chosen)
    out = GuardStress(
        instances=len(chosen),
        conflicts=conflicts,
        controls=len(chosen) - conflicts,
        let_through={c: [] for c in cites},
        left_standing=dict.fromkeys(cites, 0),
    )
    walk: Iterable[Instance] = chosen
    if progress:
        from tqdm import tqdm

        walk = tqdm(chosen, desc="guard stress", unit="inst")
    for inst in walk:
        analysis = policy.analyze(list(present(inst, seed=0).memories), inst.query)
        for cite in cites:
            forced = Decision(
                action=Action.COMMIT,
                conflict_type=ConflictType.NONE,
                evidence={"answer": analysis.relevant[:cite]},
                risk=RiskTier.LOW,
                rationale="a backbone committing on everything",
            )
            if apply_guard(forced, analysis).action is Action.COMMIT:
                if inst.conflict_type == "NONE":
                    out.left_standing[cite] += 1
                else:
                    out.let_through[cite].append(inst.id)
    return out
