"""The two frame-acquisition agents VideoBrain's policy calls: Uniform (dense sampling) and CLIP (retrieval).

Both read through ``vidlab.video`` and return ``vidlab.understanding.messages.Frame`` (pixels at 640x360, the source
frame index, its timestamp): ``resize="reference"`` (default) stretches every frame to exactly 640x360 as the
authors' release does; ``resize="fit"`` keeps aspect and only shrinks (``vidlab.video.fit_within``).
Reference behaviour (authors' release):
``uniform_sample`` -> frames at ``linspace(start, end-1, 8)`` (int truncation, de-duplicated);
``clip_sample`` -> K candidates at ``linspace(start, end-1, K)`` with ``K = min(128, range)`` when the range is
below 20,000 frames, else ``min(256, range)``; the 4 with the highest cosine similarity to the prompt, in
temporal order. The CLIP agent serves candidate embeddings from the cached ``vidlab.clip.FrameIndex``
(the reference re-decodes and re-embeds them on every call).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from vidlab.understanding.messages import Frame
from vidlab.video import fit_within, uniform_indices

MAX_SIZE = (640, 360)
NUM_UNIFORM = 8
NUM_CLIP = 4
NUM_INITIAL = 16
CLIP_LARGE_RANGE = 20_000


class AgentError(ValueError):
    """A tool request the agent cannot serve (out-of-range frames, empty prompt); the reason names the input."""


FRAME_RESIZE = ("reference", "fit")


def frame_size(
    width: int, height: int, max_size: tuple[int, int] = MAX_SIZE, resize: str = "reference"
) -> tuple[int, int]:
    """The size a ``width x height`` frame is shown at.

    ``reference`` (the authors' release, the default): exactly ``max_size`` (640x360), stretching other aspect
    ratios and upscaling small videos, as their checkpoints were trained. ``fit``: ``vidlab.video.fit_within``,
    keeping aspect and only ever shrinking.
    """
    if resize == "reference":
        return int(max_size[0]), int(max_size[1])
    if resize == "fit":
        return fit_within(int(width), int(height), max_size)
    raise ValueError(f"frame_resize must be one of {FRAME_RESIZE}, got {resize!r}")


def linspace_frames(start: int, end: int, n: int) -> list[int]:
    """Sorted unique ``linspace(start, end-1, n)`` truncated to int: the reference's sampling of ``[start, end)``."""
    if n <= 0 or end <= start:
        return []
    return uniform_indices(start, end - 1, n, unique=True).tolist()


def initial_indices(total_frames: int, n: int = NUM_INITIAL) -> list[int]:
    """The initial view: ``linspace(0, total-1, n)`` (de-duplicated, which only matters below n frames)."""
    return linspace_frames(0, total_frames, n)


def clip_candidate_count(start: int, end: int) -> int:
    """K for ``clip_sample``: ``min(128, range)`` below 20,000 frames of range, else ``min(256, range)``."""
    span = end - start
    return min(128, span) if span < CLIP_LARGE_RANGE else min(256, span)


def _reader_size(reader: Any) -> tuple[int, int] | None:
    w, h = getattr(reader, "width", None), getattr(reader, "height", None)
    if w and h:
        return int(w), int(h)
    return None


def decode_frames(
    reader: Any, indices: Sequence[int], max_size: tuple[int, int] = MAX_SIZE, resize: str = "reference"
) -> list[Frame]:
    """Decode ``indices`` through a ``vidlab.video`` reader at :func:`frame_size`, as ``Frame`` objects.

    ``fit`` lets the reader scale at decode time; ``reference`` decodes the full frame and resizes it to exactly
    ``max_size`` with PIL's default filter (bicubic), as ``Image.resize((640, 360))`` in the authors' code does.
    A reader that carries a frame cache (``vidlab.video.frame_cache.CachedReader``) decodes only the frames the
    cache lacks; the pixels are the same either way.
    """
    idx = [int(i) for i in indices]
    if not idx:
        return []
    cache = getattr(reader, "frame_cache", None)
    if cache is not None:
        key = (reader.frame_cache_key, tuple(max_size), resize)
        shown = cache.frames(key, idx, lambda miss: _decode_pixels(reader, miss, max_size, resize))
        return [Frame(p, i, t) for (p, t), i in zip(shown, idx)]
    pixels, times = _decode_pixels(reader, idx, max_size, resize)
    return [Frame(np.ascontiguousarray(p), i, float(t)) for p, i, t in zip(pixels, idx, times)]


def _decode_pixels(
    reader: Any, idx: list[int], max_size: tuple[int, int], resize: str
) -> tuple[np.ndarray, np.ndarray]:
    """uint8 [N, H, W, 3] at :func:`frame_size` and the timestamps of frames ``idx``."""
    native = _reader_size(reader)
    if resize == "fit" and native:
        target = frame_size(*native, max_size, "fit")
        pixels = reader.get_frames(idx, size=target if target != native else None)
    else:
        pixels = reader.get_frames(idx)
    h, w = pixels.shape[1:3]
    target = frame_size(w, h, max_size, resize)
    if target != (w, h):
        pixels = _resize(pixels, target)
    return pixels, np.asarray(reader.timestamps(idx), dtype=np.float64)


def _resize(pixels: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    from PIL import Image

    return np.stack([np.asarray(Image.fromarray(p).resize(size)) for p in pixels])


def open_reader(video: Any) -> Any:
    """A ``vidlab.video`` reader for a path; an already open reader is returned as is."""
    if isinstance(video, (str, os.PathLike)):
        from vidlab.video import open_video

        return open_video(video)
    return video


_open = open_reader  # older private name, kept for callers


def check_range(name: str, start: int, end: int, total: int) -> tuple[int, int]:
    """Validate a request like the reference: ``0 <= start < total``, ``end`` clipped to total, ``start < end``."""
    if start < 0 or start >= total:
        raise AgentError(f"{name}: start_frame {start} is outside the video (0..{total - 1})")
    end = min(int(end), total)
    if start >= end:
        raise AgentError(f"{name}: start_frame {start} must be < end_frame {end}")
    return int(start), end


class UniformAgent:
    """``uniform_sample``: 8 frames evenly spread over ``[start, end)``, decoded through the ``VideoReader``."""

    name = "uniform_sample"

    def __init__(
        self,
        reader: Any,
        num_frames: int = NUM_UNIFORM,
        max_size: tuple[int, int] = MAX_SIZE,
        resize: str = "reference",
    ):
        self.reader = open_reader(reader)
        self.num_frames = num_frames
        self.max_size = max_size
        self.resize = resize

    @property
    def total_frames(self) -> int:
        return int(self.reader.num_frames)

    def indices(self, start: int, end: int) -> list[int]:
        """The frame indices a call returns (after range checks)."""
        start, end = check_range(self.name, start, end, self.total_frames)
        return linspace_frames(start, end, self.num_frames)

    def initial(self, n: int = NUM_INITIAL) -> list[Frame]:
        """The initial view: n frames at ``linspace(0, total-1, n)``."""
        return decode_frames(self.reader, initial_indices(self.total_frames, n), self.max_size, self.resize)

    def sample(self, start: int, end: int) -> list[Frame]:
        """Frames for ``uniform_sample(start, end)``."""
        return decode_frames(self.reader, self.indices(start, end), self.max_size, self.resize)

    def frames(self, indices: Sequence[int]) -> list[Frame]:
        """Any frames by index (used for richer views in data classification)."""
        return decode_frames(self.reader, indices, self.max_size, self.resize)


class ClipAgent:
    """``clip_sample``: the 4 candidates most similar to the prompt, in temporal order.

    ``index_or_reader`` is a ``vidlab.clip.FrameIndex`` (embeddings cached on disk, the fast path) or a
    ``VideoReader``/path (candidates decoded and embedded on every call, as the reference does).
    ``parity=True`` scores exactly the reference's linspace candidates; ``parity=False`` searches every indexed
    frame inside the range instead (needs a FrameIndex; denser indexes find more).
    """

    name = "clip_sample"

    def __init__(
        self,
        index_or_reader: Any,
        model: Any,
        parity: bool = True,
        *,
        reader: Any = None,
        num_frames: int = NUM_CLIP,
        max_size: tuple[int, int] = MAX_SIZE,
        resize: str = "reference",
    ):
        self.model = model
        self.parity = parity
        self.num_frames = num_frames
        self.max_size = max_size
        self.resize = resize
        if hasattr(index_or_reader, "candidates"):
            self.index = index_or_reader
            source = reader if reader is not None else _index_video(index_or_reader)
            self.reader = open_reader(source)
        else:
            self.index = None
            self.reader = open_reader(reader if reader is not None else index_or_reader)
        if not parity and self.index is None:
            raise ValueError(
                "ClipAgent(parity=False) searches a FrameIndex; pass one (vidlab.clip.FrameIndex.build)"
            )

    @property
    def total_frames(self) -> int:
        return int(self.reader.num_frames)

    def scores(self, start: int, end: int, prompt: str) -> tuple[np.ndarray, np.ndarray]:
        """Candidate frame indices in ``[start, end)`` and their cosine similarity to ``prompt``."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise AgentError(f"{self.name}: prompt must be a non-empty string, got {prompt!r}")
        start, end = check_range(self.name, start, end, self.total_frames)
        text = np.asarray(self.model.embed_texts([prompt.strip()]), dtype=np.float32)[0]
        if self.index is not None and self.parity:
            frames, emb = _index_candidates(self.index, self.model, self.reader, start, end, self.max_size)
        elif self.index is not None:
            frames, emb = _indexed_in_range(self.index, start, end)
        else:
            frames = np.asarray(linspace_frames(start, end, clip_candidate_count(start, end)), dtype=np.int64)
            emb = _embed_decoded(self.reader, self.model, frames, self.max_size, self.resize)
        emb = np.asarray(emb, dtype=np.float32)
        return np.asarray(frames, dtype=np.int64), emb @ text

    def indices(self, start: int, end: int, prompt: str) -> list[int]:
        """Top-``num_frames`` candidates by similarity (stable: earlier frame wins a tie), in temporal order."""
        frames, sims = self.scores(start, end, prompt)
        order = np.argsort(-sims, kind="stable")[: self.num_frames]
        return sorted(int(i) for i in frames[order])

    def sample(self, start: int, end: int, prompt: str) -> list[Frame]:
        """Frames for ``clip_sample(start, end, prompt)``."""
        return decode_frames(self.reader, self.indices(start, end, prompt), self.max_size, self.resize)


def _index_video(index: Any) -> Any:
    for attr in ("video_path", "path"):
        value = getattr(index, attr, None)
        if value:
            return value
    meta = getattr(index, "meta", None) or {}
    for key in ("video_path", "path", "video"):
        if meta.get(key):
            return meta[key]
    raise ValueError("ClipAgent: this FrameIndex does not say which video it indexes; pass reader=...")


def _index_candidates(
    index: Any, model: Any, reader: Any, start: int, end: int, max_size: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """The reference's candidates (truncating linspace) with embeddings served from the FrameIndex cache
    (frames the cache lacks are decoded, embedded and added to it by the index)."""
    frames, emb = index.candidates(start, end, clip_candidate_count(start, end))
    return np.asarray(frames, dtype=np.int64), np.asarray(emb, dtype=np.float32)


def _indexed_in_range(index: Any, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
    frames = np.asarray(index.frame_indices, dtype=np.int64)
    keep = (frames >= start) & (frames < end)
    if not keep.any():
        raise AgentError(f"clip_sample: the frame index holds no frames in [{start}, {end})")
    return frames[keep], np.asarray(index.embeddings[keep], dtype=np.float32)


def _embed_decoded(
    reader: Any,
    model: Any,
    frames: np.ndarray,
    max_size: tuple[int, int],
    resize: str = "reference",
    chunk: int = 32,
) -> np.ndarray:
    """Decode + embed candidates in bounded chunks (the reference path, when no FrameIndex is given)."""
    out = []
    for s in range(0, len(frames), chunk):
        pix = [f.image for f in decode_frames(reader, frames[s : s + chunk].tolist(), max_size, resize)]
        out.append(np.asarray(model.embed_images(np.stack(pix)), dtype=np.float32))
    return np.concatenate(out) if out else np.zeros((0, 1), np.float32)
