"""Exact metrics for toy-world videos, judged by the learning-free detector against the caption (and a layout).

``score_video(caption, frames, layout=None)`` returns a ``VideoScore``:

* ``presence``  -- every named subject (colour AND shape) detected in at least ``min_frame_share`` of the frames;
* ``presence_colour`` -- the same with colour only (how much of a miss is the shape classifier on blurry samples);
* ``relation``  -- spatial captions: the relation holds between the two subjects' centres in at least
  ``min_frame_share`` of the frames; motion captions: the subject's centre moves the named way by at least
  ``min_motion`` (fraction of the frame) and more than across; None for other captions;
* ``swapped``   -- spatial captions: the *opposite* relation holds (what a layout with swapped boxes asks for);
* ``count``     -- count captions: exactly that many subjects in at least ``min_frame_share`` of the frames;
* ``iou``       -- mean over layout subjects and frames of the best detection's IoU with the layout box (0 when
  the subject is missing); None without a layout.

``subject_centre(caption, frames)`` is where the caption's (first) subject landed: the mean centre, over the frames
where it is seen, of the largest component of its colour (colour only, so a blurry shape still has a position;
None when the colour is never seen). It is the position-control figure: measured on the rendered video, not on the
attention the method biased. ``toward_box(cx, side)`` signs it: ``+`` towards the ``side`` ("left"/"right") half.

``bootstrap_ci(values)`` gives a percentile bootstrap interval over prompts; ``paired_ci(a, b)`` the interval of the
per-prompt difference ``b - a`` over the prompts both have.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from vidlab.generation.toyworld.detect import Detection, DetectorConfig, box_iou, detect_video
from vidlab.generation.toyworld.world import COLOURS, PLURAL, SHAPES, parse_caption

OPPOSITE = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}


@dataclass(frozen=True)
class MetricConfig:
    min_frame_share: float = 0.5
    min_motion: float = 0.1


@dataclass
class VideoScore:
    presence: bool
    presence_colour: bool
    relation: bool | None
    swapped: bool | None
    count: bool | None
    iou: float | None
    kind: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _matches(d: Detection, subject: tuple[str, str], colour_only: bool = False) -> bool:
    return d.colour == subject[0] and (colour_only or d.shape == subject[1])


def _present(dets: list[list[Detection]], subject, share: float, colour_only: bool = False) -> bool:
    hits = sum(any(_matches(d, subject, colour_only) for d in fr) for fr in dets)
    return hits >= share * len(dets)


def _largest(fr: list[Detection], subject) -> Detection | None:
    cands = [d for d in fr if _matches(d, subject)]
    return max(cands, key=lambda d: d.area) if cands else None


def relation_holds(relation: str, a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Centre-based spatial relation of subject centre ``a`` to object centre ``b`` (image y grows downwards)."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    return {"left of": dx > 0, "right of": dx < 0, "above": dy > 0, "below": dy < 0}[relation]


def _spatial(dets, subjects, relation: str, share: float) -> bool:
    ok = 0
    for fr in dets:
        a, b = _largest(fr, subjects[0]), _largest(fr, subjects[1])
        if a is not None and b is not None and relation_holds(relation, a.centre, b.centre):
            ok += 1
    return ok >= share * len(dets)


def _motion(dets, subject, direction: str, min_motion: float) -> bool:
    cs = [(i, d.centre) for i, fr in enumerate(dets) if (d := _largest(fr, subject)) is not None]
    if len(cs) < 2:
        return False
    (_, (x0, y0)), (_, (x1, y1)) = cs[0], cs[-1]
    along, cross = {
        "left": (x0 - x1, abs(y1 - y0)),
        "right": (x1 - x0, abs(y1 - y0)),
        "up": (y0 - y1, abs(x1 - x0)),
        "down": (y1 - y0, abs(x1 - x0)),
    }[direction]
    return along >= min_motion and along > cross


def phrase_subject(phrase: str) -> tuple[str, str] | None:
    """(colour, shape) named by a layout phrase such as "red circle" or "yellow triangles"."""
    words = phrase.lower().split()
    colour = next((w for w in words if w in COLOURS), None)
    singular = {v: k for k, v in PLURAL.items()}
    shape = next((singular.get(w, w) for w in words if w in SHAPES or w in singular), None)
    return (colour, shape) if colour and shape else None


def layout_iou(dets: list[list[Detection]], layout: Any) -> float:
    """Mean best-detection IoU with each layout subject's box over frames (0 where the subject is not found)."""
    n = len(dets)
    vals = []
    for s in layout.subjects:
        subject = phrase_subject(s.phrase)
        for f, fr in enumerate(dets):
            box = s.box_at(f / (n - 1) if n > 1 else 0.0)
            cands = [box_iou(d.box, box) for d in fr if subject is not None and _matches(d, subject)]
            vals.append(max(cands, default=0.0))
    return float(np.mean(vals)) if vals else 0.0


