"""The toy long-video world: seeded videos full of events, written as real mp4, and multiple-choice questions.

One video per seed (``video_spec(seed, cfg)``): 32x32 pixels at 1 fps, minutes to an hour long. Every frame
has a coloured **border** that never changes (static fact), a dark **background** that changes at scene cuts,
a small grey **blob** that wanders (nuisance), and at most one **event** object in the middle: short flashes
of shapes in colours, scheduled on one timeline so they never overlap. Four questions per video:

- ``static``     "What colour is the border of the video?"          any frame answers it (should be Direct)
- ``needle``     "What colour was the triangle?"                   one triangle, shown for ~1% of the video
- ``count``      "How many circles appear between frame a and b?"  0-3 circle flashes inside a 128-frame
  interval (each long enough for 8 uniform samples over the interval to see it; more circles elsewhere)
- ``distractor`` "What colour was the plus?"                        one plus, right next to a square of
  another colour (one of the options) at the same place

Everything is a pure function of (seed, config): ``render_frame(spec, t)``. The answer-bearing facts live in
``VideoSpec`` (ground truth for questions and teachers); policies only ever see decoded pixels.

The **where-to-look world** (``WORLDS["where"]``, ``world_config("where")``) turns on four knobs of
``WorldConfig`` that make one call with a rule-made argument fall short, so that a policy must choose *where*
to look, turn by turn. With ``s = n / 128`` the spacing of ``clip_sample(0, n)``'s candidates:

- ``flash``: the needle triangle shows its colour for only ``flash * s`` frames (< s: a coarse ``clip_sample``
  lands on it with probability ~``flash``), in the middle of a grey triangle ``context * s`` frames long (the
  region a coarse call does find; grey is never an option). Question: "What colour did the triangle flash?"
- ``count_interval`` / ``count_event`` (and their ``_max``: a range drawn per video): the counted circles spread
  over an interval that one ``uniform_sample`` of 8 frames cannot cover (its stride is wider than a circle); the
  shortest circles fall between the frames of the interval's two halves too, and only its four quarters show them.
- ``foil_shape``: the upright plus (also ``flash * s`` frames) sits between two foils, "tilted pluses" (a cross:
  the plus turned 45 degrees, captioned "a tilted plus" and "a plus" in the toy CLIP's training text), in one
  other colour that is one of the options; together ``context * s`` frames. Question: "What colour was the
  upright plus?". A top-4 ``clip_sample("plus")`` retrieves foil frames along with (or instead of) the upright
  plus: the prompt cannot tell them apart, and reading a foil gives a wrong option.
- ``two_look``: a fifth kind, ``twolook``, "What colour was the square just before the star appeared?": a star
  (``star * s`` frames, one per video) right after a square (``before * s`` frames); other squares elsewhere,
  two of their colours among the options. A call for the star shows the star, not the square; a call for
  "square" retrieves the other squares. Two looks answer it: find the star, then look just before it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (230, 40, 40),
    "green": (40, 200, 60),
    "blue": (60, 100, 255),
    "yellow": (240, 220, 40),
    "magenta": (220, 50, 200),
    "cyan": (40, 210, 220),
    "orange": (245, 140, 30),
    "white": (245, 245, 245),
}
GREY = "grey"  # the unlit needle triangle of the where world: a paint, never an option
PAINTS: dict[str, tuple[int, int, int]] = {**COLOURS, GREY: (150, 150, 150)}
BACKGROUNDS = ((20, 20, 20), (40, 20, 20), (20, 40, 20), (20, 20, 45), (45, 40, 15))
SHAPES = ("square", "circle", "triangle", "plus")
WHERE_SHAPES = (
    *SHAPES,
    "cross",
    "star",
)  # the where world adds the distractor's foil and the two-look anchor
KINDS = ("static", "needle", "count", "distractor")
WHERE_KINDS = (*KINDS, "twolook")
COUNT_WORDS = ("zero", "one", "two", "three")
CLIP_CANDIDATES = 128  # clip_sample's candidates over a range below 20,000 frames: the spacing is n / 128


@dataclass
class WorldConfig:
    """Size and pace of the world's videos (defaults: the shipped preset)."""

    size: int = 32  # frames are size x size
    fps: float = 1.0
    min_frames: int = 300  # 5 minutes at 1 fps
    max_frames: int = 3600  # 1 hour at 1 fps
    count_interval: int = 128  # frames in a count question's interval
    count_event: int = 20  # frames each counted circle is shown (>= interval / 7: 8 uniform samples see it)
    # > 0: a distribution: each video draws its circles' length from [count_event, count_event_max] and its
    # interval from [count_interval, count_interval_max] (integers, uniform, from their own stream of the seed)
    count_event_max: int = 0
    count_interval_max: int = 0
    background_events: float = 1 / 150  # extra distracting flashes per frame
    scene_length: int = 400  # mean frames between background changes
    # ---- the where-to-look knobs (the defaults keep the world above; WORLDS["where"] sets them) -------------
    # > 0: the needle triangle is lit (coloured) for flash x the clip candidate spacing (n / 128) frames, inside
    # a grey triangle, and the plus lasts as long; < 1 means shorter than the spacing. 0: the default needle,
    # max(2, ceil(n / 90)) frames, never shorter than the spacing
    flash: float = 0.0
    context: float = 1.6  # (flash > 0) the grey triangle / the plus with its foils, in candidate spacings
    foil_shape: str = "square"  # (flash > 0) the shape of the plus's two foils ("cross": a plus turned 45°)
    two_look: bool = False  # add the "twolook" question: the square just before the star
    star: float = 2.5  # (two_look) the star's length in candidate spacings (2-3 candidates: all in a top-4)
    before: float = 0.6  # (two_look) the square right before the star, in candidate spacings

    def __post_init__(self) -> None:
        from vidlab.config import ConfigError

        if not 0 <= self.flash < self.context:
            raise ConfigError(
                f"world.flash must be >= 0 and < world.context ({self.context}), got {self.flash}"
            )
        for lo, hi, name in (
            (self.count_event, self.count_event_max, "count_event"),
            (self.count_interval, self.count_interval_max, "count_interval"),
        ):
            if lo < 1 or (hi and hi < lo):
                raise ConfigError(f"world.{name} must be >= 1 and <= world.{name}_max ({hi}), got {lo}")
        if self.foil_shape not in WHERE_SHAPES:
            raise ConfigError(
                f"world.foil_shape must be one of {list(WHERE_SHAPES)}, got {self.foil_shape!r}"
            )

    @property
    def kinds(self) -> tuple[str, ...]:
        """The question kinds of this world, in the order ``questions`` writes them."""
        return WHERE_KINDS if self.two_look else KINDS


