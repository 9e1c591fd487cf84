"""Agents over vidlab: uniform sampling through the VideoReader, CLIP retrieval from the cached FrameIndex."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vidlab.understanding.agents import (
    AgentError,
    ClipAgent,
    UniformAgent,
    clip_candidate_count,
    frame_size,
    initial_indices,
    linspace_frames,
)

FRAMES, FPS = 120, 12.0


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    from vidlab.video.synth import render_synthetic

    return str(
        render_synthetic(
            tmp_path_factory.mktemp("v") / "wide.mp4", FRAMES, fps=FPS, width=800, height=450, seed=3
        )
    )


@pytest.fixture(scope="module")
def model():
    from vidlab.clip import TINY_MODEL, load_model

    return load_model(TINY_MODEL)


def reference_linspace(start: int, end: int, n: int) -> list[int]:
    """The authors' code: ``sorted(set(np.linspace(start, end - 1, n, dtype=int).tolist()))``."""
    return sorted(set(np.linspace(start, end - 1, n, dtype=int).tolist()))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 50_000), st.integers(1, 50_000), st.sampled_from([4, 8, 16, 128, 256]))
def test_linspace_frames_matches_reference(start, span, n):
    assert linspace_frames(start, start + span, n) == reference_linspace(start, start + span, n)


def test_initial_view_and_candidate_count():
    assert initial_indices(1000) == reference_linspace(0, 1000, 16) and len(initial_indices(1000)) == 16
    assert initial_indices(5) == [0, 1, 2, 3, 4]  # short videos: de-duplicated
    assert clip_candidate_count(0, 19_999) == 128
    assert clip_candidate_count(100, 20_100) == 256  # range, not position, decides
    assert clip_candidate_count(5, 50) == 45
    assert clip_candidate_count(0, 200) == 128


@pytest.mark.parametrize(
    "size, fit",
    [
        ((1920, 1080), (640, 360)),
        ((800, 450), (640, 360)),
        ((480, 640), (270, 360)),
        ((320, 240), (320, 240)),
    ],
)
def test_fit_mode_only_downscales_keeping_aspect(size, fit):
    from vidlab.video import fit_within

    assert frame_size(*size, resize="fit") == fit == fit_within(*size, (640, 360))
    assert frame_size(*size) == (640, 360)  # reference: always exactly 640x360


def test_uniform_agent_frames_are_exact_and_fit_640x360(video):
    from vidlab.video import open_video
    from vidlab.video.synth import read_index_code

    agent = UniformAgent(open_video(video))
    frames = agent.sample(10, 100)
    assert [f.index for f in frames] == reference_linspace(10, 100, 8)
    for f in frames:
        assert f.image.shape == (360, 640, 3) and f.image.dtype == np.uint8
        assert f.timestamp == pytest.approx(f.index / FPS, abs=1e-3)
    # frame i decodes to the content written at i (the synthetic code survives the downscale)
    assert [read_index_code(f.image) for f in frames] == [f.index for f in frames]
    init = agent.initial()
    assert [f.index for f in init] == reference_linspace(0, FRAMES, 16)


def test_uniform_agent_range_rules(video):
    agent = UniformAgent(video)  # a path works too
    assert agent.indices(100, 10_000) == reference_linspace(100, FRAMES, 8)  # end clipped to the video
    with pytest.raises(AgentError, match="outside the video"):
        agent.indices(FRAMES, FRAMES + 10)
    with pytest.raises(AgentError, match="outside the video"):
        agent.indices(-1, 10)
    assert agent.indices(5, 9) == [5, 6, 7, 8]  # fewer frames than 8: de-duplicated (the env ends such calls)


def brute_force_clip(video, model, start, end, prompt):
    """The reference's clip_sample: decode candidates at 640x360-fit, embed, cosine, top 4, temporal order."""
    from vidlab.video import open_video

    reader = open_video(video)
    cands = reference_linspace(start, end, min(128, end - start))
    pix = reader.get_frames(cands, size=(640, 360))
    emb = model.embed_images(pix)
    text = model.embed_texts([prompt])[0]
    sims = emb @ text
    order = sorted(range(len(cands)), key=lambda i: -sims[i])[:4]
    return sorted(cands[i] for i in order), dict(zip(cands, sims))


def test_clip_agent_on_reader_reproduces_reference(video, model):
    agent = ClipAgent(video, model)
    want, _ = brute_force_clip(video, model, 7, 67, "a red circle")
    frames = agent.sample(7, 67, "a red circle")
    assert [f.index for f in frames] == want
    assert all(f.image.shape == (360, 640, 3) for f in frames)
    assert [f.index for f in frames] == sorted(f.index for f in frames)


def test_clip_agent_on_frame_index_parity(video, model, tmp_path):
    from vidlab.clip import FrameIndex, Sampling

    idx = FrameIndex.build(video, model, Sampling.fps(1.0), cache_dir=tmp_path)
    agent = ClipAgent(idx, model)  # reader taken from the index
    frames, sims = agent.scores(3, 118, "blue square")
    assert frames.tolist() == reference_linspace(3, 118, 115)  # exact reference candidates (truncation)
    want, ref_sims = brute_force_clip(video, model, 3, 118, "blue square")
    # cached fp16 embeddings of frames decoded at the model's size: close to the reference's scores
    assert np.allclose(sims, [ref_sims[int(f)] for f in frames], atol=0.05)
    got = agent.indices(3, 118, "blue square")
    assert got == sorted(frames[np.argsort(-sims, kind="stable")[:4]].tolist())
    assert len(set(got) & set(want)) >= 3
    # a second agent on a reopened index reads the candidates from the cache: same answer
    again = ClipAgent(FrameIndex.build(video, model, Sampling.fps(1.0), cache_dir=tmp_path), model)
    assert again.indices(3, 118, "blue square") == got


def test_clip_agent_search_mode_and_errors(video, model, tmp_path):
    from vidlab.clip import FrameIndex, Sampling

    idx = FrameIndex.build(video, model, Sampling.fps(2.0), cache_dir=tmp_path)
    dense = ClipAgent(idx, model, parity=False)
    got = dense.indices(0, 60, "green triangle")
    indexed = set(np.asarray(idx.frame_indices).tolist())
    assert len(got) == 4 and set(got) <= indexed and all(0 <= g < 60 for g in got)
    with pytest.raises(ValueError, match="FrameIndex"):
        ClipAgent(video, model, parity=False)
    with pytest.raises(AgentError, match="prompt"):
        dense.indices(0, 60, "  ")
    with pytest.raises(AgentError, match="outside"):
        dense.indices(500, 600, "x")