def score_video(
    caption: str,
    frames: np.ndarray,
    layout: Any = None,
    cfg: MetricConfig | None = None,
    detector: DetectorConfig | None = None,
    detections: list[list[Detection]] | None = None,
) -> VideoScore:
    """Score one video ``[F, H, W, 3]`` (uint8, or float in [0, 1]) against its grammar caption."""
    cfg = cfg or MetricConfig()
    p = parse_caption(caption)
    dets = detections if detections is not None else detect_video(frames, detector)
    share = cfg.min_frame_share
    presence = all(_present(dets, s, share) for s in p.subjects)
    presence_c = all(_present(dets, s, share, colour_only=True) for s in p.subjects)
    relation = swapped = count = None
    if p.kind == "relation":
        relation = _spatial(dets, p.subjects, p.relation or "", share)
        swapped = _spatial(dets, p.subjects, OPPOSITE[p.relation or ""], share)
    elif p.kind == "motion":
        relation = _motion(dets, p.subjects[0], p.motion or "", cfg.min_motion)
    elif p.kind == "count":
        hits = sum(sum(_matches(d, p.subjects[0]) for d in fr) == p.count for fr in dets)
        count = hits >= share * len(dets)
    iou = layout_iou(dets, layout) if layout is not None else None
    return VideoScore(presence, presence_c, relation, swapped, count, iou, p.kind)


def subject_centre(
    caption: str,
    frames: np.ndarray | None = None,
    detections: list[list[Detection]] | None = None,
    detector: DetectorConfig | None = None,
) -> tuple[float, float] | None:
    """Mean (x, y) centre of the caption's first subject's colour over the frames where it is seen, or None."""
    colour = parse_caption(caption).subjects[0][0]
    dets = detections if detections is not None else detect_video(np.asarray(frames), detector)
    cs = []
    for fr in dets:
        cands = [d for d in fr if d.colour == colour]
        if cands:
            cs.append(max(cands, key=lambda d: d.area).centre)
    if not cs:
        return None
    return (float(np.mean([c[0] for c in cs])), float(np.mean([c[1] for c in cs])))


def toward_box(cx: float, side: str) -> float:
    """Signed offset of centre ``cx`` from the frame's middle towards ``side`` ("left" / "right"), in frame widths."""
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    return (cx - 0.5) if side == "right" else (0.5 - cx)


def bootstrap_ci(
    values: Sequence[float], n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """(mean, low, high): percentile bootstrap over the given per-prompt values."""
    v = np.asarray([x for x in values if x is not None], dtype=np.float64)
    if v.size == 0:
        return (float("nan"), float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, v.size, size=(n_boot, v.size))].mean(axis=1)
    a = (1 - level) / 2
    return (float(v.mean()), float(np.quantile(means, a)), float(np.quantile(means, 1 - a)))


def paired_ci(
    a: dict[str, float], b: dict[str, float], n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float, float, int]:
    """(mean, low, high, n) of the per-prompt difference ``b[p] - a[p]`` over the prompts in both (nan when none)."""
    keys = [k for k in a if k in b and a[k] is not None and b[k] is not None]
    m, lo, hi = bootstrap_ci([b[k] - a[k] for k in keys], n_boot, level, seed)
    return (m, lo, hi, len(keys))


def judge_toyworld_videos(model_dir: str, prompt: str, videos: Sequence[np.ndarray], layout: Any = None):
    """The exact detector's verdict (``VideoScore.to_dict()``) on each video when ``model_dir`` is a toy-world
    pipeline folder (it has ``toyworld.json``), else None: the truth shown beside a generated video."""
    from pathlib import Path

    if not (Path(model_dir) / "toyworld.json").is_file():
        return None
    try:
        return [score_video(prompt, frames, layout=layout).to_dict() for frames in videos]
    except ValueError as exc:  # a prompt outside the world's caption grammar cannot be judged
        return [{"error": f"not judged: {exc}"} for _ in videos]


def verdict_line(v: dict[str, Any], video: str) -> str:
    """One loud line per video: did the detector find what the prompt asked for?"""
    if "error" in v:
        return f"toy-world detector on {video}: {v['error']}"
    yes = {True: "yes", False: "NO", None: "-"}
    parts = [
        f"every subject (colour+shape) {yes[v['presence']]}",
        f"colours only {yes[v['presence_colour']]}",
    ]
    if v.get("relation") is not None:
        parts.append(f"relation {yes[v['relation']]}")
    if v.get("count") is not None:
        parts.append(f"count {yes[v['count']]}")
    if v.get("iou") is not None:
        parts.append(f"IoU with the layout {v['iou']:.2f}")
    return f"toy-world detector on {video} (exact, learning-free): " + "; ".join(parts)


__all__ = [
    "MetricConfig",
    "VideoScore",
    "bootstrap_ci",
    "judge_toyworld_videos",
    "layout_iou",
    "paired_ci",
    "phrase_subject",
    "relation_holds",
    "score_video",
    "subject_centre",
    "toward_box",
    "verdict_line",
]
