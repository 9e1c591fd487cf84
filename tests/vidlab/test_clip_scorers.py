"""Scorers: exact top-k equals brute force; the faiss IVF scorer's recall is measured against exact."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    """Reference: float64 scores of the stored rows, top k by score then lower row id. Each score sums the
    (exact) float64 products of one row in the same order for every row, so identical rows tie exactly (a BLAS
    matrix product may sum rows in different orders, one ulp apart)."""
    s = (np.asarray(emb, np.float64) * np.asarray(q, np.float64)).sum(axis=1)
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


# ---- the SIMD int8 kernel: exact w.r.t. the stored vectors, whatever the data ------------------------------
def _needs_kernel(path=None):
    pytest.importorskip("numba")
    from vidlab.clip.int8scan import _numba_target, kernels, supported_paths

    arch, features = _numba_target()
    if path is not None and path not in supported_paths(features, arch):
        pytest.skip(f"this CPU does not run the {path} kernel")
    k = kernels(path)
    assert k is not None
    return k


SIMD_PATHS = ["zmm", "ymm", "portable"]


@pytest.mark.parametrize("path", SIMD_PATHS)
def test_dot_rows_is_the_exact_integer_dot_product_at_the_worst_case_magnitude(path):
    """int32 accumulation never overflows at the largest codes and query levels the scorer uses, for a
    dimension that is no multiple of 16 (the scalar tail), dimensions that leave every remainder of the
    kernel's groups of four chunks (and the zmm kernel's 16-code chunk), and for CLIP ViT-L's 768; on every
    SIMD path this CPU runs."""
    from vidlab.clip.int8scan import query_levels

    k = _needs_kernel(path)
    assert k["simd_path"] == path
    rng = np.random.default_rng(0)
    for d in (7, 16, 40, 48, 96, 112, 144, 200, 512, 768):
        lv = query_levels(d)
        codes = rng.integers(-127, 128, (37, d), dtype=np.int8)
        codes[0] = 127  # worst case: every product at its maximum, one sign
        codes[1] = -127
        qq = rng.integers(-lv, lv + 1, d).astype(np.int16)
        qq[: d // 2] = lv
        qq[d // 2 :] = lv
        out = np.zeros(37, np.int32)
        k["dot_rows"](codes, qq, 0, 37, out)
        ref = codes.astype(np.int64) @ qq.astype(np.int64)
        assert abs(int(ref[0])) < 2**31
        np.testing.assert_array_equal(out.astype(np.int64), ref)
        part = np.zeros(5, np.int32)  # a block that starts mid-matrix
        k["dot_rows"](codes, qq, 30, 35, part)
        np.testing.assert_array_equal(part.astype(np.int64), ref[30:35])


def test_quantize_rows_guarantees_the_bounds_the_scan_relies_on():
    from vidlab.clip.int8scan import quantize_rows

    rng = np.random.default_rng(1)
    x = rng.standard_normal((500, 33)).astype(np.float32) * rng.uniform(1e-6, 10, (500, 1)).astype(np.float32)
    x[3] = 0.0  # an all-zero row
    x[4, :] = 1e-30  # a subnormal-scale row
    for stored in (x, x.astype(np.float16)):
        codes, scale, l1 = quantize_rows(stored)
        assert codes.dtype == np.int8 and scale.dtype == np.float32 and l1.dtype == np.float32
        xs = stored.astype(np.float64)
        err = np.abs(xs - scale.astype(np.float64)[:, None] * codes.astype(np.float64))
        assert np.all(err <= scale.astype(np.float64)[:, None] / 2 * (1 + 1e-12))
        assert np.all(l1.astype(np.float64) >= np.abs(xs).sum(axis=1))
        assert np.abs(codes.astype(np.int64)).max() <= 127


def test_kernel_runs_at_the_hosts_vector_width():
    """The point of the kernel: packed 16-bit multiply-adds at the vector width of the CPU it runs on (checked
    in the compiled assembly of the scan): zmm with AVX-512BW, ymm with AVX2, and where the CPU has VNNI
    (AVX512-VNNI, or AVX-VNNI that LLVM prints as "{vex} vpdpwssd") the fused multiply-add-accumulate
    vpdpwssd; on any other CPU the portable IR, as SSE2 pmaddwd (x86-64) or NEON smlal (aarch64).
    Every target's forms, whatever this host: test_int8scan_targets.py."""
    k = _needs_kernel()
    from vidlab.clip.int8scan import _numba_target, kernel_instructions, supported_paths

    arch, feats = _numba_target()
    path = k["simd_path"]
    assert path == supported_paths(feats, arch)[0]  # the widest path this CPU runs
    ins = kernel_instructions()
    assert ins["prefetch"] >= 1  # the codes are prefetched ahead of the multiply-adds
    if path == "portable":
        simd = ins.get("pmaddwd xmm", 0) + ins.get("vpmaddwd xmm", 0) + ins.get("smlal neon", 0)
        if arch.startswith(("x86", "aarch64", "arm64")):
            assert simd >= 1
        return
    w = path
    vnni = (
        "avx512vnni" in feats and ("avx512vl" in feats or w == "zmm") or (w == "ymm" and "avxvnni" in feats)
    )
    assert ins[f"vpmaddwd {w}"] + ins[f"vpdpwssd {w}"] >= 1 and ins[f"vpmovsxbw {w}"] >= 1
    if vnni:  # LLVM fuses the multiply-add with its accumulation
        assert ins[f"vpdpwssd {w}"] >= 1
    assert ins["vpmaddwd xmm"] + ins["vpdpwssd xmm"] == 0  # not numba's own 128-bit loop
    assert ins[f"vpmulld {w}"] == 0  # nor an int32-multiply loop
    if w == "ymm":
        assert sum(v for key, v in ins.items() if key.endswith(" zmm")) == 0


