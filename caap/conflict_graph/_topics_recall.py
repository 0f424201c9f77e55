"""Budgeted recall: the memories that share the query's subject, ranked by a walk from it.

Used by :meth:`caap.Agent.recall` when a ``budget`` is given. The candidates (the pool) are the
memories nearest the query, :data:`POOL_FACTOR` times the budget and at least
:data:`POOL_MIN`, plus the members of the topic (or aspect, for memories outside topic
formation) that best matches the query. The first :data:`HEAD_SHARE` of the budget goes to the
candidates that best match the query; the rest is filled in the order of a personalised
PageRank over the pool's nearest-neighbour graph, restarting at the query's best matches. A
memory is matched to the query, and to the other candidates, by the cosine of the embeddings
plus a share of the cosine of TF-IDF word rows (:mod:`caap.conflict_graph._lexical`): rare
words that two turns share ("the chore chart", a person's name) hold a subject together when a
short chatty turn's embedding is pulled elsewhere.

Why a walk and not the query's nearest memories: the sides of a conflict are told across many
conversations, and most of their turns are far from the query's wording (a query about a
sticker for clearing the table; turns about a chart relaunched with new prizes, or abandoned in
May). They are near the turns that are near the query. Ranking the members of the best topics
(the previous design) depended on the topics being right; the walk uses the same neighbourhood
without a hard partition (measured in docs/benchmark.md, issue 13).

A member with conflict edges brings its conflict cluster (memories joined by active conflict
edges) whole when the rest of the cluster fits in what is left of the budget and holds at most
a quarter of the budget (:data:`CLUSTER_SHARE`): both sides of a small conflict arrive
together, while a topic-sized cluster cannot crowd out the rest of the bank.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from caap.conflict_graph._lexical import tfidf

if TYPE_CHECKING:
    from caap.conflict_graph.graph import ConflictGraph

Vector = npt.NDArray[np.float32]

#: The pool holds this many memories nearest the query per unit of budget ...
POOL_FACTOR = 10
#: ... and at least this many.
POOL_MIN = 100
#: A topic (or aspect) is scored by the mean of its this many best similarities to the query.
TOPIC_TOP = 2
#: Share of the budget given first to the candidates that best match the query.
HEAD_SHARE = 0.3
#: Weight of word overlap (TF-IDF cosine) next to embedding similarity, for the query ...
QUERY_LEXICAL = 0.5
#: ... and between two candidates (the neighbour graph).
GRAPH_LEXICAL = 0.5
#: Each candidate links to this many nearest candidates.
NEIGHBOURS = 5
#: Probability that the walk restarts at the query's best matches.
RESTART = 0.3
#: Softmax temperature of the restart distribution over the candidates' query match.
TEMPERATURE = 0.05
#: Steps of the power iteration (the rank moves by less than (1 - RESTART)^steps after).
PAGERANK_STEPS = 30
#: A conflict cluster comes whole only when it holds at most this share of the budget (and at
#: least two memories are always allowed).
CLUSTER_SHARE = 0.25


def _best_unit(graph: ConflictGraph, query: Vector) -> tuple[str, bool] | None:
    """The topic, or aspect of memories outside topic formation, that best matches the query,
    as ``(label, is_topic)``; ``None`` when there is neither.

    Each is scored by the mean of its :data:`TOPIC_TOP` best similarities to the query; only
    scores are computed here, and only the best one's members are read (:func:`_members`).
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
    if not units:
        return None
    _, label, is_topic = max(units, key=lambda u: u[0])  # the first of equals
    return label, is_topic


def _members(graph: ConflictGraph, label: str, is_topic: bool) -> list[str]:
    """A unit's member ids."""
    if not is_topic:
        return graph.aspect_members(label)
    return [m for s in graph.topics.topic_segments(label) for m in s.members if m in graph]


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


