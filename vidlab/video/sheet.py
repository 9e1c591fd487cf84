"""Contact sheets: a grid of uniformly sampled frames, each labelled with its index and timestamp."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def contact_sheet(
    frames: np.ndarray,
    indices: Sequence[int],
    timestamps: Sequence[float],
    columns: int = 4,
    title: str | None = None,
    label_px: int = 14,
    pad: int = 4,
):
    """Tile ``frames`` ``[N, H, W, 3]`` into one PIL image with ``#index  t=..s`` under each tile."""
    from PIL import Image, ImageDraw, ImageFont

    n, h, w = frames.shape[:3]
    if n == 0:
        raise ValueError("contact_sheet needs at least one frame")
    cols = max(1, min(int(columns), n))
    rows = math.ceil(n / cols)
    try:
        font = ImageFont.load_default(size=label_px)
    except TypeError:
        font = ImageFont.load_default()
    label_h = label_px + 6
    title_h = label_h + 4 if title else 0
    sheet = Image.new(
        "RGB", (cols * (w + pad) + pad, title_h + rows * (h + label_h + pad) + pad), (24, 24, 24)
    )
    draw = ImageDraw.Draw(sheet)
    if title:
        draw.text((pad, pad), title, fill=(230, 230, 230), font=font)
    for k in range(n):
        r, c = divmod(k, cols)
        x = pad + c * (w + pad)
        y = title_h + pad + r * (h + label_h + pad)
        sheet.paste(Image.fromarray(frames[k]), (x, y))
        draw.text(
            (x + 2, y + h + 2),
            f"#{int(indices[k])}  t={float(timestamps[k]):.2f}s",
            fill=(255, 255, 255),
            font=font,
        )
    return sheet