@pytest.mark.parametrize("path", SIMD_PATHS)
def test_every_simd_path_gives_the_same_exact_top_k(path):
    """The scorer on each SIMD path this CPU runs: the same top-k (rows and order) as float64 brute force, the
    same candidates as the default path (the integer dot products are identical, so are the bounds)."""
    _needs_kernel(path)
    emb = _unit(20000, 136, 4).astype(np.float16)  # 136 = 8 x 16 + 8: a zmm remainder chunk and a scalar tail
    emb[7000:7100] = emb[:100]  # exact ties
    qs = _unit(4, 136, 9)
    base = ExactScorer(emb)
    s = base.on_simd_path(path)
    assert s.simd_path == path and s.codes is base.codes
    for q in list(qs) + [emb[50].astype(np.float32)]:
        got_v, got_r = s.search(q, 10)
        np.testing.assert_array_equal(got_r[0], _brute(emb, q, 10)[0])
        ref_v, ref_r = base.search(q, 10)
        np.testing.assert_array_equal(got_v, ref_v)
        assert s.last_candidates == base.last_candidates
    with pytest.raises(ValueError, match="torch"):
        ExactScorer(emb, backend="torch").on_simd_path(path)


def test_bytes_per_query_counts_what_the_first_pass_reads():
    _needs_kernel()
    emb = _unit(1000, 64, 0).astype(np.float16)
    s = ExactScorer(emb)
    assert s.bytes_per_query == 1000 * (64 + 8)  # int8 codes + float32 scale + float32 l1 per row
    assert ExactScorer(emb, backend="torch").bytes_per_query == emb.nbytes


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 400),
    d=st.sampled_from([1, 3, 16, 17, 64, 100]),
    k=st.integers(1, 20),
    dtype=st.sampled_from([np.float16, np.float32]),
    seed=st.integers(0, 2**31 - 1),
    dups=st.integers(0, 30),
    near=st.floats(0, 1e-3),
    scale_spread=st.booleans(),
)
def test_int8_scorer_equals_brute_force_property(n, d, k, dtype, seed, dups, near, scale_spread):
    """Same top-k (rows and order: score, then lower row id) as float64 brute force over the stored vectors,
    on data built to stress the bound: duplicates and near-copies (ties at the boundary), rows of very
    different norms, zero rows, dimensions that are no multiple of 16."""
    _needs_kernel()
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    if scale_spread:
        x *= 10.0 ** rng.uniform(-3, 1, (n, 1))
    if dups and n > 1:  # near-copies of a few rows
        src = rng.integers(0, n, dups)
        dst = rng.integers(0, n, dups)
        x[dst] = x[src] + near * rng.standard_normal((dups, d))
    if n > 2:
        x[rng.integers(0, n)] = 0.0
    emb = x.astype(dtype)
    q = rng.standard_normal(d).astype(np.float32)
    s = ExactScorer(emb, backend="int8")
    got_v, got_r = s.search(q, k)
    rows, vals = _brute(emb, q, min(k, n))
    np.testing.assert_array_equal(got_r[0], rows)
    np.testing.assert_allclose(got_v[0], vals, rtol=1e-6, atol=1e-6)
