"""Bad input: typed errors naming the file and the reason; never a crash, a hang or a wrong frame."""

from __future__ import annotations

import importlib.util
import pickle
import subprocess
import sys
import types

import numpy as np
import pytest

from vidlab.video import BackendUnavailableError, VideoReadError, open_video
from vidlab.video.synth import render_synthetic
from vidlab.video.testing import codes_of

BACKENDS = [
    "auto",
    "pyav",
    pytest.param(
        "decord",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("decord") is None, reason="decord is not installed: pip install decord"
        ),
    ),
    pytest.param("torchcodec", marks=pytest.mark.needs("torchcodec")),  # FFmpeg's shared libraries (apt)
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import av

    d = tmp_path_factory.mktemp("bad")
    (d / "zero.mp4").write_bytes(b"")
    (d / "text.mp4").write_text("this is a text file, not a video\n" * 20)
    (d / "folder.mp4").mkdir()
    # audio only
    c = av.open(str(d / "audio.m4a"), "w")
    s = c.add_stream("aac", rate=16000)
    for i in range(10):
        fr = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
        fr.sample_rate = 16000
        fr.pts = i * 1024
        for p in s.encode(fr):
            c.mux(p)
    for p in s.encode():
        c.mux(p)
    c.close()
    # truncated files: mp4 with its index at the end (a cut loses it), and the CUT_FILES (header first)
    render_synthetic(d / "full.mp4", 120, width=64, height=48, gop=30)
    data = (d / "full.mp4").read_bytes()
    (d / "half_full.mp4").write_bytes(data[: len(data) // 2])
    for kind, (name, options) in CUT_FILES.items():
        render_synthetic(d / name, 120, width=64, height=48, gop=30, container_options=options)
        data = (d / name).read_bytes()
        for cut in CUTS:
            end = bframe_end(d / name, len(data) // 2) if cut == "b" else int(len(data) * cut)
            (d / cut_name(kind, cut)).write_bytes(data[:end])
    return d


# Files cut short whose header survives (120 frames, GOP 30, libx264's B-frames, reordered 2 deep), cut at
# fractions of their bytes and at "b": just after the first B-frame packet past the middle, so that the
# frames shown next to it are stored after it, past the cut (where numbering by the pts read went wrong).
CUTS = [0.3, 0.5, 0.7, "b"]
CUT_FILES = {
    "mkv": ("full.mkv", None),
    "mkv_live": ("live.mkv", {"live": "1"}),  # Segment of unknown size, as a recording stopped mid-way
    "mp4_faststart": ("full_fs.mp4", {"movflags": "faststart"}),
}


def cut_name(kind: str, cut) -> str:
    return f"cut_{kind}_{cut}{CUT_FILES[kind][0][-4:]}"


def bframe_end(path, after: int) -> int:
    """Byte just after the first B-frame packet (shown before the packet stored ahead of it) that ends at or
    after byte ``after``."""
    import av

    with av.open(str(path)) as c:
        stream, prev = c.streams.video[0], None
        for p in c.demux(stream):
            if not p.size:
                continue
            if prev is not None and p.pts < prev and not p.is_keyframe and p.pos + p.size >= after:
                return int(p.pos + p.size)
            prev = p.pts
    raise AssertionError(f"{path} holds no B-frame packet past byte {after}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "name,reason",
    [
        ("missing.mp4", "no such file"),
        ("folder.mp4", "is a folder"),
        ("zero.mp4", "empty file (0 bytes)"),
        ("text.mp4", "not a readable video container"),
        ("audio.m4a", "no video stream"),
        ("half_full.mp4", "not a readable video container"),
    ],
)
def test_unreadable_files_raise_typed_errors(files, backend, name, reason):
    with pytest.raises(VideoReadError) as ei:
        open_video(files / name, backend=backend)
    err = ei.value
    assert err.path == str(files / name) and reason in err.reason
    assert str(files / name) in str(err) and reason in str(err)
    again = pickle.loads(pickle.dumps(err))  # survives process boundaries (Ray, multiprocessing)
    assert (again.path, again.reason) == (err.path, err.reason)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cut", CUTS)
@pytest.mark.parametrize("kind", CUT_FILES)
def test_cut_file_keeps_exact_prefix_and_counts_lost(files, kind, cut, backend, monkeypatch):
    """Decision: a file cut short whose header survives opens with only the frames that decode in place, frame
    i showing what was written at i, wherever the cut lands; lost_frames counts the frames that the header
    declares (mp4) or whose packets were read (Matroska counts none) and that are not kept. decord refuses."""
    path = files / cut_name(kind, cut)
    if backend == "decord":
        with pytest.raises(VideoReadError, match="truncated file"):
            open_video(path, backend=backend)
        return
    monkeypatch.setenv("VIDLAB_AUTO_BACKEND", "decord")  # auto must avoid decord here even when preferred
    with open_video(path, backend=backend) as r:
        assert 0 < r.num_frames < 120 and r.lost_frames > 0
        if kind == "mp4_faststart":
            assert r.lost_frames == 120 - r.num_frames
        else:
            assert r.num_frames + r.lost_frames <= 120
        if backend == "auto":
            assert r.backend == "pyav"
        for idx in (np.arange(r.num_frames), np.arange(r.num_frames)[::-1]):  # forward, then random access
            assert codes_of(r.get_frames(idx)) == idx.tolist()
        with pytest.raises(IndexError, match="lost to truncation"):
            r.get_frames([r.num_frames])


@pytest.mark.needs("ffmpeg")
@pytest.mark.parametrize("cut", CUTS)
@pytest.mark.parametrize("kind", CUT_FILES)
def test_cut_file_prefix_is_what_ffmpeg_decodes_in_place(files, kind, cut):
    """FFmpeg's CLI on the same bytes decodes the frames vidlab keeps to the same pictures, and shows the lost
    B-frames as gaps after them (after a B-frame cut always): frames vidlab must not renumber. vidlab drops at
    most 3 of the frames FFmpeg decodes before its first gap (the reorder depth, 2, and a partial packet)."""
    path = files / cut_name(kind, cut)
    cmd = ["ffmpeg", "-v", "error", "-i", str(path), "-map", "0:v:0", "-fps_mode", "passthrough"]
    raw = subprocess.run([*cmd, "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], capture_output=True).stdout
    ff = np.frombuffer(raw, np.uint8).reshape(-1, 48, 64, 3)
    codes = codes_of(ff)
    in_place = next((i for i, c in enumerate(codes) if c != i), len(codes))
    with open_video(path, backend="pyav") as r:
        ours = r.get_frames(np.arange(r.num_frames))
    assert in_place - 3 <= len(ours) <= in_place
    assert np.array_equal(ours, ff[: len(ours)])
    if cut == "b":
        assert in_place < len(codes) and codes[in_place] > in_place


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_indices(files, backend):
    with open_video(files / "full.mp4", backend=backend) as r:
        with pytest.raises(IndexError, match="negative"):
            r.get_frames([0, -1])
        with pytest.raises(IndexError, match="out of range"):
            r.get_frames([120])
        with pytest.raises(ValueError, match="empty index list"):
            r.get_frames([])
        with pytest.raises(ValueError, match="integers"):
            r.get_frames([1.5])
        with pytest.raises(IndexError):
            r.timestamps([500])
        with pytest.raises(IndexError):
            list(r.iter_frames(0, 121))
        with pytest.raises(ValueError):
            r.get_frames([0], size=(0, 10))
        assert codes_of(r.get_frames(np.array([2.0, 3.0]))) == [2, 3]  # integral floats are accepted


def test_unknown_backend_and_closed_reader(files):
    with pytest.raises(ValueError, match="unknown video backend"):
        open_video(files / "full.mp4", backend="opencv")
    r = open_video(files / "full.mp4")
    r.close()
    with pytest.raises(VideoReadError, match="closed"):
        r.get_frames([0])


# torchcodec's own message on a machine without FFmpeg's shared libraries (0.17; the per-version tracebacks cut)
NO_FFMPEG = """Could not load libtorchcodec. Likely causes:
          1. FFmpeg is not properly installed in your environment. We support
             versions 4, 5, 6, 7, 8, and 9, and we attempt to load libtorchcodec
             for each of those versions.

        The following exceptions were raised as we tried to load libtorchcodec:
        \n[start of libtorchcodec loading traceback]
FFmpeg version 5:
Traceback (most recent call last):
OSError: libavutil.so.57: cannot open shared object file: No such file or directory
[end of libtorchcodec loading traceback]."""


@pytest.fixture
def torchcodec_without_ffmpeg(monkeypatch):
    """In this process: ``torchcodec.decoders`` imports, and building a VideoDecoder raises torchcodec's
    RuntimeError, as on a machine without FFmpeg's libraries (tests/vidlab/test_video_no_ffmpeg_libs.py runs the
    real torchcodec that way in a subprocess). The backend's cached probe is cleared before and after."""
    from vidlab.video import reader
    from vidlab.video.backends import torchcodec_backend

    class VideoDecoder:
        def __init__(self, source, **kwargs):
            raise RuntimeError(NO_FFMPEG)

    decoders = types.ModuleType("torchcodec.decoders")
    decoders.VideoDecoder = decoders.SimpleVideoDecoder = VideoDecoder  # type: ignore[attr-defined]
    package = types.ModuleType("torchcodec")
    package.__path__ = []  # type: ignore[attr-defined]
    package.decoders = decoders  # type: ignore[attr-defined]
    package.ffmpeg_major_version = package.core_library_path = None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torchcodec", package)
    monkeypatch.setitem(sys.modules, "torchcodec.decoders", decoders)
    monkeypatch.setattr(reader, "_told", set())  # the fallback's log line is once per process
    torchcodec_backend.unavailable_reason.cache_clear()
    yield
    torchcodec_backend.unavailable_reason.cache_clear()


APT = "apt-get install libavcodec59 libavformat59 libavutil57 libswscale6 libavdevice59 libavfilter8"


def test_torchcodec_without_ffmpeg_is_one_typed_line_and_auto_avoids_it(
    files, torchcodec_without_ffmpeg, monkeypatch, caplog
):
    """Without FFmpeg's shared libraries: one line naming the apt packages and PyAV, before the file is read;
    ``available_backends`` leaves torchcodec out, and auto never picks it, even when preferred."""
    from vidlab.video import available_backends
    from vidlab.video.backends import torchcodec_backend

    why = torchcodec_backend.unavailable_reason()
    assert why == f"torchcodec cannot load FFmpeg's shared libraries: {APT} (Debian 12)"
    for path in (files / "full.mp4", files / "missing.mp4"):
        with pytest.raises(BackendUnavailableError) as ei:
            open_video(path, backend="torchcodec")
        err = ei.value
        assert isinstance(err, VideoReadError) and err.backend == "torchcodec" and err.path == str(path)
        assert str(err) == f"video backend 'torchcodec' cannot run here: {why}, or use backend=pyav"
        again = pickle.loads(pickle.dumps(err))
        assert (type(again), str(again), again.path) == (BackendUnavailableError, str(err), err.path)
    assert "torchcodec" not in available_backends() and "pyav" in available_backends()
    monkeypatch.setenv("VIDLAB_AUTO_BACKEND", "torchcodec")
    with caplog.at_level("WARNING", logger="vidlab.video.reader"):
        for _ in range(2):
            with open_video(files / "full.mp4") as r:
                assert r.backend == "pyav" and r.selection_reason.startswith(
                    f"VIDLAB_AUTO_BACKEND=torchcodec, but {why}: planned PyAV"
                )
                assert codes_of(r.get_frames([119, 0])) == [119, 0]
    assert [rec.getMessage() for rec in caplog.records] == [r.selection_reason]  # once per process
    assert torchcodec_backend.unavailable_reason.cache_info().misses == 1  # probed once


def test_torchcodec_not_installed_names_the_extra(files, monkeypatch):
    from vidlab.video.backends import torchcodec_backend

    monkeypatch.setitem(sys.modules, "torchcodec", None)  # import torchcodec -> ModuleNotFoundError
    monkeypatch.setitem(sys.modules, "torchcodec.decoders", None)
    torchcodec_backend.unavailable_reason.cache_clear()
    try:
        with pytest.raises(
            BackendUnavailableError, match=r"pip install 'vidlab\[torchcodec\]', or use backend=pyav"
        ):
            open_video(files / "full.mp4", backend="torchcodec")
    finally:
        torchcodec_backend.unavailable_reason.cache_clear()


def test_contact_sheet_with_torchcodec_missing_is_one_line_exit_2(
    files, tmp_path, torchcodec_without_ffmpeg, capsys
):
    from vidlab import cli

    out = tmp_path / "sheet.png"
    assert (
        cli.main(["contact-sheet", str(files / "full.mp4"), "--out", str(out), "--backend", "torchcodec"])
        == 2
    )
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        f"vidlab contact-sheet: error: video backend 'torchcodec' cannot run here: torchcodec cannot load FFmpeg's "
        f"shared libraries: {APT} (Debian 12), or use backend=pyav"
    ]
    assert not out.exists()
