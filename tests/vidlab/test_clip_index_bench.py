"""The exact-search and ANN measurements of benchmarks/clip_index.py, run small: their figures are consistent."""

from __future__ import annotations

import sys
from argparse import Namespace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root holds benchmarks/
from benchmarks.clip_index import bench_ann, bench_search  # noqa: E402


def test_search_figures_count_what_the_scan_reads_and_every_method_agrees(monkeypatch):
    pytest.importorskip("numba")
    from vidlab.clip import int8scan

    monkeypatch.setattr(int8scan, "kernel_instructions", dict)  # a fresh compile; tested in test_clip_scorers
    res = bench_search(Namespace(rows=3000, quick=True, threads=1))
    assert res["vidlab_backend"] == "int8"
    assert res["bytes_scanned_per_query"] == 3000 * (512 + 8)  # int8 codes + two float32 row constants
    for row in res["table"]:
        if not row["method"].startswith("read floor"):
            assert row["same top-10 as numpy"] == 1.0, row["method"]
    assert 10 <= res["rows_rescored"]["min"] and res["rows_rescored"]["max"] < 3000
    assert res["vs_read_floor_paired"]["n"] == 8 and res["vs_read_floor_paired"]["min"] > 0


def test_ann_figures_exhaustive_ivf_has_full_recall():
    pytest.importorskip("faiss")
    args = Namespace(rows=4000, threads=1, hnsw_rows=0, ann_data="clustered", nlist=16)
    rows = bench_ann(args)["table"]
    assert [r["data"] for r in rows] == ["clustered"] * 7  # exact + 2 IVF kinds x 3 nprobe, no HNSW
    full = [r for r in rows if r["index"] == "IVFFlat nlist 16 nprobe 128"]  # nprobe >= nlist: every cell
    assert full and full[0]["recall@10"] == 1.0
    sq8 = [r for r in rows if r["index"].startswith("IVFSQ8")]
    assert all(0 < r["serialized MB"] < full[0]["serialized MB"] for r in sq8)  # a byte per dimension, not 4