# The named worlds: "default" (the shipped policy's) and "where" (a coarse call is not enough).
WORLDS: dict[str, dict[str, Any]] = {
    "default": {},
    "where": {
        "min_frames": 600,  # the spacing n / 128 stays >= 4.7 frames, so a 2-frame flash is shorter
        # count: circles of 8 to 24 frames over 192 to 320 frames, per video (chosen on the validation splits:
        # the widest bounds tried where the four quarters still show every count, the halves only 0.61 of them)
        "count_interval": 192,
        "count_interval_max": 320,
        "count_event": 8,
        "count_event_max": 24,
        "flash": 0.4,
        "context": 1.6,
        "foil_shape": "cross",
        "two_look": True,
    },
}


def world_config(name: str = "default", **overrides: Any) -> WorldConfig:
    """The named world's ``WorldConfig`` (``WORLDS``), with any field overridden."""
    if name not in WORLDS:
        raise ValueError(f"world must be one of {sorted(WORLDS)}, got {name!r}")
    return WorldConfig(**{**WORLDS[name], **overrides})


def world_name(cfg: WorldConfig) -> str:
    """``"where"`` when the where-to-look knobs are on, else ``"default"``."""
    return "where" if (cfg.flash > 0 or cfg.two_look) else "default"


@dataclass(frozen=True)
class Event:
    start: int
    end: int
    shape: str
    colour: str
    # needle | distractor-target | distractor-foil | count | filler; where world: needle-context (grey),
    # twolook-target (the square before the star), twolook-anchor (the star)
    role: str = "filler"


