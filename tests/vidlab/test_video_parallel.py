"""Parallel decoding of keyframe-interval groups: same frames as the serial plan, bounded resources, clean close."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from vidlab.video.backends import pyav_backend
from vidlab.video.backends.pyav_backend import PyAVReader, decode_workers, plan_groups
from vidlab.video.testing import build, codes_of

FILES = ["h264_gop30", "h264_gop250", "h264_vfr", "h264_vfr_mkv", "h264_open_gop"]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("parallel")


@pytest.fixture
def always_parallel(monkeypatch):
    """Test frames are tiny: let every multi-group request take the parallel path."""
    monkeypatch.setattr(pyav_backend, "PARALLEL_MIN_WORK", 0)


def decode_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("vidlab-decode")]


def request(n: int, rng: np.random.Generator) -> np.ndarray:
    """Unsorted indices with repeats, covering first and last frame and several keyframe intervals."""
    picks = rng.choice(n, size=min(n, 24), replace=False)
    return np.concatenate([picks, picks[:5], [n - 1, 0, n - 1]])


@pytest.mark.parametrize("name", FILES)
def test_parallel_returns_exactly_the_serial_frames(root, name, always_parallel):
    path, n, _ = build(root, name)
    rng = np.random.default_rng(11)
    with PyAVReader(path, workers=1) as serial, PyAVReader(path, workers=3) as par:
        for _ in range(3):  # repeated calls reuse the lanes and their decode positions
            idx = request(n, rng)
            want = serial.get_frames(idx)
            got = par.get_frames(idx)
            assert codes_of(got) == idx.tolist()
            assert np.array_equal(got, want)
            small = par.get_frames(idx[::-1], size=(40, 40))
            assert np.array_equal(small, serial.get_frames(idx[::-1], size=(40, 40)))
        assert serial.parallel_calls == 0 and not serial._lanes
        assert par.parallel_calls == 6 and 2 <= len(par._lanes) <= 3
        assert par.seeks == 0  # the lanes did the work; the reader's own decoder stayed idle
        assert par.stats()["decoded"] == sum(lane.decoded for lane in par._lanes)


@pytest.mark.parametrize("workers", [1, 3])
def test_unsorted_requests_decode_straight_into_their_rows(root, workers, always_parallel, monkeypatch):
    """Unsorted or repeated indices: each distinct frame is written once into the first row that asked for it
    and repeats are copied from there: no sorted array that is then reordered into a second one."""
    path, n, _ = build(root, "h264_gop30")
    idx = request(n, np.random.default_rng(5))
    with PyAVReader(path, workers=workers) as r:
        want = r.get_frames(np.unique(idx))  # sorted: the plain path
        monkeypatch.setattr(
            PyAVReader, "_decode_sorted", lambda *a: pytest.fail("decoded to a temporary array")
        )
        got = r.get_frames(idx)
        assert codes_of(got) == idx.tolist() and got.flags.c_contiguous
        np.testing.assert_array_equal(got, want[np.searchsorted(np.unique(idx), idx)])
        assert r.parallel_calls == (2 if workers > 1 else 0)


def test_groups_match_the_serial_seeks(root):
    """plan_groups cuts exactly where the serial planner seeks, so each group is independent."""
    path, n, _ = build(root, "h264_gop30")
    rng = np.random.default_rng(3)
    for _ in range(5):
        idx = np.unique(rng.choice(n, size=int(rng.integers(2, 40)), replace=False))
        with PyAVReader(path, workers=1) as r:
            r.get_frames(idx)
            assert len(plan_groups(idx, r.index.keyframe_of(idx))) == r.seeks


def test_plan_groups():
    keys_of = np.array([0, 0, 30, 30, 60])
    assert plan_groups(np.array([1, 5, 31, 40, 61]), keys_of) == [(0, 2), (2, 4), (4, 5)]
    # a target right after the previous one continues decoding even across a keyframe
    assert plan_groups(np.array([29, 30]), np.array([0, 30])) == [(0, 2)]


def test_close_releases_lanes_and_threads(root, always_parallel):
    path, n, _ = build(root, "h264_gop30")
    before = len(decode_threads())
    r = PyAVReader(path, workers=3)
    idx = np.arange(0, n, 7)
    assert codes_of(r.get_frames(idx)) == idx.tolist()
    lanes = list(r._lanes)
    assert len(lanes) == 3 and r._pool is not None
    assert len(decode_threads()) > before  # the pool's threads are alive while the reader is open
    r.close()
    assert all(lane._closed for lane in lanes) and r._lanes == [] and r._pool is None
    assert len(decode_threads()) == before
    for lane in lanes:  # each lane's own av container is closed too
        with pytest.raises(AssertionError, match="not open"):
            lane._container.seek(0)
    r.close()  # idempotent


def test_workers_setting(root, monkeypatch, always_parallel):
    path, n, _ = build(root, "h264_gop30")
    monkeypatch.delenv("VIDLAB_DECODE_WORKERS", raising=False)
    import os

    assert decode_workers() == min(os.cpu_count() or 1, 4)
    monkeypatch.setenv("VIDLAB_DECODE_WORKERS", "1")
    with PyAVReader(path) as r:
        assert r.workers == 1
        idx = np.arange(0, n, 10)
        assert codes_of(r.get_frames(idx)) == idx.tolist()
        assert (
            r._lanes == []
            and r.parallel_calls == 0
            and r.seeks == len(plan_groups(idx, r.index.keyframe_of(idx)))
        )
    monkeypatch.setenv("VIDLAB_DECODE_WORKERS", "2")
    with PyAVReader(path) as r:
        assert r.workers == 2
        r.get_frames(np.arange(0, n, 10))
        assert len(r._lanes) == 2 and r.parallel_calls == 1
    monkeypatch.setenv("VIDLAB_DECODE_WORKERS", "many")
    with pytest.raises(ValueError, match="VIDLAB_DECODE_WORKERS"):
        decode_workers()


def test_one_group_and_streaming_stay_serial(root, always_parallel):
    path, n, _ = build(root, "h264_gop250")
    with PyAVReader(path, workers=3) as r:
        idx = np.array([3, 9, 200, 120])  # one keyframe interval: one seek, no lanes
        assert codes_of(r.get_frames(idx)) == idx.tolist()
        assert r._lanes == [] and r.seeks == 1
        got = [i for i, _ in r.iter_frames(0, n, 3)]
        assert got == list(range(0, n, 3)) and r._lanes == []


def test_small_requests_skip_threads_by_default(root):
    """Below PARALLEL_MIN_WORK (tiny frames, short stretches) thread hand-over costs more than it saves."""
    path, n, _ = build(root, "h264_gop30")
    with PyAVReader(path, workers=3) as r:
        idx = np.array([1, 31, 61])
        assert codes_of(r.get_frames(idx)) == idx.tolist()
        assert r.parallel_calls == 0 and r._lanes == []


def test_long_stretches_go_parallel_by_default(root):
    """Two targets deep in two 250-frame intervals: enough decoding to cross PARALLEL_MIN_WORK on 96x72."""
    path, n, kw = build(root, "h264_gop250")
    idx = np.array([299, 200])
    work = (200 + 1 + 299 - 250 + 1) * kw["width"] * kw["height"]
    assert work >= pyav_backend.PARALLEL_MIN_WORK
    with PyAVReader(path, workers=2) as par, PyAVReader(path, workers=1) as serial:
        got = par.get_frames(idx)
        assert codes_of(got) == idx.tolist() and np.array_equal(got, serial.get_frames(idx))
        assert par.parallel_calls == 1 and len(par._lanes) == 2
        assert sum(lane.seeks for lane in par._lanes) == 2 and par.seeks == 0  # one seek per group, on lanes


def test_targets_just_before_each_keyframe_still_split_for_the_lanes(root, always_parallel):
    """249 then 250 is one serial run (decoding on through the keyframe costs nothing), yet two keyframe
    intervals: the lanes take one each, decoding the same frames the serial plan decodes, exactly."""
    path, n, _ = build(root, "h264_gop250")
    with PyAVReader(path, workers=1) as serial:
        keys = serial.index.keyframes
        assert keys.size >= 2
        k1 = int(keys[1])
        idx = np.array([5, k1 - 1, k1, k1 + 20])
        want = serial.get_frames(idx)
        assert serial.seeks == len(plan_groups(idx, serial.index.keyframe_of(idx))) == 1
        assert pyav_backend.keyframe_groups(serial.index.keyframe_of(idx)) == [(0, 2), (2, 4)]
    with PyAVReader(path, workers=2) as par:
        got = par.get_frames(idx)
        assert codes_of(got) == idx.tolist() and np.array_equal(got, want)
        assert par.parallel_calls == 1 and sum(lane.seeks for lane in par._lanes) == 2
        assert par.stats()["decoded"] <= serial.decoded + 4  # no stretch decoded twice (+ reorder delay)
