"""An open-GOP HEVC file made with the ffmpeg CLI (x265 ``open-gop=1``): decord itself returns neighbouring
frames on random access, so ``open_video(path, backend="decord")`` refuses it with the reason, and both
``auto`` and ``pyav`` read every frame exactly. A closed-GOP encode of the same frames is the control: decord
opens it and reads it exactly, so the refusal is about the open GOP, not about HEVC."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from vidlab.video import VideoReadError, open_video
from vidlab.video.reader import import_decord
from vidlab.video.synth import synth_frames
from vidlab.video.testing import codes_of

FFMPEG = shutil.which("ffmpeg")
W, H, N = 96, 72, 120


def _x265(path, open_gop: bool):
    params = f"keyint=24:min-keyint=24:scenecut=0:bframes=4:open-gop={int(open_gop)}:log-level=error"
    cmd = [str(FFMPEG), "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{W}x{H}", "-r", "24",
           "-i", "-", "-c:v", "libx265", "-preset", "ultrafast", "-x265-params", params,
           "-pix_fmt", "yuv420p", "-tag:v", "hvc1", str(path)]  # fmt: skip
    raw = b"".join(f.tobytes() for f in synth_frames(N, W, H, seed=3))
    subprocess.run(cmd, input=raw, check=True)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory, needs):
    needs("ffmpeg")  # with libx265, as Debian's is built
    try:
        import_decord()  # after PyAV, as vidlab imports it
    except ImportError:
        pytest.skip("decord is not installed: pip install decord")
    root = tmp_path_factory.mktemp("hevc")
    return {"open": _x265(root / "open_gop.mp4", True), "closed": _x265(root / "closed_gop.mp4", False)}


def _decord_wrong(path) -> int:
    vr = import_decord().VideoReader(str(path))
    rng = np.random.default_rng(0)
    wrong = 0
    for _ in range(3):
        idx = rng.integers(0, N, size=48)
        wrong += sum(c != i for c, i in zip(codes_of(vr.get_batch(idx.tolist()).asnumpy()), idx.tolist()))
    return wrong


def test_decord_on_open_gop_hevc_is_refused_with_the_reason(files):
    assert _decord_wrong(files["open"]) > 0, "decord became exact on open-GOP HEVC: revisit decord_refuses"
    with pytest.raises(VideoReadError, match=r"open GOP \(hevc") as e:
        open_video(files["open"], backend="decord")
    assert "open_gop.mp4" in str(e.value) and "random access" in str(e.value)
    idx = np.random.default_rng(1).integers(0, N, size=40)
    for backend in ("auto", "pyav"):
        with open_video(files["open"], backend=backend) as r:
            assert r.backend == "pyav" and r.index.open_gop and r.index.codec == "hevc"
            assert codes_of(r.get_frames(idx)) == idx.tolist()


def test_closed_gop_hevc_control_is_read_by_decord(files):
    assert _decord_wrong(files["closed"]) == 0
    idx = np.random.default_rng(1).integers(0, N, size=40)
    with open_video(files["closed"], backend="decord") as r:
        assert not r.index.open_gop and r.backend == "decord"
        assert codes_of(r.get_frames(idx)) == idx.tolist()
