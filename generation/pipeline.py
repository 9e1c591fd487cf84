"""The Wan pipeline as vidlab uses it: ``GenerateConfig``, model check and load, call arguments, uint8 frames,
and the one generation recipe (install Comp-Attn, generate, remove, convert) every app calls.

``vidlab generate``, the compbench worker, the demo and the toy-world evaluation all go through
``load_pipeline`` and ``generate_video``, so a setting means the same thing everywhere. Importing this module
needs no torch or diffusers (they are imported where used).

A model may record its own sampling settings (``model_settings``: the trained toy-world folder's
``toyworld.json`` ``generate`` entry; the built-in tiny models' sizes). ``vidlab generate`` uses them unless the
user sets them; ``GenerateConfig.for_model(name)`` is the same in Python; and the pipeline ``load_pipeline``
returns carries them (``pipe.vidlab_call_defaults``), so a plain ``pipe(prompt=...)`` uses the model's own size,
frames, steps and guidance instead of diffusers' 480x832x81::

    pipe = load_pipeline(GenerateConfig(model="toyworld"))
    video = pipe(prompt="a red circle to the left of a blue square").frames[0]   # 5 frames of 64x64
    video = pipe(prompt="a green star", num_inference_steps=20).frames[0]      # any keyword still wins
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import re
import time
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from vidlab.config import in_range as _range
from vidlab.config import validate
from vidlab.generation.config import CompAttnConfig
from vidlab.generation.errors import ModelNotFoundError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from vidlab.generation.comp_attn import CompAttnResult

TINY_MODELS = {"tiny": "wan2.1", "tiny-wan2.2": "wan2.2"}
# Trained pipelines that ship inside the package, by name (so presets work from an installed wheel too).
SHIPPED_MODELS = {"toyworld": Path(__file__).resolve().parent / "toyworld" / "weights"}
# vidlab's own pipeline components a model folder may name (diffusers loads such a class only once its module is
# imported, and never imports a module because a folder names it): only these are imported, and only when named
OWN_COMPONENT_MODULES = ("vidlab.generation.toyworld.minilm",)


def import_own_components(folder: str | Path) -> list[str]:
    """Import the modules of ``OWN_COMPONENT_MODULES`` that ``folder``'s ``model_index.json`` names (e.g. the toy
    world's MiniLM text encoder), so ``WanPipeline.from_pretrained(folder)`` can build those components; returns
    the modules imported."""
    import importlib
    import json

    try:
        index = json.loads((Path(folder) / "model_index.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    named = {v[0] for v in index.values() if isinstance(v, list) and v and isinstance(v[0], str)}
    own = [module for module in OWN_COMPONENT_MODULES if module in named]
    for module in own:
        importlib.import_module(module)
    return own


class _OwnComponentTypes(logging.Filter):
    """Drops diffusers' "Expected types for text_encoder: (UMT5EncoderModel,), got <vidlab's class>" warning for
    the components of ``OWN_COMPONENT_MODULES``, which stand in for the annotated class on purpose; any other
    type mismatch still warns."""

    def __init__(self, modules: Sequence[str]) -> None:
        super().__init__()
        self.modules = tuple(modules)

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return not (msg.startswith("Expected types for") and any(f"'{m}." in msg for m in self.modules))


DTYPES = ("float32", "bfloat16", "float16")
OFFLOAD = ("none", "model", "sequential")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")

DType = Literal["float32", "bfloat16", "float16"]


def model_source(name: str) -> str:
    """A shipped model's folder for its name (``toyworld``), else ``name`` unchanged."""
    return str(SHIPPED_MODELS[name]) if name in SHIPPED_MODELS else name


