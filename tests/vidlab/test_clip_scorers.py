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


def _brute(emb, q, k):
    """Reference: float64 scores of the stored rows, top k by score then lower row id."""
    s = np.asarray(emb, np.float64) @ np.asarray(q, np.float64)
    order = np.lexsort((np.arange(len(s)), -s))[:k]
    return order, s[order]


@pytest.mark.parametrize("backend", ["int8", "torch"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_exact_on_near_ties_that_quantization_cannot_separate(backend, dtype):
    """Rows that differ by far less than one int8 step (1e-3) around the k-th place: only exact rescoring of
    the stored vectors orders them; the int8 scores alone would flip some of them."""
    if backend == "int8":
        pytest.importorskip("numba")
    rng = np.random.default_rng(3)
    d, k = 64, 8
    emb = _unit(20000, d, 5)
    q = _unit(1, d, 6)[0]
    # 40 near-copies of the query direction, spread by ~1e-5..1e-4 in score: ties at the top-k boundary
    base = q + 0.35 * _unit(1, d, 7)[0]
    noise = rng.standard_normal((40, d)).astype(np.float32) * 2e-4
    near = base + noise
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    emb[rng.choice(20000, 40, replace=False)] = near
    emb = emb.astype(dtype)
    s = ExactScorer(emb, backend=backend)
    assert s.backend == backend
    rows, vals = _brute(emb, q, k)
    got_v, got_r = s.search(q, k)
    np.testing.assert_array_equal(got_r[0], rows)
    np.testing.assert_allclose(got_v[0], vals, rtol=0, atol=1e-6)
    assert s.last_candidates >= k
    # the int8 codes on their own do not give this order: the rescoring is what makes it exact
    if backend == "int8":
        from vidlab.clip.scorers import quantize_rows

        codes, scale, _ = quantize_rows(emb)
        approx = (codes.astype(np.float64) * scale[:, None]) @ q.astype(np.float64)
        assert not np.array_equal(np.argsort(-approx, kind="stable")[:k], rows)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_int8_scan_equals_fp32_brute_force_on_random_data(seed):
    pytest.importorskip("numba")
    emb = _unit(30000, 128, seed).astype(np.float16)
    qs = _unit(5, 128, seed + 10)
    s = ExactScorer(emb)
    assert s.backend == "int8"
    _, rows = s.search(qs, 10)
    for j, q in enumerate(qs):
        np.testing.assert_array_equal(rows[j], _brute(emb, q, 10)[0])
    assert s.last_candidates < 30000 // 10  # the bound prunes: only a few rows are rescored
    # duplicates (exact ties) come back by lower row id, and k beyond N returns everything
    dup = np.concatenate([emb[:100], emb[:100]])
    _, r = ExactScorer(dup).search(dup[5].astype(np.float32), 2)
    assert r[0].tolist() == [5, 105]
    assert ExactScorer(dup).search(qs[0], 10**6)[1].shape == (1, 200)
