"""write_video: streamed input, GOP control, vp9/webm, odd sizes, VFR, typed errors, atomic output."""

from __future__ import annotations

import numpy as np
import pytest

from vidlab.video import VideoWriteError, open_video, write_video
from vidlab.video.synth import read_index_code, synth_frames


def test_iterator_input_is_consumed_lazily(tmp_path):
    produced = []

    def gen():
        for i, f in enumerate(synth_frames(40, 64, 48)):
            produced.append(i)
            yield f

    write_video(gen(), tmp_path / "a.mp4", fps=24, gop=10)
    assert produced == list(range(40))
    with open_video(tmp_path / "a.mp4", backend="pyav") as r:
        assert r.num_frames == 40
        assert r.index.keyframes.tolist() == [0, 10, 20, 30]  # gop respected exactly
        assert r.codec == "h264"


def test_array_input_vp9_webm(tmp_path):
    frames = np.stack(list(synth_frames(12, 64, 48, seed=2)))
    p = write_video(frames, tmp_path / "a.webm", fps=12, codec="vp9", gop=6)
    with open_video(p, backend="pyav") as r:
        assert r.codec == "vp9" and r.num_frames == 12 and r.fps == 12
        assert [read_index_code(f) for f in r.get_frames([11, 0])] == [11, 0]


def test_odd_size_padding_and_error(tmp_path):
    frames = list(synth_frames(3, 65, 49))
    p = write_video(frames, tmp_path / "odd.mp4", fps=5)
    with open_video(p) as r:
        assert (r.width, r.height) == (66, 50)
    with pytest.raises(VideoWriteError, match="even sizes"):
        write_video(frames, tmp_path / "odd2.mp4", fps=5, odd_size="error")
    assert (
        not (tmp_path / "odd2.mp4").exists()
        and sorted(p.name for p in tmp_path.iterdir() if "odd2" in p.name) == []
    )


def test_vfr_timestamps(tmp_path):
    ts = [0.0, 0.1, 0.15, 0.5, 0.52]
    p = write_video(synth_frames(5, 64, 48), tmp_path / "vfr.mp4", fps=10, timestamps=ts)
    with open_video(p, backend="pyav") as r:
        np.testing.assert_allclose(r.timestamps(range(5)), ts, atol=1e-3)
        assert r.index.vfr


@pytest.mark.parametrize(
    "frames,match",
    [
        ([], "no frames"),
        ([np.zeros((48, 64), np.uint8)], "expected \\[H, W, 3\\]"),
        ([np.zeros((48, 64, 3), np.float32)], "uint8"),
        ([np.zeros((48, 64, 3), np.uint8), np.zeros((50, 64, 3), np.uint8)], "earlier frames"),
    ],
)
def test_bad_frames_raise_typed_errors_and_leave_no_file(tmp_path, frames, match):
    out = tmp_path / "bad.mp4"
    with pytest.raises(VideoWriteError, match=match) as ei:
        write_video(iter(frames), out, fps=10)
    assert ei.value.path == str(out)
    assert not out.exists() and not [p for p in out.parent.iterdir() if p.name.startswith(".bad")]


def test_bad_codec_and_fps(tmp_path):
    with pytest.raises(VideoWriteError, match="encoder"):
        write_video(synth_frames(2, 64, 48), tmp_path / "x.mp4", fps=10, codec="nope")
    with pytest.raises(VideoWriteError, match="fps"):
        write_video(synth_frames(2, 64, 48), tmp_path / "x.mp4", fps=0)
