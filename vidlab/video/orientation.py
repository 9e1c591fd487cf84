"""Display rotation (the display matrix / ``rotate`` tag phones write), applied exactly as FFmpeg's CLI does.

FFmpeg's ``ffmpeg`` tool autorotates: it reads the stream's display matrix, computes the rotation
``theta`` (degrees clockwise, ``fftools`` ``get_rotation``) and inserts ``transpose`` / ``hflip`` /
``vflip`` filters. :func:`ffmpeg_autorotate` reproduces that choice and :func:`apply` the same pixel
permutation on decoded RGB arrays (lossless: only rows and columns move), so every backend shows a
file the way ``ffmpeg -i file out.png`` does.
"""

from __future__ import annotations

import math

import numpy as np

# op -> (swaps width and height, function on [..., H, W, C] arrays)
OPS = ("", "clock", "cclock", "cclock_flip", "clock_flip", "hflip", "vflip", "hflip,vflip")
_SWAPS = {"clock", "cclock", "cclock_flip", "clock_flip"}
_INVERSE = {"clock": "cclock", "cclock": "clock"}  # the others are their own inverse


def display_rotation_get(matrix: np.ndarray) -> float:
    """FFmpeg's ``av_display_rotation_get``: counter-clockwise rotation in degrees (NaN if degenerate)."""
    m = [float(x) / 65536.0 for x in np.asarray(matrix, dtype=np.int64)[:9]]
    s0, s1 = math.hypot(m[0], m[3]), math.hypot(m[1], m[4])
    if s0 == 0.0 or s1 == 0.0:
        return float("nan")
    return -math.degrees(math.atan2(m[1] / s1, m[0] / s0))


def ffmpeg_autorotate(matrix: np.ndarray | None) -> tuple[float, str]:
    """``(theta, op)`` exactly as ``ffmpeg``'s autorotate picks them (fftools ``get_rotation`` and the
    filter choice in ``configure_input_video_filter``); ``op`` is one of :data:`OPS`, or ``"rotate"``
    for an angle that is not a multiple of 90 degrees (FFmpeg then interpolates; vidlab refuses)."""
    if matrix is None:
        return 0.0, ""
    m = np.asarray(matrix, dtype=np.int64)
    r = display_rotation_get(m)
    if math.isnan(r):
        return 0.0, ""
    theta = -float(round(r))
    theta -= 360.0 * math.floor(theta / 360.0 + 0.9 / 360.0)
    if abs(theta - 90) < 1.0:
        return 90.0, "cclock_flip" if m[3] > 0 else "clock"
    if abs(theta - 180) < 1.0:
        flips = [name for name, on in (("hflip", m[0] < 0), ("vflip", m[4] < 0)) if on]
        return 180.0, ",".join(flips)
    if abs(theta - 270) < 1.0:
        return 270.0, "clock_flip" if m[3] < 0 else "cclock"
    if abs(theta) > 1.0:
        return theta, "rotate"
    return 0.0, "vflip" if m[4] < 0 else ""


def swaps_axes(op: str) -> bool:
    """Whether ``op`` exchanges width and height."""
    return op in _SWAPS


def mirrors(op: str) -> bool:
    """Whether ``op`` mirrors the picture (a display matrix with a negative determinant)."""
    return op in ("cclock_flip", "clock_flip", "hflip", "vflip")


def inverse(op: str) -> str:
    return _INVERSE.get(op, op)


def apply(frames: np.ndarray, op: str) -> np.ndarray:
    """Apply ``op`` to ``[N, H, W, C]`` (or ``[H, W, C]``) frames; returns a contiguous array."""
    if not op:
        return frames
    h, w = frames.ndim - 3, frames.ndim - 2  # row and column axes
    if op == "clock":
        out = np.rot90(frames, -1, axes=(h, w))
    elif op == "cclock":
        out = np.rot90(frames, 1, axes=(h, w))
    elif op == "cclock_flip":
        out = np.swapaxes(frames, h, w)
    elif op == "clock_flip":
        out = np.rot90(np.swapaxes(frames, h, w), 2, axes=(h, w))
    elif op == "hflip":
        out = np.flip(frames, axis=w)
    elif op == "vflip":
        out = np.flip(frames, axis=h)
    elif op == "hflip,vflip":
        out = np.rot90(frames, 2, axes=(h, w))
    else:
        raise ValueError(f"unknown orientation op {op!r}")
    return np.ascontiguousarray(out)
