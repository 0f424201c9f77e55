import numpy as np
import pytest

from caap.conflict_graph._index import VectorIndex


def _unit(rng: np.random.Generator, n: int, dim: int = 32) -> np.ndarray:
    # Clustered data, as sentence embeddings are: 40 topics, points scattered around each.
    centres = rng.normal(size=(40, dim))
    pts = centres[rng.integers(0, 40, n)] + 0.35 * rng.normal(size=(n, dim))
    pts /= np.linalg.norm(pts, axis=1, keepdims=True)
    return pts.astype(np.float32)


def test_exact_scan_matches_brute_force_and_skips_removed_rows() -> None:
    rng = np.random.default_rng(1)
    data = _unit(rng, 300)
    idx = VectorIndex(32, exact_limit=1000)
    for i, v in enumerate(data):
        idx.add(i, v)
    idx.remove(7)
    q = data[7]
    rows, sims = idx.search(q, 5)
    brute = np.argsort(-(data @ q))
    assert 7 not in rows
    assert rows == [int(r) for r in brute if r != 7][:5]
    assert sims == sorted(sims, reverse=True)
    assert not idx.inverted and len(idx) == 299


def test_inverted_lists_keep_nearest_neighbours_past_the_exact_limit() -> None:
    rng = np.random.default_rng(2)
    data = _unit(rng, 3000)
    idx = VectorIndex(32, exact_limit=1000, nprobe=8)
    for i, v in enumerate(data):
        idx.add(i, v)
    assert idx.inverted
    # Every stored vector finds itself first, including rows added after the lists were built.
    for i in range(0, 3000, 37):
        rows, _ = idx.search(data[i], 3)
        assert rows[0] == i
    # And most true 10-nearest neighbours are among the 10 returned.
    recall = []
    for i in range(0, 3000, 101):
        truth = set(np.argsort(-(data @ data[i]))[:10].tolist())
        got, _ = idx.search(data[i], 10)
        recall.append(len(truth & set(got)) / 10)
    assert float(np.mean(recall)) >= 0.9
    idx.remove(5)
    assert 5 not in idx.search(data[5], 10)[0]


def test_rows_must_be_dense_and_parameters_positive() -> None:
    idx = VectorIndex(4)
    with pytest.raises(ValueError, match="in order"):
        idx.add(3, np.ones(4, dtype=np.float32))
    with pytest.raises(ValueError):
        VectorIndex(4, nprobe=0)
    assert idx.search(np.ones(4, dtype=np.float32), 3) == ([], [])
