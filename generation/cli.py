"""``vidlab generate``: text-to-video with Comp-Attn on a Wan pipeline (tiny offline, hub id or local dir).

Writes ``video.mp4``, ``layout.json`` + layout PNGs, attention-map PNGs (``--attention-maps``),
``result.json`` (subjects, tokens, SCI and LAM logs, attention-in-box shares) and the resolved
``config.yaml`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from generation.comp_attn import CompAttnConfig

TINY_MODELS = {"tiny": "wan2.1", "tiny-wan2.2": "wan2.2"}
DTYPES = ("float32", "bfloat16", "float16")
OFFLOAD = ("none", "model", "sequential")


@dataclass
class GenerateConfig:
    """Everything ``vidlab generate`` uses: model and sampling settings plus ``comp_attn``."""

    model: str = "tiny"  # tiny | tiny-wan2.2 | hub id (Wan-AI/...-Diffusers) | local pipeline dir
    height: int = 64
    width: int = 64
    frames: int = 17  # 4k+1
    steps: int = 4
    guidance: float = 5.0
    guidance_2: float | None = None  # Wan2.2 low-noise expert's guidance (None = same as guidance)
    seed: int = 0
    fps: int = 8
    negative_prompt: str | None = None
    flow_shift: float | None = None  # None keeps the checkpoint's scheduler shift
    dtype: str = "float32"  # transformer + text encoder dtype
    vae_dtype: str = "float32"
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    cpu_offload: str = "none"  # none | model | sequential
    attention_backend: str | None = None  # native | flex | xformers | ... (None = diffusers' default)
    planner: str = "rule"  # rule | llm (when no --layout is given)
    comp_attn: CompAttnConfig = field(default_factory=CompAttnConfig)


def _dtype(name: str):
    import torch

    if name not in DTYPES:
        raise ValueError(f"dtype {name!r} is not one of {DTYPES}")
    return getattr(torch, name)


def load_pipeline(cfg: GenerateConfig) -> Any:
    """Build or load the Wan pipeline the config names, on its device, with offload/backend/shift applied."""
    import torch

    if cfg.cpu_offload not in OFFLOAD:
        raise ValueError(f"cpu_offload {cfg.cpu_offload!r} is not one of {OFFLOAD}")
    dtype = _dtype(cfg.dtype)
    if cfg.model in TINY_MODELS:
        from generation.tiny import build_tiny_pipeline

        pipe = build_tiny_pipeline(TINY_MODELS[cfg.model], seed=0, dtype=dtype)
    else:
        from diffusers import AutoencoderKLWan, WanPipeline

        src = cfg.model
        local = Path(src).expanduser()
        if local.exists() and not (local / "model_index.json").is_file():
            raise FileNotFoundError(
                f"model dir {local} has no model_index.json (not a diffusers pipeline folder)"
            )
        src = str(local) if local.exists() else src
        try:
            vae = AutoencoderKLWan.from_pretrained(src, subfolder="vae", torch_dtype=_dtype(cfg.vae_dtype))
            pipe = WanPipeline.from_pretrained(src, vae=vae, torch_dtype=dtype)
        except OSError as exc:
            raise FileNotFoundError(
                f"could not load Wan pipeline {cfg.model!r} (a hub id needs network or a cached copy; "
                f"a local dir needs a diffusers layout): {exc}"
            ) from exc
    if cfg.flow_shift is not None:
        sc = pipe.scheduler.config
        key = "flow_shift" if "flow_shift" in sc else "shift"
        pipe.scheduler = type(pipe.scheduler).from_config(sc, **{key: float(cfg.flow_shift)})
    if cfg.attention_backend:
        for name in ("transformer", "transformer_2"):
            tr = getattr(pipe, name, None)
            if tr is not None:
                tr.set_attention_backend(cfg.attention_backend)
    if cfg.cpu_offload == "model":
        pipe.enable_model_cpu_offload()
    elif cfg.cpu_offload == "sequential":
        pipe.enable_sequential_cpu_offload()
    else:
        device = cfg.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        pipe.to(device)
    pipe.set_progress_bar_config(disable=False, leave=False, desc="denoising")
    return pipe


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vidlab generate",
        description="Text-to-video with Comp-Attn (SCI + LAM) on a Wan pipeline. Writes video.mp4, layout.json, "
        "layout and attention PNGs, result.json and the resolved config.yaml into --out.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="""examples:
  # offline, seconds on a CPU: the tiny random Wan pipeline, rule-planned layout
  vidlab generate "a red cat on the left of a blue dog" --out outputs/gen --attention-maps
  # a user layout, Comp-Attn off (plain diffusers output, same seed)
  vidlab generate "a cat and a dog" --layout layout.json --no-sci --no-lam --out outputs/plain
  # a real checkpoint (needs the weights and a GPU), preset defaults + overrides
  vidlab generate "two dogs chasing a ball" --preset wan2.1-t2v-1.3b --out outputs/wan \\
      lam.step_fraction=0.25 sci.strength=0.8 cpu_offload=model
  # Wan2.2 two-expert form of the tiny model
  vidlab generate "a bird above a boat" --model tiny-wan2.2 --out outputs/w22

