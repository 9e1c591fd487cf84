"""The ``VideoReader`` interface every backend implements, and the frame-index helpers they share.

Every backend numbers frames the same way: frame ``i`` is the ``i``-th frame in presentation order,
as listed by the packet index (:mod:`vidlab.video.probe`), of the stream FFmpeg picks as best (or the
``stream=`` asked for). Every backend shows frames the same way: rotated by the display matrix as FFmpeg's
CLI does (``rotate=True``, the default; ``width``/``height`` are then the displayed size), or as coded
(``rotate=False``). Backends only implement ``_decode_sorted`` (distinct sorted indices -> frames, in
their ``native_rotation`` orientation) and optionally ``_decode_sorted_into`` and ``_iter``. The factory is :mod:`vidlab.video.reader`.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from . import orientation
from .errors import VideoReadError
from .probe import StreamIndex, build_index


def uniform_indices(start: int, end: int, n: int, unique: bool = False) -> np.ndarray:
    """``np.linspace(start, end, n)`` truncated to int64, exactly VideoBrain's reference sampling.

    The reference computes ``np.linspace(s, e - 1, k, dtype=int)``, which truncates toward zero (it does
    not round), so this does the same. ``end`` is inclusive, as in linspace: the initial view is
    ``uniform_indices(0, total - 1, 16)`` and an interval ``[s, e)`` is ``uniform_indices(s, e - 1, 8)``.
    With ``unique=True`` repeated indices (when the range holds fewer than ``n`` frames) are dropped,
    keeping the ascending order.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    idx = np.linspace(start, end, int(n)).astype(np.int64)
    if unique and idx.size:
        idx = np.unique(idx) if np.any(np.diff(idx) < 0) else idx[np.concatenate([[True], np.diff(idx) != 0])]
    return idx


def fit_within(width: int, height: int, size: tuple[int, int] | None) -> tuple[int, int]:
    """Output (w, h) for a frame of ``width x height`` scaled, keeping aspect, to fit within ``size``.

    Frames are only shrunk, never enlarged; each side is at least 1 pixel.
    """
    if size is None:
        return width, height
    try:
        bw, bh = int(size[0]), int(size[1])
    except (TypeError, ValueError, IndexError) as e:
        raise ValueError(f"size must be (width, height), got {size!r}") from e
    if bw <= 0 or bh <= 0:
        raise ValueError(f"size must be positive (width, height), got {size!r}")
    scale = min(bw / width, bh / height, 1.0)
    if scale >= 1.0:
        return width, height
    return max(1, int(round(width * scale))), max(1, int(round(height * scale)))


