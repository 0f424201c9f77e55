"""Budgeted recall over topics: the members of the best topics, ranked for the query.

Used by :meth:`caap.Agent.recall` when a ``budget`` is given. The first :data:`HEAD_SHARE` of
the budget goes to the memories nearest the query. Topics (and the aspects of memories outside
topic formation) are scored for the query; the members of the best :data:`REACH` of them are
then ranked together by their similarity to the query plus :data:`CENTRE_WEIGHT` times their
closeness to a centre (the best topic's centre joined with the centre of the :data:`FEEDBACK`
candidates nearest the query), with a bonus of :data:`BEST_BONUS` for being in the best topic,
and the rest of the budget is filled in that order. A topic is read whether or not it carries
a conflict edge.

Ranking by closeness to a centre, rather than reading topics one after another, matters
because a topic may mix two subjects or miss a few turns of its own: the turns nearest the
centre are the ones of the query's subject, wherever the topic model put them, while a topic's
off-subject turns fall behind the next topic's best ones. The query's own nearest memories
come first because a small topic's centre says little (with few turns per subject, the
nearest turns are already most of the subject).

A member with conflict edges brings its conflict cluster (memories joined by active conflict
edges) whole when the rest of the cluster fits in what is left of the budget and holds at most
a quarter of the budget (:data:`CLUSTER_SHARE`): both sides of a small conflict arrive
together, while a topic-sized cluster cannot crowd out the rest of the bank.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from caap.conflict_graph.graph import ConflictGraph

Vector = npt.NDArray[np.float32]

#: Weight of a member's closeness to the best topic's centre, next to its similarity to the query.
CENTRE_WEIGHT = 2.0
#: Added to the score of a member of the best topic.
BEST_BONUS = 0.2
#: How many of the best topics (or aspects) are ranked together.
REACH = 3
#: A topic is scored by the mean of its this many best segment similarities to the query.
TOPIC_TOP = 2
#: Share of the budget given first to the memories nearest the query, whatever their topic.
HEAD_SHARE = 0.3
#: How many of the candidates nearest the query shape the ranking centre (with the best topic).
FEEDBACK = 5
#: A conflict cluster comes whole only when it holds at most this share of the budget (and at
#: least two memories are always allowed).
CLUSTER_SHARE = 0.25


def _units(graph: ConflictGraph, query: Vector) -> list[tuple[float, str, bool]]:
    """Topics and the other aspects, each as ``(score, label, is_topic)``, best first.

    Only scores are computed here; a unit's members are read when it is among the best
    (:func:`_members`), so a query reads a few topics, not all of them.
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


def _members(graph: ConflictGraph, label: str, is_topic: bool) -> list[str]:
    """A unit's member ids."""
    if not is_topic:
        return graph.aspect_members(label)
    return [m for s in graph.topics.topic_segments(label) for m in s.members if m in graph]


def _unit_vector(vecs: Vector) -> Vector:
    total = vecs.sum(axis=0)
    out: Vector = (total / (float(np.linalg.norm(total)) or 1.0)).astype(np.float32)
    return out


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


def _ranked(graph: ConflictGraph, query: Vector, budget: int) -> tuple[list[str], Vector]:
    """Candidate ids in fill order and their similarities to the query.

    First the :data:`HEAD_SHARE` of the budget nearest the query (whatever their topic); then
    the members of the best :data:`REACH` units, ranked by query similarity plus closeness to a
    centre: the best unit's centre plus the centre of the :data:`FEEDBACK` candidates nearest
    the query. When the best units hold fewer than ``budget`` members, the next units' members
    join them.
    """
    units = _units(graph, query)
    ids: list[str] = []
    best: list[bool] = []
    reached = 0
    for _, label, is_topic in units:
        if reached >= REACH and len(ids) >= budget:
            break
        members = _members(graph, label, is_topic)
        if not members:
            continue
        ids += members
        best += [reached == 0] * len(members)
        reached += 1
    head = [mid for mid, _ in graph.nearest(query, max(0, round(HEAD_SHARE * budget)))]
    if not ids:
        return head, graph.vectors(head) @ query if head else np.zeros(0, dtype=np.float32)
    vecs = graph.vectors(ids)
    sims: Vector = (vecs @ query).astype(np.float32)
    in_best = np.asarray(best, dtype=bool)
    feedback = np.argsort(-sims, kind="stable")[:FEEDBACK]
    centre = _unit_vector(
        np.stack([_unit_vector(vecs[in_best]), _unit_vector(vecs[feedback])]).astype(np.float32)
    )
    score = sims + CENTRE_WEIGHT * (vecs @ centre) + BEST_BONUS * in_best.astype(np.float32)
    order = [ids[int(i)] for i in np.argsort(-score, kind="stable")]
    taken = set(head)
    ranked = head + [m for m in order if m not in taken]
    # Similarities already computed for the units' members; only head memories outside them
    # are read again.
    known = dict(zip(ids, sims.tolist(), strict=True))
    outside = [m for m in head if m not in known]
    if outside:
        known.update(zip(outside, (graph.vectors(outside) @ query).tolist(), strict=True))
    out: Vector = np.asarray([known[m] for m in ranked], dtype=np.float32)
    return ranked, out


def budgeted(
    graph: ConflictGraph, query: Vector, budget: int
) -> tuple[list[tuple[str, float]], list[str]]:
    """At most ``budget`` memory ids with their similarity to the query, in recall order, and
    the aspects they fill (in the order first filled)."""
    ranked, sims = _ranked(graph, query, budget)
    sim = dict(zip(ranked, sims.tolist(), strict=True))
    cluster_cap = max(2, int(budget * CLUSTER_SHARE))
    chosen: dict[str, float] = {}
    aspects: list[str] = []
    for mid in ranked:
        if len(chosen) >= budget:
            break
        if mid in chosen:
            continue
        group = [mid]
        if graph.g.degree(mid):
            # The conflict cluster this member sits in comes whole when it fits.
            comp = _component(graph, mid, chosen, min(budget - len(chosen), cluster_cap))
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