key=value overrides address GenerateConfig fields (model, height, width, frames, steps, guidance, seed, fps,
dtype, cpu_offload, attention_backend, flow_shift, ...) and comp_attn.* (e.g. comp_attn.lam.alpha_max=1.5);
lam.* and sci.* are shorthands for comp_attn.lam.* and comp_attn.sci.*.""",
    )
    p.add_argument("prompt", help="the text prompt")
    p.add_argument("overrides", nargs="*", help="config overrides key=value (see below)")
    p.add_argument("--out", required=True, help="output directory")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--layout", help="layout file (.json/.yaml); default: plan one with --planner")
    src.add_argument("--planner", choices=("rule", "llm"), help="layout planner (default from config: rule)")
    p.add_argument(
        "--subjects", nargs="+", help="subject phrases to use (default: every subject in the layout)"
    )
    p.add_argument("--model", help="tiny | tiny-wan2.2 | hub id | local diffusers dir")
    p.add_argument(
        "--preset", default="tiny", help="config preset name in configs/ or a YAML path (default tiny)"
    )
    p.add_argument("--steps", type=int, help="denoising steps")
    p.add_argument("--seed", type=int, help="generation seed")
    p.add_argument("--height", type=int, help="height in px (multiple of 16)")
    p.add_argument("--width", type=int, help="width in px (multiple of 16)")
    p.add_argument("--frames", type=int, help="number of frames (4k+1)")
    p.add_argument("--guidance", type=float, help="classifier-free guidance scale")
    p.add_argument("--fps", type=int, help="frame rate of video.mp4")
    p.add_argument("--sci", action=argparse.BooleanOptionalAction, default=None, help="SCI on/off")
    p.add_argument("--lam", action=argparse.BooleanOptionalAction, default=None, help="LAM on/off")
    p.add_argument(
        "--comp-attn", action=argparse.BooleanOptionalAction, default=None, help="Comp-Attn on/off as a whole"
    )
    p.add_argument("--attention-maps", action="store_true", help="capture and save subject attention maps")
    return p


def _overrides(args: argparse.Namespace) -> list[str]:
    """CLI flags as key=value overrides, applied after the positional ones (flags win)."""
    out = []
    for item in args.overrides:
        key = item.split("=", 1)[0]
        out.append(f"comp_attn.{item}" if key.startswith(("lam.", "sci.")) else item)
    simple = {
        "model": args.model,
        "steps": args.steps,
        "seed": args.seed,
        "height": args.height,
        "width": args.width,
        "frames": args.frames,
        "guidance": args.guidance,
        "fps": args.fps,
        "planner": args.planner,
    }
    out += [f"{k}={v}" for k, v in simple.items() if v is not None]
    for flag, key in ((args.sci, "comp_attn.sci.enabled"), (args.lam, "comp_attn.lam.enabled")):
        if flag is not None:
            out.append(f"{key}={str(flag).lower()}")
    if args.comp_attn is not None:
        out.append(f"comp_attn.enabled={str(args.comp_attn).lower()}")
    if args.attention_maps:
        out.append("comp_attn.capture_attention=true")
    return out


def _to_uint8(frames: Any):
    import numpy as np

    arr = np.asarray(frames)
    if arr.dtype != np.uint8:
        arr = (np.clip(arr, 0.0, 1.0) * 255.0).round().astype(np.uint8)
    return arr


def generate_main(argv: list[str] | None = None) -> int:
    """Entry point of ``vidlab generate``; returns the exit status."""
    import torch

    from generation.comp_attn import apply_comp_attn
    from vidlab.config import resolve, save_resolved
    from vidlab.video import write_video

    args = _parser().parse_intermixed_args(argv)
    if args.subjects:  # `--subjects a b key=value` would swallow overrides: give them back
        args.overrides += [x for x in args.subjects if "=" in x]
        args.subjects = [x for x in args.subjects if "=" not in x] or None
    cfg = resolve(GenerateConfig, args.preset, _overrides(args))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    save_resolved(cfg, out)
    t0 = time.perf_counter()
    pipe = load_pipeline(cfg)
    t_load = time.perf_counter() - t0
    comp = apply_comp_attn(pipe, cfg.comp_attn)
    gen_device = "cpu" if cfg.cpu_offload != "none" else pipe._execution_device
    generator = torch.Generator(device=gen_device).manual_seed(cfg.seed)
    kwargs: dict[str, Any] = dict(
        height=cfg.height,
        width=cfg.width,
        num_frames=cfg.frames,
        num_inference_steps=cfg.steps,
        guidance_scale=cfg.guidance,
        negative_prompt=cfg.negative_prompt,
        generator=generator,
        output_type="np",
    )
    if cfg.guidance_2 is not None:
        kwargs["guidance_scale_2"] = cfg.guidance_2
    layout: Any = args.layout
    if layout is None and not cfg.comp_attn.enabled:
        from generation.planners import plan_layout

        layout = plan_layout(args.prompt, planner=cfg.planner, subjects=args.subjects)
    t1 = time.perf_counter()
    try:
        res = comp.generate(args.prompt, layout=layout, subjects=args.subjects, planner=cfg.planner, **kwargs)
    finally:
        comp.remove()
    t_gen = time.perf_counter() - t1
    video = write_video(_to_uint8(res.frames), out / "video.mp4", fps=cfg.fps)
    files = {"video": str(video)}
    lay = res.layout if res.layout is not None else layout
    if lay is not None and not isinstance(lay, (str, Path)):
        files["layout"] = str(lay.save(out / "layout.json"))
        # draw at the video's aspect but at least 384 px on the short side, so labels stay readable
        scale = max(1.0, 384 / min(cfg.width, cfg.height))
        size = (round(cfg.width * scale), round(cfg.height * scale))
        files["layout_pngs"] = [str(p) for p in lay.render_overlays(out / "layout", *size)]
    summary: dict[str, Any] = {
        "prompt": args.prompt,
        "subjects": res.subjects,
        "token_indices": res.token_indices,
        "height": res.height,
        "width": res.width,
        "frames": res.num_frames,
        "sci": res.sci,
        "sci_weights": {str(k): v for k, v in res.sci_weights.items()},
        "lam_log": res.lam_log,
        "seconds": {"load": round(t_load, 3), "generate": round(t_gen, 3)},
    }
    if res.maps is not None:
        files["attention_pngs"] = [str(p) for p in res.maps.save_png(out / "attention")]
        summary["attention_inside_share"] = {str(k): v for k, v in res.maps.inside_share().items()}
    summary["files"] = files
    (out / "result.json").write_text(json.dumps(summary, indent=2))
    print(
        f"wrote {video} ({res.num_frames} frames {res.width}x{res.height}, {t_gen:.1f}s) and outputs in {out}/"
    )
    return 0
