"""Synthetic videos: deterministic by seed, index code robust to coding and resizing, scheduled events."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vidlab.video import open_video
from vidlab.video.synth import (
    COLORS,
    MAX_CODE,
    Event,
    draw_index_code,
    read_index_code,
    render_synthetic,
    synth_frame,
)


@settings(max_examples=60, deadline=None)
@given(
    value=st.integers(0, MAX_CODE),
    w=st.integers(24, 400),
    h=st.integers(24, 300),
    scale=st.floats(0.5, 1.0),
)
def test_index_code_roundtrip_any_size_and_scale(value, w, h, scale):
    from PIL import Image

    frame = np.full((h, w, 3), 90, np.uint8)
    draw_index_code(frame, value)
    assert read_index_code(frame) == value
    if min(w, h) * scale >= 48:  # documented robustness: resized frames keep >= 48 px on each side
        sw, sh = int(w * scale), int(h * scale)
        small = np.asarray(Image.fromarray(frame).resize((sw, sh), Image.BILINEAR))
        assert read_index_code(small) == value


def test_read_index_code_rejects_frames_without_code():
    with pytest.raises(ValueError, match="no valid index code"):
        read_index_code(np.zeros((48, 64, 3), np.uint8))
    with pytest.raises(ValueError, match="no valid index code"):
        read_index_code(np.full((48, 64, 3), 255, np.uint8))
    with pytest.raises(ValueError):
        draw_index_code(np.zeros((48, 64, 3), np.uint8), MAX_CODE + 1)


def test_frames_are_deterministic_by_seed_and_differ_across_seeds_and_time():
    a = synth_frame(17, 96, 72, seed=3)
    assert np.array_equal(a, synth_frame(17, 96, 72, seed=3))
    assert not np.array_equal(a[20:], synth_frame(17, 96, 72, seed=4)[20:])
    assert not np.array_equal(a[20:], synth_frame(18, 96, 72, seed=3)[20:])
    with pytest.raises(ValueError, match="24x24"):
        synth_frame(0, 10, 10)


def test_events_appear_exactly_in_their_frames():
    ev = Event(5, 9, shape="square", color="red", center=(0.5, 0.6), size=0.3)
    red = np.array(COLORS["red"])
    for t in range(0, 12):
        f = synth_frame(t, 120, 90, seed=0, num_shapes=0, events=[ev], counter=False)
        y, x = int(0.6 * 90), int(0.5 * 120)
        assert np.array_equal(f[y, x], red) == ev.active(t)
    with pytest.raises(ValueError, match="shape"):
        Event(0, 1, shape="star")
    with pytest.raises(ValueError, match="color"):
        Event(0, 1, color="mauve")
    with pytest.raises(ValueError, match="start < end"):
        Event(4, 4)


def test_render_synthetic_streams_to_a_readable_exact_video(tmp_path):
    path = render_synthetic(tmp_path / "s.mp4", 50, fps=10, width=80, height=60, seed=1, gop=10, text="hi")
    with open_video(path) as r:
        assert (r.num_frames, r.width, r.height, r.fps) == (50, 80, 60, 10.0)
        assert r.duration == pytest.approx(5.0)
        idx = [49, 0, 25]
        assert [read_index_code(f) for f in r.get_frames(idx)] == idx
        # decoded content is close to the rendered frame (lossy, but not a different picture)
        ref = synth_frame(25, 80, 60, seed=1, text="hi").astype(int)
        assert np.abs(r.get_frame(25).astype(int) - ref).mean() < 6