@dataclass
class GenerateConfig:
    """Everything ``vidlab generate`` uses: model and sampling settings plus ``comp_attn``.

    Checked on construction (types, ranges, 4k+1 frames, sides, device form), in Python as from a preset.
    """

    model: str = "tiny"  # tiny | tiny-wan2.2 | toyworld (shipped, trained) | hub id (Wan-AI/...-Diffusers) | local pipeline dir
    height: int = field(default=64, metadata=_range(16, None))  # multiple of 16
    width: int = field(default=64, metadata=_range(16, None))  # multiple of 16
    frames: int = field(default=17, metadata=_range(1, None))  # 4k+1
    steps: int = field(default=4, metadata=_range(1, None))
    guidance: float = field(default=5.0, metadata=_range(0.0, None))
    # Wan2.2 low-noise expert's guidance (None = same as guidance)
    guidance_2: float | None = field(default=None, metadata=_range(0.0, None))
    seed: int = field(default=0, metadata=_range(0, 2**64 - 1))  # torch.Generator.manual_seed takes a uint64
    fps: int = field(default=8, metadata=_range(1, None))
    num_videos: int = field(default=1, metadata=_range(1, None))  # videos of the prompt (different noise)
    negative_prompt: str | None = None
    flow_shift: float | None = field(default=None, metadata=_range(0.0, None))  # None keeps the checkpoint's
    dtype: DType = "float32"  # transformer + text encoder dtype
    vae_dtype: DType = "float32"
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    cpu_offload: Literal["none", "model", "sequential"] = "none"
    attention_backend: str | None = None  # native | flex | xformers | ... (None = diffusers' default)
    planner: Literal["rule", "llm"] = "rule"  # when no --layout is given
    # the rule planner's largest box side (fraction of the frame; 1: no cap), for subjects of a known size: LAM
    # draws a subject to fill its box. Measured on the toy world at 0.34 and not kept there
    # (docs/results/toyworld-comp-attn.md)
    planner_max_box: float = field(default=1.0, metadata=_range(0.05, 1.0))
    # the LLM planner's plan cache: on (read and write) | off (neither) | refresh (ask again, keep the new plan);
    # YAML reads a bare on/off as true/false, so those are taken as on/off
    planner_cache: Literal["on", "off", "refresh"] | bool = "on"
    # use an LLM plan whose boxes had to be clamped into the frame (with a warning; never cached)
    planner_accept_repaired: bool = False
    comp_attn: CompAttnConfig = field(default_factory=CompAttnConfig)

    PRESET_DIR: ClassVar[str] = "generate"  # `vidlab generate --preset tiny` reads configs/generate/tiny.yaml

    def __post_init__(self) -> None:
        from vidlab.config import ConfigError

        validate(self)
        if isinstance(self.planner_cache, bool):
            self.planner_cache = "on" if self.planner_cache else "off"
        if (self.frames - 1) % 4:
            raise ConfigError(f"frames: expected 4k+1 (e.g. 9, 17, 33, 81), got {self.frames}")
        for name in ("height", "width"):
            v = getattr(self, name)
            if v % 16:
                raise ConfigError(f"{name}: expected a multiple of 16 (WanPipeline's rule), got {v}")
        if not _DEVICE.match(self.device):
            raise ConfigError(f"device: expected auto, cpu, mps, cuda or cuda:N, got {self.device!r}")

    @classmethod
    def for_model(cls, model: str, **settings: Any) -> GenerateConfig:
        """The config of ``model`` with the sampling settings it records (``model_settings``: size, frames,
        steps, guidance, ...) in place of the dataclass defaults, and ``settings`` over both::

            GenerateConfig.for_model("toyworld")            # 64x64, 5 frames, 12 steps, guidance 6.0
            GenerateConfig.for_model("toyworld", steps=20)  # the same with 20 steps

        ``GenerateConfig(model=...)`` alone keeps the dataclass defaults (the tiny model's sizes)."""
        own = model_settings(model)
        return cls(model=model, **{**(own.values if own else {}), **settings})


# The GenerateConfig keys a model folder may record for itself (its `generate` entry), and the WanPipeline
# keyword each one is.
SAMPLING_KEYS = {
    "height": "height",
    "width": "width",
    "frames": "num_frames",
    "steps": "num_inference_steps",
    "guidance": "guidance_scale",
    "guidance_2": "guidance_scale_2",
    "negative_prompt": "negative_prompt",
}
# other recorded keys that are settings of vidlab rather than pipeline keywords
_RECORDED_EXTRA = ("fps", "planner_max_box")
MODEL_SETTINGS_FILE = "toyworld.json"  # written by `vidlab train-gen-toyworld`; its `generate` entry


@dataclass(frozen=True)
class ModelSettings:
    """The sampling settings a model records for itself (``GenerateConfig`` keys) and where they come from."""

    values: dict[str, Any]
    source: str  # the file they were read from, or "built in" (the tiny models)


