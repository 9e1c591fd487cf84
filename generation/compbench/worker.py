"""``CompbenchWorker``: one Wan pipeline per worker (Ray actor or in-process), every method run on it.

The pipeline is loaded once in ``__init__``; each ``process(item)`` runs ``vidlab.generation.pipeline.generate_video``
with the item's method (baseline = diffusers' own attention), seed and pre-planned layout file (Comp-Attn is
installed and removed again around the call: the very same processors come back), and writes the mp4 atomically
(``vidlab.io.atomic_path``): a killed worker never leaves a file under the final name.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Any


def peak_memory() -> dict[str, float]:
    """GPU peak since the last reset (MB) where CUDA is in use, and this process's peak RSS (MB)."""
    out: dict[str, float] = {
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    }
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            out["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    except Exception:  # noqa: BLE001 - memory figures are best effort
        pass
    return out


def measure(maps: Any) -> dict[str, Any]:
    """The non-circular layout-faithfulness figures of one generation (or the reason there are none)."""
    from vidlab.generation.attention_measure import NoUnbiasedMapsError, layout_faithfulness

    if maps is None:
        return {"error": "no attention maps were captured"}
    try:
        return layout_faithfulness(maps).to_dict()
    except NoUnbiasedMapsError as e:
        return {"error": str(e)}


class CompbenchWorker:
    """Generates compbench items; ``generate`` is a GenerateConfig as a dict, ``out`` the run folder."""

    def __init__(self, generate: dict[str, Any], out: str, measure_layout: bool = False) -> None:
        from vidlab.config import from_dict
        from vidlab.generation.pipeline import GenerateConfig, load_pipeline

        self.cfg = from_dict(GenerateConfig, generate)
        self.out = Path(out)
        self.measure_layout = measure_layout
        t0 = time.perf_counter()
        self.pipe = load_pipeline(self.cfg)
        self.pipe.set_progress_bar_config(disable=True)
        self.load_seconds = time.perf_counter() - t0
        self.pid = os.getpid()

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        import torch

        from vidlab.generation.compbench.config import method_comp_attn
        from vidlab.generation.layout import Layout
        from vidlab.generation.pipeline import generate_video
        from vidlab.io import atomic_path
        from vidlab.video import write_video

        cfg = self.cfg
        layout_file = self.out / item["layout"]
        if not layout_file.is_file():
            raise FileNotFoundError(
                f"no planned layout {layout_file} (planning failed; see layouts/failed.json)"
            )
        layout = Layout.load(layout_file)
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.reset_peak_memory_stats()
        gen = generate_video(
            self.pipe,
            cfg,
            item["prompt"],
            layout,
            seed=int(item["seed"]),
            comp_attn=method_comp_attn(cfg.comp_attn, item["method"], self.measure_layout),
        )
        res, seconds, frames = gen.result, gen.seconds, gen.frames
        video = self.out / item["video"]
        video.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(video) as tmp:
            write_video(frames, tmp, fps=cfg.fps)
        extra: dict[str, Any] = {}
        if self.measure_layout:
            extra["layout_faithfulness"] = measure(res.maps)
        return {
            **extra,
            "video": item["video"],
            "layout": item["layout"],
            "frames": int(frames.shape[0]),
            "seconds": round(seconds, 4),
            "load_seconds": round(self.load_seconds, 3),
            "pid": self.pid,
            **peak_memory(),
        }
