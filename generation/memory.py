"""The memory a generation request needs, estimated before anything loads or allocates, against what is free.

``vidlab generate --height 100000 --width 100000`` would otherwise allocate its latents, run out of memory
and end in an out-of-memory traceback. :func:`check_request_memory` refuses it first, in one line naming the
settings and the estimate.

The estimate is a **lower bound**, built from the model's config files and the call settings (size, frames,
videos per prompt, dtypes), so a refused request cannot fit, while one that passes may still run out
(attention kernels that materialise the score matrix, allocator fragmentation, other processes):

- ``weights``: every parameter of the transformer(s), text encoder and VAE at its load dtype, counted from the
  safetensors headers of a local folder (0 for the built-in tiny models, which are a few hundred kB);
- ``latents``: the float32 latents and one noise prediction, ``videos x z_dim x T' x H' x W'``;
- ``transformer``: one block's live activations during a forward pass (classifier-free guidance runs its two
  passes one after the other): ``videos x tokens x max(4 x dim, dim + 2 x ffn_dim)`` at the transformer dtype
  (the hidden states with q, k and v, or with the feed-forward's two inner tensors); no attention matrix;
- ``vae_decode``: the decoded video at the VAE dtype plus its float32 copy that the pipeline returns, and one
  full-resolution decoder feature map (``decoder_base_dim x 4 frames x H x W``, two live);

``needed = weights on the device + latents + max(transformer, vae_decode)``: the denoising loop and the decode
do not overlap. On a GPU the weights count as the largest component with ``cpu_offload=model`` and not at all
with ``sequential``. Free memory: ``MemAvailable`` (bounded by a cgroup limit) for the CPU,
``torch.cuda.mem_get_info`` for a CUDA device; an unknown amount (MPS) is never refused.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vidlab.generation.errors import GenerationInputError

__all__ = [
    "MemoryEstimate",
    "ModelDims",
    "RequestTooLargeError",
    "available_memory",
    "check_request_memory",
    "dims_from_pipe",
    "estimate_request",
    "model_dims",
]

_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
_SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1}
_COMPONENTS = ("transformer", "transformer_2", "text_encoder", "vae")


class RequestTooLargeError(GenerationInputError):
    """A request whose estimated memory (a lower bound) exceeds what the device has free."""


@dataclass(frozen=True)
class ModelDims:
    """What the estimate reads from a model's configs: the transformer and VAE shapes and parameter counts."""

    dim: int  # num_attention_heads x attention_head_dim
    ffn_dim: int
    patch: tuple[int, int, int]
    z_dim: int
    temporal: int  # VAE factors
    spatial: int
    decoder_dim: int  # the decoder's channels at full resolution
    params: dict[str, int] = field(default_factory=dict)  # component -> parameter count (when known)


def _dims_from_configs(tr: Mapping[str, Any], vae: Mapping[str, Any], params: dict[str, int]) -> ModelDims:
    heads, head_dim = int(tr.get("num_attention_heads") or 1), int(tr.get("attention_head_dim") or 1)
    mult = list(vae.get("dim_mult") or [1])
    base = int(vae.get("decoder_base_dim") or vae.get("base_dim") or 1)
    pt, ph, pw = (int(p) for p in (tr.get("patch_size") or (1, 2, 2)))
    return ModelDims(
        dim=heads * head_dim,
        ffn_dim=int(tr.get("ffn_dim") or 4 * heads * head_dim),
        patch=(pt, ph, pw),
        z_dim=int(vae.get("z_dim") or 16),
        temporal=int(vae.get("scale_factor_temporal") or 4),
        spatial=int(vae.get("scale_factor_spatial") or 8),
        decoder_dim=base * int(mult[0]),
        params=params,
    )


def _safetensors_params(path: Path) -> int:
    """Parameters in a safetensors file, from its JSON header alone (8-byte length, then the header)."""
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(n))
    return sum(math.prod(v.get("shape") or [1]) for k, v in header.items() if k != "__metadata__")