class VideoReader(ABC):
    """Frame-exact random access and streaming over one video; use as a context manager."""

    backend: str = "?"
    native_rotation: bool = False  # True when the backend's own frames come out already rotated for display

    def __init__(
        self, path: str | os.PathLike, index: StreamIndex | None = None, rotate: bool = True, stream=None
    ):
        self._path = Path(path)
        self._index = index if index is not None else build_index(path, stream=stream)
        self._closed = False
        self.rotate = bool(rotate)
        op = self._index.orient_op
        if op == "rotate" and self.rotate:
            raise VideoReadError(
                self._path,
                f"display rotation of {self._index.rotation:g} degrees is not a multiple of 90 "
                "(FFmpeg would interpolate it); open with rotate=False for the coded picture",
            )
        self._op = op if op != "rotate" else ""  # what turns coded frames into displayed ones
        # the transform from the backend's frames to what the caller asked for
        if self.rotate == self.native_rotation or not self._op:
            self._fix = ""
        else:
            self._fix = self._op if self.rotate else orientation.inverse(self._op)

    # metadata ---------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self._path

    @property
    def index(self) -> StreamIndex:
        """The packet index (pts of each frame, keyframes) that defines frame numbering."""
        return self._index

    @property
    def num_frames(self) -> int:
        return self._index.num_frames

    @property
    def fps(self) -> float:
        return self._index.fps

    @property
    def duration(self) -> float:
        return self._index.duration

    @property
    def width(self) -> int:
        """Width of the frames returned: the displayed width (``rotate=True``) or the coded one."""
        return self._index.display_size[0] if self.rotate else self._index.width

    @property
    def height(self) -> int:
        return self._index.display_size[1] if self.rotate else self._index.height

    @property
    def rotation(self) -> float:
        """The file's display rotation in degrees clockwise (FFmpeg's reading of the display matrix)."""
        return self._index.rotation

    @property
    def stream(self) -> int:
        """Index (in the file) of the video stream read."""
        return self._index.stream_index

    @property
    def codec(self) -> str:
        return self._index.codec

    @property
    def lost_frames(self) -> int:
        """Frames the header declares that the file does not hold (truncated file); 0 when intact."""
        return self._index.lost_frames

    def metadata(self) -> dict:
        """Plain-dict summary (JSON-ready) of the video and the backend reading it."""
        return {
            "path": str(self.path),
            "backend": self.backend,
            "num_frames": self.num_frames,
            "fps": self.fps,
            "duration": self.duration,
            "width": self.width,
            "height": self.height,
            "codec": self.codec,
            "pix_fmt": self._index.pix_fmt,
            "keyframes": int(self._index.keyframes.size),
            "vfr": self._index.vfr,
            "b_frames": self._index.has_b_frames,
            "lost_frames": self.lost_frames,
            "stream": self.stream,
            "video_streams": list(self._index.video_streams),
            "rotation": self.rotation,
            "rotated": bool(self.rotate and self._index.orient_op),
            "bit_depth": self._index.bit_depth,
            "color_range": self._index.color_range,
        }

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({str(self.path)!r}, backend={self.backend!r}, frames={self.num_frames}, "
            f"{self.width}x{self.height}@{self.fps:.3f}fps, codec={self.codec!r})"
        )

    # access -----------------------------------------------------------------------------------
    def check_indices(self, indices: Sequence[int] | np.ndarray | int) -> np.ndarray:
        """Validate indices: ValueError for an empty or non-integer list, IndexError for out-of-range ones."""
        arr = np.asarray(indices)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.ndim != 1:
            raise ValueError(f"indices must be a 1-D list of frame numbers, got shape {arr.shape}")
        if arr.size == 0:
            raise ValueError(f"empty index list: ask for at least one frame of {self.path}")
        if not np.issubdtype(arr.dtype, np.integer):
            if np.issubdtype(arr.dtype, np.floating) and np.all(np.mod(arr, 1) == 0):
                arr = arr.astype(np.int64)
            else:
                raise ValueError(f"frame indices must be integers, got dtype {arr.dtype}")
        arr = arr.astype(np.int64, copy=False)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0:
            raise IndexError(f"frame index {lo} is negative; {self.path} has frames 0..{self.num_frames - 1}")
        if hi >= self.num_frames:
            raise IndexError(
                f"frame index {hi} is out of range; {self.path} has frames 0..{self.num_frames - 1}"
                + (f" ({self.lost_frames} frames lost to truncation)" if self.lost_frames else "")
            )
        return arr

    def get_frames(
        self, indices: Sequence[int] | np.ndarray, size: tuple[int, int] | None = None
    ) -> np.ndarray:
        """Frames at ``indices`` as uint8 ``[N, H, W, 3]`` RGB, in the order asked (repeats allowed).

        ``size=(w, h)`` scales each frame at decode time, keeping aspect, to fit within ``w x h``.
        Each distinct frame is decoded once, in file order, whatever order is asked.
        """
        self._check_open()
        idx = self.check_indices(indices)
        out_w, out_h = fit_within(self.width, self.height, size)
        if idx.size == 1 or bool(np.all(np.diff(idx) > 0)):
            return self._decode_oriented(idx, out_w, out_h)
        uniq, first, inverse = np.unique(idx, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        if self._fix:  # frames are turned after decoding: decode in file order, then reorder
            return self._decode_oriented(uniq, out_w, out_h)[inverse]
        # Unsorted or repeated: each distinct frame is decoded once, in file order, straight into the row where
        # it was first asked for; repeats are copied from that row. One output array, not a sorted array plus
        # a reordered copy (at 128 x 640x360 each fresh array costs ~100 ms of page faults here).
        out = np.empty((idx.size, out_h, out_w, 3), dtype=np.uint8)
        self._decode_sorted_into(uniq, out, first)
        dup = np.flatnonzero(first[inverse] != np.arange(idx.size))
        if dup.size:
            out[dup] = out[first[inverse[dup]]]
        return out

    def _native_size(self, w: int, h: int) -> tuple[int, int]:
        """The size the backend must produce so that, after ``self._fix``, frames are ``w x h``."""
        return (h, w) if orientation.swaps_axes(self._fix) else (w, h)

    def _decode_oriented(self, idx: np.ndarray, w: int, h: int) -> np.ndarray:
        nw, nh = self._native_size(w, h)
        return orientation.apply(self._decode_sorted(idx, nw, nh), self._fix)

    def get_frame(self, index: int, size: tuple[int, int] | None = None) -> np.ndarray:
        """One frame ``[H, W, 3]``."""
        return self.get_frames([index], size=size)[0]

    def iter_frames(
        self, start: int = 0, end: int | None = None, step: int = 1, size: tuple[int, int] | None = None
    ) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(index, frame)`` for ``range(start, end, step)`` streaming, holding a few frames at most."""
        self._check_open()
        end = self.num_frames if end is None else int(end)
        if step < 1:
            raise ValueError(f"step must be >= 1, got {step}")
        if start < 0 or end < 0:
            raise IndexError(f"iter_frames range [{start}, {end}) has a negative bound")
        if end > self.num_frames:
            raise IndexError(
                f"iter_frames end {end} is past the last frame ({self.num_frames}) of {self.path}"
            )
        if start >= end:
            return
        out_w, out_h = fit_within(self.width, self.height, size)
        nw, nh = self._native_size(out_w, out_h)
        for i, frame in self._iter(int(start), end, int(step), nw, nh):
            yield i, orientation.apply(frame, self._fix)

    def timestamps(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """Presentation time in seconds of each frame (first frame at 0), float64."""
        return self._index.seconds(self.check_indices(indices))

    def _iter(self, start: int, end: int, step: int, w: int, h: int) -> Iterator[tuple[int, np.ndarray]]:
        """Default streaming: decode chunks of the range through ``_decode_sorted``."""
        chunk = 16
        rng = np.arange(start, end, step, dtype=np.int64)
        for k in range(0, rng.size, chunk):
            part = rng[k : k + chunk]
            frames = self._decode_sorted(part, w, h)
            yield from zip(part.tolist(), frames)
            del frames

    @abstractmethod
    def _decode_sorted(self, indices: np.ndarray, width: int, height: int) -> np.ndarray:
        """Decode distinct, increasing, valid ``indices`` into ``[N, height, width, 3]`` uint8."""

    def _decode_sorted_into(self, indices: np.ndarray, out: np.ndarray, rows: np.ndarray) -> None:
        """Decode distinct, increasing ``indices`` into ``out[rows[k]]`` (``out``: ``[M, H, W, 3]`` uint8, in
        the backend's native orientation). This default decodes to a new array and scatters it; a backend
        that can write each frame where it belongs overrides it."""
        out[rows] = self._decode_sorted(indices, out.shape[2], out.shape[1])

    # lifetime ---------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise VideoReadError(self.path, "reader is closed")

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> VideoReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

    def __len__(self) -> int:
        return self.num_frames
