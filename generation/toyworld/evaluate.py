"""Evaluation glue: load the trained toy-world Wan, generate with or without Comp-Attn, score with the detector.

``load_toyworld_pipeline(model)`` goes through ``generation.cli.load_pipeline`` (the code path of ``vidlab generate``).
``METHODS`` names the compared settings; ``run_method(pipe, method, prompts, seeds, ...)`` generates every
(prompt, seed) with the rule planner's layout (``placebo``: the same boxes with the subjects swapped, or for a
single group, mirrored left-right) and returns one record per video with its ``VideoScore`` and seconds.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from generation.toyworld.metrics import score_video
from generation.toyworld.model import WEIGHTS_DIR

METHODS = ("baseline", "sci", "lam", "both", "placebo")


@dataclass
class SamplingConfig:
    """How the benchmark samples the toy model (the shipped preset ``gen-toyworld`` uses the same values)."""

    height: int = 64
    width: int = 64
    frames: int = 9
    steps: int = 12
    guidance: float = 4.0


def load_toyworld_pipeline(model: str | Path | None = None):
    """The trained toy-world pipeline (default: the shipped weights) on CPU, loaded like ``vidlab generate`` does."""
    from generation.cli import GenerateConfig, load_pipeline

    path = Path(model) if model is not None else WEIGHTS_DIR
    if not (path / "model_index.json").is_file():
        from vidlab.errors import UserError

        raise UserError(
            f"no trained toy-world pipeline at {path} (model_index.json missing); "
            "train one with: vidlab train-gen-toyworld --out " + str(path)
        )
    pipe = load_pipeline(GenerateConfig(model=str(path), device="cpu"))
    pipe.set_progress_bar_config(disable=True)
    return pipe


def comp_config(method: str, sci_strength: float = 0.5, step_fraction: float = 0.3):
    """The ``CompAttnConfig`` of a method (``placebo`` is LAM alone, fed a contradicting layout)."""
    from generation.comp_attn import CompAttnConfig

    cfg = CompAttnConfig()
    cfg.sci.strength = float(sci_strength)
    cfg.lam.step_fraction = float(step_fraction)
    if method == "baseline":
        cfg.enabled = False
    elif method == "sci":
        cfg.lam.enabled = False
    elif method in ("lam", "placebo"):
        cfg.sci.enabled = False
    elif method != "both":
        raise ValueError(f"unknown method {method!r}; known: {METHODS}")
    return cfg


def _with_keyframes(s: Any, keyframes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(s, keyframes=list(keyframes))


def swapped_layout(layout: Any) -> Any:
    """A layout that contradicts the prompt: two groups swap boxes; a single group is mirrored left-right."""
    from generation.layout import Layout

    subs = list(layout.subjects)
    groups: list[list[int]] = []
    for i in range(len(subs)):
        if not any(i in g for g in groups):
            groups.append(layout.group_of(i))
    new = [copy.deepcopy(s) for s in subs]
    if len(groups) >= 2:
        a, b = groups[0], groups[1]
        for i, j in zip(a, b):
            new[i] = _with_keyframes(subs[i], subs[j].keyframes)
            new[j] = _with_keyframes(subs[j], subs[i].keyframes)
    else:
        for i, s in enumerate(subs):
            kfs = [(t, (1 - b[2], b[1], 1 - b[0], b[3])) for t, b in s.keyframes]
            new[i] = _with_keyframes(s, kfs)
    return Layout(prompt=layout.prompt, subjects=new, relations=[], planner="placebo-swapped", meta={})


def run_method(
    pipe: Any,
    method: str,
    prompts: Sequence[str],
    seeds: Sequence[int],
    sampling: SamplingConfig | None = None,
    sci_strength: float = 0.5,
    step_fraction: float = 0.3,
    progress: bool = True,
    desc: str | None = None,
) -> list[dict[str, Any]]:
    """Generate and score every (prompt, seed) with ``method``; one dict per video."""
    import torch
    from tqdm.auto import tqdm

    from generation.comp_attn import apply_comp_attn
    from generation.planners import plan_layout

    s = sampling or SamplingConfig()
    comp = apply_comp_attn(pipe, comp_config(method, sci_strength, step_fraction))
    out = []
    try:
        jobs = [(p, sd) for p in prompts for sd in seeds]
        for prompt, seed in tqdm(jobs, desc=desc or method, disable=not progress, leave=False):
            planned = plan_layout(prompt, planner="rule")
            given = swapped_layout(planned) if method == "placebo" else planned
            t0 = time.perf_counter()
            res = comp.generate(
                prompt,
                layout=given,
                height=s.height,
                width=s.width,
                num_frames=s.frames,
                num_inference_steps=s.steps,
                guidance_scale=s.guidance,
                generator=torch.Generator("cpu").manual_seed(int(seed)),
                output_type="np",
            )
            secs = time.perf_counter() - t0
            frames = np.asarray(res.frames)
            sc = score_video(prompt, frames, layout=given)
            out.append({"prompt": prompt, "seed": int(seed), "seconds": secs, **sc.to_dict()})
    finally:
        comp.remove()
    return out


def per_prompt(records: list[dict[str, Any]], key: str) -> list[float]:
    """Per-prompt mean of ``key`` over seeds (prompts where it is None are skipped)."""
    by: dict[str, list[float]] = {}
    for r in records:
        if r.get(key) is not None:
            by.setdefault(r["prompt"], []).append(float(r[key]))
    return [float(np.mean(v)) for v in by.values()]
