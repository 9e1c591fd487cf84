"""decord backend: fast batched decoding; used by ``auto`` only on files where it is frame-exact.

decord resizes in its own reader (one per output size, cached). Frames are fetched in sorted,
de-duplicated order (decord decodes forward from the nearest keyframe, so sorting avoids re-seeks).
An open decord reader keeps about one core busy in background threads until it is closed: close
readers (or use ``with``) as soon as the frames are read.

decord applies the display rotation itself (its frames come out as displayed, verified against
FFmpeg's CLI for 90/180/270 degrees), so ``rotate=False`` undoes it losslessly. It cannot be told which
video stream to read, and converts >8-bit video about 4 levels off FFmpeg: such files are refused
(:func:`decord_safe`), never read wrongly.
"""

from __future__ import annotations

import numpy as np

from .. import orientation
from ..base import VideoReader
from ..errors import VideoReadError
from ..probe import StreamIndex


def import_decord():
    """Import decord *after* PyAV: decord loads its own FFmpeg 4 / libvpx / x264 with RTLD_GLOBAL, and when it
    comes first PyAV's encoders bind to those older libraries (libvpx-vp9 then fails to open)."""
    import av  # noqa: F401, I001  - must be loaded first
    import decord

    return decord


def decord_refuses(index: StreamIndex) -> str | None:
    """Why decord would return other frames than the reference on this file, whatever the indices
    (``backend="decord"`` then raises VideoReadError), or None."""
    if len(index.video_streams) > 1:
        return (
            f"{len(index.video_streams)} video streams: decord cannot be told which to read, and its "
            "FFmpeg 4 picks without regard to the default disposition"
        )
    if index.bit_depth > 8:
        return (
            f"{index.bit_depth}-bit video ({index.pix_fmt}): decord's RGB conversion is about 4 levels "
            "off FFmpeg's"
        )
    if orientation.mirrors(index.orient_op) or index.orient_op == "rotate":
        return f"display matrix {index.orient_op!r}: decord's handling of it is not verified"
    if index.open_gop:
        return (
            f"open GOP ({index.codec}: leading frames shown before their keyframe): decord returns "
            "neighbouring frames on random access (e.g. frame 6 for frame 5)"
        )
    return None


def decord_safe(index: StreamIndex) -> tuple[bool, str]:
    """Whether decord reads this file's frames exactly as the reference (PyAV / FFmpeg); with the reason.

    See docs/guides/video-io.md, "Backends and how auto chooses", for the measurements behind these rules.
    """
    refused = decord_refuses(index)
    if refused:
        return False, refused
    if index.vfr:
        return False, "variable frame rate: decord is reported inexact on such files (dmlc/decord#54)"
    if index.lost_frames:
        return False, (
            "truncated file (its header or packets count more frames than decode in place): decord can hang "
            "(dmlc/decord#373) and numbers the frames past the cut"
        )
    return True, "constant frame rate, closed GOP, intact"


class DecordReader(VideoReader):
    """Reader on decord's CPU VideoReader, numbered by vidlab's packet index."""

    backend = "decord"
    native_rotation = True

    def __init__(self, path, index: StreamIndex | None = None, rotate: bool = True):
        super().__init__(path, index, rotate=rotate)
        self._readers: dict[tuple[int, int], object] = {}
        why = decord_refuses(self._index)
        if why:
            self.close()
            raise VideoReadError(
                self.path, f"decord cannot read it exactly: {why}; use backend='pyav' or 'auto'"
            )
        if self.lost_frames:
            self.close()
            raise VideoReadError(
                self.path,
                f"truncated file ({self.lost_frames} frames lost): decord can hang on such files "
                "(dmlc/decord#373) and numbers the frames past the cut; use backend='pyav' or 'auto'",
            )
        self._shown = self._index.display_size  # decord's full-size frames are displayed-orientation
        vr = self._reader(*self._shown)
        if len(vr) != self.num_frames:
            n = len(vr)
            self.close()
            raise VideoReadError(self.path, f"decord sees {n} frames, the packet index {self.num_frames}")
        if self._index.orient_op:  # decord's rotation path fails on some sizes (e.g. 96x72 at 90 degrees)
            try:
                vr.get_batch([0]).asnumpy()
            except Exception as e:  # noqa: BLE001
                self.close()
                raise VideoReadError(
                    self.path,
                    f"decord fails on this rotated file ({str(e).splitlines()[-1][-90:]}); use 'pyav'",
                ) from e

    def _reader(self, width: int, height: int):
        key = (width, height)
        vr = self._readers.get(key)
        if vr is None:
            decord = import_decord()
            kw = {} if key == self._shown else {"width": width, "height": height}
            try:
                vr = decord.VideoReader(str(self.path), ctx=decord.cpu(0), num_threads=0, **kw)
            except Exception as e:  # noqa: BLE001 - decord raises DECORDError / RuntimeError
                raise VideoReadError(self.path, f"decord cannot open it: {e}") from e
            if len(self._readers) >= 4:  # keep a few sizes open, not unbounded
                self._readers.pop(next(iter(self._readers)))
            self._readers[key] = vr
        return vr

    def _decode_sorted(self, indices: np.ndarray, width: int, height: int) -> np.ndarray:
        vr = self._reader(width, height)
        try:
            batch = vr.get_batch(indices.tolist()).asnumpy()
        except Exception as e:  # noqa: BLE001
            if (width, height) != self._shown and "size must exactly match" in str(e):
                # decord's scaler mis-sizes some outputs (96x72 -> 48x36 raises): resize full frames in torch
                self._readers.pop((width, height), None)
                return _resize(self._decode_sorted(indices, *self._shown), width, height)
            raise VideoReadError(self.path, f"decord failed on frames {indices[:8].tolist()}...: {e}") from e
        if batch.shape[1:3] != (height, width):
            raise VideoReadError(
                self.path, f"decord returned {batch.shape[2]}x{batch.shape[1]}, not {width}x{height}"
            )
        return batch

    def close(self) -> None:
        self._readers = {}
        super().close()


def _resize(frames: np.ndarray, width: int, height: int) -> np.ndarray:
    """Antialiased bilinear resize of ``[N, H, W, 3]`` uint8 frames (the torchcodec backend's filter)."""
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(frames).permute(0, 3, 1, 2).float()
    x = F.interpolate(x, size=(height, width), mode="bilinear", antialias=True, align_corners=False)
    return np.ascontiguousarray(x.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy())