def model_settings(name: str) -> ModelSettings | None:
    """The sampling settings model ``name`` records, or None: a model folder's ``toyworld.json`` ``generate``
    entry (the shipped ``toyworld`` model and any folder ``vidlab train-gen-toyworld`` wrote); the built-in
    tiny models' own sizes (``GenerateConfig``'s defaults). Each value is checked like a config value; a bad
    one is a ``ModelNotFoundError`` naming the file and the key. Reads one small JSON file; loads nothing."""
    if name in TINY_MODELS:
        defaults = {f.name: f.default for f in dataclasses.fields(GenerateConfig)}
        keys = ("height", "width", "frames", "steps", "guidance")
        return ModelSettings({k: defaults[k] for k in keys}, "built in")
    meta = Path(model_source(name)).expanduser() / MODEL_SETTINGS_FILE
    if not meta.is_file():
        return None
    try:
        entry = json.loads(meta.read_text(encoding="utf-8")).get("generate") or {}
    except (OSError, ValueError, AttributeError) as exc:
        raise ModelNotFoundError(f"model {name!r}: {meta} is not a readable JSON object ({exc})") from exc
    if not isinstance(entry, dict):
        raise ModelNotFoundError(f"model {name!r}: {meta} 'generate' must be a mapping, got {entry!r}")
    from vidlab.config import ConfigError, check_value

    fields = {f.name: f for f in dataclasses.fields(GenerateConfig)}
    types = typing.get_type_hints(GenerateConfig)
    values: dict[str, Any] = {}
    for key in [*SAMPLING_KEYS, *_RECORDED_EXTRA]:
        if key in entry:
            try:
                values[key] = check_value(
                    entry[key], types[key], f"{meta} generate.{key}", fields[key].metadata
                )
            except ConfigError as exc:
                raise ModelNotFoundError(f"model {name!r}: {exc}") from exc
    return ModelSettings(values, str(meta)) if values else None


def call_defaults(name: str) -> dict[str, Any]:
    """The ``WanPipeline.__call__`` keywords model ``name``'s recorded settings mean (``num_frames``,
    ``num_inference_steps``, ...); empty when it records none (diffusers' own defaults stay)."""
    own = model_settings(name)
    if own is None:
        return {}
    return {SAMPLING_KEYS[k]: v for k, v in own.values.items() if k in SAMPLING_KEYS}


_DEFAULTS_CLASSES: dict[type, type] = {}


def _call_with_defaults(self: Any, *args: Any, **kwargs: Any) -> Any:
    """``pipe(...)`` with every keyword the call leaves out taken from ``pipe.vidlab_call_defaults``."""
    import inspect

    base = type(self)._vidlab_defaults_base
    defaults = getattr(self, "vidlab_call_defaults", None) or {}
    if defaults:
        given = inspect.signature(base.__call__).bind_partial(self, *args, **kwargs).arguments
        kwargs = {**{k: v for k, v in defaults.items() if k not in given}, **kwargs}
    return base.__call__(self, *args, **kwargs)


def with_call_defaults(pipe: Any, defaults: dict[str, Any]) -> Any:
    """``pipe``, whose plain call now fills the keywords it is not given from ``defaults`` (kept, editable, as
    ``pipe.vidlab_call_defaults``). The pipeline stays an instance of its class (a same-named subclass whose
    ``__call__`` has the same signature), so Comp-Attn, offloading and ``save_pretrained`` work as before."""
    import functools
    import inspect

    base = getattr(type(pipe), "_vidlab_defaults_base", type(pipe))
    if base not in _DEFAULTS_CLASSES:

        @functools.wraps(base.__call__)
        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            return _call_with_defaults(self, *args, **kwargs)

        __call__.__signature__ = inspect.signature(base.__call__)  # type: ignore[attr-defined]
        _DEFAULTS_CLASSES[base] = type(
            base.__name__,
            (base,),
            {"__call__": __call__, "_vidlab_defaults_base": base, "__module__": base.__module__,
             "__doc__": base.__doc__},
        )  # fmt: skip
    pipe.__class__ = _DEFAULTS_CLASSES[base]
    pipe.vidlab_call_defaults = dict(defaults)
    return pipe


def planner_kwargs(cfg: GenerateConfig) -> dict[str, Any] | None:
    """The planner options ``cfg`` sets (the rule planner's box cap; the LLM planner's cache mode and whether
    it may use a repaired plan; the LLM planner sizes its own boxes)."""
    if cfg.planner == "rule" and cfg.planner_max_box < 1.0:
        return {"max_box": cfg.planner_max_box}
    if cfg.planner == "llm":
        return {"cache": cfg.planner_cache, "accept_repaired": cfg.planner_accept_repaired}
    return None


def _dtype(name: str):
    import torch

    if name not in DTYPES:
        raise ValueError(f"dtype {name!r} is not one of {DTYPES}")
    return getattr(torch, name)