@dataclass
class VideoSpec:
    """Ground truth of one video: its length, border colour, scene cuts, events and question facts."""

    seed: int
    num_frames: int
    fps: float
    size: int
    border: str
    scenes: list[tuple[int, int]]  # (start frame, background index)
    events: list[Event]
    count_interval: tuple[int, int]
    count: int
    facts: dict[str, Any] = field(default_factory=dict)

    def event_at(self, t: int) -> Event | None:
        for ev in self.events:
            if ev.start <= t < ev.end:
                return ev
        return None

    def background_at(self, t: int) -> int:
        bg = self.scenes[0][1]
        for start, b in self.scenes:
            if start <= t:
                bg = b
        return bg


def _place(
    rng: np.random.Generator, busy: list[tuple[int, int]], lo: int, hi: int, length: int, gap: int
) -> int | None:
    """A start in [lo, hi - length] whose [start - gap, end + gap) overlaps nothing busy (None after 200 tries)."""
    if hi - lo < length:
        return None
    for _ in range(200):
        s = int(rng.integers(lo, hi - length + 1))
        if all(s + length + gap <= a or s >= b + gap for a, b in busy):
            return s
    return None


def count_lengths(seed: int, cfg: WorldConfig) -> tuple[int, int]:
    """(circle length, interval length) of the count question of video ``seed``: the config's values, or, where
    it gives ``count_event_max`` / ``count_interval_max``, integers drawn uniformly within the bounds from a
    stream of their own (so the rest of the video draws as without the range)."""
    if not (cfg.count_event_max or cfg.count_interval_max):
        return cfg.count_event, cfg.count_interval
    rng = np.random.default_rng([int(seed), 7919, 2])
    e = int(rng.integers(cfg.count_event, max(cfg.count_event, cfg.count_event_max) + 1))
    i = int(rng.integers(cfg.count_interval, max(cfg.count_interval, cfg.count_interval_max) + 1))
    return e, i


