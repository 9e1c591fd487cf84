"""The exact-search measurement of benchmarks/clip_index.py, run small: its figures are consistent."""

from __future__ import annotations

import sys
from argparse import Namespace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root holds benchmarks/
from benchmarks.clip_index import bench_search  # noqa: E402


def test_search_figures_count_what_the_scan_reads_and_every_method_agrees(monkeypatch):
    pytest.importorskip("numba")
    from vidlab.clip import int8scan

    monkeypatch.setattr(int8scan, "kernel_instructions", dict)  # a fresh compile; tested in test_clip_scorers
    res = bench_search(Namespace(rows=3000, quick=True, threads=1, queries=8))
    assert res["vidlab_backend"] == "int8"
    assert res["bytes_scanned_per_query"] == 3000 * (512 + 8)  # int8 codes + two float32 row constants
    for row in res["table"]:
        if not row["method"].startswith("read floor"):
            assert row["same top-10 as numpy"] == 1.0, row["method"]
    assert 10 <= res["rows_rescored"]["min"] and res["rows_rescored"]["max"] < 3000
    assert res["vs_read_floor_paired"]["n"] == 8 and res["vs_read_floor_paired"]["min"] > 0
