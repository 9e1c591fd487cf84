"""GroundingDINO-based official metrics: generative numeracy and 2D spatial relationships.

Official pipeline (``Detection_eval/eval_numeracy.py``, ``eval_spatial_relationships.py``): the 16 sampled
frames; per frame, each object phrase is a separate GroundingDINO query (box threshold 0.4, text threshold
0.25); the detections of all queries are merged by :func:`filter_box` (a box overlapping a kept one with
IoU > 0.9 replaces it only if more confident). Then, per frame:

* numeracy: ``count(label == object_j)`` against the number; one object: 1 if exact; two: 0.5 per exact
  count. Video = mean over the 16 frames.
* spatial (left/right/above/on/under/below): among all box pairs whose centre offset gives the relation
  (:func:`spatial_judge`: the larger of |dx|, |dy| decides; "on" accepts "above", "below" accepts
  "under"), the pair maximising ``0.5 (1 - IoU) + 0.5 (p0 + p1) / 2``; the frame's raw score is that
  pair's ``1 - IoU``, 0 if no pair is right, -1 if one object is missing, -2 if both are. Raw -> frame:
  -2 -> 0, -1 -> 0.2, 0 -> 0.4, s > 0 -> 0.4 + 0.6 s. Video = mean over the 16 frames.
  "in front of" / "behind" need depth (Depth Anything) and SAM masks: not in process; ingest the CSV.

Spatial and motion metadata are not in ../shared (held back); an official checkout has them in
``meta_data/spatial_relationships.json`` (``spatial``, ``object_1``, ``object_2``).

Backend interface (``score.detector=module:factory``)::

    def detect(self, image: np.ndarray, caption: str) -> list[tuple[list[float], float, str]]
        # GroundingDINO on one uint8 [H, W, 3] frame for one object phrase, already filtered by the box and
        # text thresholds: (box [cx, cy, w, h] normalised, max logit, predicted phrase without "(0.xx)")
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from vidlab.generation.compbench.metrics import VideoContext, build_backend

Detection = tuple[list[float], float, str]
SPATIAL_2D = ("left", "right", "above", "on", "under", "below")


class DetectorBackend(Protocol):
    def detect(self, image: np.ndarray, caption: str) -> list[Detection]: ...


def calculate_iou(box0: list[float], box1: list[float]) -> float:
    """IoU of two [cx, cy, w, h] boxes (the official ``calculate_iou``)."""
    b0 = (box0[0] - box0[2] / 2, box0[1] - box0[3] / 2, box0[0] + box0[2] / 2, box0[1] + box0[3] / 2)
    b1 = (box1[0] - box1[2] / 2, box1[1] - box1[3] / 2, box1[0] + box1[2] / 2, box1[1] + box1[3] / 2)
    xo = max(0.0, min(b0[2], b1[2]) - max(b0[0], b1[0]))
    yo = max(0.0, min(b0[3], b1[3]) - max(b0[1], b1[1]))
    inter = xo * yo
    union = box0[2] * box0[3] + box1[2] * box1[3] - inter
    return inter / union if union > 0 else 0.0


def filter_box(dets: list[Detection], iou_threshold: float = 0.9) -> list[Detection]:
    """The official duplicate filter, in order: keep the more confident of boxes with IoU > threshold."""
    kept: list[Detection] = []
    for d in dets:
        for j, k in enumerate(kept):
            if calculate_iou(d[0], k[0]) > iou_threshold:
                if d[1] > k[1]:
                    kept[j] = d
                break
        else:
            kept.append(d)
    return kept


def numeracy_frame_score(
    dets: list[Detection], objects: list[str], numbers: list[int]
) -> tuple[float, list[int]]:
    counts = [sum(1 for d in dets if d[2] == obj) for obj in objects]
    if len(objects) == 1:
        return float(counts[0] == numbers[0]), counts
    return 0.5 * (counts[0] == numbers[0]) + 0.5 * (counts[1] == numbers[1]), counts


def spatial_judge(box0: list[float], box1: list[float], spatial: str) -> bool:
    dw, dh = box0[0] - box1[0], box0[1] - box1[1]
    if dw < 0 and abs(dw) > abs(dh):
        actual = "left"
    elif dw > 0 and abs(dw) > abs(dh):
        actual = "right"
    elif dh < 0 and abs(dh) > abs(dw):
        actual = "above"
    elif dh > 0 and abs(dh) > abs(dw):
        actual = "under"
    else:
        actual = ""
    return (
        actual == spatial
        or (spatial == "on" and actual == "above")
        or (spatial == "below" and actual == "under")
    )


def spatial_frame_raw(dets: list[Detection], obj1: str, obj2: str, spatial: str) -> float:
    a = [d for d in dets if d[2] == obj1]
    b = [d for d in dets if d[2] == obj2]
    if not a and not b:
        return -2.0
    if not a or not b:
        return -1.0
    best: tuple[float, float] | None = None  # (total, spatial score)
    for d0 in a:
        for d1 in b:
            if spatial_judge(d0[0], d1[0], spatial):
                s = 1 - calculate_iou(d0[0], d1[0])
                total = 0.5 * s + 0.5 * (0.5 * d0[1] + 0.5 * d1[1])
                if best is None or total > best[0]:
                    best = (total, s)
    return 0.0 if best is None else best[1]


def spatial_frame_score(raw: float) -> float:
    if raw < -1:
        return 0.0
    if raw < 0:
        return 0.2
    if raw == 0:
        return 0.4
    return raw * 0.6 + 0.4


def detect_frame(
    backend: DetectorBackend, frame: np.ndarray, phrases: list[str], iou_threshold: float
) -> list[Detection]:
    dets: list[Detection] = []
    for ph in phrases:
        dets += [(list(map(float, b)), float(p), str(lab)) for b, p, lab in backend.detect(frame, ph)]
    return filter_box(dets, iou_threshold)


def score_numeracy(backend: DetectorBackend, frames16: np.ndarray, meta: dict[str, Any]) -> dict[str, Any]:
    objects = [o.strip() for o in str(meta["objects"]).split(",")]
    numbers = [int(n) for n in str(meta["numbers"]).split(",")]
    if len(objects) != len(numbers):
        return {"score": None, "reason": f"objects {objects} and numbers {numbers} do not pair up"}
    per_frame, counts = [], []
    for f in frames16:
        s, c = numeracy_frame_score(detect_frame(backend, f, objects, 0.9), objects, numbers)
        per_frame.append(s)
        counts.append(c)
    return {"score": float(np.mean(per_frame)), "frame_scores": per_frame, "counts": counts}


def score_spatial(
    backend: DetectorBackend, frames16: np.ndarray, meta: dict[str, Any], iou_threshold: float = 0.9
) -> dict:
    spatial, o1, o2 = meta["spatial"], meta["object_1"], meta["object_2"]
    if spatial not in SPATIAL_2D:
        return {
            "score": None,
            "reason": f"{spatial!r} is a depth relation: official 3D script (ingest its CSV)",
        }
    raws = [
        spatial_frame_raw(detect_frame(backend, f, [o1, o2], iou_threshold), o1, o2, spatial)
        for f in frames16
    ]
    frame = [spatial_frame_score(r) for r in raws]
    return {"score": float(np.mean(frame)), "frame_scores": frame, "raw": raws}


class OfficialGrounding:
    name = "official_grounding"
    description = "official GroundingDINO numeracy and 2D spatial scores with a user-supplied detector"

    def __init__(self, cfg: Any, suite: Any) -> None:
        self.backend = build_backend(cfg.detector, "detector")

    def score(self, ctx: VideoContext) -> dict[str, Any]:
        cat, meta = ctx.prompt.category, ctx.prompt.meta
        if cat == "numeracy" and meta:
            return score_numeracy(self.backend, ctx.frames(), meta)
        if cat == "spatial_relationship" and meta:
            return score_spatial(self.backend, ctx.frames(), meta)
        if cat in ("numeracy", "spatial_relationship"):
            return {
                "score": None,
                "reason": f"no metadata for {cat} (needs an official checkout's meta_data/)",
            }
        return {"score": None, "reason": "not a detection category"}
