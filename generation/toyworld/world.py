"""The coloured-shapes world: scenes from a caption grammar, rendered deterministically to short videos.

A scene is a list of objects (colour, shape, size, start and end centre); its caption comes from a small grammar:

* ``single``   "a red circle"
* ``motion``   "a green star moving right" (left / right / up / down)
* ``relation`` "a red circle to the left of a blue square" (to the left of / to the right of / above / below)
* ``count``    "two yellow triangles"

``sample_scene(kind, rng)`` draws a scene of that kind, ``scene_for_caption(caption, rng)`` draws one that fits a
caption, ``render(scene)`` gives uint8 frames ``[F, S, S, 3]`` (4x supersampled PIL drawing, box-filtered), and
``write_clip`` writes one through ``vidlab.video``. Same seed, same scene, same pixels.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# Saturated, mutually distant colours (RGB); the background is a dark grey, so the detector separates them.
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (230, 40, 40),
    "green": (40, 200, 60),
    "blue": (50, 90, 245),
    "yellow": (240, 220, 40),
    "purple": (200, 50, 220),
    "cyan": (40, 215, 225),
}
COLOURS = tuple(PALETTE)
SHAPES = ("circle", "square", "triangle", "star")
PLURAL = {s: s + "s" for s in SHAPES}
DIRECTIONS = ("left", "right", "up", "down")
# caption phrase -> layout relation name (vidlab.generation.layout.SPATIAL_RELATIONS)
RELATION_PHRASES = {
    "to the left of": "left of",
    "to the right of": "right of",
    "above": "above",
    "below": "below",
}
KINDS = ("single", "motion", "relation", "count")
BACKGROUND_RANGE = (22, 48)  # grey level of the plain background, drawn per clip
TEXTURE_AMPLITUDE = 3  # +- grey levels of per-pixel background texture ("lightly textured")
SUPERSAMPLE = 4


@dataclass(frozen=True)
class WorldConfig:
    """Clip geometry: ``size`` x ``size`` px, ``frames`` (4k+1), shape radius and motion travel as fractions.

    5 frames (2 latent frames with Wan's 4x temporal VAE; 9 frames gave a third latent frame whose causal chunk the
    VAE never trained on). Larger shapes (radius 0.13-0.17) were tried: the anti-aliased rim of a large cyan
    triangle then reads as a green component, so the radius stays at 0.12-0.15 of the side (8-10 px at 64 px).
    """

    size: int = 64
    frames: int = 5
    radius: tuple[float, float] = (0.12, 0.15)  # shape "radius" as a fraction of the side
    travel: float = 0.4  # how far a moving shape goes over the clip (fraction of the side)
    gap: float = 0.06  # minimum free space between two shapes (fraction of the side)
    # 0: shape centres anywhere. g > 0: centres (at every frame) on multiples of g x size px, and a moving shape's
    # travel rounded to a multiple of g x size x (frames - 1), so each frame's step is on the grid too. With
    # g = 0.125 at 64 px that is the 8 px token grid of the toy Wan (4x VAE, patch 2): every shape then covers
    # the tokens in the same pattern, instead of at any sub-token phase
    grid: float = 0.0

    def _grid_px(self) -> float:
        return self.grid * self.size


@dataclass
class WorldObject:
    """One shape: centres in pixels at the first (``start``) and last (``end``) frame, radius in pixels."""

    colour: str
    shape: str
    radius: float
    start: tuple[float, float]
    end: tuple[float, float]

    def centre(self, t: float) -> tuple[float, float]:
        """Centre at clip time ``t`` in [0, 1] (linear motion)."""
        return (
            self.start[0] + (self.end[0] - self.start[0]) * t,
            self.start[1] + (self.end[1] - self.start[1]) * t,
        )

    def box(self, t: float, size: int) -> tuple[float, float, float, float]:
        """Normalised bounding box (x0, y0, x1, y1) of the drawn shape at time ``t``."""
        cx, cy = self.centre(t)
        x0, y0, x1, y1 = _extent(self.shape, cx, cy, self.radius)
        return (x0 / size, y0 / size, x1 / size, y1 / size)


@dataclass
class Scene:
    """A caption and the objects that make it true (``relation``: (subject, relation, object) indices)."""

    caption: str
    kind: str
    objects: list[WorldObject]
    relation: tuple[int, str, int] | None = None
    motion: str | None = None
    background: int = 32
    texture_seed: int = 0
    config: WorldConfig = field(default_factory=WorldConfig)


# ---- captions ------------------------------------------------------------------------------------------
def caption_single(colour: str, shape: str) -> str:
    return f"a {colour} {shape}"


def caption_motion(colour: str, shape: str, direction: str) -> str:
    return f"a {colour} {shape} moving {direction}"


def caption_relation(a: tuple[str, str], phrase: str, b: tuple[str, str]) -> str:
    return f"a {a[0]} {a[1]} {phrase} a {b[0]} {b[1]}"


def caption_count(colour: str, shape: str) -> str:
    return f"two {colour} {PLURAL[shape]}"


def all_captions(kind: str) -> list[str]:
    """Every caption of a kind, in a fixed order."""
    subjects = list(itertools.product(COLOURS, SHAPES))
    if kind == "single":
        return [caption_single(c, s) for c, s in subjects]
    if kind == "motion":
        return [caption_motion(c, s, d) for (c, s), d in itertools.product(subjects, DIRECTIONS)]
    if kind == "count":
        return [caption_count(c, s) for c, s in subjects]
    if kind == "relation":
        return [
            caption_relation(a, p, b)
            for a, b in itertools.permutations(subjects, 2)
            for p in RELATION_PHRASES
            if a[0] != b[0]  # two different colours, so the detector can tell the subjects apart
        ]
    raise ValueError(f"unknown caption kind {kind!r}; known: {KINDS}")


def vocabulary() -> list[str]:
    """Every word the grammar uses, sorted (the word-level tokenizer's vocabulary)."""
    words = {"a", "two", "moving", "to", "the", "of", *COLOURS, *SHAPES, *PLURAL.values(), *DIRECTIONS}
    for p in RELATION_PHRASES:
        words.update(p.split())
    return sorted(words)


_SUBJ = rf"({'|'.join(COLOURS)}) ({'|'.join(SHAPES)})"
_RX = {
    "single": re.compile(rf"^a {_SUBJ}$"),
    "motion": re.compile(rf"^a {_SUBJ} moving ({'|'.join(DIRECTIONS)})$"),
    "relation": re.compile(rf"^a {_SUBJ} ({'|'.join(RELATION_PHRASES)}) a {_SUBJ}$"),
    "count": re.compile(rf"^two ({'|'.join(COLOURS)}) ({'|'.join(PLURAL.values())})$"),
}


@dataclass(frozen=True)
class ParsedCaption:
    """What a caption asks for: subjects as (colour, shape), the relation or motion, the count."""

    kind: str
    subjects: tuple[tuple[str, str], ...]
    relation: str | None = None  # layout relation name ("left of", ...) for kind "relation"
    motion: str | None = None  # direction for kind "motion"
    count: int = 1


class CaptionError(ValueError):
    """A caption outside the world's grammar."""


def parse_caption(caption: str) -> ParsedCaption:
    """Parse a grammar caption; CaptionError names the caption when it is not one."""
    text = " ".join(caption.lower().split())
    if m := _RX["single"].match(text):
        return ParsedCaption("single", ((m[1], m[2]),))
    if m := _RX["motion"].match(text):
        return ParsedCaption("motion", ((m[1], m[2]),), motion=m[3])
    if m := _RX["relation"].match(text):
        return ParsedCaption("relation", ((m[1], m[2]), (m[4], m[5])), relation=RELATION_PHRASES[m[3]])
    if m := _RX["count"].match(text):
        return ParsedCaption("count", ((m[1], m[2][:-1]),), count=2)
    raise CaptionError(
        f"caption {caption!r} is not in the toy world's grammar (e.g. 'a red circle', 'a green star moving right', "
        "'a red circle to the left of a blue square', 'two yellow triangles')"
    )


# ---- scene sampling ------------------------------------------------------------------------------------
def _overlap_free(objs: list[WorldObject], cfg: WorldConfig) -> bool:
    gap = cfg.gap * cfg.size
    for a, b in itertools.combinations(objs, 2):
        for t in (0.0, 0.5, 1.0):
            (ax, ay), (bx, by) = a.centre(t), b.centre(t)
            if np.hypot(ax - bx, ay - by) < 1.15 * (a.radius + b.radius) + gap:
                return False
    return True


def _pos(
    rng: np.random.Generator, r: float, cfg: WorldConfig, lo=(0.0, 0.0), hi=(1.0, 1.0)
) -> tuple[float, float]:
    s = cfg.size
    m = 1.15 * r + 1
    return (
        _coord(rng, max(m, lo[0] * s), min(s - m, hi[0] * s), cfg),
        _coord(rng, max(m, lo[1] * s), min(s - m, hi[1] * s), cfg),
    )


def _coord(rng: np.random.Generator, a: float, b: float, cfg: WorldConfig) -> float:
    """A coordinate in [a, b]: uniform, or (``cfg.grid``) a uniformly chosen grid point there."""
    g = cfg._grid_px()
    if g <= 0:
        return float(rng.uniform(a, b))
    k0, k1 = int(np.ceil(a / g - 1e-9)), int(np.floor(b / g + 1e-9))
    if k1 < k0:
        raise ValueError(f"no grid point ({g:g} px) between {a:.1f} and {b:.1f} px: a smaller radius or grid")
    return float(g * rng.integers(k0, k1 + 1))


def _radius(rng: np.random.Generator, cfg: WorldConfig) -> float:
    return float(rng.uniform(*cfg.radius) * cfg.size)


def scene_for_caption(caption: str, rng: np.random.Generator, cfg: WorldConfig | None = None) -> Scene:
    """A random scene that makes ``caption`` true (rejection sampling keeps shapes apart)."""
    cfg = cfg or WorldConfig()
    p = parse_caption(caption)
    bg = int(rng.integers(BACKGROUND_RANGE[0], BACKGROUND_RANGE[1] + 1))
    tex = int(rng.integers(0, 2**31 - 1))
    s = cfg.size
    for _ in range(1000):
        if p.kind == "single":
            (c, sh), r = p.subjects[0], _radius(rng, cfg)
            xy = _pos(rng, r, cfg)
            objs = [WorldObject(c, sh, r, xy, xy)]
        elif p.kind == "motion":
            (c, sh), r = p.subjects[0], _radius(rng, cfg)
            d = cfg.travel * s
            if cfg.grid > 0:  # every frame's step on the grid
                unit = cfg._grid_px() * max(1, cfg.frames - 1)
                d = unit * max(1, round(d / unit))
            dx, dy = {"left": (-d, 0), "right": (d, 0), "up": (0, -d), "down": (0, d)}[p.motion or ""]
            m = 1.15 * r + 1
            x0 = _coord(rng, max(m, m - dx), min(s - m, s - m - dx), cfg)
            y0 = _coord(rng, max(m, m - dy), min(s - m, s - m - dy), cfg)
            objs = [WorldObject(c, sh, r, (float(x0), float(y0)), (float(x0 + dx), float(y0 + dy)))]
        elif p.kind == "count":
            (c, sh) = p.subjects[0]
            objs = []
            for _k in range(2):
                r = _radius(rng, cfg)
                xy = _pos(rng, r, cfg)
                objs.append(WorldObject(c, sh, r, xy, xy))
        else:
            (ca, sa), (cb, sb) = p.subjects
            ra, rb = _radius(rng, cfg), _radius(rng, cfg)
            # the subject on one side of the frame's midline, the object on the other, along the relation's axis
            lo_a, hi_a, lo_b, hi_b = {
                "left of": ((0, 0), (0.5, 1), (0.5, 0), (1, 1)),
                "right of": ((0.5, 0), (1, 1), (0, 0), (0.5, 1)),
                "above": ((0, 0), (1, 0.5), (0, 0.5), (1, 1)),
                "below": ((0, 0.5), (1, 1), (0, 0), (1, 0.5)),
            }[p.relation or ""]
            xa, xb = _pos(rng, ra, cfg, lo_a, hi_a), _pos(rng, rb, cfg, lo_b, hi_b)
            objs = [WorldObject(ca, sa, ra, xa, xa), WorldObject(cb, sb, rb, xb, xb)]
            if not _relation_true(p.relation or "", xa, xb, 0.2 * s):
                continue
        if _overlap_free(objs, cfg):
            rel = (0, p.relation, 1) if p.relation else None
            return Scene(caption, p.kind, objs, rel, p.motion, bg, tex, cfg)
    raise RuntimeError(f"could not place the shapes of {caption!r} apart in a {s}px frame")


def _relation_true(rel: str, a: tuple[float, float], b: tuple[float, float], min_sep: float) -> bool:
    """Centre-based relation with a dominant axis: the separation along it exceeds ``min_sep`` and the cross one."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    along = {"left of": dx, "right of": -dx, "above": dy, "below": -dy}[rel]
    cross = abs(dy) if rel in ("left of", "right of") else abs(dx)
    return along > min_sep and along > cross


def sample_scene(kind: str, rng: np.random.Generator, cfg: WorldConfig | None = None, captions=None) -> Scene:
    """A random scene of ``kind`` (caption drawn uniformly from ``captions`` or from every caption of the kind)."""
    pool = list(captions) if captions is not None else all_captions(kind)
    return scene_for_caption(pool[int(rng.integers(len(pool)))], rng, cfg)


# ---- rendering -----------------------------------------------------------------------------------------
def _extent(shape: str, cx: float, cy: float, r: float) -> tuple[float, float, float, float]:
    pts = _polygon(shape, cx, cy, r)
    if pts is None:
        return (cx - r, cy - r, cx + r, cy + r)
    xs, ys = zip(*pts)
    return (min(xs), min(ys), max(xs), max(ys))


def _polygon(shape: str, cx: float, cy: float, r: float) -> list[tuple[float, float]] | None:
    """Vertices of the polygonal shapes (None for the circle)."""
    if shape == "circle":
        return None
    if shape == "square":
        h = 0.88 * r
        return [(cx - h, cy - h), (cx + h, cy - h), (cx + h, cy + h), (cx - h, cy + h)]
    if shape == "triangle":
        return [(cx, cy - 1.05 * r), (cx + 1.1 * r, cy + 0.85 * r), (cx - 1.1 * r, cy + 0.85 * r)]
    if shape == "star":
        out, ro, ri = [], 1.2 * r, 0.5 * 1.2 * r
        for k in range(10):
            ang = -np.pi / 2 + k * np.pi / 5
            rad = ro if k % 2 == 0 else ri
            out.append((cx + rad * np.cos(ang), cy + 0.1 * r + rad * np.sin(ang)))
        return out
    raise ValueError(f"unknown shape {shape!r}; known: {SHAPES}")


def render(scene: Scene) -> np.ndarray:
    """The scene as uint8 RGB frames ``[F, S, S, 3]``."""
    from PIL import Image, ImageDraw

    cfg = scene.config
    s, k, n = cfg.size, SUPERSAMPLE, cfg.frames
    tex = np.random.default_rng(scene.texture_seed).integers(
        -TEXTURE_AMPLITUDE, TEXTURE_AMPLITUDE + 1, size=(s, s, 1)
    )
    out = np.empty((n, s, s, 3), dtype=np.uint8)
    for f in range(n):
        t = f / (n - 1) if n > 1 else 0.0
        img = Image.new("RGB", (s * k, s * k), (scene.background,) * 3)
        draw = ImageDraw.Draw(img)
        for o in scene.objects:
            cx, cy = o.centre(t)
            colour = PALETTE[o.colour]
            pts = _polygon(o.shape, cx * k, cy * k, o.radius * k)
            if pts is None:
                rr = o.radius * k
                draw.ellipse((cx * k - rr, cy * k - rr, cx * k + rr, cy * k + rr), fill=colour)
            else:
                draw.polygon(pts, fill=colour)
        small = np.asarray(img.resize((s, s), Image.Resampling.BOX), dtype=np.int16)
        bg_mask = np.all(small == scene.background, axis=-1, keepdims=True)
        out[f] = np.clip(small + tex * bg_mask, 0, 255).astype(np.uint8)
    return out


def scene_boxes(scene: Scene) -> np.ndarray:
    """Ground-truth normalised boxes ``[F, num_objects, 4]``."""
    n = scene.config.frames
    ts = [f / (n - 1) if n > 1 else 0.0 for f in range(n)]
    return np.array([[o.box(t, scene.config.size) for o in scene.objects] for t in ts], dtype=np.float64)


def write_clip(scene: Scene, path: str | Path, fps: int = 8) -> Path:
    """Render ``scene`` and write it through ``vidlab.video`` (mp4, h264)."""
    from vidlab.video import write_video

    return write_video(render(scene), path, fps=fps)


__all__ = [
    "COLOURS",
    "DIRECTIONS",
    "KINDS",
    "PALETTE",
    "RELATION_PHRASES",
    "SHAPES",
    "CaptionError",
    "ParsedCaption",
    "Scene",
    "WorldConfig",
    "WorldObject",
    "all_captions",
    "parse_caption",
    "render",
    "sample_scene",
    "scene_boxes",
    "scene_for_caption",
    "vocabulary",
    "write_clip",
]
