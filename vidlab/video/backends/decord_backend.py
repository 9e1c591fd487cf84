"""decord backend: fast batched decoding; used by ``auto`` only on files where it is frame-exact.

decord resizes in its own reader (one per output size, cached). Frames are fetched in sorted,
de-duplicated order (decord decodes forward from the nearest keyframe, so sorting avoids re-seeks).
An open decord reader keeps about one core busy in background threads until it is closed: close
readers (or use ``with``) as soon as the frames are read.

decord applies the display rotation itself (its frames come out as displayed, verified against
FFmpeg's CLI for 90/180/270 degrees), so ``rotate=False`` undoes it losslessly. It cannot be told which
video stream to read, and converts >8-bit video about 4 levels off FFmpeg: such files are refused
(:func:`vidlab.video.reader.decord_safe`), never read wrongly.
"""

from __future__ import annotations

import numpy as np

from ..errors import VideoReadError
from ..probe import StreamIndex
from ..reader import VideoReader


class DecordReader(VideoReader):
    """Reader on decord's CPU VideoReader, numbered by vidlab's packet index."""

    backend = "decord"
    native_rotation = True

    def __init__(self, path, index: StreamIndex | None = None, rotate: bool = True):
        super().__init__(path, index, rotate=rotate)
        self._readers: dict[tuple[int, int], object] = {}
        from ..reader import decord_refuses

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
                "(dmlc/decord#373); use backend='pyav' or 'auto'",
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
            from ..reader import import_decord

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
