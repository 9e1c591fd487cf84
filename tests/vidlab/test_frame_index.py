"""FrameIndex on real encoded videos: cache key, reuse, rename/changed content, corruption, search, candidates."""

import shutil

import numpy as np
import pytest

from vidlab.clip import EmptyIntervalError, FrameIndex, Sampling, load_model
from vidlab.clip.store import read_arrays
from vidlab.video import open_video, uniform_indices
from vidlab.video.synth import render_synthetic

N_FRAMES, FPS = 96, 24.0


@pytest.fixture(scope="module")
def model():
    return load_model("vidlab-tiny")


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    return render_synthetic(
        tmp_path_factory.mktemp("v") / "a.mp4", N_FRAMES, fps=FPS, width=160, height=120, seed=1
    )


@pytest.fixture()
def built(video, model, tmp_path):
    return FrameIndex.build(video, model, Sampling.every(4), cache_dir=tmp_path / "cache")


def test_build_stores_fp16_memmap_grid(built, video, model):
    assert built.meta["built"] is True
    np.testing.assert_array_equal(built.frame_indices, np.arange(0, N_FRAMES, 4))
    assert built.embeddings.dtype == np.float16 and isinstance(built.embeddings, np.memmap)
    assert built.embeddings.shape == (N_FRAMES // 4, model.dim)
    np.testing.assert_allclose(built.timestamps, built.frame_indices / FPS, atol=1e-6)
    assert built.meta["sampling"] == "every=4" and built.meta["model_tag"] == model.tag
    # the cached vectors are the model's embeddings of the decoded frames (up to fp16 rounding)
    with open_video(video) as r:
        direct = model.embed_images(r.get_frames([8, 40]))
    from vidlab.clip.frame_index import embed_frames

    with open_video(video) as r:
        via_index_path = embed_frames(r, model, np.array([8, 40]))
    np.testing.assert_allclose(built.embeddings[[2, 10]], via_index_path, atol=0)
    np.testing.assert_allclose(np.asarray(built.embeddings[[2, 10]], np.float32), direct, atol=0.05)


def test_second_build_reuses_cache(built, video, model):
    again = FrameIndex.build(video, model, "every=4", cache_dir=built.path.parent)
    assert again.meta["built"] is False and again.path == built.path
    np.testing.assert_array_equal(again.embeddings, built.embeddings)


def test_key_survives_rename_but_not_content_or_spec_changes(built, video, model, tmp_path):
    cache = built.path.parent
    moved = shutil.copy(video, tmp_path / "renamed copy.mp4")
    assert FrameIndex.build(moved, model, "every=4", cache_dir=cache).path == built.path
    other_video = render_synthetic(tmp_path / "b.mp4", N_FRAMES, fps=FPS, width=160, height=120, seed=2)
    assert FrameIndex.build(other_video, model, "every=4", cache_dir=cache).path != built.path
    assert FrameIndex.build(video, model, "every=8", cache_dir=cache).path != built.path
    other_model = load_model("vidlab-tiny:seed1")
    assert FrameIndex.build(video, other_model, "every=4", cache_dir=cache).path != built.path


@pytest.mark.parametrize("damage", ["truncate_data", "truncate_header", "flip_byte", "garbage"])
def test_corrupt_cache_is_detected_and_rebuilt(built, video, model, damage, caplog):
    path = built.path
    good = np.array(built.embeddings)
    blob = bytearray(path.read_bytes())
    if damage == "truncate_data":
        blob = blob[: len(blob) - 100]
    elif damage == "truncate_header":
        blob = blob[:20]
    elif damage == "flip_byte":
        blob[-7] ^= 0x10
    else:
        blob = bytearray(b"\x00" * len(blob))
    path.write_bytes(bytes(blob))
    with caplog.at_level("WARNING", logger="vidlab.clip.frame_index"):
        rebuilt = FrameIndex.build(video, model, "every=4", cache_dir=path.parent)
    assert "corrupt cache file" in caplog.text and "rebuilding" in caplog.text
    assert rebuilt.meta["built"] is True
    np.testing.assert_array_equal(rebuilt.embeddings, good)
    read_arrays(path)  # the rewritten file verifies


def test_search_is_exact_topk_within_interval(built):
    rng = np.random.default_rng(0)
    q = rng.standard_normal(built.dim).astype(np.float32)
    res = built.search(q, k=5, start_frame=10, end_frame=70)
    frames = np.asarray(built.frame_indices)
    inside = (frames >= 10) & (frames < 70)
    scores = np.asarray(built.embeddings, np.float32)[inside] @ q
    expect = frames[inside][np.argsort(-scores)[:5]]
    np.testing.assert_array_equal(res.frame_indices, expect)
    assert np.all(np.diff(res.scores) <= 0)
    np.testing.assert_allclose(res.timestamps, res.frame_indices / FPS, atol=1e-6)
    # a query equal to a cached embedding finds that frame first with cosine ~1
    own = built.search(np.asarray(built.embeddings[7], np.float32), k=1)
    assert own.frame_indices[0] == built.frame_indices[7] and own.scores[0] == pytest.approx(1.0, abs=2e-3)


def test_search_text_query_order_time_and_nms(built):
    res = built.search("a red circle", k=4, nms_window=12, order="time")
    assert len(res) == 4
    assert np.all(np.diff(res.frame_indices) > 12)
    by_score = built.search("a red circle", k=4, nms_window=12)
    assert set(by_score.frame_indices) == set(res.frame_indices)
    plain = built.search("a red circle", k=4)
    assert plain.scores[0] == pytest.approx(by_score.scores[0])


def test_k_larger_than_candidates_returns_all(built):
    res = built.search("x", k=1000, start_frame=0, end_frame=20)
    np.testing.assert_array_equal(np.sort(res.frame_indices), [0, 4, 8, 12, 16])


def test_empty_interval_is_a_clear_error(built):
    for start, end in [(50, 50), (60, 10), (N_FRAMES, N_FRAMES + 5), (-1, 10)]:
        with pytest.raises(EmptyIntervalError, match="holds no frame"):
            built.search("x", k=3, start_frame=start, end_frame=end)
        with pytest.raises(EmptyIntervalError):
            built.candidates(start, end, 16)


def test_candidates_match_videobrain_grid_and_fill_cache(built, video, tmp_path):
    frames, emb = built.candidates(3, 90, 16)
    np.testing.assert_array_equal(frames, np.unique(np.linspace(3, 89, 16, dtype=np.int64)))
    np.testing.assert_array_equal(frames, uniform_indices(3, 89, 16, unique=True))
    assert emb.dtype == np.float32 and emb.shape == (frames.size, built.dim)
    # grid frames come from the grid; the rest were decoded, embedded and persisted as extras
    on_grid = np.isin(frames, built.frame_indices)
    np.testing.assert_array_equal(np.sort(built.extra_frame_indices), frames[~on_grid])
    reopened = FrameIndex.open(built.path, model=built.model, video_path=video)
    np.testing.assert_array_equal(reopened.extra_frame_indices, built.extra_frame_indices)
    # served from the cache: works with the video gone, and gives the same vectors
    gone = tmp_path / "gone.mp4"
    shutil.copy(video, gone)
    idx = FrameIndex.open(built.path, model=built.model, video_path=gone)
    gone.unlink()
    frames2, emb2 = idx.candidates(3, 90, 16)
    np.testing.assert_array_equal(frames2, frames)
    np.testing.assert_array_equal(emb2, emb)
    # search still ranks the grid only, so its results do not depend on candidate history
    assert len(idx.search("x", k=1000)) == len(idx)


def test_candidates_dedupe_short_ranges_and_clip_end(built):
    frames, emb = built.candidates(90, 500, 128)
    np.testing.assert_array_equal(frames, np.arange(90, N_FRAMES))
    assert emb.shape[0] == frames.size


def test_fps_sampling_grid(video, model, tmp_path):
    idx = FrameIndex.build(video, model, Sampling.fps(2.0), cache_dir=tmp_path)
    np.testing.assert_array_equal(idx.frame_indices, np.arange(0, N_FRAMES, 12))


def test_open_with_other_model_refused(built):
    with pytest.raises(ValueError, match="built with model"):
        FrameIndex.open(built.path, model=load_model("vidlab-tiny:seed3"))


class _ChunkRecorder:
    """Wraps a real reader and records how many frames each decode call asked for."""

    def __init__(self, reader):
        self.reader = reader
        self.calls = []

    def get_frames(self, indices, size=None):
        self.calls.append(len(indices))
        return self.reader.get_frames(indices, size=size)

    def __getattr__(self, name):
        return getattr(self.reader, name)


def test_frames_are_decoded_in_bounded_chunks(video, model):
    from vidlab.clip.frame_index import embed_frames

    frames = np.arange(0, N_FRAMES, dtype=np.int64)
    with open_video(video) as r:
        rec = _ChunkRecorder(r)
        small = embed_frames(rec, model, frames, batch_size=16)
        big = embed_frames(r, model, frames, batch_size=96)
    assert max(rec.calls) <= 16 and sum(rec.calls) == N_FRAMES
    np.testing.assert_allclose(np.asarray(small, np.float32), np.asarray(big, np.float32), atol=2e-3)


def test_concurrent_candidate_additions_merge(built, video):
    a = FrameIndex.open(built.path, model=built.model, video_path=video)
    b = FrameIndex.open(built.path, model=built.model, video_path=video)  # opened before a writes
    fa, _ = a.candidates(1, 40, 8)
    fb, _ = b.candidates(41, 90, 8)
    merged = FrameIndex.open(built.path, model=built.model, video_path=video)
    expect = np.union1d(fa, fb)
    expect = expect[~np.isin(expect, built.frame_indices)]
    np.testing.assert_array_equal(merged.extra_frame_indices, expect)


def test_candidate_grid_truncates_like_videobrain_and_serves_any_frame(built):
    frames, emb = built.candidates(0, 50, 16)
    # the reference's grid: np.linspace(start, end - 1, K) truncated to int (not rounded), de-duplicated
    np.testing.assert_array_equal(frames, np.unique(np.linspace(0, 49, 16).astype(np.int64)))
    assert not np.array_equal(frames, np.unique(np.round(np.linspace(0, 49, 16)).astype(np.int64)))
    again = built.frame_embeddings(frames[::-1])  # any order, served from the cache now
    np.testing.assert_array_equal(again, emb[::-1])
    with pytest.raises(IndexError, match="0..95"):
        built.frame_embeddings([5, N_FRAMES])
