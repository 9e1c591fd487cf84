"""Frame pixels -> the encodings policies send: PIL images (Hugging Face) and base64 data URLs (OpenAI API)."""

from __future__ import annotations

import base64
import io

import numpy as np


def to_pil(image: np.ndarray):
    """A uint8 [H, W, 3] array as an RGB PIL image (what Qwen processors take)."""
    from PIL import Image

    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[-1] != 3:
        raise ValueError(f"frame must be uint8 [H, W, 3], got dtype {arr.dtype} shape {arr.shape}")
    return Image.fromarray(np.ascontiguousarray(arr))


def to_data_url(image: np.ndarray, fmt: str = "jpeg", quality: int = 90) -> str:
    """Encode a frame as ``data:image/{png|jpeg};base64,...`` for an OpenAI-style ``image_url`` part."""
    fmt = fmt.lower()
    if fmt == "jpg":
        fmt = "jpeg"
    if fmt not in ("jpeg", "png"):
        raise ValueError(f"image format must be 'jpeg' or 'png', got {fmt!r}")
    buf = io.BytesIO()
    pil = to_pil(image)
    if fmt == "jpeg":
        pil.save(buf, format="JPEG", quality=int(quality))
    else:
        pil.save(buf, format="PNG")
    return f"data:image/{fmt};base64," + base64.b64encode(buf.getvalue()).decode("ascii")