def _pool(graph: ConflictGraph, query: Vector, budget: int) -> list[str]:
    """The candidates of one recall: the :data:`POOL_FACTOR` × budget (at least
    :data:`POOL_MIN`) memories nearest the query, then the members of the best unit (topic or
    aspect) not among them, nearest the query first, up to as many again."""
    size = max(POOL_MIN, POOL_FACTOR * budget)
    pool = [mid for mid, _ in graph.nearest(query, size)]
    seen = set(pool)
    best = _best_unit(graph, query)
    if best is not None:
        rest = [m for m in _members(graph, *best) if m not in seen]
        if rest:
            sims = graph.vectors(rest) @ query
            pool += [rest[int(i)] for i in np.argsort(-sims, kind="stable")[:size]]
    return pool


def _propagated(
    vecs: Vector, words: Vector, teleport: Vector, *, neighbours: int, restart: float
) -> Vector:
    """Personalised PageRank over the k-nearest-neighbour graph of the pool.

    Two memories are near by the cosine of their embeddings plus :data:`GRAPH_LEXICAL` times the
    cosine of their TF-IDF rows; each links to its ``neighbours`` nearest (edges kept both ways,
    weighted by that closeness). The walk restarts at ``teleport`` with probability ``restart``.
    """
    n = len(vecs)
    close = vecs @ vecs.T + GRAPH_LEXICAL * (words @ words.T)
    np.fill_diagonal(close, -np.inf)
    k = min(neighbours, n - 1)
    adj = np.zeros((n, n), dtype=np.float32)
    if k > 0:
        nbr = np.argpartition(-close, k - 1, axis=1)[:, :k]
        rows = np.repeat(np.arange(n), k)
        w = np.maximum(close[rows, nbr.ravel()], 0.0)
        adj[rows, nbr.ravel()] = w
        adj = np.maximum(adj, adj.T)
    deg = adj.sum(axis=1, keepdims=True)
    deg[deg == 0] = 1.0
    walk = adj / deg
    rank = teleport.copy()
    for _ in range(PAGERANK_STEPS):
        rank = restart * teleport + (1.0 - restart) * (rank @ walk)
    out: Vector = rank.astype(np.float32)
    return out


def _ranked(
    graph: ConflictGraph, query: Vector, query_text: str, budget: int
) -> tuple[list[str], Vector]:
    """Candidate ids in fill order and their similarities to the query.

    First the :data:`HEAD_SHARE` of the budget that best matches the query (embedding plus
    :data:`QUERY_LEXICAL` times word overlap); then the rest of the pool by personalised
    PageRank from the query over the pool's nearest-neighbour graph, so that a memory joins the
    bank because memories like the query's best matches are like it, not only because it is
    like the query itself.
    """
    ids = _pool(graph, query, budget)
    if not ids:
        return [], np.zeros(0, dtype=np.float32)
    vecs = graph.vectors(ids)
    sims: Vector = (vecs @ query).astype(np.float32)
    words = tfidf([graph.memory(m).text for m in ids] + [query_text], shared_only=True)
    match = sims + QUERY_LEXICAL * (words[:-1] @ words[-1])
    teleport = np.exp((match - match.max()) / TEMPERATURE).astype(np.float32)
    teleport /= teleport.sum()
    rank = _propagated(vecs, words[:-1], teleport, neighbours=NEIGHBOURS, restart=RESTART)
    head = [int(i) for i in np.argsort(-match, kind="stable")[: round(HEAD_SHARE * budget)]]
    taken = set(head)
    order = head + [int(i) for i in np.argsort(-rank, kind="stable") if int(i) not in taken]
    out: Vector = sims[order]
    return [ids[i] for i in order], out


def budgeted(
    graph: ConflictGraph, query: Vector, budget: int, query_text: str = ""
) -> tuple[list[tuple[str, float]], list[str]]:
    """At most ``budget`` memory ids with their similarity to the query, in recall order, and
    the aspects they fill (in the order first filled)."""
    ranked, sims = _ranked(graph, query, query_text, budget)
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