def _folder_params(folder: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for comp in _COMPONENTS:
        files = sorted((folder / comp).glob("*.safetensors")) if (folder / comp).is_dir() else []
        try:
            if files:
                out[comp] = sum(_safetensors_params(f) for f in files)
        except (OSError, ValueError, struct.error):
            continue  # an unreadable header: that component's weights are not counted (a lower bound still)
    return out


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def model_dims(model: str) -> ModelDims | None:
    """The dims of a model named as ``GenerateConfig.model`` is, read from files without loading anything: the
    built-in tiny models (their constants), a local pipeline folder, or a hub id already in the local cache;
    None when they cannot be known before loading."""
    from vidlab.generation.pipeline import TINY_MODELS, model_source

    if model in TINY_MODELS:
        from vidlab.generation.tiny import TRANSFORMER_KWARGS, VAE_KWARGS

        return _dims_from_configs(TRANSFORMER_KWARGS, {**VAE_KWARGS, "scale_factor_spatial": 8}, {})
    local = Path(model_source(model)).expanduser()
    if local.is_dir():
        tr, vae = _read_json(local / "transformer" / "config.json"), _read_json(local / "vae" / "config.json")
        return _dims_from_configs(tr, vae, _folder_params(local)) if tr and vae else None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency of diffusers
        return None
    found = [try_to_load_from_cache(model, f"{c}/config.json") for c in ("transformer", "vae")]
    if not all(isinstance(f, str) for f in found):
        return None
    tr, vae = _read_json(Path(str(found[0]))), _read_json(Path(str(found[1])))
    return (
        _dims_from_configs(tr, vae, _folder_params(Path(str(found[0])).parent.parent)) if tr and vae else None
    )


@dataclass(frozen=True)
class MemoryEstimate:
    """A request's estimated memory (bytes, a lower bound) by part, on ``device``, and what is free there."""

    parts: dict[str, int]
    needed: int
    device: str
    available: int | None

    @property
    def fits(self) -> bool:
        return self.available is None or self.needed <= self.available

    def describe(self) -> str:
        parts = ", ".join(f"{k} {human_bytes(v)}" for k, v in self.parts.items() if v)
        return f"at least {human_bytes(self.needed)} ({parts})"


def human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


def estimate_request(cfg: Any, dims: ModelDims, device: str) -> MemoryEstimate:
    """The lower-bound estimate (module docstring) of ``cfg`` (a ``GenerateConfig``) on ``device``."""
    b = int(cfg.num_videos)
    t_lat = (int(cfg.frames) - 1) // dims.temporal + 1
    h_lat, w_lat = int(cfg.height) // dims.spatial, int(cfg.width) // dims.spatial
    pt, ph, pw = dims.patch
    tokens = math.ceil(t_lat / pt) * (h_lat // ph) * (w_lat // pw)
    tr_bytes, vae_bytes = _BYTES.get(cfg.dtype, 4), _BYTES.get(cfg.vae_dtype, 4)
    latents = 2 * b * dims.z_dim * t_lat * h_lat * w_lat * 4
    act = b * tokens * max(4 * dims.dim, dims.dim + 2 * dims.ffn_dim) * tr_bytes
    pixels = b * 3 * int(cfg.frames) * int(cfg.height) * int(cfg.width)
    decode = (
        pixels * (vae_bytes + 4) + 2 * dims.decoder_dim * 4 * int(cfg.height) * int(cfg.width) * vae_bytes
    )
    weights = {
        c: n * (vae_bytes if c == "vae" else tr_bytes) for c, n in dims.params.items() if c in _COMPONENTS
    }
    on_gpu = not device.startswith("cpu")
    if on_gpu and cfg.cpu_offload == "sequential":
        w_dev = 0
    elif on_gpu and cfg.cpu_offload == "model":
        w_dev = max(weights.values(), default=0)
    else:
        w_dev = sum(weights.values())
    parts = {"weights": w_dev, "latents": latents, "transformer": act, "vae_decode": decode}
    return MemoryEstimate(parts, w_dev + latents + max(act, decode), device, available_memory(device))


def _cgroup_free() -> int | None:
    """What the cgroup (v2) memory limit leaves, when one is set."""
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
    except (OSError, ValueError):
        return None
    return None if limit == "max" else max(0, int(limit) - used)


def available_memory(device: str) -> int | None:
    """Free bytes on ``device`` (``cpu``, ``cuda``, ``cuda:N``); None when it cannot be told (then nothing is
    refused). A CUDA device is asked through torch (the only import this needs; the caller has checked the
    device already)."""
    if device.startswith("cuda"):
        try:
            import torch

            index = int(device.partition(":")[2] or 0)
            return int(torch.cuda.mem_get_info(index)[0])
        except Exception:  # noqa: BLE001 - no driver / no device: nothing to compare with
            return None
    if device != "cpu":
        return None
    free: int | None = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        free = None
    if free is None:
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            free = None
    group = _cgroup_free()
    if group is not None:
        free = group if free is None else min(free, group)
    return free


def check_request_memory(cfg: Any, device: str, dims: ModelDims | None = None) -> MemoryEstimate | None:
    """Refuse (``RequestTooLargeError``, one line naming the settings and the estimate) a request whose
    lower-bound estimate exceeds the free memory of ``device``; the estimate when it fits, None when the
    model's dims cannot be known before loading (``model_dims``). Allocates nothing."""
    dims = dims if dims is not None else model_dims(cfg.model)
    if dims is None:
        return None
    est = estimate_request(cfg, dims, device)
    if est.fits:
        return est
    where = "the CPU (RAM)" if device == "cpu" else device
    videos = f", num_videos={cfg.num_videos}" if cfg.num_videos > 1 else ""
    raise RequestTooLargeError(
        f"height={cfg.height} width={cfg.width} frames={cfg.frames}{videos} needs {est.describe()}, a lower "
        f"bound, but {where} has {human_bytes(est.available or 0)} free: lower height/width/frames"
        + ("/num_videos" if videos else "")
        + (" or set cpu_offload=model" if device != "cpu" and cfg.cpu_offload == "none" else "")
    )


def dims_from_pipe(pipe: Any) -> ModelDims:
    """The dims of a loaded pipeline (for a hub model whose configs were not known before loading)."""
    params = {}
    for comp in _COMPONENTS:
        module = getattr(pipe, comp, None)
        if module is not None and hasattr(module, "parameters"):
            params[comp] = sum(int(p.numel()) for p in module.parameters())
    return _dims_from_configs(dict(pipe.transformer.config), dict(pipe.vae.config), params)
