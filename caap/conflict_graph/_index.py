"""Nearest-neighbour blocking for conflict detection: exact while small, inverted lists after.

Every write asks for its nearest memories (the candidates it is typed against). A brute-force
scan is exact and fastest up to tens of thousands of vectors, but makes each write linear in
the user's memory. Past ``exact_limit`` rows the index switches to an inverted file: the vectors
are grouped under centroids (spherical k-means on the vectors seen so far), a query scans only
the ``nprobe`` nearest groups, so the cost of a write grows with about ``sqrt(n)``.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = ["VectorIndex"]

Vector = npt.NDArray[np.float32]


class _List:
    __slots__ = ("n", "rows", "vecs")

    def __init__(self, dim: int) -> None:
        self.vecs: Vector = np.zeros((16, dim), dtype=np.float32)
        self.rows: npt.NDArray[np.int64] = np.zeros(16, dtype=np.int64)
        self.n = 0

    def add(self, row: int, vec: Vector) -> None:
        if self.n == len(self.rows):
            self.vecs = np.concatenate([self.vecs, np.zeros_like(self.vecs)])
            self.rows = np.concatenate([self.rows, np.zeros_like(self.rows)])
        self.vecs[self.n] = vec
        self.rows[self.n] = row
        self.n += 1


class VectorIndex:
    """Unit vectors under integer row ids; ``search`` returns the nearest live rows.

    Args:
        dim: Vector dimension.
        exact_limit: Up to this many rows, search is an exact scan.
        nprobe: Groups scanned per query once the index is inverted.
        seed: Seed of the k-means initialisation (the index is deterministic).
    """

    def __init__(
        self, dim: int, *, exact_limit: int = 20_000, nprobe: int = 12, seed: int = 0
    ) -> None:
        if exact_limit < 1 or nprobe < 1:
            raise ValueError("exact_limit and nprobe must be positive")
        self.dim = dim
        self.exact_limit = exact_limit
        self.nprobe = nprobe
        self.seed = seed
        self._vecs: Vector = np.zeros((0, dim), dtype=np.float32)
        self._alive: npt.NDArray[np.bool_] = np.zeros(0, dtype=bool)
        self._n = 0
        self._centroids: Vector | None = None
        self._lists: list[_List] = []

    @property
    def inverted(self) -> bool:
        """Whether searches scan inverted lists (approximate) rather than every row."""
        return self._centroids is not None

    def __len__(self) -> int:
        return int(self._alive[: self._n].sum())

    def add(self, row: int, vector: Vector) -> None:
        """Store ``vector`` under ``row`` (rows are dense: 0, 1, 2, ...)."""
        if row != self._n:
            raise ValueError(f"rows must be added in order: expected {self._n}, got {row}")
        if row == len(self._vecs):
            grown = np.zeros((max(16, 2 * len(self._vecs)), self.dim), dtype=np.float32)
            grown[:row] = self._vecs[:row]
            self._vecs = grown
            alive = np.zeros(len(grown), dtype=bool)
            alive[:row] = self._alive[:row]
            self._alive = alive
        self._vecs[row] = vector
        self._alive[row] = True
        self._n += 1
        if self._centroids is not None:
            self._lists[int(np.argmax(self._centroids @ vector))].add(row, vector)
        elif self._n > self.exact_limit:
            self._build()

    def remove(self, row: int) -> None:
        """Forget a row (it is never returned again)."""
        if 0 <= row < self._n:
            self._alive[row] = False

    def scores(self, vectors: Vector) -> Vector | None:
        """Similarities of every stored row to each of ``vectors`` (one column each), for a
        batch of searches that follows (``search(..., known=column)``): one matrix product
        instead of one scan per search. ``None`` once the index is inverted."""
        if self._centroids is not None or self._n == 0:
            return None
        out: Vector = self._vecs[: self._n] @ np.asarray(vectors, dtype=np.float32).T
        return out

    def search(
        self, vector: Vector, k: int, *, known: Vector | None = None
    ) -> tuple[list[int], list[float]]:
        """The ``k`` nearest live rows and their similarities (dot products), best first.

        ``known``: ``vector``'s similarities to the first ``len(known)`` rows, computed
        earlier by :meth:`scores` (rows added since are scored here).
        """
        if self._n == 0 or k < 1:
            return [], []
        if self._centroids is None:
            rows = np.arange(self._n)
            if known is not None and len(known) <= self._n:
                m = len(known)
                sims = np.concatenate([known, self._vecs[m : self._n] @ vector])
            else:
                sims = self._vecs[: self._n] @ vector
        else:
            near = np.argsort(-(self._centroids @ vector))[: self.nprobe]
            lists = [self._lists[int(c)] for c in near if self._lists[int(c)].n]
            rows = np.concatenate([lst.rows[: lst.n] for lst in lists])
            sims = np.concatenate([lst.vecs[: lst.n] @ vector for lst in lists])
        sims = np.where(self._alive[rows], sims, -np.inf)
        k = min(k, len(sims))
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.argsort(-sims[top], kind="stable")]
        keep = [int(t) for t in top if np.isfinite(sims[t])]
        return [int(rows[t]) for t in keep], [float(sims[t]) for t in keep]

    def _build(self) -> None:
        data = self._vecs[: self._n]
        n_lists = max(8, int(4 * math.sqrt(self._n)))
        rng = np.random.default_rng(self.seed)
        centroids = data[rng.choice(self._n, n_lists, replace=False)].copy()
        for _ in range(6):
            assign = np.argmax(data @ centroids.T, axis=1)
            sums = np.zeros_like(centroids)
            np.add.at(sums, assign, data)
            norms = np.linalg.norm(sums, axis=1, keepdims=True)
            empty = norms[:, 0] == 0
            centroids = np.where(empty[:, None], centroids, sums / np.maximum(norms, 1e-12))
        self._centroids = centroids.astype(np.float32)
        self._lists = [_List(self.dim) for _ in range(n_lists)]
        assign = np.argmax(data @ self._centroids.T, axis=1)
        for row, c in enumerate(assign.tolist()):
            self._lists[c].add(row, data[row])
