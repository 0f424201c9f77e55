"""Budgeted recall over topics: the best topics for a query, their members ranked for it.

Used by :meth:`caap.Agent.recall` when a ``budget`` is given. A topic is read whether or not
it carries a conflict edge; a conflict cluster touched (memories joined by active conflict
edges) comes in whole when it fits in what is left of the budget.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from caap.conflict_graph.graph import ConflictGraph

Vector = npt.NDArray[np.float32]

#: Weight of a member's closeness to its topic's centre, next to its similarity to the query.
CENTRE_WEIGHT = 1.0
#: A topic is scored by the mean of its this many best segment similarities to the query.
TOPIC_TOP = 2


def _units(graph: ConflictGraph, query: Vector) -> list[tuple[float, str, bool]]:
    """Topics and the other aspects, each as ``(score, label, is_topic)``, best first.

    Only scores are computed here; a unit's members and centre are read when the budget
    reaches it (:func:`_members`), so a query reads the few best topics, not all of them.
    """
    units: list[tuple[float, str, bool]] = [
        (score, topic, True) for topic, score in graph.topics.score_topics(query, top=TOPIC_TOP)
    ]
    # Memories outside topic formation (caller aspects, non-conversational input): their
    # aspects are units too, scored the same way by their members. A memory in topic
    # formation has its topic as its aspect, so an aspect named like a topic is one.
    topics = {label for _, label, _ in units}
    for aspect in graph.aspects():
        if aspect in topics:
            continue
        ids = graph.aspect_members(aspect)
        sims = np.sort(graph.vectors(ids) @ query)[::-1][:TOPIC_TOP]
        units.append((float(sims.mean()), aspect, False))
    units.sort(key=lambda u: -u[0])
    return units


def _members(graph: ConflictGraph, label: str, is_topic: bool) -> tuple[list[str], Vector | None]:
    """A unit's member ids and, for a topic, its centre."""
    if not is_topic:
        return graph.aspect_members(label), None
    ids = [m for s in graph.topics.topic_segments(label) for m in s.members if m in graph]
    return ids, graph.topics.topic_centroid(label)


def _component(graph: ConflictGraph, start: str, skip: dict[str, float], limit: int) -> list[str]:
    """The conflict cluster (connected memories) of ``start`` without those in ``skip``, or
    ``[]`` when it holds more than ``limit`` of them (the walk stops there)."""
    adj = graph.g.adj
    seen = {start}
    frontier = [start]
    count = 0 if start in skip else 1
    while frontier:
        node = frontier.pop()
        for nbr in adj[node]:
            if nbr not in seen:
                seen.add(nbr)
                frontier.append(nbr)
                if nbr not in skip:
                    count += 1
                    if count > limit:
                        return []
    return [c for c in seen if c not in skip]


def budgeted(
    graph: ConflictGraph, query: Vector, budget: int
) -> tuple[list[tuple[str, float]], list[str]]:
    """At most ``budget`` memory ids with their similarity to the query, in recall order, and
    the aspects they fill (topics first)."""
    chosen: dict[str, float] = {}
    aspects: list[str] = []
    for _, label, is_topic in _units(graph, query):
        if len(chosen) >= budget:
            break
        ids, centre = _members(graph, label, is_topic)
        if not ids:
            continue
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
                comp = _component(graph, mid, chosen, budget - len(chosen))
                if comp:
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
