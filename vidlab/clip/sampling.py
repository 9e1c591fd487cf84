"""Which frames a frame index embeds: a rate in frames per second, every n-th frame, or explicit indices.

The spec string (``fps=1``, ``every=30``, ``indices=0,5,9``) is part of the cache key, so two specs that
pick different frames never share a cache file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


class SamplingError(ValueError):
    """A sampling spec that is malformed or does not fit the video."""


@dataclass(frozen=True)
class Sampling:
    """A frame-sampling rule; build with ``Sampling.fps(1.0)``, ``.every(30)``, ``.indices([...])`` or ``.parse``."""

    kind: str
    rate: float = 0.0
    step: int = 0
    frames: tuple[int, ...] = ()

    @classmethod
    def fps(cls, rate: float) -> Sampling:
        """About ``rate`` frames per second of video: the frame nearest each time ``t = j / rate``."""
        rate = float(rate)
        if not rate > 0 or not np.isfinite(rate):
            raise SamplingError(f"sampling fps must be a positive number, got {rate!r}")
        return cls("fps", rate=rate)

    @classmethod
    def every(cls, n: int) -> Sampling:
        """Frames 0, n, 2n, ..."""
        if isinstance(n, bool) or int(n) != n or int(n) < 1:
            raise SamplingError(f"sampling every=n needs an integer n >= 1, got {n!r}")
        return cls("every", step=int(n))

    @classmethod
    def indices(cls, frames: Sequence[int] | np.ndarray) -> Sampling:
        """Exactly these frames (sorted, de-duplicated)."""
        arr = np.asarray(list(frames) if not isinstance(frames, np.ndarray) else frames)
        if arr.size == 0:
            raise SamplingError("sampling indices=... needs at least one frame index")
        if not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0:
            raise SamplingError(f"sampling indices must be non-negative integers, got {arr.tolist()[:8]}")
        return cls("indices", frames=tuple(int(i) for i in np.unique(arr)))

    @classmethod
    def parse(cls, spec: str | Sampling) -> Sampling:
        """``"fps=1"`` | ``"every=30"`` | ``"indices=0,5,9"`` -> Sampling."""
        if isinstance(spec, Sampling):
            return spec
        key, sep, value = str(spec).strip().partition("=")
        key = key.strip().lower()
        try:
            if sep and key == "fps":
                return cls.fps(float(value))
            if sep and key == "every":
                return cls.every(int(value))
            if sep and key == "indices":
                return cls.indices([int(v) for v in value.split(",") if v.strip()])
        except ValueError as e:
            if isinstance(e, SamplingError):
                raise
            raise SamplingError(f"bad sampling spec {spec!r}: {e}") from e
        raise SamplingError(f"bad sampling spec {spec!r}; use fps=1, every=30 or indices=0,5,9")

    @property
    def spec(self) -> str:
        """Canonical string; long index lists are abbreviated to a hash so cache keys stay short."""
        if self.kind == "fps":
            return f"fps={self.rate:g}"
        if self.kind == "every":
            return f"every={self.step}"
        text = ",".join(map(str, self.frames))
        if len(text) > 64:
            return f"indices#{len(self.frames)}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"
        return f"indices={text}"

    def __str__(self) -> str:
        return self.spec

    def frame_indices(self, num_frames: int, fps: float) -> np.ndarray:
        """The sorted int64 frames this rule picks in a video of ``num_frames`` frames at ``fps``."""
        if num_frames <= 0:
            raise SamplingError("the video has no frames to sample")
        if self.kind == "every":
            return np.arange(0, num_frames, self.step, dtype=np.int64)
        if self.kind == "indices":
            arr = np.asarray(self.frames, dtype=np.int64)
            if arr.max() >= num_frames:
                raise SamplingError(
                    f"sampling indices go up to {int(arr.max())} but the video has frames 0..{num_frames - 1}"
                )
            return arr
        if not fps > 0:
            raise SamplingError(f"sampling fps={self.rate:g} needs the video's fps, which is {fps!r}")
        duration = num_frames / fps
        times = np.arange(0.0, duration, 1.0 / self.rate)
        idx = np.clip(np.round(times * fps), 0, num_frames - 1).astype(np.int64)
        return np.unique(idx)
