"""``vidlab generate``: text-to-video with Comp-Attn on a Wan pipeline (tiny offline, hub id or local dir).

Writes ``video.mp4``, ``layout.json`` + layout PNGs, attention-map PNGs (``--attention-maps``),
``result.json`` (subjects, tokens, SCI and LAM logs, the non-circular layout-faithfulness measure) and the
resolved ``config.yaml`` into ``--out``.

Everything a user can get wrong is checked before the pipeline loads and before anything is written to
``--out``: the config (types, ranges, 4k+1 frames, multiples of 16), the model name, the output folder, the
prompt, the layout, the subjects, the device and the memory the request needs (``vidlab.generation.memory``, a lower
bound against what is free). Each mistake is a typed ``UserError``: one line, exit status 2. The cheap checks
come first, so a wrong argument never waits for torch to import.

Sampling settings (size, frames, steps, guidance): a model that records its own (``model_settings``: the
toy-world folder's ``toyworld.json``) uses them unless the user sets them (a flag, a ``key=value`` word or an
explicit ``--preset``); the first line of output says which settings were used and what the user overrode.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from vidlab.generation.errors import OutputDirError
from vidlab.generation.memory import check_request_memory

# re-exported for one release: these moved to vidlab.generation.pipeline
from vidlab.generation.pipeline import (
    SHIPPED_MODELS,
    TINY_MODELS,
    GenerateConfig,
    check_device,
    check_geometry,
    check_model,
    generate_video,
    load_pipeline,
    model_settings,
    model_source,
    pipeline_kwargs,
    planner_kwargs,
    to_uint8,
)

__all__ = [
    "SHIPPED_MODELS",
    "TINY_MODELS",
    "GenerateConfig",
    "check_model",
    "check_out_dir",
    "generate_main",
    "load_pipeline",
    "model_source",
    "pipeline_kwargs",
    "to_uint8",
]

DEFAULT_PRESET = "tiny"
# written by every run, besides the files result.json lists
OWN_FILES = ("result.json", "config.yaml", "layout.json")


def clear_previous_outputs(out: Path) -> list[Path]:
    """Remove what an earlier ``vidlab generate`` wrote into ``out`` (the files its ``result.json`` lists, and
    ``OWN_FILES``), so that ``--overwrite`` never leaves a stale ``video_1.mp4`` beside a new one-video run;
    anything else in the folder is left alone. Returns the removed paths."""
    import json

    names: list[Any] = list(OWN_FILES)
    try:
        files = json.loads((out / "result.json").read_text()).get("files", {})
    except (OSError, ValueError, AttributeError):
        files = {}
    for value in files.values() if isinstance(files, dict) else ():
        names.extend(value if isinstance(value, list) else [value])
    root = out.resolve()
    removed = []
    for name in names:
        p = Path(str(name))
        if not p.is_absolute() and not p.exists():
            p = out / p.name  # written from another working directory: the same name in this folder
        try:
            inside = p.resolve().is_relative_to(root) and p.resolve() != root
        except OSError:
            continue
        if inside and p.is_file():
            p.unlink()
            removed.append(p)
    return removed


def check_out_dir(out: str | os.PathLike, overwrite: bool = False) -> Path:
    """``--out`` as a Path if it is (or can be created as) a writable folder; writes nothing.

    generate is not resumable, so a folder that already holds files is refused (one line naming ``--overwrite``)
    unless ``overwrite``: then the previous run's outputs there are replaced (:func:`clear_previous_outputs`)."""
    path = Path(out).expanduser()
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise OutputDirError(f"--out {path}: exists and is not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise OutputDirError(f"--out {path}: the folder is not writable")
        held = sorted(p.name for p in path.iterdir())
        if held and not overwrite:
            shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
            raise OutputDirError(
                f"--out {path} already holds files ({shown}); pass --overwrite to replace the outputs there, "
                "or another --out"
            )
        return path
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputDirError(f"--out {path}: cannot create it, {parent} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputDirError(f"--out {path}: cannot create it, {parent} is not writable")
    return path


def _parser() -> argparse.ArgumentParser:
    from vidlab.config import add_config_args

    p = argparse.ArgumentParser(
        prog="vidlab generate",
        description="Text-to-video with Comp-Attn (SCI + LAM) on a Wan pipeline. Writes video.mp4, layout.json, "
        "layout and attention PNGs, result.json and the resolved config.yaml into --out. The prompt, layout, "
        "subjects, model name, settings and --out are all checked before the model loads.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"""examples:
  # offline, seconds on a CPU: the tiny random Wan pipeline, rule-planned layout
  vidlab generate "a red cat on the left of a blue dog" --out outputs/gen --attention-maps
  # a user layout, Comp-Attn off (plain diffusers output, same seed)
  vidlab generate "a cat and a dog" --layout layout.json --no-sci --no-lam --out outputs/plain
  # a real checkpoint (needs the weights and a GPU), preset defaults + overrides
  vidlab generate "two dogs chasing a ball" --preset wan2.1-t2v-1.3b --out outputs/wan \\
      lam.step_fraction=0.25 sci.strength=0.8 cpu_offload=model
  # Wan2.2's two experts: LAM also on the first 20% of the low-noise expert's own steps
  vidlab generate "a bird above a boat" --model tiny-wan2.2 --out outputs/w22 lam.step_fraction_2=0.2

settings: --preset NAME|PATH (default {DEFAULT_PRESET}) <- the model's own sampling settings (a model folder
that records them, like toyworld: size, frames, steps, guidance; they replace the default preset's, not an
explicit --preset's) <- key=value words (or --set key=value) <- the flags above. The first line printed says
which settings were used. A request whose memory (a lower bound) exceeds what the device has free is refused
before anything loads. Keys are GenerateConfig fields (model, height, width, frames, steps, guidance,
guidance_2, seed, fps, num_videos, negative_prompt, dtype, cpu_offload, attention_backend, flow_shift,
planner, ...) and comp_attn.* (such as comp_attn.lam.alpha_max=1.5); lam.* and sci.* are shorthands for
comp_attn.lam.* and comp_attn.sci.*. Values are checked at once: steps=two or steps=0 or frames=10 is a one-line error.""",
    )
    p.add_argument("prompt", help="the text prompt")
    add_config_args(p)
    p.add_argument(
        "--out", required=True, help="output folder (created; nothing is written before the checks)"
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the outputs of an earlier run in --out (a folder that holds files is refused without it)",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--layout", help="layout file (.json/.yaml); default: plan one with --planner")
    src.add_argument("--planner", choices=("rule", "llm"), help="layout planner (default from config: rule)")
    p.add_argument(
        "--subjects", nargs="+", help="subject phrases to use (default: every subject in the layout)"
    )
    p.add_argument("--model", help="tiny | tiny-wan2.2 | hub id | local diffusers dir")
    p.add_argument("--steps", type=int, help="denoising steps")
    p.add_argument("--seed", type=int, help="generation seed")
    p.add_argument("--height", type=int, help="height in px (multiple of 16)")
    p.add_argument("--width", type=int, help="width in px (multiple of 16)")
    p.add_argument("--frames", type=int, help="number of frames (4k+1)")
    p.add_argument("--guidance", type=float, help="classifier-free guidance scale")
    p.add_argument("--fps", type=int, help="frame rate of video.mp4")
    p.add_argument("--num-videos", type=int, help="videos of the prompt (video.mp4, video_1.mp4, ...)")
    p.add_argument("--sci", action=argparse.BooleanOptionalAction, default=None, help="SCI on/off")
    p.add_argument(
        "--lam",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="LAM on/off (--lam on a layout with no subjects is an error, not a silent no-op)",
    )
    p.add_argument(
        "--comp-attn", action=argparse.BooleanOptionalAction, default=None, help="Comp-Attn on/off as a whole"
    )
    p.add_argument("--attention-maps", action="store_true", help="capture and save subject attention maps")
    return p


_SHORTHANDS = ("lam.", "sci.")


def _expand(items: list[str]) -> list[str]:
    """``lam.x=1`` -> ``comp_attn.lam.x=1`` (and sci.*)."""
    return [f"comp_attn.{i}" if i.split("=", 1)[0].strip().startswith(_SHORTHANDS) else i for i in items]


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    """CLI flags as dotted config keys (None = not given); they win over key=value words."""
    return {
        "model": args.model,
        "steps": args.steps,
        "seed": args.seed,
        "height": args.height,
        "width": args.width,
        "frames": args.frames,
        "guidance": args.guidance,
        "fps": args.fps,
        "num_videos": args.num_videos,
        "planner": args.planner,
        "comp_attn.sci.enabled": args.sci,
        "comp_attn.lam.enabled": args.lam,
        "comp_attn.enabled": args.comp_attn,
        "comp_attn.capture_attention": True if args.attention_maps else None,
    }


def _lam_requested(args: argparse.Namespace, overrides: list[str]) -> bool:
    """The user asked for LAM in so many words (--lam, or lam.enabled=true)."""
    import yaml

    if args.lam is True:
        return True
    for item in overrides:
        key, _, raw = item.partition("=")
        if key.strip() == "comp_attn.lam.enabled" and yaml.safe_load(raw or "null") is True:
            return True
    return False


def _one_line_warnings(prog: str):
    """A context where our warnings print as one ``prog: warning: ...`` line on stderr."""
    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("always", UserWarning)
    original = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        if issubclass(category, UserWarning) and category.__module__.startswith("vidlab.generation"):
            print(f"{prog}: warning: {' '.join(str(message).split())}", file=sys.stderr)
        else:
            original(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    return ctx


def _user_keys(args: argparse.Namespace, explicit_preset: bool) -> set[str]:
    """Top-level config keys the user set: flags, ``key=value`` words and an explicit ``--preset``'s keys."""
    from vidlab.config import load_preset, parse_overrides

    keys = {k.split(".")[0] for k, v in _flags(args).items() if v is not None}
    keys |= set(parse_overrides(args.overrides + args.set_overrides))
    if explicit_preset:
        keys |= set(load_preset(args.preset, GenerateConfig.PRESET_DIR))
    return keys


def _sampling(cfg: GenerateConfig) -> str:
    return f"{cfg.height}x{cfg.width}, {cfg.frames} frames, {cfg.steps} steps, guidance {cfg.guidance:g}"


def with_model_settings(
    cfg: GenerateConfig, user: set[str], preset: str, explicit_preset: bool
) -> tuple[GenerateConfig, str]:
    """``cfg`` with the sampling settings its model records (``model_settings``) wherever the user set none
    (``user``: top-level keys), and the one line that says which settings were used and what was overridden."""
    import dataclasses

    own = model_settings(cfg.model)
    if own is None:
        line = f"settings: preset {preset}: {_sampling(cfg)}"
        if not explicit_preset and cfg.model not in TINY_MODELS:
            line += (
                f" (model {cfg.model} records no sampling settings, so these are the {preset} preset's, made for the"
                " tiny model: for a real checkpoint pass its preset, e.g. --preset wan2.1-t2v-1.3b)"
            )
        return cfg, line
    cfg = dataclasses.replace(cfg, **{k: v for k, v in own.values.items() if k not in user})
    changed = [
        f"{k}={getattr(cfg, k)} (the model's: {v})" for k, v in own.values.items() if getattr(cfg, k) != v
    ]
    line = f"settings: the model's own ({own.source}): {_sampling(cfg)}"
    return cfg, line + (f"; overridden: {', '.join(changed)}" if changed else "")


RANDOM_WEIGHTS_NOTE = (
    "note: the {model} model has random weights (never trained), so its video is noise by construction; it "
    "shows the pipeline and Comp-Attn's machinery. A trained model: --model toyworld (its prompts: "
    '"a red circle to the left of a blue square")'
)


def generate_main(argv: list[str] | None = None) -> int:
    """Entry point of ``vidlab generate``; returns the exit status."""
    from vidlab.config import config_from_args
    from vidlab.generation.comp_attn import prepare_inputs

    args = _parser().parse_intermixed_args(argv)
    if args.subjects:  # `--subjects a b key=value` would swallow overrides: give them back
        args.overrides += [x for x in args.subjects if "=" in x]
        args.subjects = [x for x in args.subjects if "=" not in x] or None
    args.overrides, args.set_overrides = _expand(args.overrides), _expand(args.set_overrides)
    explicit_preset = args.preset is not None
    args.preset = args.preset or DEFAULT_PRESET
    ctx = _one_line_warnings("vidlab generate")
    try:
        # ---- validate everything; nothing is loaded or written yet (torch is imported last, if at all) ----
        cfg = config_from_args(GenerateConfig, args, _flags(args))
        check_model(cfg.model)
        cfg, settings_line = with_model_settings(
            cfg, _user_keys(args, explicit_preset), args.preset, explicit_preset
        )
        from vidlab.generation.toyworld.tokenizer import check_prompt_words

        check_prompt_words(args.prompt, model_source(cfg.model), cfg.model)  # word-level (toy) vocabularies
        check_geometry(cfg)
        out = check_out_dir(args.out, overwrite=args.overwrite)
        # the memory a request needs (a lower bound; None: a hub model's configs are read after its load).
        # On the CPU it is known now; a GPU's free memory needs torch, so that check comes last.
        estimate = check_request_memory(cfg, "cpu") if cfg.device == "cpu" else None
        comp_on = cfg.comp_attn.enabled and bool(cfg.comp_attn.lam.enabled or cfg.comp_attn.sci.enabled)
        lam_asked = cfg.comp_attn.enabled and _lam_requested(args, args.overrides + args.set_overrides)
        with warnings.catch_warnings():
            if not comp_on:
                warnings.simplefilter("ignore", UserWarning)  # no subjects is no news with Comp-Attn off
            prep = prepare_inputs(
                args.prompt,
                args.layout,
                args.subjects,
                cfg.planner,
                planner_kwargs(cfg),
                require_subjects=lam_asked,
            )
        device = check_device(cfg)  # auto and cuda ask torch: after every check that does not need it
        if cfg.device != "cpu":
            estimate = check_request_memory(cfg, device)
        if args.overwrite and out.is_dir() and any(out.iterdir()):
            print(
                f"vidlab generate: note: --overwrite: replacing the earlier outputs in {out}", file=sys.stderr
            )
        print(settings_line, flush=True)
        if cfg.model in TINY_MODELS:
            print(RANDOM_WEIGHTS_NOTE.format(model=cfg.model), flush=True)
        return _run(cfg, args, out, prep, device, estimate is not None)
    finally:
        ctx.__exit__(None, None, None)


def _run(
    cfg: GenerateConfig, args: argparse.Namespace, out: Path, prep: Any, device: str, memory_checked: bool
) -> int:
    from vidlab.config import save_resolved
    from vidlab.generation.attention_measure import NoUnbiasedMapsError, layout_faithfulness
    from vidlab.generation.toyworld.metrics import judge_toyworld_videos, verdict_line
    from vidlab.io import atomic_path, atomic_write_json, ensure_output_dir
    from vidlab.video import write_video

    t0 = time.perf_counter()
    pipe = load_pipeline(cfg)
    t_load = time.perf_counter() - t0
    if not memory_checked:
        # a hub model: its configs are known now, before anything is allocated for the call
        from vidlab.generation.memory import dims_from_pipe

        check_request_memory(cfg, device, dims_from_pipe(pipe))
    if args.overwrite and out.is_dir():
        clear_previous_outputs(out)  # only now, after every check and the load: a failed run destroys nothing
    ensure_output_dir(out)  # the first write: only now, after every check and the load
    save_resolved(cfg, out)
    gen = generate_video(pipe, cfg, prep.prompt, prep)
    res, t_gen = gen.result, gen.seconds
    videos = []
    for k, frames in enumerate(gen.videos):
        path = out / ("video.mp4" if k == 0 else f"video_{k}.mp4")
        with atomic_path(path) as tmp:
            write_video(frames, tmp, fps=cfg.fps)
        videos.append(str(path))
    files: dict[str, Any] = {"video": videos[0], "videos": videos}
    lay = prep.layout
    files["layout"] = str(lay.save(out / "layout.json"))
    # draw at the video's aspect but at least 384 px on the short side, so labels stay readable
    scale = max(1.0, 384 / min(cfg.width, cfg.height))
    size = (round(cfg.width * scale), round(cfg.height * scale))
    files["layout_pngs"] = [str(p) for p in lay.render_overlays(out / "layout", *size)]
    summary: dict[str, Any] = {
        "prompt": prep.prompt,
        "subjects": res.subjects,
        "token_indices": res.token_indices,
        "height": res.height,
        "width": res.width,
        "frames": res.num_frames,
        "num_videos": len(videos),
        "sci": res.sci,
        "sci_weights": {str(k): v for k, v in res.sci_weights.items()},
        "lam_log": res.lam_log,
        "seconds": {"load": round(t_load, 3), "generate": round(t_gen, 3)},
    }
    if res.maps is not None:
        files["attention_pngs"] = [str(p) for p in res.maps.save_png(out / "attention")]
        summary["attention_biased_steps"] = res.maps.biased_steps
        # circular (read from the probabilities LAM biased on biased steps); kept for reference only
        summary["attention_inside_share"] = {str(k): v for k, v in res.maps.inside_share().items()}
        try:
            summary["layout_faithfulness"] = layout_faithfulness(res.maps).to_dict()
        except NoUnbiasedMapsError as exc:
            summary["layout_faithfulness"] = {"error": str(exc)}
    summary["files"] = files
    truth = judge_toyworld_videos(model_source(cfg.model), prep.prompt, gen.videos, lay)
    if truth is not None:
        summary["detector"] = truth
    atomic_write_json(out / "result.json", summary)
    print(
        f"wrote {videos[0]} ({res.num_frames} frames {res.width}x{res.height}, {t_gen:.1f}s) and outputs in {out}/"
    )
    for k, v in enumerate(truth or []):
        print(verdict_line(v, videos[k]))
    return 0
