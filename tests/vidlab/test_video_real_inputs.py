"""Files from the wild, made by other tools (Debian's ffmpeg CLI and PyAV): several video streams,
display rotation, 10-bit and full-range sources. Every backend must show what FFmpeg shows."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

import numpy as np
import pytest

from vidlab.video import VideoReadError, open_video
from vidlab.video.reader import import_decord
from vidlab.video.synth import render_synthetic
from vidlab.video.testing import codes_of

# system packages (tests/conftest.py SYSTEM_DEPS): cases that need them skip naming the Debian packages
TORCHCODEC = pytest.param("torchcodec", marks=pytest.mark.needs("torchcodec"))  # FFmpeg's shared libraries
BACKENDS = ["pyav", "decord", TORCHCODEC]
FFMPEG = shutil.which("ffmpeg")  # files made with the ffmpeg CLI are made where it is installed


def _skip_missing(backend):
    if backend == "decord":
        try:
            import_decord()  # after PyAV, as vidlab imports it
        except ImportError:
            pytest.skip("decord is not installed: pip install decord")


def _ff(*args):
    subprocess.run([str(FFMPEG), "-v", "error", "-y", *map(str, args)], check=True)


def ffmpeg_rgb(path, width, height, stream=None) -> np.ndarray:
    """What ``ffmpeg -i path -pix_fmt rgb24`` decodes (autorotated; its default stream choice unless ``stream``)."""
    cmd = [str(FFMPEG), "-v", "error", "-i", str(path)]
    if stream is not None:
        cmd += ["-map", f"0:{stream}"]
    out = subprocess.run([*cmd, "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], check=True, capture_output=True)
    return np.frombuffer(out.stdout, np.uint8).reshape(-1, height, width, 3)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("wild")


def _pyav_remux(src, dst, rotation=None, disposition_default=None):
    """Copy ``src``'s video packets into ``dst`` with PyAV, optionally with a display rotation."""
    import av

    with av.open(str(src)) as ic, av.open(str(dst), "w") as oc:
        ist = ic.streams.video[0]
        ost = oc.add_stream_from_template(ist)
        if rotation is not None:
            ost.set_display_rotation(rotation)
        for pkt in ic.demux(ist):
            if pkt.dts is None:
                continue
            pkt.stream = ost
            oc.mux(pkt)


def _pyav_two_streams(path, default_second: bool):
    """Two video streams written by PyAV: 64x48 (30 frames) and 96x72 (45 frames), index codes on both."""
    import av

    from vidlab.video.synth import synth_frame

    with av.open(str(path), "w") as oc:
        specs = [(64, 48, 30), (96, 72, 45)]
        streams = []
        for w, h, _ in specs:
            s = oc.add_stream("libx264", rate=24, options={"crf": "18"})
            s.width, s.height, s.pix_fmt = w, h, "yuv420p"
            streams.append(s)
        if default_second:
            streams[0].disposition = av.stream.Disposition(0)
            streams[1].disposition = av.stream.Disposition.default
        for s, (w, h, n) in zip(streams, specs):
            for t in range(n):
                frame = av.VideoFrame.from_ndarray(synth_frame(t, w, h, seed=3), format="rgb24")
                for pkt in s.encode(frame):
                    oc.mux(pkt)
            for pkt in s.encode():
                oc.mux(pkt)


# --- stream selection --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def multi(root):
    """name -> (path, best stream, {stream: (frames, width, height)})."""
    files = {}
    if FFMPEG:
        a, b = root / "a.mp4", root / "b.mp4"
        render_synthetic(a, 30, width=64, height=48, gop=10)
        render_synthetic(b, 45, width=96, height=72, gop=10)
        # ffmpeg marks the first stream default; here the second one is
        _ff("-i", a, "-i", b, "-map", "0:v", "-map", "1:v", "-c", "copy",
            "-disposition:v:0", "0", "-disposition:v:1", "default", root / "ff_default2.mp4")  # fmt: skip
        _ff("-i", a, "-i", b, "-map", "0:v", "-map", "1:v", "-c", "copy", root / "ff_default1.mkv")
        files["ff_default2"] = (root / "ff_default2.mp4", 1)
        files["ff_default1"] = (root / "ff_default1.mkv", 0)
    _pyav_two_streams(root / "pyav_default2.mkv", default_second=True)
    files["pyav_default2"] = (root / "pyav_default2.mkv", 1)
    return files


SPECS = {0: (30, 64, 48), 1: (45, 96, 72)}