def video_spec(seed: int, cfg: WorldConfig | None = None) -> VideoSpec:
    """The seeded ground truth of one video (deterministic: same seed and config, same video)."""
    cfg = cfg or WorldConfig()
    rng = np.random.default_rng([int(seed), 7919])
    n = int(rng.integers(cfg.min_frames, cfg.max_frames + 1))
    names = sorted(COLOURS)
    border = names[int(rng.integers(len(names)))]
    scenes = [(0, int(rng.integers(len(BACKGROUNDS))))]
    t = 0
    while True:
        t += int(rng.integers(cfg.scene_length // 2, cfg.scene_length * 3 // 2 + 1))
        if t >= n:
            break
        scenes.append((t, int(rng.integers(len(BACKGROUNDS)))))
    events: list[Event] = []
    busy: list[tuple[int, int]] = []
    needle_len = max(2, math.ceil(n / 90))  # >= the clip_sample candidate spacing (n / 128)

    def add(start: int, length: int, shape: str, colour: str, role: str) -> None:
        events.append(Event(start, start + length, shape, colour, role))
        busy.append((start, start + length))

    # count interval and its circles (lengths drawn per video when the config gives a range)
    event_len, interval = count_lengths(seed, cfg)
    L = min(interval, n // 2)
    a = int(rng.integers(0, n - L + 1))
    count = int(rng.integers(0, len(COUNT_WORDS)))
    busy_iv: list[tuple[int, int]] = []
    placed = 0
    for _ in range(count):
        s = _place(rng, busy_iv, a, a + L, event_len, event_len)
        if s is None:
            break
        busy_iv.append((s, s + event_len))
        add(s, event_len, "circle", names[int(rng.integers(len(names)))], "count")
        placed += 1
    count = placed
    busy.append((a, a + L))  # nothing else inside the interval
    # needle triangle
    needle_colour = names[int(rng.integers(len(names)))]
    spacing = n / CLIP_CANDIDATES
    flash_len = max(2, round(cfg.flash * spacing))
    context_len = max(flash_len + 2, round(cfg.context * spacing))
    if cfg.flash > 0:  # lit for flash_len frames in the middle of a grey triangle
        s = _place(rng, busy, 0, n, context_len, needle_len)
        if s is not None:
            pre = (context_len - flash_len) // 2
            add(s, pre, "triangle", GREY, "needle-context")
            add(s + pre, flash_len, "triangle", needle_colour, "needle")
            add(s + pre + flash_len, context_len - pre - flash_len, "triangle", GREY, "needle-context")
    else:
        s = _place(rng, busy, 0, n, needle_len, needle_len)
        if s is not None:
            add(s, needle_len, "triangle", needle_colour, "needle")
    # plus next to a square foil of another colour
    target = names[int(rng.integers(len(names)))]
    foil = rng.choice([c for c in names if c != target])
    if cfg.flash > 0:  # the plus between two foils (foil_shape) of the foil colour
        s = _place(rng, busy, 0, n, context_len, needle_len)
        if s is not None:
            pre = (context_len - flash_len) // 2
            add(s, pre, cfg.foil_shape, str(foil), "distractor-foil")
            add(s + pre, flash_len, "plus", target, "distractor-target")
            add(
                s + pre + flash_len,
                context_len - pre - flash_len,
                cfg.foil_shape,
                str(foil),
                "distractor-foil",
            )
    else:
        s = _place(rng, busy, 0, n, 3 * needle_len, needle_len)
        if s is not None:
            first_is_foil = bool(rng.integers(2))
            add(
                s + (0 if first_is_foil else 2 * needle_len),
                needle_len,
                "square",
                str(foil),
                "distractor-foil",
            )
            add(s + (2 * needle_len if first_is_foil else 0), needle_len, "plus", target, "distractor-target")
    # the two-look pair: a square right before the star
    look: dict[str, Any] = {}
    if cfg.two_look:
        before_len = max(2, round(cfg.before * spacing))
        star_len = max(2, round(cfg.star * spacing))
        s = _place(rng, busy, 0, n, before_len + star_len, needle_len)
        if s is not None:
            look["twolook"] = names[int(rng.integers(len(names)))]
            add(s, before_len, "square", look["twolook"], "twolook-target")
            add(s + before_len, star_len, "star", names[int(rng.integers(len(names)))], "twolook-anchor")
    # fillers: circles and squares elsewhere (never triangles or pluses: those are the needles)
    for _ in range(int(n * cfg.background_events)):
        length = int(rng.integers(needle_len, 3 * needle_len + 1))
        s = _place(rng, busy, 0, n, length, 2)
        if s is None:
            continue
        add(s, length, str(rng.choice(["circle", "square"])), names[int(rng.integers(len(names)))], "filler")
    events.sort(key=lambda e: e.start)
    facts = {
        "border": border,
        "needle": needle_colour,
        "count": count,
        "count_event": event_len,  # frames each counted circle lasts (for binning by event length)
        "distractor": target,
        "foil": str(foil),
    }
    if look:
        facts["twolook"] = look["twolook"]
        # colours of other squares in the video: the distractors a call for "square" retrieves (options)
        others = sorted(
            {e.colour for e in events if e.shape == "square" and e.role == "filler"} - {look["twolook"]}
        )
        facts["twolook_foils"] = others
    return VideoSpec(int(seed), n, cfg.fps, cfg.size, border, scenes, events, (a, a + L), count, facts)


# ----------------------------------------------------------------------------------------------- rendering
def _shape_mask(shape: str, size: int) -> np.ndarray:
    """Boolean mask of a centred shape, about 40% of the frame wide."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) + 0.5
    c, r = size / 2, size * 0.2
    dx, dy = xx - c, yy - c
    if shape == "square":
        return (np.abs(dx) <= r * 0.85) & (np.abs(dy) <= r * 0.85)
    if shape == "circle":
        return dx * dx + dy * dy <= r * r
    if shape == "triangle":
        return (dy >= -r) & (dy <= r) & (np.abs(dx) <= (dy + r) / 2)
    if shape == "plus":
        return ((np.abs(dx) <= r * 0.3) & (np.abs(dy) <= r)) | ((np.abs(dy) <= r * 0.3) & (np.abs(dx) <= r))
    if shape == "cross":  # the plus turned 45 degrees
        u, v = (dx + dy) / np.sqrt(2), (dx - dy) / np.sqrt(2)
        return ((np.abs(u) <= r * 0.3) & (np.abs(v) <= r)) | ((np.abs(v) <= r * 0.3) & (np.abs(u) <= r))
    if (
        shape == "star"
    ):  # five points, one up: the radius limit falls linearly from a tip to the notch between
        ang = np.arctan2(dy, dx) + np.pi / 2
        u = (5 * ang / (2 * np.pi)) % 1.0
        tip = 1 - 2 * np.minimum(u, 1 - u)  # 1 at a tip, 0 halfway between tips
        return np.sqrt(dx * dx + dy * dy) <= r * (0.5 + 0.7 * tip)
    raise ValueError(f"unknown shape {shape!r}; known: {WHERE_SHAPES}")


def render_frame(spec: VideoSpec, t: int) -> np.ndarray:
    """Frame ``t`` of the video as uint8 [size, size, 3]."""
    s = spec.size
    img = np.empty((s, s, 3), np.uint8)
    img[:] = BACKGROUNDS[spec.background_at(t)]
    b = max(2, s // 16)
    col = COLOURS[spec.border]
    img[:b], img[-b:], img[:, :b], img[:, -b:] = col, col, col, col
    # wandering grey blob (a nuisance the CLIP must learn to ignore)
    rng = np.random.default_rng([spec.seed, 31])
    px, py, vx, vy = rng.uniform(0, 1, 4)
    x = int(b + (abs(((px + 0.013 * (vx + 0.5) * t) % 2) - 1)) * (s - 2 * b - 4))
    y = int(b + (abs(((py + 0.011 * (vy + 0.5) * t) % 2) - 1)) * (s - 2 * b - 4))
    img[y : y + 4, x : x + 4] = (128, 128, 128)
    ev = spec.event_at(t)
    if ev is not None:
        img[_mask(ev.shape, s)] = PAINTS[ev.colour]
    return img


_MASKS: dict[tuple[str, int], np.ndarray] = {}


def _mask(shape: str, size: int) -> np.ndarray:
    key = (shape, size)
    if key not in _MASKS:
        _MASKS[key] = _shape_mask(shape, size)
    return _MASKS[key]


def caption(spec: VideoSpec, t: int) -> str:
    """What frame ``t`` shows, in words (CLIP training text): e.g. "a red triangle, blue border"."""
    ev = spec.event_at(t)
    thing = f"a {ev.colour} {'tilted plus' if ev.shape == 'cross' else ev.shape}" if ev else "no shape"
    return f"{thing}, {spec.border} border"


def write_video(spec: VideoSpec, path: str | os.PathLike) -> Path:
    """Render the whole video to ``path`` as h264 mp4 (yuv444p keeps the small shapes' colours), atomically."""
    from vidlab.video import write_video as _write

    frames = (render_frame(spec, t) for t in range(spec.num_frames))
    return _write(frames, path, spec.fps, codec="h264", pix_fmt="yuv444p", crf=12, gop=64)


# ----------------------------------------------------------------------------------------------- questions
NEEDLE_QUESTION = "What colour was the triangle?"
FLASH_QUESTION = "What colour did the triangle flash?"  # the where world: lit briefly inside a grey triangle
TWOLOOK_QUESTION = "What colour was the square just before the star appeared?"
UPRIGHT_QUESTION = "What colour was the upright plus?"  # the where world: its foils are tilted pluses


def questions(spec: VideoSpec, video: str) -> list[dict[str, Any]]:
    """The multiple-choice questions of one video as lmms-eval-style rows (options shuffled by seed): the four
    kinds of ``KINDS``, plus ``twolook`` in the where world."""
    rng = np.random.default_rng([spec.seed, 4243])
    names = sorted(COLOURS)
    f = spec.facts
    a, b = spec.count_interval
    out = []

    def colour_options(correct: str, must: Sequence[str] = ()) -> list[str]:
        others = [c for c in names if c != correct and c not in must]
        opts = [correct, *must, *rng.choice(others, 3 - len(must), replace=False).tolist()]
        return [str(o) for o in rng.permutation(opts)]

    specs = [
        ("static", "What colour is the border of the video?", colour_options(f["border"]), f["border"]),
        (
            "needle",
            FLASH_QUESTION if any(e.role == "needle-context" for e in spec.events) else NEEDLE_QUESTION,
            colour_options(f["needle"]),
            f["needle"],
        ),
        (
            "count",
            f"How many circles appear between frame {a} and frame {b}?",
            list(COUNT_WORDS),
            COUNT_WORDS[f["count"]],
        ),
        (
            "distractor",
            UPRIGHT_QUESTION if any(e.shape == "cross" for e in spec.events) else "What colour was the plus?",
            colour_options(f["distractor"], [f["foil"]]),
            f["distractor"],
        ),
    ]
    if "twolook" in f:  # two of the other squares' colours among the options (what a call for "square" shows)
        foils = list(f["twolook_foils"])[:2]
        foils = [str(c) for c in rng.permutation(foils)] if foils else []
        specs.append(("twolook", TWOLOOK_QUESTION, colour_options(f["twolook"], foils), f["twolook"]))
    for kind, q, opts, correct in specs:
        letter = chr(65 + opts.index(correct))
        out.append(
            {
                "id": f"toy{spec.seed:05d}-{kind}",
                "video": video,
                "question": q,
                "options": opts,
                "answer": letter,
                "question_type": "mc",
                "category": kind,
                "duration": round(spec.num_frames / spec.fps, 1),
            }
        )
    return out


def _event(spec: VideoSpec, role: str) -> Event | None:
    return next((e for e in spec.events if e.role == role), None)


def _spread(lo: int, hi: int, k: int) -> list[int]:
    """``k`` frames at ``linspace(lo, hi - 1, k)``, de-duplicated (what ``uniform_sample(lo, hi)`` shows)."""
    if hi <= lo:
        return []
    return sorted({int(round(x)) for x in np.linspace(lo, hi - 1, k)})


def count_view(spec: VideoSpec) -> list[int]:
    """Frames that show every counted circle as its own run: 8 uniform frames over the interval, or over each of
    its halves, quarters, ... when 8 over the whole are sparser than a circle lasts (the where world: halves)."""
    a, b = spec.count_interval
    lengths = [e.end - e.start for e in spec.events if e.role == "count"]
    pieces = 1
    while lengths and (b - a) / pieces - 1 > 7 * min(lengths) and pieces < 16:
        pieces *= 2
    out: set[int] = set()
    for p in range(pieces):
        out.update(_spread(a + (b - a) * p // pieces, a + (b - a) * (p + 1) // pieces, 8))
    return sorted(out)


def evidence_frames(spec: VideoSpec, kind: str) -> list[int]:
    """The ground-truth frames that answer a question of this kind (the oracle's view; teachers only).

    static: 4 frames across the video (the border is everywhere); needle / distractor: 4 frames of the (lit)
    triangle / the plus; count: the 8 frames ``uniform_sample`` shows over the asked interval (``count_view``: over
    each half when 8 over the whole miss circles); twolook: 4 frames of the square and the first 2 of the star after it (the relation "just before" is part of the evidence).
    """
    if kind == "static":
        return _spread(0, spec.num_frames, 4)
    if kind in ("needle", "distractor"):
        ev = _event(spec, "needle" if kind == "needle" else "distractor-target")
        return _spread(ev.start, ev.end, 4) if ev else []
    if kind == "count":
        return count_view(spec)
    if kind == "twolook":
        sq, star = _event(spec, "twolook-target"), _event(spec, "twolook-anchor")
        return [*_spread(sq.start, sq.end, 4), star.start, star.start + 1] if sq and star else []
    raise ValueError(f"kind must be one of {WHERE_KINDS}, got {kind!r}")


def evidence_in_view(spec: VideoSpec, kind: str, labels: Iterable[int]) -> bool:
    """Do frames with these indices show the answer? (count: >= 4 frames inside the interval, and the runs of
    counted circles among them equal the count)."""
    labels = sorted(set(int(x) for x in labels))
    if kind == "static":
        return bool(labels)
    if kind in ("needle", "distractor"):
        ev = _event(spec, "needle" if kind == "needle" else "distractor-target")
        return ev is not None and any(ev.start <= t < ev.end for t in labels)
    if kind == "count":
        a, b = spec.count_interval
        inside = [t for t in labels if a <= t < b]
        if len(inside) < 4:
            return False
        seen = [spec.event_at(t) for t in inside]
        runs = sum(
            1
            for i, e in enumerate(seen)
            if e is not None and e.role == "count" and (i == 0 or seen[i - 1] is not e)
        )
        return runs == spec.count
    if kind == "twolook":  # a frame of the square whose next frame in view shows the star
        sq, star = _event(spec, "twolook-target"), _event(spec, "twolook-anchor")
        if sq is None or star is None:
            return False
        return any(sq.start <= t < sq.end and star.start <= u < star.end for t, u in zip(labels, labels[1:]))
    raise ValueError(f"kind must be one of {WHERE_KINDS}, got {kind!r}")


def shows_subject(spec: VideoSpec, subject: str, t: int) -> bool:
    """Does frame ``t`` show the question's subject ("border": every frame; a shape: the event at ``t``, lit:
    the where world's grey triangle is not "the triangle" whose colour is asked)?"""
    if subject == "border":
        return True
    ev = spec.event_at(t)
    return ev is not None and ev.shape == subject and ev.colour != GREY


def seed_of(row: dict[str, Any]) -> int:
    """The world seed of a question row (its video is ``videos/{seed:06d}.mp4``)."""
    return int(Path(str(row["video"])).stem)


@dataclass
class Split:
    """One split on disk: its seeds, videos and question rows (``questions.jsonl``)."""

    name: str
    root: Path
    seeds: list[int]
    rows: list[dict[str, Any]]

    @property
    def jsonl(self) -> Path:
        return self.root / "questions.jsonl"


SPLIT_OFFSETS = {"train": 0, "val": 100_000, "test": 200_000}


def split_seeds(name: str, n: int, base_seed: int = 0) -> list[int]:
    """Disjoint seed ranges per split: train from 0, val from 100,000, test from 200,000 (+ 1000 x base_seed)."""
    if name not in SPLIT_OFFSETS:
        raise ValueError(f"split must be one of {sorted(SPLIT_OFFSETS)}, got {name!r}")
    start = SPLIT_OFFSETS[name] + 1000 * int(base_seed)
    return list(range(start, start + int(n)))


def build_split(
    root: str | os.PathLike,
    name: str,
    n_videos: int,
    cfg: WorldConfig | None = None,
    base_seed: int = 0,
    progress: bool = False,
) -> Split:
    """Render (or reuse) the split's videos under ``root/name/`` and write its questions as JSONL."""
    from vidlab.io import atomic_write_text

    cfg = cfg or WorldConfig()
    d = Path(root) / name
    (d / "videos").mkdir(parents=True, exist_ok=True)
    seeds = split_seeds(name, n_videos, base_seed)
    rows: list[dict[str, Any]] = []
    it: Iterable[int] = seeds
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(seeds, desc=f"render {name}", unit="video")
    for s in it:
        spec = video_spec(s, cfg)
        rel = f"videos/{s:06d}.mp4"
        path = d / rel
        if not path.is_file():
            write_video(spec, path)
        rows.extend(questions(spec, rel))
    atomic_write_text(d / "questions.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    atomic_write_text(d / "world.json", json.dumps({"config": asdict(cfg), "seeds": seeds}, indent=1))
    return Split(name, d, seeds, rows)


class MemoryReader:
    """A ``vidlab.video`` reader's interface over a video decoded once into memory (toy videos are tiny).

    Training runs thousands of episodes over the same few videos; decoding each once keeps the frames exactly
    the mp4's decoded frames while making repeat requests free.
    """

    def __init__(self, path: str | os.PathLike):
        from vidlab.video import open_video

        self.path = Path(path)
        with open_video(path) as r:
            self.num_frames = int(r.num_frames)
            self.fps = float(r.fps)
            self.width, self.height = int(r.width), int(r.height)
            self._times = np.asarray(r.timestamps(np.arange(self.num_frames)), dtype=np.float64)
            self._frames = np.stack([f for _, f in r.iter_frames()])

    def get_frames(
        self, indices: Sequence[int] | np.ndarray, size: tuple[int, int] | None = None
    ) -> np.ndarray:
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.num_frames):
            raise IndexError(f"frame indices must lie in 0..{self.num_frames - 1} for {self.path}")
        if size is not None and tuple(size) != (self.width, self.height):
            from vidlab.video import fit_within

            w, h = fit_within(self.width, self.height, size)
            if (w, h) != (self.width, self.height):
                from PIL import Image

                return np.stack([np.asarray(Image.fromarray(f).resize((w, h))) for f in self._frames[idx]])
        return self._frames[idx]

    def get_frame(self, index: int, size: tuple[int, int] | None = None) -> np.ndarray:
        return self.get_frames([index], size)[0]

    def timestamps(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        return self._times[np.asarray(indices, dtype=np.int64)]

    def close(self) -> None:
        pass

    def __enter__(self) -> MemoryReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass
