"""Point-tracking official metric: motion binding (official: GroundingSAM masks + DOT point tracks).

Official pipeline (``Tracking_eval/``): the video at 16 frames (8 fps); each object's mask in the first
frame; dense point tracks; the mean x and y change of the points inside the object (foreground) and
outside every object (background: camera motion). Then (``motion_binding_score_cal.py``):
``net_left = back_dx - fore_dx``, ``net_up = back_dy - fore_dy``; per object with direction d: correct if
``net_left > 0`` (left), ``< 0`` (right), ``net_up > 0`` (up), ``< 0`` (down), score ``|net| / W`` (x) or
``|net| / H`` (y); a missing object scores -1. Two objects: both right -> mean of the two; one right ->
half of its score; none -> 0, or -1 if neither was detected. Video: ``< 0`` -> 0, else ``0.2 + 0.8 s``.
The official frames are 856x480 (W, H); we divide by the frame size the displacements were measured in,
which is the same number for 856x480 frames.

Motion metadata (``object_1``, ``d_1``, ``object_2``, ``d_2``) is held back from ../shared: use an official
checkout (``meta_data/motion_binding.json``).

Backend interface (``score.tracker=module:factory``)::

    def displacement(self, frames: np.ndarray, phrase: str) -> tuple[float, float, float, float] | None
        # on the uint8 [16, H, W, 3] frames: (fore_dx, fore_dy, back_dx, back_dy) in pixels (last minus
        # first position, averaged over tracked points), or None if the phrase's object is not detected
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from vidlab.generation.compbench.metrics import VideoContext, build_backend


class TrackerBackend(Protocol):
    def displacement(self, frames: np.ndarray, phrase: str) -> tuple[float, float, float, float] | None: ...


def object_score(
    net_left: float, net_up: float, direction: str, width: float, height: float
) -> tuple[bool, float]:
    if direction == "left" and net_left > 0:
        return True, abs(net_left) / width
    if direction == "right" and net_left < 0:
        return True, abs(net_left) / width
    if direction == "up" and net_up > 0:
        return True, abs(net_up) / height
    if direction == "down" and net_up < 0:
        return True, abs(net_up) / height
    return False, 0.0


def motion_raw(
    objects: list[tuple[str, tuple[float, float, float, float] | None]], size: tuple[int, int]
) -> float:
    """The official per-video raw score from each (direction, displacement-or-None)."""
    w, h = size
    res = []
    for direction, disp in objects:
        if disp is None:
            res.append((False, -1.0))
            continue
        fdx, fdy, bdx, bdy = disp
        res.append(object_score(bdx - fdx, bdy - fdy, direction, w, h))
    if len(res) == 1:
        return res[0][1]
    (ok1, s1), (ok2, s2) = res[:2]
    if ok1 and ok2:
        return (s1 + s2) * 0.5
    if ok1:
        return 0.5 * s1
    if ok2:
        return 0.5 * s2
    return -1.0 if s1 < 0 and s2 < 0 else 0.0


def video_score(raw: float) -> float:
    return 0.0 if raw < 0 else raw * 0.8 + 0.2


def score_motion(backend: TrackerBackend, frames16: np.ndarray, meta: dict[str, Any]) -> dict[str, Any]:
    size = (int(frames16.shape[2]), int(frames16.shape[1]))
    pairs = []
    for k in (1, 2):
        obj, d = meta.get(f"object_{k}"), meta.get(f"d_{k}")
        if obj and d:
            pairs.append((str(d), backend.displacement(frames16, str(obj))))
    if not pairs:
        return {"score": None, "reason": "no object/direction in the metadata"}
    raw = motion_raw(pairs, size)
    return {"score": video_score(raw), "raw": raw}


class OfficialTracking:
    name = "official_tracking"
    description = "official motion-binding score from a user-supplied segmentation + point-tracking backend"

    def __init__(self, cfg: Any, suite: Any) -> None:
        self.backend = build_backend(cfg.tracker, "tracker")

    def score(self, ctx: VideoContext) -> dict[str, Any]:
        if ctx.prompt.category != "motion_binding":
            return {"score": None, "reason": "not the motion binding category"}
        if not ctx.prompt.meta:
            return {"score": None, "reason": "no motion metadata (needs an official checkout's meta_data/)"}
        return score_motion(self.backend, ctx.frames(), ctx.prompt.meta)
