"""torchcodec backend (optional): used only when ``torchcodec`` imports; numbered by vidlab's index."""

from __future__ import annotations

import numpy as np

from ..errors import VideoReadError
from ..probe import StreamIndex
from ..reader import VideoReader


class TorchCodecReader(VideoReader):
    """Reader on torchcodec's VideoDecoder (exact seek mode), resizing with PyAV-equivalent bilinear."""

    backend = "torchcodec"

    def __init__(self, path, index: StreamIndex | None = None):
        super().__init__(path, index)
        try:
            from torchcodec.decoders import VideoDecoder
        except Exception as e:  # noqa: BLE001
            raise VideoReadError(self.path, f"torchcodec is not available: {e}") from e
        try:
            self._dec = VideoDecoder(str(self.path), seek_mode="exact", dimension_order="NHWC")
        except Exception as e:  # noqa: BLE001
            raise VideoReadError(self.path, f"torchcodec cannot open it: {e}") from e

    def _decode_sorted(self, indices: np.ndarray, width: int, height: int) -> np.ndarray:
        try:
            batch = self._dec.get_frames_at(indices=indices.tolist()).data
        except Exception as e:  # noqa: BLE001
            raise VideoReadError(
                self.path, f"torchcodec failed on frames {indices[:8].tolist()}...: {e}"
            ) from e
        if (width, height) != (self.width, self.height):
            import torch.nn.functional as F

            x = batch.permute(0, 3, 1, 2).float()
            x = F.interpolate(x, size=(height, width), mode="bilinear", antialias=True, align_corners=False)
            batch = x.round().clamp(0, 255).to(batch.dtype).permute(0, 2, 3, 1)
        return np.ascontiguousarray(batch.numpy())

    def close(self) -> None:
        self._dec = None
        super().close()
