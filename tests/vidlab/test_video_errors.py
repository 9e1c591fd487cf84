"""Bad input: typed errors naming the file and the reason; never a crash, a hang or a wrong frame."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from vidlab.video import VideoReadError, available_backends, open_video
from vidlab.video.synth import render_synthetic
from vidlab.video.testing import codes_of

BACKENDS = ["auto", *available_backends()]


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
    # truncated files: index at the end (cut loses it), index first (cut loses data), matroska
    render_synthetic(d / "full.mp4", 120, width=64, height=48, gop=30)
    render_synthetic(
        d / "full_fs.mp4", 120, width=64, height=48, gop=30, container_options={"movflags": "faststart"}
    )
    render_synthetic(d / "full.mkv", 120, width=64, height=48, gop=30)
    for name in ("full.mp4", "full_fs.mp4", "full.mkv"):
        data = (d / name).read_bytes()
        (d / f"half_{name}").write_bytes(data[: len(data) // 2])
    return d


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
def test_mp4_cut_in_half_returns_decodable_frames_and_counts_lost(files, backend, monkeypatch):
    """Decision: a file whose header survives opens with only the frames that decode; lost_frames says how many."""
    if backend == "decord":
        with pytest.raises(VideoReadError, match="truncated file"):
            open_video(files / "half_full_fs.mp4", backend=backend)
        return
    monkeypatch.setenv("VIDLAB_AUTO_BACKEND", "decord")  # auto must avoid decord here even when preferred
    with open_video(files / "half_full_fs.mp4", backend=backend) as r:
        assert 0 < r.num_frames < 120
        assert r.lost_frames == 120 - r.num_frames
        if backend == "auto":
            assert r.backend == "pyav"
        idx = np.arange(r.num_frames)[::-1]
        assert codes_of(r.get_frames(idx)) == idx.tolist()
        with pytest.raises(IndexError, match="lost to truncation"):
            r.get_frames([r.num_frames])


@pytest.mark.parametrize("backend", BACKENDS)
def test_mkv_cut_in_half_keeps_exact_prefix(files, backend):
    with open_video(files / "half_full.mkv", backend=backend) as r:
        assert 0 < r.num_frames < 120
        idx = np.arange(r.num_frames)
        assert codes_of(r.get_frames(idx)) == idx.tolist()


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


def test_torchcodec_backend_is_clear_when_missing(files, monkeypatch):
    """Without torchcodec (or without FFmpeg's shared libraries) the error names what to install."""
    import builtins

    from vidlab.video.backends import torchcodec_backend

    real_import = builtins.__import__

    def no_ffmpeg(name, *args, **kwargs):
        if name.startswith("torchcodec"):
            raise RuntimeError(
                "Could not load libtorchcodec. libavutil.so.57: cannot open shared object file"
            )
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ffmpeg)
    why = torchcodec_backend.unavailable_reason()
    assert "apt-get install libavcodec59 libavformat59 libavutil57 libswscale6" in why
    with pytest.raises(VideoReadError, match="apt-get install libavcodec59"):
        open_video(files / "full.mp4", backend="torchcodec")
