"""Small videos for frame-exactness checks (the test matrix), reusable by any test that needs real files.

``build(root, name)`` renders one entry of ``MATRIX`` once under ``root``; every frame carries its
index (``vidlab.video.synth.read_index_code``), so ``codes_of(frames) == indices`` checks a reader.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np

from .synth import read_index_code, render_synthetic

W, H = 96, 72
VFR_STEPS = (1 / 24, 1 / 12, 1 / 60, 0.1)


def vfr_timestamps(n: int, seed: int = 0) -> np.ndarray:
    """Irregular, increasing presentation times (seconds) for a variable-frame-rate video."""
    rng = np.random.default_rng(seed)
    return np.cumsum(np.r_[0.0, rng.choice(VFR_STEPS, size=n - 1)])


# name -> (file name, frames, render kwargs)
MATRIX = {
    "h264_gop30": ("gop30.mp4", 90, dict(gop=30)),
    "h264_gop250": ("gop250.mp4", 300, dict(gop=250)),
    "h264_vfr": ("vfr.mp4", 80, dict(gop=30, timestamps=vfr_timestamps(80))),
    "h264_vfr_mkv": ("vfr.mkv", 80, dict(gop=30, timestamps=vfr_timestamps(80, 1))),
    "h264_odd_padded": ("odd.mp4", 40, dict(width=321, height=179, gop=15)),
    "h264_odd_yuv444": ("odd444.mp4", 40, dict(width=321, height=179, gop=15, pix_fmt="yuv444p")),
    "vp9_webm_odd": ("odd.webm", 60, dict(width=321, height=179, codec="vp9", gop=20)),
    "one_frame": ("one.mp4", 1, {}),
    "h264_open_gop": (
        "opengop.mp4",
        150,
        dict(
            gop=30,
            options={
                "x264-params": "keyint=30:min-keyint=30:scenecut=0:open-gop=1:b-pyramid=normal:bframes=8"
            },
        ),
    ),
}


def build(root: Path, name: str) -> tuple[Path, int, dict]:
    """Render one matrix entry under ``root`` (once) and return (path, frames, kwargs)."""
    fname, n, kw = MATRIX[name]
    kw = dict(kw)
    kw.setdefault("width", W)
    kw.setdefault("height", H)
    path = root / fname
    if not path.exists():
        render_synthetic(path, n, fps=24, seed=7, **kw)
    return path, n, kw


def codes_of(frames: np.ndarray) -> list[int]:
    """Index code of each frame (-1 where none is readable): compare with the indices asked for."""
    out = []
    for f in frames:
        try:
            out.append(read_index_code(f))
        except ValueError:
            out.append(-1)
    return out


FFMPEG_LINKED = re.compile(r"libtorchcodec_(core|custom_ops)\d+\.")


def torchcodec_without_ffmpeg(root: Path) -> Path:
    """A ``PYTHONPATH`` entry (under ``root``) holding the installed torchcodec as a machine without FFmpeg's
    shared libraries sees it: ``import torchcodec.decoders`` works, building a ``VideoDecoder`` raises
    torchcodec's own ``RuntimeError("Could not load libtorchcodec ...")``.

    Every file of the package is a symlink to the installed one, except its FFmpeg-linked libraries
    (``libtorchcodec_core<N>`` and ``libtorchcodec_custom_ops<N>`` for FFmpeg 4-9), which are empty files, so
    ``dlopen`` refuses each as on such a machine and torchcodec's loader reports it. Raises
    ModuleNotFoundError when torchcodec is not installed (checked without importing it).
    """
    spec = importlib.util.find_spec("torchcodec")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("torchcodec is not installed", name="torchcodec")
    src = Path(next(iter(spec.submodule_search_locations)))
    dst = Path(root) / "torchcodec"
    dst.mkdir(parents=True)
    for entry in src.iterdir():
        if FFMPEG_LINKED.match(entry.name):
            (dst / entry.name).write_bytes(b"")
        elif entry.name != "__pycache__":
            (dst / entry.name).symlink_to(entry)
    return Path(root)
