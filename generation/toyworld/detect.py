"""An exact, learning-free detector for the toy world: colour segmentation + shape rules -> per-frame boxes.

Per frame: the background colour is the frame's median; every pixel nearer (RGB distance) to a palette colour than
to the background, and within ``max_distance`` of it, is labelled with that colour; 4-connected components of each
colour with at least ``min_area`` pixels are objects. A component's shape follows from two scale-free numbers:
*solidity* (area / convex-hull area: the star is the only concave shape) and *extent* (area / bounding-box area:
square ~1, circle ~pi/4, triangle ~1/2). Boxes are normalised (x0, y0, x1, y1), x1/y1 exclusive.

``detect_frame(frame)`` -> list of ``Detection``; ``detect_video(frames)`` -> one list per frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vidlab.generation.toyworld.world import PALETTE

_NAMES = list(PALETTE)
_COLOURS = np.array([PALETTE[c] for c in _NAMES], dtype=np.float32)


@dataclass(frozen=True)
class DetectorConfig:
    """Thresholds of the rules (fixed from the world's definition, not fitted to generated video)."""

    max_distance: float = 110.0  # RGB distance to the nearest palette colour
    min_area: float = 0.006  # fraction of the frame (about 25 px at 64x64)
    star_solidity: float = 0.8  # below: star
    square_extent: float = 0.88  # above (and convex): square
    circle_extent: float = 0.66  # above (and convex): circle, else triangle


@dataclass(frozen=True)
class Detection:
    """One object in one frame: colour, shape, normalised box, area (fraction of the frame)."""

    colour: str
    shape: str
    box: tuple[float, float, float, float]
    area: float
    solidity: float
    extent: float

    @property
    def centre(self) -> tuple[float, float]:
        return ((self.box[0] + self.box[2]) / 2, (self.box[1] + self.box[3]) / 2)


def _components(mask: np.ndarray) -> list[np.ndarray]:
    """4-connected components of a boolean mask, each as an array of (y, x) pixel coordinates.

    Vectorised min-label propagation (each pixel takes the smallest label among itself and its 4 neighbours
    until nothing changes): exact, and fast on the small frames of the toy world.
    """
    h, w = mask.shape
    big = h * w
    lab = np.where(mask, np.arange(big).reshape(h, w), big)
    while True:
        p = np.pad(lab, 1, constant_values=big)
        nb = np.minimum.reduce([lab, p[:-2, 1:-1], p[2:, 1:-1], p[1:-1, :-2], p[1:-1, 2:]])
        nb = np.where(mask, nb, big)
        if np.array_equal(nb, lab):
            break
        lab = nb
    ys, xs = np.nonzero(mask)
    ids = lab[ys, xs]
    order = np.argsort(ids, kind="stable")
    ids, ys, xs = ids[order], ys[order], xs[order]
    cuts = np.flatnonzero(np.diff(ids)) + 1
    return [np.stack([y, x], 1) for y, x in zip(np.split(ys, cuts), np.split(xs, cuts))]


def _hull_area(points: np.ndarray) -> float:
    """Area of the convex hull of 2-D points (Andrew's monotone chain + shoelace)."""
    pts = sorted({(float(a), float(b)) for a, b in points})
    if len(pts) < 3:
        return 0.0

    def half(seq):
        h: list = []
        for p in seq:
            while (
                len(h) >= 2
                and (h[-1][0] - h[-2][0]) * (p[1] - h[-2][1]) - (h[-1][1] - h[-2][1]) * (p[0] - h[-2][0]) <= 0
            ):
                h.pop()
            h.append(p)
        return h

    hull = half(pts)[:-1] + half(pts[::-1])[:-1]
    area = 0.0
    for (x0, y0), (x1, y1) in zip(hull, hull[1:] + hull[:1]):
        area += x0 * y1 - x1 * y0
    return abs(area) / 2


def _boundary(pixels: np.ndarray) -> np.ndarray:
    """The pixels of a component that are extreme in their row (enough for the convex hull)."""
    ys, xs = pixels[:, 0], pixels[:, 1]
    out = []
    for y in np.unique(ys):
        row = xs[ys == y]
        out += [(y, row.min()), (y, row.max())]
    return np.array(out)


def classify_shape(pixels: np.ndarray, cfg: DetectorConfig | None = None) -> tuple[str, float, float]:
    """(shape, solidity, extent) of a component given as (y, x) pixel coordinates."""
    cfg = cfg or DetectorConfig()
    area = float(len(pixels))
    ys, xs = pixels[:, 0], pixels[:, 1]
    extent = area / float((ys.max() - ys.min() + 1) * (xs.max() - xs.min() + 1))
    # hull of the pixel squares' corners, so a filled square has solidity 1
    edge = _boundary(pixels)
    corners = np.concatenate([edge + d for d in ((0, 0), (0, 1), (1, 0), (1, 1))])
    hull = _hull_area(corners.astype(np.float64))
    solidity = area / hull if hull > 0 else 1.0
    if solidity < cfg.star_solidity:
        shape = "star"
    elif extent >= cfg.square_extent:
        shape = "square"
    elif extent >= cfg.circle_extent:
        shape = "circle"
    else:
        shape = "triangle"
    return shape, solidity, extent


def colour_labels(frame: np.ndarray, cfg: DetectorConfig | None = None) -> np.ndarray:
    """Per-pixel palette index (``-1`` = background) of an RGB frame ``[H, W, 3]``."""
    cfg = cfg or DetectorConfig()
    px = np.asarray(frame, dtype=np.float32)[..., :3]
    bg = np.median(px.reshape(-1, 3), axis=0)
    d = np.linalg.norm(px[:, :, None, :] - _COLOURS[None, None], axis=-1)  # [H, W, C]
    best = d.argmin(-1)
    dbest = d.min(-1)
    dbg = np.linalg.norm(px - bg, axis=-1)
    return np.where((dbest < cfg.max_distance) & (dbest < dbg), best, -1)


def detect_frame(frame: np.ndarray, cfg: DetectorConfig | None = None) -> list[Detection]:
    """Objects in one RGB frame (uint8 ``[H, W, 3]`` or float in [0, 1]), largest first."""
    cfg = cfg or DetectorConfig()
    arr = np.asarray(frame)
    if arr.ndim != 3 or arr.shape[-1] < 3:
        raise ValueError(f"detect_frame needs an RGB frame [H, W, 3], got shape {arr.shape}")
    if arr.dtype != np.uint8:
        arr = (np.clip(arr.astype(np.float32), 0.0, 1.0) * 255.0).round()
    h, w = arr.shape[:2]
    labels = colour_labels(arr, cfg)
    out = []
    min_px = cfg.min_area * h * w
    for ci, name in enumerate(_NAMES):
        mask = labels == ci
        if mask.sum() < min_px:
            continue
        for pix in _components(mask):
            if len(pix) < min_px:
                continue
            shape, sol, ext = classify_shape(pix, cfg)
            ys, xs = pix[:, 0], pix[:, 1]
            box = (xs.min() / w, ys.min() / h, (xs.max() + 1) / w, (ys.max() + 1) / h)
            out.append(Detection(name, shape, tuple(float(v) for v in box), len(pix) / (h * w), sol, ext))
    out.sort(key=lambda d: -d.area)
    return out


def detect_video(frames: np.ndarray, cfg: DetectorConfig | None = None) -> list[list[Detection]]:
    """``detect_frame`` on every frame of ``[F, H, W, 3]``."""
    return [detect_frame(f, cfg) for f in np.asarray(frames)]


def box_iou(a, b) -> float:
    """IoU of two (x0, y0, x1, y1) boxes."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


__all__ = [
    "Detection",
    "DetectorConfig",
    "box_iou",
    "classify_shape",
    "colour_labels",
    "detect_frame",
    "detect_video",
]
