"""decord backend: fast batched decoding; used by ``auto`` only on files where it is frame-exact.

decord resizes in its own reader (one per output size, cached). Frames are fetched in sorted,
de-duplicated order (decord decodes forward from the nearest keyframe, so sorting avoids re-seeks).
An open decord reader keeps about one core busy in background threads until it is closed: close
readers (or use ``with``) as soon as the frames are read.
"""

from __future__ import annotations

import numpy as np

from ..errors import VideoReadError
from ..probe import StreamIndex
from ..reader import VideoReader


class DecordReader(VideoReader):
    """Reader on decord's CPU VideoReader, numbered by vidlab's packet index."""

    backend = "decord"

    def __init__(self, path, index: StreamIndex | None = None):
        super().__init__(path, index)
        self._readers: dict[tuple[int, int], object] = {}
        if self.lost_frames:
            self.close()
            raise VideoReadError(
                self.path,
                f"truncated file ({self.lost_frames} frames lost): decord can hang on such files "
                "(dmlc/decord#373); use backend='pyav' or 'auto'",
            )
        vr = self._reader(self.width, self.height)
        if len(vr) != self.num_frames:
            n = len(vr)
            self.close()
            raise VideoReadError(self.path, f"decord sees {n} frames, the packet index {self.num_frames}")

    def _reader(self, width: int, height: int):
        key = (width, height)
        vr = self._readers.get(key)
        if vr is None:
            from ..reader import import_decord

            decord = import_decord()
            kw = {} if key == (self.width, self.height) else {"width": width, "height": height}
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
            raise VideoReadError(self.path, f"decord failed on frames {indices[:8].tolist()}...: {e}") from e
        if batch.shape[1:3] != (height, width):
            raise VideoReadError(
                self.path, f"decord returned {batch.shape[2]}x{batch.shape[1]}, not {width}x{height}"
            )
        return batch

    def close(self) -> None:
        self._readers = {}
        super().close()
