"""A bounded cache of decoded, resized frames: an evaluation decodes each frame it shows once per run.

An evaluation asks several questions of each video (Video-MME 3, a long-video corpus 11) and runs several
strategies over them; each question's initial view is the same frames, and strategies show overlapping frames.
:class:`FrameCache` keeps the frames as shown (decoded and resized, uint8) under a budget in MB, least recently
used first out, so that every question and strategy of a video reads them from memory. The pixels are the
decoder's: a frame decodes to the same bytes alone or in a batch (frame-exact random access), so results do not
change with the cache.

The cache sits behind a reader: :class:`CachedReader` wraps a ``vidlab.video`` reader and carries the cache and
the video's identity (path, size, modification time), and the code that decodes frames for showing
(``vidlab.understanding.agents.decode_frames``) looks for it there. Cached pixel arrays are read-only.

    cache = shared_frame_cache()            # one per process, default budget sized to the machine
    reader = CachedReader(open_video(path), cache, video_key(path))
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CachedReader",
    "FrameCache",
    "FrameCacheStats",
    "default_budget_mb",
    "shared_frame_cache",
    "video_key",
]

# The default budget: a sixteenth of the machine's memory, at least 256 MB and at most 4 GB (24 GB -> 1.5 GB).
# A shown frame is at most 640x360x3 bytes (0.66 MB), so 1.5 GB holds about 2,300 of them: every frame a
# question's strategies show of a few videos.
DEFAULT_SHARE = 16
MIN_DEFAULT_MB = 256
MAX_DEFAULT_MB = 4096


# Distinct frames counted (for ``stats.distinct``) before the count stops growing: bounds its memory in a
# long-lived process (about 200 MB of keys at the limit).
MAX_TRACKED = 2_000_000


def default_budget_mb() -> int:
    """The default budget in MB: a sixteenth of physical memory, clamped to [256, 4096]."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX system
        return MIN_DEFAULT_MB * 4
    return int(min(MAX_DEFAULT_MB, max(MIN_DEFAULT_MB, total / 2**20 / DEFAULT_SHARE)))


def resolve_budget_mb(budget_mb: float | None) -> float:
    """``None`` -> :func:`default_budget_mb`; a number must be >= 0 (0 turns the cache off)."""
    if budget_mb is None:
        return float(default_budget_mb())
    b = float(budget_mb)
    if not b >= 0:
        raise ValueError(f"frame cache budget must be >= 0 MB (0 turns it off), got {budget_mb!r}")
    return b


def video_key(path: str | os.PathLike) -> tuple[str, int, int]:
    """A video's identity for the cache: resolved path, size and modification time (a rewritten file is a new
    video)."""
    p = Path(path)
    st = p.stat()
    return (str(p.resolve()), int(st.st_size), int(st.st_mtime_ns))


@dataclass
class FrameCacheStats:
    """What the cache did: frames asked for, served from memory, decoded; distinct frames asked for; bytes."""

    requested: int = 0
    hits: int = 0
    decoded: int = 0
    distinct: int = 0
    evicted: int = 0
    bytes: int = 0
    peak_bytes: int = 0
    budget_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["peak_mb"] = round(self.peak_bytes / 2**20, 2)
        d["budget_mb"] = round(self.budget_bytes / 2**20, 2)
        return d


