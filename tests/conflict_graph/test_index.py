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


def test_a_batch_of_searches_scored_at_once_finds_the_same_rows() -> None:
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(300, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    one, batched = VectorIndex(16), VectorIndex(16)
    for row in range(200):
        one.add(row, vecs[row])
        batched.add(row, vecs[row])
    batched.remove(7)
    one.remove(7)
    known = batched.scores(vecs[200:])
    assert known is not None and known.shape == (200, 100)
    for j, row in enumerate(range(200, 300)):
        # Each search also sees the rows added since the batch was scored.
        rows, sims = batched.search(vecs[row], 5, known=known[:, j])
        rows_one, sims_one = one.search(vecs[row], 5)
        assert rows == rows_one
        # A matrix product may round the last bit differently from a matrix-vector one.
        assert np.allclose(sims, sims_one, atol=1e-6)
        one.add(row, vecs[row])
        batched.add(row, vecs[row])
    inverted = VectorIndex(16, exact_limit=50)
    for row in range(60):
        inverted.add(row, vecs[row])
    assert inverted.scores(vecs[60:62]) is None