@pytest.mark.parametrize("name", ["ff_default2", "ff_default1", "pyav_default2"])
@pytest.mark.parametrize("backend", ["auto", *BACKENDS])
def test_best_stream_is_ffmpegs_choice_on_every_backend(multi, name, backend, needs):
    if name.startswith("ff_"):
        needs("ffmpeg")
    if backend != "auto":
        _skip_missing(backend)
    path, best = multi[name]
    if backend == "decord":  # decord has no stream argument and its FFmpeg 4 ignores the disposition
        with pytest.raises(VideoReadError, match="2 video streams"):
            open_video(path, backend="decord")
        return
    n, w, h = SPECS[best]
    with open_video(path, backend=backend) as r:
        assert (r.stream, r.num_frames, r.width, r.height) == (best, n, w, h)
        idx = np.array([n - 1, 0, n // 2, 3])
        assert codes_of(r.get_frames(idx)) == idx.tolist()
        assert r.metadata()["video_streams"] == [0, 1]
    if backend == "torchcodec":  # torchcodec's own default (av_find_best_stream in the system FFmpeg) agrees
        from torchcodec.decoders import VideoDecoder

        assert VideoDecoder(str(path)).metadata.stream_index == best


@pytest.mark.parametrize("backend", ["auto", "pyav", TORCHCODEC])
def test_stream_argument_reads_another_stream(multi, backend):
    if backend != "auto":
        _skip_missing(backend)
    path, best = multi["pyav_default2"]
    other = 1 - best
    n, w, h = SPECS[other]
    with open_video(path, backend=backend, stream=other) as r:
        assert (r.stream, r.num_frames, r.width, r.height) == (other, n, w, h)
        assert codes_of(r.get_frames([n - 1, 1])) == [n - 1, 1]
    with pytest.raises(VideoReadError, match=r"stream 7 is not a video stream; video streams: \[0, 1\]"):
        open_video(path, backend=backend, stream=7)


# --- rotation ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rotated(root):
    """(maker, angle) -> path; 160x120 coded picture with index codes, rotated by ffmpeg's tag or PyAV."""
    base = root / "upright.mp4"
    render_synthetic(base, 12, width=160, height=120, gop=4)
    out = {}
    for angle in (0, 90, 180, 270):
        p = root / f"pyav_rot{angle}.mp4"
        _pyav_remux(base, p, rotation=angle)
        out[("pyav", angle)] = p
        if FFMPEG:
            q = root / f"ff_rot{angle}.mp4"
            _ff("-i", base, "-c", "copy", "-metadata:s:v:0", f"rotate={angle}", q)
            out[("ffmpeg", angle)] = q
    return base, out


@pytest.mark.parametrize("maker", ["ffmpeg", "pyav"])
@pytest.mark.parametrize("angle", [0, 90, 180, 270])
@pytest.mark.parametrize("backend", BACKENDS)
def test_rotation_is_applied_as_ffmpeg_shows_it(rotated, maker, angle, backend, needs):
    _skip_missing(backend)
    if maker == "ffmpeg":
        needs("ffmpeg")
    base, files = rotated
    path = files[(maker, angle)]
    with open_video(base, backend="pyav") as r:
        upright = r.get_frames(np.arange(12))
    with open_video(path, backend=backend) as r:
        swapped = angle in (90, 270)
        assert (r.width, r.height) == ((120, 160) if swapped else (160, 120))
        shown = r.get_frames(np.arange(12))
        assert shown.shape == (12, r.height, r.width, 3)
        if angle:
            assert not np.array_equal(np.ascontiguousarray(shown[:, :96, :96]), upright[:, :96, :96])
        # a pure permutation of the coded pixels
        k = {"cclock": 1, "clock": -1, "hflip,vflip": 2, "": 0}[r.index.orient_op]
        np.testing.assert_array_equal(shown, np.rot90(upright, k, axes=(1, 2)))
        small = r.get_frames([5], size=(48, 48))
        assert small.shape == ((1, 48, 36, 3) if swapped else (1, 36, 48, 3))
        big = r.get_frames([5], size=(100, 100))
        assert big.shape == ((1, 100, 75, 3) if swapped else (1, 75, 100, 3))
        streamed = np.stack([f for _, f in r.iter_frames(0, 12, 5)])
        np.testing.assert_array_equal(streamed, shown[::5])
        np.testing.assert_array_equal(r.get_frames([9, 3, 9, 0]), shown[[9, 3, 9, 0]])  # unsorted, a repeat
    with open_video(path, backend=backend, rotate=False) as r:  # the coded picture
        assert (r.width, r.height) == (160, 120)
        np.testing.assert_array_equal(r.get_frames(np.arange(12)), upright)
        assert codes_of(r.get_frames([7, 2])) == [7, 2]
        assert r.get_frames([5], size=(48, 48)).shape == (1, 36, 48, 3)
    if FFMPEG:  # the reference: what ffmpeg's CLI decodes (it autorotates)
        ref = ffmpeg_rgb(path, shown.shape[2], shown.shape[1])
        assert float(np.abs(ref.astype(np.int16) - shown).mean()) < 1.0


def test_rotation_metadata(rotated):
    _, files = rotated
    with open_video(
        files[("pyav", 90)]
    ) as r:  # PyAV's angle is counter-clockwise: shown 270 degrees clockwise
        md = r.metadata()
        assert md["rotation"] == 270 and md["rotated"] and (md["width"], md["height"]) == (120, 160)
    with open_video(files[("pyav", 90)], rotate=False) as r:
        assert not r.metadata()["rotated"] and (r.width, r.height) == (160, 120)


def test_decord_refuses_rotated_files_it_cannot_decode(root):
    """decord's rotation path raises a size mismatch on 96x72 rotated 90 degrees: refused at open, not later."""
    _skip_missing("decord")
    base, path = root / "small.mp4", root / "small_rot90.mp4"
    render_synthetic(base, 12, width=96, height=72, gop=4)
    _pyav_remux(base, path, rotation=90)
    with pytest.raises(VideoReadError, match="decord fails on this rotated file"):
        open_video(path, backend="decord")
    with open_video(path, backend="auto") as r:
        assert (r.width, r.height) == (72, 96) and r.get_frames([3]).shape == (1, 96, 72, 3)


# --- 10-bit and full range ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def deep(root, needs):
    needs("ffmpeg")
    base = root / "src8.mp4"
    render_synthetic(base, 24, width=96, height=72, gop=8, crf=0)
    out = {}
    for name, args in {
        "h264_10bit": ["-c:v", "libx264", "-pix_fmt", "yuv420p10le", "-g", "8"],
        "hevc_10bit": ["-c:v", "libx265", "-pix_fmt", "yuv420p10le", "-x265-params", "log-level=error:keyint=8"],
        "h264_full709": ["-c:v", "libx264", "-pix_fmt", "yuvj420p", "-color_range", "pc", "-colorspace",
                         "bt709", "-color_primaries", "bt709", "-color_trc", "bt709", "-g", "8"],
    }.items():  # fmt: skip
        _ff("-i", base, *args, root / f"{name}.mp4")
        out[name] = root / f"{name}.mp4"
    return out


@pytest.mark.parametrize("name", ["h264_10bit", "hevc_10bit", "h264_full709"])
@pytest.mark.parametrize("backend", ["auto", *BACKENDS])
def test_deep_and_full_range_agree_with_ffmpeg(deep, name, backend):
    if backend != "auto":
        _skip_missing(backend)
    path = deep[name]
    ref = ffmpeg_rgb(path, 96, 72)
    if backend == "decord" and "10bit" in name:  # about 4 levels off: refused, never returned
        with pytest.raises(VideoReadError, match="10-bit"):
            open_video(path, backend="decord")
        return
    with open_video(path, backend=backend) as r:
        got = r.get_frames(np.arange(r.num_frames))
        assert r.num_frames == ref.shape[0] == 24
        mad = float(np.abs(got.astype(np.int16) - ref).mean())
        assert mad <= 1.0, f"{backend} is {mad:.2f} levels off ffmpeg on {name}"
        assert codes_of(got[[3, 17]]) == [3, 17]
        if "10bit" in name:
            assert r.index.bit_depth == 10
        else:
            assert r.index.color_range == "pc"


def test_auto_preferring_decord_routes_10bit_and_multistream_to_pyav(deep, multi, monkeypatch):
    _skip_missing("decord")
    monkeypatch.setenv("VIDLAB_AUTO_BACKEND", "decord")
    with open_video(deep["hevc_10bit"]) as r:
        assert r.backend == "pyav" and "10-bit" in r.selection_reason
    with open_video(multi["pyav_default2"][0]) as r:
        assert r.backend == "pyav" and "video streams" in r.selection_reason
    with open_video(deep["h264_full709"]) as r:
        assert r.backend == "decord"


# --- true error reasons ------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["auto", *BACKENDS])
def test_fifo_and_symlink_errors_say_what_they_are_and_never_block(tmp_path, backend):
    fifo = tmp_path / "pipe.mp4"
    os.mkfifo(fifo)
    loop = tmp_path / "loop.mp4"
    loop.symlink_to(loop)
    broken = tmp_path / "broken.mp4"
    broken.symlink_to(tmp_path / "gone.mp4")
    cases = [(fifo, "named pipe (FIFO)"), (loop, "symlink loop"), (broken, "broken symlink"),
             (tmp_path, "is a folder"), (tmp_path / "missing.mp4", "no such file")]  # fmt: skip
    for path, reason in cases:
        result = {}

        def attempt(path=path, result=result):
            try:
                open_video(path, backend=backend)
            except VideoReadError as e:
                result["error"] = e

        t = threading.Thread(target=attempt, daemon=True)
        t.start()
        t.join(timeout=20)
        if t.is_alive():  # unblock the reader before failing
            with open(fifo, "wb"):
                pass
            pytest.fail(f"open_video blocked on {path}")
        assert "error" in result, path
        assert reason in result["error"].reason and "empty" not in result["error"].reason