class FrameCache:
    """Decoded, resized frames under a byte budget, least recently used out first; thread-safe.

    ``frames(key, indices, decode)`` returns one ``(pixels, timestamp)`` per index, calling ``decode(missing)``
    once for the indices it lacks. ``key`` names the video and the way frames are shown (size, resize mode).
    A budget of 0 keeps nothing but still counts (``stats``), so a run without the cache reports its decodes.
    """

    def __init__(self, budget_mb: float | None = None) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[Hashable, int], tuple[np.ndarray, float]] = OrderedDict()
        self._seen: set[tuple[Hashable, int]] = set()
        self.stats = FrameCacheStats()
        self.resize(budget_mb)

    @property
    def budget_bytes(self) -> int:
        return self.stats.budget_bytes

    def __len__(self) -> int:
        return len(self._items)

    def resize(self, budget_mb: float | None) -> None:
        """Set the budget (None: the default for this machine) and evict down to it."""
        with self._lock:
            self.stats.budget_bytes = int(resolve_budget_mb(budget_mb) * 2**20)
            self._evict()

    def reset_counts(self) -> None:
        """Start the counts afresh (a run's own figures); the frames stay."""
        with self._lock:
            budget, held = self.stats.budget_bytes, self.stats.bytes
            self.stats = FrameCacheStats(bytes=held, peak_bytes=held, budget_bytes=budget)
            self._seen.clear()

    def clear(self) -> None:
        """Drop every frame (the counts stay)."""
        with self._lock:
            self._items.clear()
            self.stats.bytes = 0

    def _evict(self) -> None:
        while self.stats.bytes > self.stats.budget_bytes and self._items:
            _, (pixels, _t) = self._items.popitem(last=False)
            self.stats.bytes -= pixels.nbytes
            self.stats.evicted += 1

    def frames(
        self,
        key: Hashable,
        indices: Sequence[int],
        decode: Callable[[list[int]], tuple[Sequence[np.ndarray], Sequence[float]]],
    ) -> list[tuple[np.ndarray, float]]:
        """``(pixels, timestamp)`` for each of ``indices`` (repeats allowed), decoding only what is missing."""
        idx = [int(i) for i in indices]
        found: dict[int, tuple[np.ndarray, float]] = {}
        with self._lock:
            for i in dict.fromkeys(idx):
                k = (key, i)
                self.stats.requested += 1
                if k not in self._seen and len(self._seen) < MAX_TRACKED:
                    self._seen.add(k)
                    self.stats.distinct += 1
                hit = self._items.get(k)
                if hit is not None:
                    self._items.move_to_end(k)
                    self.stats.hits += 1
                    found[i] = hit
        missing = [i for i in dict.fromkeys(idx) if i not in found]
        if missing:
            pixels, times = decode(missing)
            if len(pixels) != len(missing) or len(times) != len(missing):
                raise ValueError(f"decode returned {len(pixels)} frames for {len(missing)} indices")
            with self._lock:
                self.stats.decoded += len(missing)
                for i, p, t in zip(missing, pixels, times):
                    arr = np.ascontiguousarray(p)
                    arr.flags.writeable = False  # shared by every later caller: nobody may draw on it
                    found[i] = (arr, float(t))
                    if arr.nbytes <= self.stats.budget_bytes:
                        old = self._items.pop((key, i), None)
                        if old is not None:
                            self.stats.bytes -= old[0].nbytes
                        self._items[(key, i)] = found[i]
                        self.stats.bytes += arr.nbytes
                        self._evict()  # before the next: what the cache holds never passes the budget
                        self.stats.peak_bytes = max(self.stats.peak_bytes, self.stats.bytes)
        return [found[i] for i in idx]


class CachedReader:
    """A ``vidlab.video`` reader that carries a :class:`FrameCache` and its video's key; everything else is the
    wrapped reader's (attributes, ``get_frames``, closing)."""

    def __init__(self, reader: Any, cache: FrameCache, key: Hashable) -> None:
        self.reader = reader
        self.frame_cache = cache
        self.frame_cache_key = key

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["reader"], name)

    def __len__(self) -> int:
        return len(self.reader)

    def __enter__(self) -> CachedReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        close = getattr(self.reader, "close", None)
        if close is not None:
            close()

    def __repr__(self) -> str:
        return f"CachedReader({self.reader!r})"


_shared: FrameCache | None = None
_shared_lock = threading.Lock()


def shared_frame_cache(budget_mb: float | None = None) -> FrameCache:
    """This process's frame cache (made on first use), set to ``budget_mb`` (None: the machine's default)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = FrameCache(budget_mb)
        elif _shared.budget_bytes != int(resolve_budget_mb(budget_mb) * 2**20):
            _shared.resize(budget_mb)
        return _shared