def check_model(name: str) -> str:
    """``name`` if it can name a Wan pipeline (built-in tiny, a diffusers folder, a hub id), else a one-line
    ``ModelNotFoundError``. Loads nothing: a hub id is only checked for its ``owner/name`` form here."""
    if name in TINY_MODELS:
        return name
    local = Path(model_source(name)).expanduser()
    if local.exists():
        if not local.is_dir():
            raise ModelNotFoundError(
                f"model {name!r} is a file; a local model must be a diffusers pipeline folder"
            )
        if not (local / "model_index.json").is_file():
            raise ModelNotFoundError(
                f"model folder {local} has no model_index.json (not a diffusers pipeline folder; "
                "save one with pipe.save_pretrained(dir))"
            )
        return name
    if _HUB_ID.match(name) and not name.startswith((".", "~")):
        return name
    close = difflib.get_close_matches(name, [*TINY_MODELS, *SHIPPED_MODELS], n=2)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise ModelNotFoundError(
        f"unknown model {name!r}: not a built-in model ({', '.join([*TINY_MODELS, *SHIPPED_MODELS])}), not an existing "
        f"pipeline folder, and not a hub id like Wan-AI/Wan2.1-T2V-1.3B-Diffusers{hint}"
    )


def check_device(cfg: GenerateConfig, setting: str = "device") -> str:
    """The device the config will run on (``auto`` resolved); a one-line ``DeviceUnavailableError`` naming the
    ``setting`` when this machine does not have it. Loads nothing: call it before ``load_pipeline``."""
    from vidlab.devices import cuda_device_count, require_device

    device = require_device(cfg.device, setting=setting)
    if device == "auto":
        return "cuda" if cuda_device_count() > 0 else "cpu"
    return device


