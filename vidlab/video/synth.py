"""Procedural test videos: moving shapes, colours, a frame counter, text and scheduled events.

Every frame is a pure function of ``(t, width, height, seed, ...)``, so videos are deterministic by
seed, of any length, rendered lazily and streamed to the encoder. The top band of each frame
carries the frame index as a 2x12 grid of black/white blocks (20 data bits + 4 check bits) that
survives lossy coding and resizing; :func:`read_index_code` decodes it, which makes frame
exactness testable (``read_index_code(reader.get_frame(i)) == i``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CODE_ROWS, CODE_COLS = 2, 12
CODE_BAND = 1 / 6  # fraction of the frame height taken by the index code
DATA_BITS, CHECK_BITS = 20, 4
MAX_CODE = (1 << DATA_BITS) - 1

COLORS: dict[str, tuple[int, int, int]] = {
    "red": (230, 40, 40),
    "green": (40, 200, 60),
    "blue": (40, 80, 230),
    "yellow": (240, 220, 40),
    "magenta": (220, 50, 200),
    "cyan": (40, 210, 220),
    "orange": (245, 140, 30),
    "white": (245, 245, 245),
}
SHAPES = ("circle", "square", "triangle")


@dataclass(frozen=True)
class Event:
    """A shape of a colour shown in frames ``[start, end)`` at a fixed place (fractions of the frame)."""

    start: int
    end: int
    shape: str = "circle"
    color: str = "red"
    center: tuple[float, float] = (0.5, 0.6)  # (x, y) as fractions of width / height
    size: float = 0.2  # diameter as a fraction of min(width, height)
    label: str = ""  # free text for whoever builds questions from events

    def __post_init__(self):
        if self.shape not in SHAPES:
            raise ValueError(f"Event shape must be one of {SHAPES}, got {self.shape!r}")
        if self.color not in COLORS:
            raise ValueError(f"Event color must be one of {sorted(COLORS)}, got {self.color!r}")
        if not 0 <= self.start < self.end:
            raise ValueError(f"Event needs 0 <= start < end, got [{self.start}, {self.end})")

    def active(self, t: int) -> bool:
        return self.start <= t < self.end


# index code -----------------------------------------------------------------------------------
def _check(value: int) -> int:
    """4 check bits: xor-fold of the 20 data bits' nibbles, plus 1 so an all-black band never validates."""
    c = 0
    v = value
    for _ in range(DATA_BITS // 4):
        c ^= v & 0xF
        v >>= 4
    return (c + 1) & 0xF


def _bits(value: int) -> list[int]:
    word = (value << CHECK_BITS) | _check(value)
    n = DATA_BITS + CHECK_BITS
    return [(word >> (n - 1 - k)) & 1 for k in range(n)]


def _block(r: int, c: int, width: int, height: int) -> tuple[int, int, int, int]:
    band = height * CODE_BAND
    y0, y1 = band * r / CODE_ROWS, band * (r + 1) / CODE_ROWS
    x0, x1 = width * c / CODE_COLS, width * (c + 1) / CODE_COLS
    return int(round(x0)), int(round(y0)), int(round(x1)), int(round(y1))


def draw_index_code(frame: np.ndarray, value: int) -> np.ndarray:
    """Write ``value`` (0..2**20-1) into the top band of ``frame`` in place; returns the frame."""
    if not 0 <= value <= MAX_CODE:
        raise ValueError(f"index code holds 0..{MAX_CODE}, got {value}")
    h, w = frame.shape[:2]
    for k, bit in enumerate(_bits(int(value))):
        x0, y0, x1, y1 = _block(k // CODE_COLS, k % CODE_COLS, w, h)
        frame[y0:y1, x0:x1] = 255 if bit else 0
    return frame


def read_index_code(frame: np.ndarray) -> int:
    """Read the index drawn by :func:`draw_index_code` (any scale); ValueError if no valid code is there."""
    arr = np.asarray(frame)
    h, w = arr.shape[:2]
    lum = arr.astype(np.float32).mean(axis=2) if arr.ndim == 3 else arr.astype(np.float32)
    word = 0
    for k in range(DATA_BITS + CHECK_BITS):
        x0, y0, x1, y1 = _block(k // CODE_COLS, k % CODE_COLS, w, h)
        mx, my = max(1, (x1 - x0) // 4), max(1, (y1 - y0) // 4)
        patch = lum[y0 + my : max(y0 + my + 1, y1 - my), x0 + mx : max(x0 + mx + 1, x1 - mx)]
        word = (word << 1) | int(patch.mean() > 127.5)
    value, check = word >> CHECK_BITS, word & ((1 << CHECK_BITS) - 1)
    if _check(value) != check:
        raise ValueError(f"frame carries no valid index code (read value {value}, bad check bits)")
    return value


# scene ----------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _scene(seed: int, num_shapes: int) -> tuple[np.ndarray, tuple[tuple, ...]]:
    """Seeded background hue and moving-shape parameters (start, velocity, size, colour, kind)."""
    rng = np.random.default_rng(seed)
    bg = rng.integers(30, 110, size=3)
    names = sorted(COLORS)
    shapes = []
    for _ in range(num_shapes):
        shapes.append(
            (
                tuple(rng.uniform(0, 1, size=2)),  # start (fractions)
                tuple(rng.uniform(0.003, 0.02, size=2) * rng.choice([-1, 1], size=2)),  # velocity / frame
                float(rng.uniform(0.1, 0.22)),  # size (fraction of min side)
                names[int(rng.integers(len(names)))],
                SHAPES[int(rng.integers(len(SHAPES)))],
            )
        )
    return bg, tuple(shapes)


def _bounce(x: float) -> float:
    """Triangle wave in [0, 1]: position of a point bouncing between two walls."""
    x = x % 2.0
    return x if x <= 1.0 else 2.0 - x


@functools.lru_cache(maxsize=8)
def _font(px: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=px)
    except TypeError:  # Pillow without FreeType sizing
        return ImageFont.load_default()


def _draw_shape(draw, kind: str, cx: float, cy: float, d: float, color: tuple[int, int, int]) -> None:
    r = d / 2
    box = (cx - r, cy - r, cx + r, cy + r)
    if kind == "circle":
        draw.ellipse(box, fill=color)
    elif kind == "square":
        draw.rectangle(box, fill=color)
    else:
        draw.polygon([(cx, cy - r), (cx + r, cy + r), (cx - r, cy + r)], fill=color)


def synth_frame(
    t: int,
    width: int,
    height: int,
    seed: int = 0,
    num_shapes: int = 3,
    events: Sequence[Event] = (),
    text: str | None = None,
    counter: bool = True,
    code: bool = True,
) -> np.ndarray:
    """Render frame ``t`` as uint8 ``[height, width, 3]``: background, moving shapes, events, counter, text, code."""
    from PIL import Image, ImageDraw

    if width < 24 or height < 24:
        raise ValueError(f"synthetic frames need at least 24x24 pixels, got {width}x{height}")
    bg, shapes = _scene(int(seed), int(num_shapes))
    # background drifts slowly (a triangle wave, never a jump) so consecutive frames differ beyond the code band
    drift = np.array([60.0 * _bounce(k * t * 0.5 / 60.0) for k in (1.0, 0.7, 0.4)])
    img = Image.new("RGB", (width, height), tuple(int(v) for v in (bg + drift).astype(int)))
    draw = ImageDraw.Draw(img)
    top = height * CODE_BAND
    area_h = height - top
    m = min(width, height)
    for (sx, sy), (vx, vy), size, color, kind in shapes:
        cx = _bounce(sx + vx * t) * width
        cy = top + _bounce(sy + vy * t) * area_h
        _draw_shape(draw, kind, cx, cy, size * m, COLORS[color])
    for ev in events:
        if ev.active(t):
            _draw_shape(
                draw, ev.shape, ev.center[0] * width, ev.center[1] * height, ev.size * m, COLORS[ev.color]
            )
    px = max(8, int(height / 12))
    if counter:
        draw.text((4, height - px - 4), f"{t:06d}", fill=(255, 255, 255), font=_font(px))
    if text:
        draw.text((4, top + 4), text, fill=(255, 255, 255), font=_font(px))
    frame = np.asarray(img).copy()
    if code:
        draw_index_code(frame, t % (MAX_CODE + 1))
    return frame


def synth_frames(
    num_frames: int, width: int = 320, height: int = 240, seed: int = 0, start: int = 0, **scene
) -> Iterator[np.ndarray]:
    """Lazily yield frames ``start .. start + num_frames - 1`` (see :func:`synth_frame` for ``scene``)."""
    for t in range(start, start + int(num_frames)):
        yield synth_frame(t, width, height, seed=seed, **scene)


def render_synthetic(
    path: str | os.PathLike,
    num_frames: int,
    fps: float = 24.0,
    width: int = 320,
    height: int = 240,
    seed: int = 0,
    gop: int | None = None,
    codec: str = "h264",
    events: Iterable[Event] = (),
    text: str | None = None,
    num_shapes: int = 3,
    timestamps: Sequence[float] | None = None,
    progress: bool = False,
    **writer_kw,
) -> Path:
    """Render a synthetic video to ``path`` (streamed; never in memory) and return the path."""
    from .writer import write_video

    if num_frames < 1:
        raise ValueError(f"num_frames must be >= 1, got {num_frames}")
    frames: Iterable[np.ndarray] = synth_frames(
        num_frames, width, height, seed=seed, events=tuple(events), text=text, num_shapes=num_shapes
    )
    if progress:
        from tqdm import tqdm

        frames = tqdm(frames, total=num_frames, desc=f"render {Path(path).name}", unit="frame")
    return write_video(frames, path, fps, codec=codec, gop=gop, timestamps=timestamps, **writer_kw)
