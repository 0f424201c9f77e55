"""Topics of conversational memories: segments of conversation grouped by a community method.

A conversation is split into **segments** where it changes subject (a turn far from the last
few turns of the open segment starts a new one); segments are grouped into **topics** by
Louvain communities over a k-nearest-neighbour graph of segment centroids. The model is kept
up to date as memories arrive:

- a turn joins the open segment of the conversation it continues (the previous write, same
  world date) unless it changes subject;
- the open segment takes the topic its nearest segments hold (weighted by similarity), or
  founds a new topic when none is near enough;
- every ``recluster_every`` new segments, the neighbourhood of the newest segments (at most
  ``recluster_max`` segments) is re-clustered with Louvain and its segments relabelled, the
  old labels kept where a new community overlaps them most.

Work per write is bounded: one product with the segment centroids, plus a re-clustering of at
most ``recluster_max`` segments every ``recluster_every`` segments. The model never reads a
memory's provenance or metadata: only vectors, order and world dates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
import numpy.typing as npt

__all__ = ["Segment", "TopicConfig", "TopicModel", "TopicMove"]

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class TopicConfig:
    """Thresholds of topic formation (defaults measured on the shipped TANGLE dialogue)."""

    split: float = 0.3
    """A turn whose similarity to the open segment's recent turns is below this starts a new
    segment (a change of subject)."""
    window: int = 3
    """How many of the open segment's latest turns a new turn is compared with."""
    neighbours: int = 6
    """k of the segment k-nearest-neighbour graph (and of a new segment's topic vote)."""
    join: float = 0.35
    """A segment joins its neighbours' topic only when their similarity reaches this."""
    recluster_every: int = 4
    """Re-cluster the newest segments' neighbourhood after this many new segments."""
    recluster_max: int = 240
    """Most segments one re-clustering visits (bounds the work of one write)."""
    resolution: float = 1.0
    """Louvain resolution (higher: smaller topics)."""


@dataclass
class Segment:
    """A run of consecutive turns of one conversation on one subject."""

    id: str
    topic: str
    day: str | None
    members: list[str] = field(default_factory=list)
    total: Vector | None = None
    """Sum of the members' unit vectors (the centroid up to scale)."""
    recent: list[Vector] = field(default_factory=list)

    def centroid(self) -> Vector:
        """The unit mean of the members' vectors."""
        assert self.total is not None
        norm = float(np.linalg.norm(self.total))
        out: Vector = (self.total / (norm or 1.0)).astype(np.float32)
        return out


@dataclass
class TopicMove:
    """Memories whose topic changed: ``old`` -> ``new`` for each id."""

    memory_ids: list[str]
    old: str
    new: str


def _unit(v: Vector) -> Vector:
    n = float(np.linalg.norm(v))
    out: Vector = (v / (n or 1.0)).astype(np.float32)
    return out


class TopicModel:
    """Segments and topics of one user's conversational memories.

    Args:
        dimension: Vector dimension.
        fresh_label: Called with a memory id to name a new topic (must return an unused label).
        config: Thresholds.
    """

    def __init__(
        self,
        dimension: int,
        fresh_label: Callable[[str], str],
        config: TopicConfig | None = None,
    ) -> None:
        self.config = config or TopicConfig()
        self._fresh_label = fresh_label
        self._dim = dimension
        self.segments: dict[str, Segment] = {}
        self._order: list[str] = []  # segment ids in creation order
        self._row: dict[str, int] = {}
        self._cent = np.zeros((0, dimension), dtype=np.float32)
        self._live = np.zeros(0, dtype=bool)
        self._of: dict[str, str] = {}  # memory id -> segment id
        self._by_topic: dict[str, set[str]] = {}
        self._open: str | None = None
        self._last: str | None = None  # the last memory written (continuity)
        self._since = 0
        self._next = 1
        self.reclusters = 0

    # -- reading ---------------------------------------------------------------------------
    def segment_of(self, memory_id: str) -> str | None:
        """The segment id holding a memory, or ``None``."""
        return self._of.get(memory_id)

    def topic_of(self, memory_id: str) -> str | None:
        """The topic label of a memory, or ``None`` when it is in no segment."""
        s = self._of.get(memory_id)
        return self.segments[s].topic if s is not None else None

    def topics(self) -> list[str]:
        """Every topic label that holds a segment."""
        return [t for t, segs in self._by_topic.items() if segs]

    def topic_segments(self, topic: str) -> list[Segment]:
        """The segments of one topic, in creation order."""
        segs = self._by_topic.get(topic, set())
        return sorted((self.segments[s] for s in segs), key=lambda s: self._row[s.id])

    def score_topics(self, query: Vector, top: int = 2) -> list[tuple[str, float]]:
        """Topics ranked for a query vector: the mean of their ``top`` best segment similarities."""
        if not self.segments:
            return []
        # Dead rows (emptied segments) are skipped below, not zeroed in a copy first.
        n = len(self._order)
        sims = (self._cent[:n] @ query).tolist()
        live = self._live[:n].tolist()
        by_topic: dict[str, list[float]] = {}
        for sid, row in self._row.items():
            if live[row]:
                by_topic.setdefault(self.segments[sid].topic, []).append(sims[row])
        scored = []
        for t, vals in by_topic.items():
            vals.sort(reverse=True)
            best = vals[:top]
            scored.append((t, sum(best) / len(best)))
        scored.sort(key=lambda x: -x[1])
        return scored

    def topic_centroid(self, topic: str) -> Vector:
        """The unit mean of a topic's member vectors."""
        total = np.zeros(self._dim, dtype=np.float32)
        for s in self.topic_segments(topic):
            if s.total is not None:
                total += s.total
        return _unit(total)

    # -- writing ---------------------------------------------------------------------------
    def add(
        self, memory_id: str, vector: Vector, day: str | None
    ) -> tuple[str, str, list[TopicMove]]:
        """Place one memory; returns its segment, its topic and the moves this write caused.

        The moves list memories (this one excluded) whose topic changed.
        """
        cfg = self.config
        v = _unit(np.asarray(vector, dtype=np.float32))
        seg = self.segments.get(self._open) if self._open is not None else None
        if seg is not None and (seg.day != day or self._last not in seg.members):
            seg = None
        if seg is not None:
            recent = _unit(np.sum(seg.recent[-cfg.window :], axis=0))
            if float(recent @ v) < cfg.split:
                seg = None
        moves: list[TopicMove] = []
        new_segment = seg is None
        if seg is None:
            sid = f"seg{self._next}"
            self._next += 1
            seg = Segment(id=sid, topic="", day=day, total=np.zeros(self._dim, np.float32))
            self._put(seg)
            self._open = sid
            self._since += 1
        assert seg.total is not None
        seg.members.append(memory_id)
        seg.total = seg.total + v
        seg.recent = [*seg.recent[-(cfg.window - 1) :], v] if cfg.window > 1 else [v]
        self._cent[self._row[seg.id]] = seg.centroid()
        self._of[memory_id] = seg.id
        self._last = memory_id
        # The open segment's topic is re-decided while it grows (one product per write).
        topic = self._vote(seg) or (seg.topic if not new_segment else "")
        if not topic:
            topic = self._fresh_label(memory_id)
        if topic != seg.topic:
            moves += self._retopic(seg, topic, exclude=memory_id)
        if self._since >= cfg.recluster_every:
            self._since = 0
            moves += self._recluster(exclude=memory_id)
        return seg.id, self.segments[seg.id].topic, [m for m in moves if m.memory_ids]

    def restore(self, memory_id: str, vector: Vector, segment_id: str, topic: str) -> None:
        """Put back a stored memory in its stored segment and topic (no re-clustering)."""
        v = _unit(np.asarray(vector, dtype=np.float32))
        seg = self.segments.get(segment_id)
        if seg is None:
            seg = Segment(
                id=segment_id, topic=topic, day=None, total=np.zeros(self._dim, np.float32)
            )
            self._put(seg)
            self._by_topic.setdefault(topic, set()).add(segment_id)
            digits = segment_id.removeprefix("seg")
            if digits.isdigit():
                self._next = max(self._next, int(digits) + 1)
        assert seg.total is not None
        seg.members.append(memory_id)
        seg.total = seg.total + v
        seg.recent = [*seg.recent[-(self.config.window - 1) :], v]
        self._cent[self._row[seg.id]] = seg.centroid()
        self._of[memory_id] = segment_id
        # A restored conversation is closed: the next write starts a new segment.
        self._open = None

    def remove(self, memory_id: str, vector: Vector) -> None:
        """Take a memory out of its segment (an emptied segment disappears)."""
        sid = self._of.pop(memory_id, None)
        if sid is None:
            return
        seg = self.segments[sid]
        seg.members.remove(memory_id)
        assert seg.total is not None
        seg.total = seg.total - _unit(np.asarray(vector, dtype=np.float32))
        if not seg.members:
            self._live[self._row[sid]] = False
            self._by_topic.get(seg.topic, set()).discard(sid)
            if self._open == sid:
                self._open = None
        else:
            self._cent[self._row[sid]] = seg.centroid()

    # -- internals -------------------------------------------------------------------------
    def _put(self, seg: Segment) -> None:
        row = len(self._order)
        if row == len(self._cent):
            grown = np.zeros((max(16, 2 * len(self._cent)), self._dim), np.float32)
            grown[:row] = self._cent[:row]
            live = np.zeros(len(grown), dtype=bool)
            live[:row] = self._live[:row]
            self._cent, self._live = grown, live
        self._order.append(seg.id)
        self._row[seg.id] = row
        self._live[row] = True
        self.segments[seg.id] = seg

    def _vote(self, seg: Segment) -> str | None:
        """The topic of the segment's nearest other segments, weighted by similarity."""
        cfg = self.config
        n = len(self._order)
        # Dead rows are masked after the product (no copy of every centroid per write).
        sims = self._cent[:n] @ self._cent[self._row[seg.id]]
        sims[~self._live[:n]] = -1.0
        sims[self._row[seg.id]] = -1.0
        k = min(cfg.neighbours, len(sims) - 1)
        if k <= 0:
            return None
        top = np.argpartition(-sims, k - 1)[:k]
        votes: dict[str, float] = {}
        for r in top:
            s = float(sims[r])
            if s >= cfg.join:
                t = self.segments[self._order[int(r)]].topic
                votes[t] = votes.get(t, 0.0) + s
        if not votes:
            return None
        return max(votes.items(), key=lambda kv: (kv[1], kv[0]))[0]

    def _retopic(self, seg: Segment, topic: str, exclude: str | None = None) -> list[TopicMove]:
        old = seg.topic
        if old:
            self._by_topic.get(old, set()).discard(seg.id)
        seg.topic = topic
        self._by_topic.setdefault(topic, set()).add(seg.id)
        if not old:
            return [TopicMove([m for m in seg.members if m != exclude], old, topic)]
        return [TopicMove([m for m in seg.members if m != exclude], old, topic)]

    def _recluster(self, exclude: str | None = None) -> list[TopicMove]:
        """Louvain over the k-NN graph of the newest segments' neighbourhood (bounded)."""
        cfg = self.config
        n = len(self._order)
        live_rows = np.flatnonzero(self._live[:n])
        if len(live_rows) < 3:
            return []
        newest = [int(r) for r in live_rows[-cfg.recluster_every :]]
        cents = self._cent[:n]  # only live rows are read below
        # The region: the newest segments' topics and their nearest segments' topics, then
        # the segments nearest the newest ones, cut at recluster_max.
        near = cents[live_rows] @ cents[newest].T  # (live, newest)
        closeness = near.max(axis=1)
        topics = {self.segments[self._order[r]].topic for r in newest}
        for j in range(len(newest)):
            for r in live_rows[np.argsort(-near[:, j])[: cfg.neighbours + 1]]:
                topics.add(self.segments[self._order[int(r)]].topic)
        # Rows of the touched topics, read off the topic index (not a scan of every segment).
        touched = np.zeros(n, dtype=bool)
        for t in topics:
            for sid in self._by_topic.get(t, ()):
                touched[self._row[sid]] = True
        in_topic = touched[live_rows]
        # Members of the touched topics first, then by closeness to the newest segments.
        order = np.lexsort((-closeness, ~in_topic))
        region = [int(live_rows[i]) for i in order[: cfg.recluster_max]]
        if len(region) < 3:
            return []
        sub = cents[region]
        sims = sub @ sub.T
        np.fill_diagonal(sims, -1.0)
        k = min(cfg.neighbours, len(region) - 1)
        g = nx.Graph()
        g.add_nodes_from(range(len(region)))
        for i in range(len(region)):
            for j in np.argpartition(-sims[i], k - 1)[:k]:
                w = float(sims[i, int(j)])
                if w > 0:
                    prev = g.get_edge_data(i, int(j), {}).get("weight", 0.0)
                    g.add_edge(i, int(j), weight=max(w, prev))
        communities = nx.community.louvain_communities(
            g, weight="weight", resolution=cfg.resolution, seed=0
        )
        self.reclusters += 1
        # Keep labels stable: each community takes the old label it overlaps most, largest
        # overlaps first; a community left without one gets a fresh label.
        labels = [self.segments[self._order[r]].topic for r in region]
        pairs = []
        for c, members in enumerate(communities):
            counts: dict[str, int] = {}
            for i in members:
                counts[labels[i]] = counts.get(labels[i], 0) + 1
            pairs += [(cnt, lab, c) for lab, cnt in counts.items()]
        pairs.sort(key=lambda p: (-p[0], p[1], p[2]))
        taken: dict[int, str] = {}
        used: set[str] = set()
        for _, lab, c in pairs:
            if c not in taken and lab not in used:
                taken[c] = lab
                used.add(lab)
        moves: list[TopicMove] = []
        for c, members in enumerate(communities):
            label = taken.get(c)
            if label is None:
                first = self.segments[self._order[region[min(members)]]].members[0]
                label = self._fresh_label(first)
            for i in sorted(members):
                seg = self.segments[self._order[region[i]]]
                if seg.topic != label:
                    old = seg.topic
                    moves += [
                        TopicMove(m.memory_ids, old, label)
                        for m in self._retopic(seg, label, exclude=exclude)
                    ]
        return moves


def topic_agreement(assigned: Sequence[str], truth: Sequence[str]) -> float:
    """Adjusted Rand index of two labelings of the same items (1 = identical partitions)."""
    from collections import Counter
    from math import comb

    n = len(assigned)
    if n != len(truth):
        raise ValueError(f"assigned has {n} labels, truth has {len(truth)}")
    if n < 2:
        return 1.0
    pairs = Counter(zip(assigned, truth, strict=True))
    a, b = Counter(assigned), Counter(truth)
    index = sum(comb(c, 2) for c in pairs.values())
    sa, sb = sum(comb(c, 2) for c in a.values()), sum(comb(c, 2) for c in b.values())
    expected = sa * sb / comb(n, 2)
    top = (sa + sb) / 2
    if top == expected:
        return 1.0
    return (index - expected) / (top - expected)