def model_token_grid(name: str) -> Any:
    """The ``TokenGrid`` of a model read from its files without loading it (built-in tiny models, local
    pipeline folders: ``vae/config.json`` and ``transformer/config.json``); None when not known before loading
    (a hub id), then ``CompAttn.generate`` checks the size against the loaded pipeline."""
    import json

    from vidlab.generation.layout import TokenGrid

    if name in TINY_MODELS:
        return TokenGrid()
    local = Path(model_source(name)).expanduser()
    try:
        vae = json.loads((local / "vae" / "config.json").read_text(encoding="utf-8"))
        tr = json.loads((local / "transformer" / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    vt, vs = int(vae.get("scale_factor_temporal") or 4), int(vae.get("scale_factor_spatial") or 8)
    pt, ph, pw = (int(p) for p in tr.get("patch_size") or (1, 2, 2))
    return TokenGrid(vt * pt, vs * ph, vs * pw, vt, vs, (pt, ph, pw))


def check_geometry(cfg: GenerateConfig) -> None:
    """Frames and size against the model's token grid, before loading it (where the grid can be read)."""
    grid = model_token_grid(cfg.model)
    if grid is not None:
        grid.shape(cfg.frames, cfg.height, cfg.width)


def pipeline_kwargs(
    cfg: GenerateConfig, pipe: Any, seed: int | Sequence[int] | None = None
) -> dict[str, Any]:
    """The ``WanPipeline.__call__`` keywords a config means (size, steps, guidance of both experts, negative
    prompt, videos per prompt, a seeded generator on the pipeline's device, numpy output).

    ``seed``: None = ``cfg.seed``; a list of seeds = one video per seed in one batched call (a generator per
    video, ``num_videos_per_prompt=len(seeds)``; each video equals its own single-seed call up to float
    rounding of the batched kernels)."""
    import torch

    device = "cpu" if cfg.cpu_offload != "none" else pipe._execution_device
    if seed is not None and not isinstance(seed, int):
        seeds = [int(s) for s in seed]
        if not seeds:
            raise ValueError("seed: an empty list of seeds")
        generator: Any = [torch.Generator(device=device).manual_seed(s) for s in seeds]
        videos = len(seeds)
    else:
        generator = torch.Generator(device=device).manual_seed(cfg.seed if seed is None else int(seed))
        videos = cfg.num_videos
    kwargs: dict[str, Any] = dict(
        height=cfg.height,
        width=cfg.width,
        num_frames=cfg.frames,
        num_inference_steps=cfg.steps,
        guidance_scale=cfg.guidance,
        negative_prompt=cfg.negative_prompt,
        num_videos_per_prompt=videos,
        generator=generator,
        output_type="np",
    )
    if cfg.guidance_2 is not None:
        kwargs["guidance_scale_2"] = cfg.guidance_2
    return kwargs


def load_pipeline(cfg: GenerateConfig) -> Any:
    """Build or load the Wan pipeline the config names, on its device, with offload/backend/shift applied.

    The config's loading settings (model, dtypes, device, offload, attention backend, flow shift) apply here;
    its sampling settings are call arguments (``generate_video`` passes them). A model that records its own
    sampling settings (``model_settings``: the toy-world model, the tiny models) comes back carrying them
    (``with_call_defaults``), so a plain ``pipe(prompt=...)`` uses them; any keyword given to the call wins.
    Other models (a hub checkpoint) keep diffusers' defaults."""
    device = check_device(cfg)
    dtype = _dtype(cfg.dtype)
    if cfg.model in TINY_MODELS:
        from vidlab.generation.tiny import build_tiny_pipeline

        pipe = build_tiny_pipeline(TINY_MODELS[cfg.model], seed=0, dtype=dtype)
    else:
        from diffusers import AutoencoderKLWan, WanPipeline

        check_model(cfg.model)
        local = Path(model_source(cfg.model)).expanduser()
        src = str(local) if local.exists() else cfg.model
        if not local.exists():  # a hub id: fail fast (one line) when it is neither cached nor reachable
            from vidlab.hub import require_hub

            require_hub(
                cfg.model,
                what="Wan pipeline",
                setting="model",
                markers=("model_index.json",),
                use="--model DIR (model=DIR)",
            )
        own = import_own_components(local) if local.exists() else []
        type_note = logging.getLogger("diffusers.pipelines.pipeline_utils")
        quiet = _OwnComponentTypes(own)
        type_note.addFilter(quiet)
        try:
            vae = AutoencoderKLWan.from_pretrained(src, subfolder="vae", dtype=_dtype(cfg.vae_dtype))
            pipe = WanPipeline.from_pretrained(src, vae=vae, dtype=dtype)
        except (OSError, ValueError) as exc:  # hub: not found / offline; folder: missing or broken files
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelNotFoundError(
                f"could not load Wan pipeline {cfg.model!r} (a hub id needs the network or a cached copy; "
                f"a folder needs a diffusers layout): {first}"
            ) from exc
        finally:
            type_note.removeFilter(quiet)
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
        pipe.to(device)
    pipe.set_progress_bar_config(disable=False, leave=False, desc="denoising")
    defaults = call_defaults(cfg.model)
    if defaults:
        # the prompt rows the model was trained with (the toy world's 16): diffusers' own call pads to 512, and
        # this model then draws its subjects less often (docs/guides/comp-attn.md, "A model's own settings")
        from vidlab.generation.subjects import WAN_TEXT_LENGTH, model_text_length

        rows = model_text_length(pipe.tokenizer)
        if rows != WAN_TEXT_LENGTH:
            defaults["max_sequence_length"] = rows
    return with_call_defaults(pipe, defaults) if defaults else pipe


def to_uint8(frames: Any) -> np.ndarray:
    """Frames as uint8 (float frames in [0, 1] are clipped, scaled by 255 and rounded; uint8 kept as is)."""
    import numpy as np

    arr = np.asarray(frames)
    if arr.dtype != np.uint8:
        arr = (np.clip(arr, 0.0, 1.0) * 255.0).round().astype(np.uint8)
    return arr


@dataclass
class Generation:
    """One ``generate_video`` call: what Comp-Attn did (``result``), every video as uint8, and the time."""

    result: CompAttnResult
    videos: list[np.ndarray]  # one uint8 [F, H, W, 3] array per video of the prompt
    seconds: float

    @property
    def frames(self) -> np.ndarray:
        """The first video (uint8 [F, H, W, 3])."""
        return self.videos[0]


def generate_video(
    pipe: Any,
    cfg: GenerateConfig,
    prompt: str,
    layout: Any = None,
    *,
    subjects: list[str] | None = None,
    seed: int | Sequence[int] | None = None,
    comp_attn: CompAttnConfig | None = None,
    require_subjects: bool = False,
) -> Generation:
    """The one recipe: install Comp-Attn (``comp_attn`` or ``cfg.comp_attn``), generate, remove, uint8 frames.

    ``layout``: a ``Layout``, a path, ``PreparedInputs`` from ``prepare_inputs``, or None to plan it with
    ``cfg.planner``. ``seed`` overrides ``cfg.seed``; a list of seeds gives one video per seed in one batched
    call (``videos[i]`` is seed ``i``'s). The very same processors are back on ``pipe`` afterwards,
    also when generation fails.
    """
    from vidlab.generation.comp_attn import apply_comp_attn

    with apply_comp_attn(pipe, comp_attn if comp_attn is not None else cfg.comp_attn) as comp:
        kwargs = pipeline_kwargs(cfg, pipe, seed=seed)
        t0 = time.perf_counter()
        res = comp.generate(
            prompt,
            layout=layout,
            subjects=subjects,
            planner=cfg.planner,
            planner_kwargs=planner_kwargs(cfg),
            require_subjects=require_subjects,
            **kwargs,
        )
        seconds = time.perf_counter() - t0
    return Generation(res, [to_uint8(v) for v in res.output.frames], seconds)
