"""GOP-aligned segments of a frame list, and independent decoders of one file, for parallel decoding.

A *segment* is a run of requested frames (sorted positions ``[a, b)`` in the request) that starts at a
keyframe interval's first requested frame and ends at another's last, so two segments never decode the same
keyframe interval: decoders working on different segments of one file never repeat each other's work.
The keyframe positions come from the packet index (:mod:`vidlab.video.probe`), not from decoding.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import VideoReader


def gop_segments(frames: np.ndarray, keyframe_of: np.ndarray, target: int) -> list[tuple[int, int]]:
    """Split sorted ``frames`` (with ``keyframe_of``, each frame's keyframe) into ``[a, b)`` segments of whole
    keyframe intervals, each holding about ``target`` frames (at least one interval; an interval with more
    than ``target`` requested frames is one segment on its own)."""
    from .backends.pyav_backend import keyframe_groups  # the runs that share one keyframe

    n = int(frames.size)
    if n == 0:
        return []
    if target < 1:
        raise ValueError(f"target must be >= 1, got {target}")
    out: list[tuple[int, int]] = []
    a = 0
    for s, _ in keyframe_groups(keyframe_of)[1:]:
        if s - a >= target:  # close the segment at this interval boundary
            out.append((a, s))
            a = s
    out.append((a, n))
    return out


def independent_reader(reader: VideoReader) -> VideoReader:
    """A second reader of the same file, stream and orientation with its own decoder and position, sharing the
    packet index (no second probe). PyAV readers get one codec thread and no lanes of their own: a parallel
    decoder stands for one core."""
    from .backends.pyav_backend import PARALLEL_THREADS, THREAD_TYPE, PyAVReader

    if isinstance(reader, PyAVReader):
        return PyAVReader(
            reader.path,
            reader.index,
            thread_type=THREAD_TYPE or PARALLEL_THREADS,
            workers=1,
            thread_count=None if THREAD_TYPE else 1,
            rotate=reader.rotate,
            _pts_list=reader._pts_list,  # read-only, shared
        )
    from .reader import open_video

    kwargs: dict[str, Any] = {"rotate": getattr(reader, "rotate", True)}
    if len(getattr(reader.index, "video_streams", ())) > 1:
        kwargs["stream"] = reader.stream
    return open_video(reader.path, backend=reader.backend, **kwargs)
