"""Write frames to a video file through PyAV, streaming, so a long video never sits in memory."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np

from .errors import VideoWriteError

# Friendly codec names -> FFmpeg encoder names.
ENCODERS = {"h264": "libx264", "x264": "libx264", "vp9": "libvpx-vp9", "hevc": "libx265", "h265": "libx265"}
# Codecs whose 4:2:0 / 4:2:2 encoders reject odd frame sizes.
_EVEN_ONLY = {"libx264", "libx265", "h264", "hevc"}
# Time base used for variable-frame-rate output (explicit per-frame timestamps).
VFR_TIME_BASE = Fraction(1, 90000)


def _as_uint8_rgb(frame: np.ndarray, path: Path, i: int) -> np.ndarray:
    arr = np.asarray(frame)
    if arr.ndim != 3 or arr.shape[2] != 3:
        raise VideoWriteError(path, f"frame {i} has shape {arr.shape}; expected [H, W, 3] RGB")
    if arr.dtype != np.uint8:
        if np.issubdtype(arr.dtype, np.floating):
            raise VideoWriteError(path, f"frame {i} is {arr.dtype}; convert to uint8 0..255 first")
        arr = np.clip(arr, 0, 255).astype(np.uint8)
    return np.ascontiguousarray(arr)


def _pad_even(arr: np.ndarray) -> np.ndarray:
    h, w = arr.shape[:2]
    ph, pw = h % 2, w % 2
    if not (ph or pw):
        return arr
    return np.pad(arr, ((0, ph), (0, pw), (0, 0)), mode="edge")


def write_video(
    frames: Iterable[np.ndarray] | np.ndarray,
    path: str | os.PathLike,
    fps: float,
    codec: str = "h264",
    gop: int | None = None,
    crf: int | None = 18,
    pix_fmt: str = "yuv420p",
    preset: str | None = None,
    bframes: int | None = None,
    timestamps: Sequence[float] | None = None,
    odd_size: str = "pad",
    options: dict[str, str] | None = None,
    container_options: dict[str, str] | None = None,
) -> Path:
    """Encode RGB uint8 frames ``[H, W, 3]`` (an array or any iterator, consumed once) to ``path``.

    ``codec``: ``h264`` (libx264, mp4/mkv), ``vp9`` (libvpx-vp9, webm) or any FFmpeg encoder name.
    ``gop``: keyframe interval (frames); ``crf``: quality (lower is better); ``preset``: x264 speed
    preset; ``bframes``: max consecutive B-frames (x264 default if None).
    ``timestamps``: presentation time in seconds of each frame, for variable-frame-rate output.
    ``odd_size``: h264/hevc with a subsampled ``pix_fmt`` cannot store odd sizes; ``"pad"`` (default)
    pads the right/bottom edge by one pixel (edge replication), ``"error"`` raises instead.
    ``options`` go to the encoder (e.g. ``{"x264-params": ...}``), ``container_options`` to the muxer
    (e.g. ``{"movflags": "faststart"}`` puts the mp4 index first).
    The file is written to a temporary beside ``path`` (:func:`vidlab.io.atomic_tmp_path`), fsynced and
    renamed when complete, so a crash never leaves a half-written file under the final name
    (``vidlab.io.sweep_stale`` removes what a killed run left).
    """
    import av  # heavy import kept lazy

    path = Path(path)
    if fps is None or float(fps) <= 0:
        raise VideoWriteError(path, f"fps must be > 0, got {fps!r}")
    if odd_size not in ("pad", "error"):
        raise VideoWriteError(path, f"odd_size must be 'pad' or 'error', got {odd_size!r}")
    encoder = ENCODERS.get(codec, codec)
    path.parent.mkdir(parents=True, exist_ok=True)
    from vidlab.io import atomic_tmp_path, commit_tmp

    tmp = atomic_tmp_path(path)
    fmt = {".mp4": "mp4", ".webm": "webm", ".mkv": "matroska", ".mov": "mov", ".avi": "avi"}.get(
        path.suffix.lower()
    )
    rate = Fraction(fps).limit_denominator(1001 * 1000) if not isinstance(fps, Fraction) else fps
    ts = None if timestamps is None else [float(t) for t in timestamps]
    pad = encoder in _EVEN_ONLY and pix_fmt in ("yuv420p", "yuv422p", "nv12", "yuvj420p")
    n = 0
    try:
        container = av.open(str(tmp), mode="w", format=fmt, options=dict(container_options or {}))
    except Exception as e:  # noqa: BLE001 - rewrapped with the path
        raise VideoWriteError(path, f"cannot create output: {e}") from e
    try:
        try:
            stream = container.add_stream(encoder, rate=rate)
        except Exception as e:  # noqa: BLE001
            raise VideoWriteError(path, f"unknown or unavailable encoder {encoder!r}: {e}") from e
        stream.pix_fmt = pix_fmt
        opts: dict[str, str] = {}
        if crf is not None:
            opts["crf"] = str(int(crf))
            if encoder == "libvpx-vp9":
                opts["b"] = "0"
        if preset is not None:
            opts["preset" if encoder != "libvpx-vp9" else "deadline"] = preset
        if encoder == "libvpx-vp9":
            opts.setdefault("deadline", "realtime")
            opts.setdefault("cpu-used", "8")
        if bframes is not None:
            stream.codec_context.max_b_frames = int(bframes)
        if gop is not None:
            stream.codec_context.gop_size = int(gop)
            if encoder == "libx264":
                # fixed GOP: no scene-cut keyframes, min interval = gop
                opts["x264-params"] = f"keyint={int(gop)}:min-keyint={int(gop)}:scenecut=0"
        if encoder == "libx264":
            # No macroblock-tree rate control: with it, libx264 (core 165, PyAV 18.1) reads heap memory it never
            # wrote on some small clips, so the same frames encode to different bytes from call to call, even
            # single-threaded (a 9-frame 32x32 clip: 3 different files in 30 calls; under glibc's
            # MALLOC_PERTURB_=1 and =200 two different files, every time), and a seed would not give one video.
            # Without it the file is the same under every fill byte, with and without frame threads
            # (tests/demos/test_demo_honest.py::test_the_writer_never_depends_on_memory_it_did_not_write).
            params = opts.get("x264-params")
            opts["x264-params"] = f"{params}:mbtree=0" if params else "mbtree=0"
        opts.update(options or {})
        stream.options = opts
        if ts is not None:
            stream.codec_context.time_base = VFR_TIME_BASE
            stream.time_base = VFR_TIME_BASE
        opened = False
        for i, frame in enumerate(frames):
            arr = _as_uint8_rgb(frame, path, i)
            h, w = arr.shape[:2]
            if not opened:
                if (h % 2 or w % 2) and pad:
                    if odd_size == "error":
                        raise VideoWriteError(
                            path,
                            f"{encoder} with {pix_fmt} needs even sizes, got {w}x{h} (odd_size='pad' pads)",
                        )
                stream.width, stream.height = (w + w % 2, h + h % 2) if pad else (w, h)
                size0 = (h, w)
                opened = True
            elif (h, w) != size0:
                raise VideoWriteError(path, f"frame {i} is {w}x{h}, earlier frames are {size0[1]}x{size0[0]}")
            if pad:
                arr = _pad_even(arr)
            vf = av.VideoFrame.from_ndarray(arr, format="rgb24")
            if ts is not None:
                if i >= len(ts):
                    raise VideoWriteError(path, f"{len(ts)} timestamps given but more frames arrived")
                vf.pts = int(round(ts[i] / VFR_TIME_BASE))
                vf.time_base = VFR_TIME_BASE
            for packet in stream.encode(vf):
                container.mux(packet)
            n = i + 1
        if n == 0:
            raise VideoWriteError(path, "no frames given")
        for packet in stream.encode():
            container.mux(packet)
    except VideoWriteError:
        container.close()
        tmp.unlink(missing_ok=True)
        raise
    except Exception as e:  # noqa: BLE001
        try:
            container.close()
        finally:
            tmp.unlink(missing_ok=True)
        raise VideoWriteError(path, f"encoding failed after {n} frames: {type(e).__name__}: {e}") from e
    container.close()
    commit_tmp(tmp, path)
    return path
