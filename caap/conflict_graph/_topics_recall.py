"""Budgeted recall over topics: the best topics for a query, their members ranked for it.

Used by :meth:`caap.Agent.recall` when a ``budget`` is given. A topic is read whether or not
it carries a conflict edge; a conflict cluster touched (memories joined by active conflict
edges) comes in whole when it fits in what is left of the budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import networkx as nx
import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from caap.conflict_graph.graph import ConflictGraph

Vector = npt.NDArray[np.float32]

#: Weight of a member's closeness to its topic's centre, next to its similarity to the query.
CENTRE_WEIGHT = 1.0
#: A topic is scored by the mean of its this many best segment similarities to the query.
TOPIC_TOP = 2


def _units(graph: ConflictGraph, query: Vector) -> list[tuple[float, list[str], Vector | None]]:
    """Topics and the other aspects, each as ``(score, member ids, centre)``, best first."""
    units: list[tuple[float, list[str], Vector | None]] = []
    for topic, score in graph.topics.score_topics(query, top=TOPIC_TOP):
        ids = [m for s in graph.topics.topic_segments(topic) for m in s.members if m in graph]
        if ids:
            units.append((score, ids, graph.topics.topic_centroid(topic)))
    # Memories outside topic formation (caller aspects, non-conversational input): their
    # aspects are units too, scored the same way by their members.
    in_topics = {m for _, ids, _ in units for m in ids}
    for aspect in graph.aspects():
        ids = [m for m in graph.aspect_members(aspect) if m not in in_topics]
        if not ids:
            continue
        sims = np.sort(graph.vectors(ids) @ query)[::-1][:TOPIC_TOP]
        units.append((float(sims.mean()), ids, None))
    units.sort(key=lambda u: -u[0])
    return units


def budgeted(
    graph: ConflictGraph, query: Vector, budget: int
) -> tuple[list[tuple[str, float]], list[str]]:
    """At most ``budget`` memory ids with their similarity to the query, in recall order, and
    the aspects they fill (topics first)."""
    chosen: dict[str, float] = {}
    aspects: list[str] = []
    for _, ids, centre in _units(graph, query):
        if len(chosen) >= budget:
            break
        vecs = graph.vectors(ids)
        qs = vecs @ query
        rank = qs + (CENTRE_WEIGHT * (vecs @ centre) if centre is not None else 0.0)
        sim = dict(zip(ids, qs.tolist(), strict=True))
        for pos in np.argsort(-rank, kind="stable"):
            if len(chosen) >= budget:
                break
            mid = ids[int(pos)]
            if mid in chosen:
                continue
            group = [mid]
            if graph.g.degree(mid):
                # The conflict cluster this member sits in comes whole when it fits.
                comp = [c for c in nx.node_connected_component(graph.g, mid) if c not in chosen]
                if len(comp) <= budget - len(chosen):
                    rest = [c for c in comp if c != mid]
                    rest_sims = graph.vectors(rest) @ query if rest else np.zeros(0)
                    order = np.argsort(-rest_sims, kind="stable")
                    group += [rest[int(i)] for i in order]
                    sim.update(zip(rest, rest_sims.tolist(), strict=True))
            for g_id in group:
                chosen[g_id] = float(sim[g_id])
                a = graph.memory(g_id).aspect
                if a and a not in aspects:
                    aspects.append(a)
    return list(chosen.items()), aspects
