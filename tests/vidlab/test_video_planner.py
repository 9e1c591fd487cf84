"""The PyAV backend plans its decoding: one seek per keyframe interval at most, state reused across calls."""

from __future__ import annotations

import numpy as np
import pytest

from vidlab.video import open_video, uniform_indices
from vidlab.video.backends.pyav_backend import PyAVReader
from vidlab.video.synth import render_synthetic
from vidlab.video.testing import codes_of


@pytest.fixture(scope="module")
def long_gop(tmp_path_factory):
    path = tmp_path_factory.mktemp("plan") / "gop50.mp4"
    render_synthetic(path, 400, fps=24, width=64, height=48, gop=50, num_shapes=1)
    return path


def test_seeks_at_most_once_per_keyframe_interval(long_gop):
    with open_video(long_gop, backend="pyav") as r:
        assert r.index.keyframes.tolist() == list(range(0, 400, 50))
        idx = np.array([3, 7, 9, 11, 49, 120, 121, 199, 260, 399, 5])
        frames = r.get_frames(idx)
        assert codes_of(frames) == idx.tolist()
        groups = len(set(r.index.keyframe_of(idx).tolist()))
        assert r.seeks <= groups  # 5 intervals touched -> at most 5 seeks, never one per frame
        assert r.decoded <= 400


def test_dense_request_in_one_interval_decodes_it_once(long_gop):
    with open_video(long_gop, backend="pyav") as r:
        idx = np.arange(100, 150)[::-1]  # unsorted, all in the interval starting at 100
        assert codes_of(r.get_frames(idx)) == idx.tolist()
        assert r.seeks == 1
        assert r.decoded == 50


def test_consecutive_calls_continue_without_seeking(long_gop):
    with open_video(long_gop, backend="pyav") as r:
        r.get_frames([10])
        s = r.seeks
        for start in range(11, 40, 4):
            assert codes_of(r.get_frames([start, start + 1])) == [start, start + 1]
        assert r.seeks == s  # moving forward inside a GOP never seeks
        r.get_frames([5])  # backwards -> one seek
        assert r.seeks == s + 1


def test_iter_frames_decodes_sequentially(long_gop):
    r = PyAVReader(long_gop)
    n = sum(1 for _ in r.iter_frames(0, 400))
    assert n == 400 and r.stats()["seeks"] == 1 and r.stats()["decoded"] == 400
    r.close()


def test_streaming_uses_a_throughput_decoder_when_random_access_threading_differs(tmp_path, monkeypatch):
    from vidlab.video.backends import pyav_backend

    monkeypatch.setattr(pyav_backend, "FRAME_THREADS_MIN_PIXELS", 1)  # small test frames count as large
    short_gop = render_synthetic(tmp_path / "g10.mp4", 60, fps=24, width=64, height=48, gop=10, num_shapes=1)
    r = PyAVReader(short_gop)
    assert r._stream.thread_type.name == "SLICE"  # short GOP: random access avoids frame threads
    assert codes_of(np.stack([f for _, f in r.iter_frames(0, 60, 2)])) == list(range(0, 60, 2))
    assert r._streamer is not None and r._streamer._stream.thread_type.name == "AUTO"
    assert codes_of(r.get_frames([59, 3])) == [59, 3]  # random access still on the first decoder
    assert r.stats()["decoded"] == r.decoded + r._streamer.decoded
    r.close()
    assert r._streamer._closed


def test_sparse_uniform_skips_intervals(long_gop):
    with open_video(long_gop, backend="pyav") as r:
        idx = uniform_indices(0, 399, 8)
        assert codes_of(r.get_frames(idx)) == idx.tolist()
        # each of the 8 targets sits in its own interval: decoded frames stay far below the whole file
        assert r.decoded < 8 * 50


@pytest.fixture(scope="module")
def b_heavy(tmp_path_factory):
    params = "keyint=120:min-keyint=120:scenecut=0:bframes=3:b-adapt=0:b-pyramid=none"
    path = tmp_path_factory.mktemp("bheavy") / "ibbbp.mp4"
    render_synthetic(path, 240, fps=24, width=64, height=48, options={"x264-params": params}, num_shapes=1)
    return path


def test_nonreference_packets_are_skipped_and_frames_stay_exact(b_heavy):
    rng = np.random.default_rng(5)
    idx = np.concatenate([rng.choice(240, size=30, replace=False), [239, 119, 1, 2, 3]])
    fast = PyAVReader(b_heavy, skip_nonref=True)
    plain = PyAVReader(b_heavy, skip_nonref=False)
    a, b = fast.get_frames(idx), plain.get_frames(idx)
    assert codes_of(a) == idx.tolist() and np.array_equal(a, b)  # bit-identical to full decoding
    assert fast.skipped > 0 and fast.decoded < plain.decoded
    # streaming every frame must not drop anything
    assert [i for i, _ in fast.iter_frames(0, 240)] == list(range(240))
    assert codes_of(np.stack([f for _, f in fast.iter_frames(100, 240, 5)])) == list(range(100, 240, 5))
    fast.close()
    plain.close()


def test_h264_nonref_parser():
    from vidlab.video.backends.pyav_backend import avcc_length_size, h264_nonref

    def nal(header: int, payload: bytes = b"\x88\x84") -> bytes:
        body = bytes([header]) + payload
        return len(body).to_bytes(4, "big") + body

    assert h264_nonref(memoryview(nal(0x06) + nal(0x01)), 4)  # SEI + non-ref slice
    assert not h264_nonref(memoryview(nal(0x21)), 4)  # nal_ref_idc = 1
    assert not h264_nonref(memoryview(nal(0x65)), 4)  # IDR
    assert not h264_nonref(memoryview(nal(0x06)), 4)  # no slice at all: keep it
    assert avcc_length_size(bytes([1, 100, 0, 31, 0xFF, 0xE1, 0])) == 4
    assert avcc_length_size(b"\x00\x00\x00\x01gd") == 0  # Annex B: not parsed


@pytest.mark.parametrize("slices", [1, 2])
def test_slice_threads_only_where_a_frame_has_slices_to_share(tmp_path, monkeypatch, slices):
    """One slice per frame: one codec thread (slice threads have nothing to split); two: FFmpeg's default.
    Parallel lanes always run one codec thread each (the lanes themselves fill the cores). Frames stay exact."""
    from vidlab.video.backends import pyav_backend

    path = render_synthetic(
        tmp_path / f"s{slices}.mp4", 80, fps=24, width=96, height=64, gop=10, num_shapes=1,
        options={"x264-params": f"slices={slices}"},
    )  # fmt: skip
    r = PyAVReader(path, workers=2)
    first = next(p for p in r._container.demux(r._stream) if p.size)
    assert pyav_backend.h264_slices(memoryview(first), r._nal_len) == slices
    assert r._stream.thread_type.name == "SLICE"
    assert r._stream.codec_context.thread_count == (1 if slices == 1 else 0)  # 0: FFmpeg picks (auto)
    idx = np.array([3, 17, 41, 66, 79])
    assert codes_of(r.get_frames(idx)) == idx.tolist()
    assert codes_of(r.get_frames(idx[::-1])) == idx[::-1].tolist()
    r.close()
    monkeypatch.setattr(pyav_backend, "PARALLEL_MIN_WORK", 0)  # take the parallel path on these small frames
    with PyAVReader(path, workers=2) as par:
        assert codes_of(par.get_frames(idx)) == idx.tolist()
        assert par.parallel_calls == 1
        assert [lane._stream.codec_context.thread_count for lane in par._lanes] == [1, 1]
