"""benchmarks/ann.py run small with real faiss: its ground truth is the exact top-10, its recall is right."""

from __future__ import annotations

import sys
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root holds benchmarks/
from benchmarks import ann  # noqa: E402

pytest.importorskip("numba")  # vidlab's int8 exact scan


def _args(tmp_path: Path, **kw) -> Namespace:
    ap_defaults = {
        "rows": 6000, "dim": 64, "queries": 40, "k": 10, "indexes": "ivfflat", "nlist": 32, "nprobe": "1,32",
        "ef_search": "8,64", "pq_m": 8, "rerank": 50, "hnsw_m": 8, "ef_construction": 40, "kmeans_iter": 10,
        "train_per_list": 40, "add_chunk": 2500, "exact_chunk": 1_000_000, "exact_every": 5,
        "max_index_gb": 6.5, "work": str(tmp_path), "seed": 0, "out": "",
    }  # fmt: skip
    ap_defaults.update(kw)
    return Namespace(**ap_defaults)


def test_corpus_is_clustered_like_clip_frames_and_queries_are_held_out(tmp_path):
    c = ann.ClipLikeCorpus(rows=6000, dim=64)
    path, queries, kinds = ann.make_corpus(c, 40, tmp_path)
    x = ann.stored(path, 64).astype(np.float32)
    assert x.shape == (6000, 64) and np.allclose(np.linalg.norm(x, axis=1), 1, atol=2e-3)
    assert queries.shape == (40, 64) and (kinds == 0).sum() == 20 and (kinds == 1).sum() == 20
    cos = x[::7] @ x[::7].T
    unrelated = np.median(cos[np.triu_indices(len(cos), 1)])
    assert 0.3 < unrelated < 0.6  # a shared direction, as CLIP image embeddings have; iid noise gives ~0
    assert np.median(np.abs(x[:-1] * x[1:]).sum(1)) > 0.85  # neighbouring rows: frames of one scene / video
    best = (queries @ x.T).max(1)
    assert np.median(best[kinds == 0]) > 0.85 > np.median(best[kinds == 1])  # a stored scene vs a new video
    assert best.max() < 0.9999  # no query is a stored row
    again = ann.make_corpus(c, 40, tmp_path)  # cached: the same rows and queries
    assert again[0] == path and np.array_equal(again[1], queries)


def test_chunked_exact_ground_truth_is_the_exact_top10_of_all_rows(tmp_path):
    path, queries, _ = ann.make_corpus(ann.ClipLikeCorpus(rows=6000, dim=64), 40, tmp_path)
    x = ann.stored(path, 64).astype(np.float64)
    s = queries.astype(np.float64) @ x.T
    brute = np.stack([np.lexsort((np.arange(len(r)), -r))[:10] for r in s])  # ties by lower row id
    whole, secs, cpu = ann.exact_topk(path, 64, queries, 10, chunk=1_000_000)
    chunked, _, _ = ann.exact_topk(path, 64, queries, 10, chunk=1700)  # 4 scorers, merged
    assert np.array_equal(whole, brute) and np.array_equal(chunked, brute)
    assert secs.shape == cpu.shape == (40,) and (secs > 0).all() and (cpu > 0).all()


def test_recall_is_one_when_every_cell_is_probed_and_lower_with_one(tmp_path):
    pytest.importorskip("faiss")
    res = ann.run(_args(tmp_path, indexes="ivfflat,ivfsq8,ivfpq", nprobe="1,32"))
    rows = {(r["index"], r["knob"]): r for r in res["table"]}
    full, one = rows[("ivfflat", "nprobe 32")], rows[("ivfflat", "nprobe 1")]
    assert full["recall@10"] == 1.0  # nprobe = nlist: every row is scanned, the same top-10 as exact
    assert one["recall@10"] < 0.95  # one cell of 32 misses rows
    recall = {
        k: rows[(k, "nprobe 32")]["recall@10"] for k in ("ivfsq8", "ivfsq8+rerank", "ivfpq", "ivfpq+rerank")
    }
    # rescoring the candidates from the stored rows undoes the codes' error (PQ's 8 bytes per row lose more)
    assert recall["ivfsq8+rerank"] == 1.0 > recall["ivfsq8"], recall
    assert recall["ivfpq+rerank"] > recall["ivfpq"], recall
    assert res["first_reaching_recall_0.95"]["ivfflat"] == "nprobe 32"
    b = res["builds"]
    assert b["ivfflat"]["index_bytes"] == 6000 * (4 * 64 + 8) + 4 * 32 * 64  # fp32 rows + ids + centroids
    assert b["ivfsq8"]["index_bytes"] == 6000 * (64 + 8) + 4 * 32 * 64 + 4 * 2 * 64  # + per-dim ranges
    assert b["ivfpq"]["index_bytes"] == 6000 * (8 + 8) + 4 * 32 * 64 + 4 * 256 * 64  # + PQ codebooks
    assert all(r["ms median"] > 0 and r["ms p90"] >= r["ms median"] for r in res["table"])
    assert all(r["exact/ann paired median"] > 0 and r["cpu ms median"] > 0 for r in res["table"])
    again = ann.run(
        _args(tmp_path, indexes="ivfflat,ivfsq8,ivfpq", nprobe="1,32")
    )  # indexes and truth from the cache
    assert again["builds"]["ivfpq"]["loaded_from"].endswith(".faiss")
    assert [r["recall@10"] for r in again["table"]] == [r["recall@10"] for r in res["table"]]


def test_hnsw_recall_rises_with_ef_and_too_large_indexes_are_skipped(tmp_path):
    pytest.importorskip("faiss")
    res = ann.run(_args(tmp_path, indexes="ivfflat,hnsw", max_index_gb=0.001))  # both need > 1 MB
    assert "skipped" in res["builds"]["ivfflat"] and "skipped" in res["builds"]["hnsw"]
    assert res["table"] == []
    res = ann.run(_args(tmp_path, indexes="hnsw", ef_search="10,200"))
    lo, hi = res["table"]
    assert lo["knob"] == "efSearch 10" and hi["recall@10"] >= lo["recall@10"] and hi["recall@10"] > 0.9
