"""Scorers: exact top-k equals brute force; the faiss IVF scorer's recall is measured against exact."""

import numpy as np
import pytest

from vidlab.clip.scorers import ExactScorer, make_scorer, recall_at_k


def _unit(n, d, seed):
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_exact_scorer_matches_brute_force_single_and_batched():
    emb = _unit(5000, 32, 0).astype(np.float16)
    q = _unit(7, 32, 1)
    ref = np.asarray(emb, np.float32) @ q.T
    s = ExactScorer(emb)
    scores, rows = s.search(q, 10)
    for j in range(7):
        top = np.argsort(-ref[:, j], kind="stable")[:10]
        np.testing.assert_array_equal(rows[j], top)  # fp32-exact order thanks to the rescoring step
        np.testing.assert_allclose(scores[j], ref[top, j], rtol=1e-5, atol=1e-6)
        s1, r1 = s.search(q[j], 10)  # a 1-D query gives the same row
        np.testing.assert_array_equal(r1[0], rows[j])
    assert s.search(q[0], 10**6)[1].shape == (1, 5000)  # k beyond N: everything


def test_query_dimension_checked():
    with pytest.raises(ValueError, match=r"\[Q, 16\]"):
        ExactScorer(_unit(10, 16, 0)).search(np.zeros(8, np.float32), 3)
    with pytest.raises(ValueError, match="unknown scorer"):
        make_scorer("annoy", _unit(10, 16, 0))


def test_faiss_recall_against_exact():
    pytest.importorskip("faiss")
    # clustered data, like frame embeddings of a few hundred scenes
    rng = np.random.default_rng(0)
    centers = _unit(200, 64, 1)
    x = centers[rng.integers(0, 200, 20000)] + 0.05 * rng.standard_normal((20000, 64)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = x[rng.integers(0, 20000, 50)] + 0.1 * rng.standard_normal((50, 64)).astype(np.float32)
    _, exact = ExactScorer(x).search(q, 10)
    full = make_scorer("faiss", x, nlist=64, nprobe=64)  # scanning every cell is exact
    assert recall_at_k(full.search(q, 10)[1], exact) > 0.99
    approx = make_scorer("faiss", x, nlist=64, nprobe=8)
    r = recall_at_k(approx.search(q, 10)[1], exact)
    assert 0.6 < r <= 1.0
