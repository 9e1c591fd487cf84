"""The decoded-frame cache: a budget in MB with least-recently-used eviction, counts, read-only pixels, and the
same pixels as decoding without it (both ways of resizing, real encoded videos)."""

from __future__ import annotations

import numpy as np
import pytest

from vidlab.understanding.agents import decode_frames
from vidlab.video import open_video
from vidlab.video.frame_cache import (
    CachedReader,
    FrameCache,
    default_budget_mb,
    shared_frame_cache,
    video_key,
)


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    from vidlab.video.synth import render_synthetic

    return render_synthetic(tmp_path_factory.mktemp("fc") / "v.mp4", 60, fps=10, width=96, height=64, seed=3)


class CountingReader:
    """A real reader that counts the frames it is asked to decode."""

    def __init__(self, path):
        self.inner = open_video(path)
        self.decoded: list[int] = []

    def get_frames(self, indices, size=None):
        self.decoded += [int(i) for i in indices]
        return self.inner.get_frames(indices, size=size)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _decoder(n_bytes: int):
    calls: list[list[int]] = []

    def decode(idx):
        calls.append(list(idx))
        return [np.full(n_bytes, i % 251, np.uint8) for i in idx], [i / 10 for i in idx]

    return decode, calls


def test_budget_evicts_least_recently_used_and_counts():
    cache = FrameCache(budget_mb=1)  # 1 MiB: four frames of 256 KiB
    decode, calls = _decoder(256 * 1024)
    cache.frames("v", [0, 1, 2, 3], decode)
    cache.frames("v", [0], decode)  # 0 is now the most recent
    cache.frames("v", [4], decode)  # 1 goes
    assert calls == [[0, 1, 2, 3], [4]]
    got = cache.frames("v", [3, 0, 1, 0], decode)  # repeats are served twice, decoded once
    assert calls[-1] == [1]
    assert [int(p[0]) for p, _ in got] == [3, 0, 1, 0] and got[1][1] == 0.0
    s = cache.stats
    assert s.bytes <= s.budget_bytes and s.peak_bytes <= s.budget_bytes
    assert (s.decoded, s.distinct) == (6, 5)
    assert s.evicted == 2 and len(cache) == 4
    with pytest.raises(ValueError):  # shared pixels cannot be drawn on
        got[0][0][0] = 1


def test_budget_zero_keeps_nothing_but_counts():
    cache = FrameCache(budget_mb=0)
    decode, calls = _decoder(16)
    cache.frames("v", [1, 2], decode)
    cache.frames("v", [1, 2], decode)
    assert calls == [[1, 2], [1, 2]] and len(cache) == 0
    assert (cache.stats.decoded, cache.stats.distinct, cache.stats.hits) == (4, 2, 0)


def test_budget_default_is_sized_to_the_machine_and_checked():
    import os

    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    assert default_budget_mb() == int(min(4096, max(256, total_mb / 16)))
    assert FrameCache().budget_bytes == default_budget_mb() * 2**20
    with pytest.raises(ValueError, match="frame cache budget"):
        FrameCache(budget_mb=-1)
    a = shared_frame_cache(7)
    assert shared_frame_cache(7) is a and a.budget_bytes == 7 * 2**20
    assert shared_frame_cache(3) is a and a.budget_bytes == 3 * 2**20


@pytest.mark.parametrize("resize,max_size", [("reference", (80, 40)), ("fit", (48, 48))])
def test_cached_decoding_gives_the_same_pixels_and_decodes_only_what_is_missing(video, resize, max_size):
    plain = decode_frames(open_video(video), list(range(0, 60, 3)), max_size, resize)
    counting = CountingReader(video)
    reader = CachedReader(counting, FrameCache(budget_mb=64), video_key(video))
    first = decode_frames(reader, [0, 3, 6, 9], max_size, resize)
    second = decode_frames(reader, list(range(0, 60, 3)), max_size, resize)
    assert counting.decoded == [0, 3, 6, 9] + list(range(12, 60, 3))  # the first four came from the cache
    for got in (first, second):
        for f in got:
            ref = plain[f.index // 3]
            assert f.index == ref.index and f.timestamp == ref.timestamp
            assert f.image.dtype == np.uint8 and np.array_equal(f.image, ref.image)
    # the reader is the wrapped one in every other respect
    assert reader.num_frames == 60 and reader.fps == counting.fps
    with reader:
        pass


def test_video_key_changes_when_the_file_is_rewritten(tmp_path, video):
    import shutil

    p = tmp_path / "x.mp4"
    shutil.copy(video, p)
    k1 = video_key(p)
    p.write_bytes(p.read_bytes() + b"\0")
    assert video_key(p) != k1
