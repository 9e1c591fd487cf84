"""open_clip models behind one small interface: load by spec, embed images/texts, save as safetensors.

Specs ``load_model`` accepts:
- ``"vidlab-tiny"`` / ``"vidlab-small"``: built-in configs registered through open_clip's public
  ``add_model_config``; random weights from a fixed seed (``"vidlab-tiny:seed3"`` picks another seed).
  They need no network and serve tests and the toy worlds.
- ``"ViT-B-32:openai"``: any open_clip architecture with a pretrained tag (downloads in real use) or a
  ``.safetensors`` file path after the colon; a bare architecture name is randomly initialised.
- ``"hf-hub:org/name"``: an open_clip model on the Hugging Face hub.
- ``"/path/to/dir"`` (or ``"local-dir:/path"``): ``open_clip_config.json`` + exactly one ``*.safetensors``,
  as written by :meth:`ClipModel.save`. vidlab loads exactly that file, the one its tag fingerprints
  (never open_clip's own pick, which prefers ``open_clip_pytorch_model.bin`` over ``model.safetensors``);
  a folder with several weight files, or a ``.bin``/``.pt``/``.pth`` beside the safetensors, is refused
  (:class:`AmbiguousWeightsError`) rather than guessed.

``ClipModel.tag`` names the weights (it enters frame-index cache keys): ``arch:seedN`` for random
weights, ``arch:tag`` for pretrained tags, ``hf-hub:...`` for the hub, and ``arch@<weights fingerprint>``
for local files, so retrained weights never reuse a stale cache.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import logging
import os
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vidlab.errors import UserError

TINY_MODEL = "vidlab-tiny"
SMALL_MODEL = "vidlab-small"
BUILTIN_DIR = Path(__file__).resolve().parent / "model_configs"
# Bump when the image preprocessing below changes: it is part of every frame-index cache key.
PREPROCESS_VERSION = "torch-resize-crop-v1"
CONFIG_NAME = "open_clip_config.json"
WEIGHTS_NAME = "open_clip_model.safetensors"
_SEED_RE = re.compile(r"^seed(\d+)$")
# files whose presence in the local hub cache means an open_clip hub model was downloaded before
_HUB_MARKERS = ("open_clip_config.json", "open_clip_model.safetensors", "open_clip_pytorch_model.bin")
_HUB_USE = "the folder as the CLIP model (--clip-model DIR, clip_model=DIR)"
_HUB_FILES = '--include "*.json" "*.safetensors"'  # vidlab loads exactly one safetensors file from a folder


class ModelLoadError(UserError, RuntimeError):
    """A model spec that names something that exists but cannot be loaded (e.g. offline download)."""


class AmbiguousWeightsError(ModelLoadError):
    """A model folder holding several weight files (or a pickle beside the safetensors): which one is meant?"""


class UnknownModelError(UserError, ValueError):
    """A model spec naming no known architecture or pretrained tag; the message lists close names."""


class MissingWeightsError(UserError, FileNotFoundError):
    """A weights file (or a model directory's safetensors) that is not there."""


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")


def local_weights(d: Path, spec: str) -> Path:
    """The one weights file of model folder ``d``: exactly one ``.safetensors`` and no pickled weights.

    Anything else is an error naming the files, so the file vidlab fingerprints is the file it loads.
    """
    from vidlab.io import is_temporary

    files = sorted(
        p for p in d.iterdir() if p.suffix in WEIGHT_SUFFIXES and p.is_file() and not is_temporary(p.name)
    )
    safe = [p for p in files if p.suffix == ".safetensors"]
    pickles = [p.name for p in files if p.suffix != ".safetensors"]
    if not safe:
        extra = f" (found {pickles}: convert them to safetensors; vidlab never unpickles)" if pickles else ""
        raise MissingWeightsError(f"model {spec!r}: no .safetensors weights file in {str(d)!r}{extra}")
    if len(safe) > 1 or pickles:
        raise AmbiguousWeightsError(
            f"model {spec!r}: folder {str(d)!r} holds several weight files {[p.name for p in files]}; "
            "keep exactly one .safetensors file there (vidlab loads only safetensors, and only the file it "
            "fingerprints), or pass 'ARCH:/path/to/file.safetensors'"
        )
    return safe[0]


# Text embeddings kept per model (a question asked again, the same prompt in every episode): 4096 entries of a
# 512-d float32 embedding are 8 MB.
TEXT_CACHE_SIZE = 4096


class TextCache:
    """A bounded least-recently-used cache of text embeddings (float32 [D] per text).

    It is cleared when the model's parameters change (:meth:`check`: any in-place update, an optimiser step or
    ``load_state_dict``, bumps a tensor's version counter), so training never reads a stale embedding; after
    replacing parameter objects, call :meth:`ClipModel.refresh_tag` (or :meth:`clear`). ``size`` 0 turns it off."""

    def __init__(self, size: int = TEXT_CACHE_SIZE) -> None:
        if int(size) < 0:
            raise ValueError(f"text cache size must be >= 0, got {size}")
        from collections import OrderedDict

        self.size = int(size)
        self._items: OrderedDict[str, np.ndarray] = OrderedDict()
        self._weights: Any = None
        self._params: list[Any] | None = None
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def check(self, module: Any) -> None:
        """Forget every entry if ``module``'s parameters changed since the last call."""
        if self._params is None:  # listing a module's parameters costs more than reading their versions
            self._params = list(module.parameters())
        sig = sum(p._version for p in self._params)
        if sig != self._weights:
            self._items.clear()
            self._weights = sig

    def get(self, text: str) -> np.ndarray | None:
        hit = self._items.get(text)
        if hit is None:
            self.misses += 1
            return None
        self._items.move_to_end(text)
        self.hits += 1
        return hit

    def put(self, text: str, emb: np.ndarray) -> None:
        if not self.size:
            return
        self._items[text] = emb
        self._items.move_to_end(text)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()
        self._weights = None
        self._params = None


class QueryTruncatedWarning(UserWarning):
    """A text longer than the model's context length was truncated before embedding."""


_registered = False


def register_builtin_configs() -> None:
    """Add vidlab's small configs to open_clip's registry (public ``add_model_config``); idempotent."""
    global _registered
    if _registered:
        return
    import open_clip

    if TINY_MODEL not in open_clip.list_models():
        open_clip.add_model_config(BUILTIN_DIR)
    _registered = True


def builtin_models() -> list[str]:
    """Names of vidlab's built-in configs (no download needed)."""
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.json"))


def _resolve_device(device: str | None) -> str:
    import torch

    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    return str(device)


def _resolve_precision(precision: str | None, device: str) -> str:
    if precision in (None, "auto"):
        return "fp16" if device.startswith("cuda") else "fp32"
    if precision not in ("fp32", "fp16", "bf16"):
        raise ValueError(f"precision {precision!r} must be one of auto, fp32, fp16, bf16")
    if precision != "fp32" and not device.startswith("cuda"):
        raise ValueError(
            f"precision {precision!r} is for GPUs; on device {device!r} use fp32 (bf16 is ~5x slower than fp32 "
            "on this kind of CPU, fp16 matmuls are not accelerated)"
        )
    return precision


def _close(name: str, choices: Sequence[str], n: int = 5) -> list[str]:
    lower = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(name.lower(), list(lower), n=n, cutoff=0.5)
    subs = [c for c in choices if name.lower() in c.lower() and lower.get(c.lower()) not in hits]
    return [lower[h] for h in hits] + subs[: max(0, n - len(hits))]


def _unknown_arch(arch: str, spec: str, names: Sequence[str] | None = None) -> UnknownModelError:
    if names is None:
        import open_clip

        names = open_clip.list_models()
    close = _close(arch, names)
    hint = f" Close names: {', '.join(close)}." if close else ""
    return UnknownModelError(
        f"unknown model {spec!r}: no open_clip architecture named {arch!r}.{hint} "
        f"Built-in (no download): {', '.join(builtin_models())}; or pass 'hf-hub:org/name' or a model directory."
    )


def _architecture_names() -> list[str] | None:
    """open_clip's architecture names read from its ``model_configs/`` folder without importing open_clip
    (which imports torch), plus vidlab's built-ins; None when open_clip's files cannot be found."""
    import importlib.util

    try:
        found = importlib.util.find_spec("open_clip")
    except (ImportError, ValueError):
        return None
    where = list(found.submodule_search_locations or []) if found is not None else []
    configs = Path(where[0]) / "model_configs" if where else None
    if configs is None or not configs.is_dir():
        return None
    return sorted({p.stem for p in configs.glob("*.json")} | set(builtin_models()))


def _local_folder(spec: str) -> tuple[Path, Path] | None:
    """The folder a spec names (``local-dir:PATH``, or a path) and its one safetensors file, checked to exist
    with its config; None when the spec names no folder (an architecture, a hub id)."""
    local = spec[len("local-dir:") :] if spec.startswith("local-dir:") else spec
    looks_like_path = (
        spec.startswith(("local-dir:", "/", "./", "../", "~")) or os.sep in spec and ":" not in spec
    )
    if not (Path(local).expanduser().is_dir() or (looks_like_path and not spec.startswith("hf-hub:"))):
        return None
    d = Path(local).expanduser()
    if not d.is_dir():
        raise MissingWeightsError(f"model {spec!r}: directory {str(d)!r} does not exist")
    if not (d / CONFIG_NAME).is_file():
        raise MissingWeightsError(
            f"model {spec!r}: {str(d / CONFIG_NAME)!r} is missing (write it with ClipModel.save)"
        )
    return d, local_weights(d, spec)


def check_model_spec(spec: str | os.PathLike) -> None:
    """Check a CLIP spec without loading anything or importing torch: a local folder must hold its config and
    one safetensors file, a weights path must exist, and an architecture name must be one open_clip knows.
    Raises what :func:`load_model` would raise for the same mistake (one line, close names listed); hub
    specs and pretrained tags are left to :func:`load_model`."""
    spec = str(spec)
    if _local_folder(spec) is not None:
        return
    if spec.startswith("hf-hub:"):
        return
    arch, _, pretrained = spec.partition(":")
    names = _architecture_names()
    if names is not None and arch not in names:
        raise _unknown_arch(arch, spec, names)
    if pretrained and not _SEED_RE.match(pretrained):
        if any(c in pretrained for c in "/\\.") or pretrained.endswith(("safetensors", "bin", "pt", "pth")):
            _check_safetensors_file(Path(pretrained).expanduser(), spec)


class ClipModel:
    """A loaded open_clip model with batched, no-grad, L2-normalised image and text embedding."""

    def __init__(
        self,
        module: Any,
        tokenizer: Any,
        tag: str,
        model_cfg: dict[str, Any] | None,
        device: str = "cpu",
        precision: str = "fp32",
        batch_size: int = 64,
        spec: str | None = None,
        text_cache_size: int = TEXT_CACHE_SIZE,
    ) -> None:
        self.model = module.eval()
        self.text_cache = TextCache(text_cache_size)
        self._text_tower: Any = None  # vidlab.clip.text_tower.TextEncoder, or False for the full pass
        self.text_prefix = True  # False: the full padded pass (the baseline benchmarks compare against)
        self.tokenizer = tokenizer
        self.tag = tag
        self.spec = spec or tag
        self.model_cfg = model_cfg
        self.device = device
        self.precision = precision
        self.batch_size = batch_size
        self.preprocess_cfg: dict[str, Any] = dict(module.visual.preprocess_cfg)
        self.dim = int(module.text_projection.shape[1] if hasattr(module, "text_projection") else 0) or int(
            (model_cfg or {}).get("embed_dim", 0)
        )
        if not self.dim:
            self.dim = int(self.embed_texts([""]).shape[1])

    def __repr__(self) -> str:
        return f"ClipModel(tag={self.tag!r}, dim={self.dim}, device={self.device!r}, precision={self.precision!r})"

    # ----- identity -------------------------------------------------------------------------
    @property
    def image_size(self) -> tuple[int, int]:
        s = self.preprocess_cfg["size"]
        return (s, s) if isinstance(s, int) else (int(s[0]), int(s[1]))

    @property
    def context_length(self) -> int:
        return int(getattr(self.tokenizer, "context_length", 77))

    @property
    def preprocess_id(self) -> str:
        """Preprocessing version + the model's preprocess config; part of frame-index cache keys."""
        cfg = json.dumps(self.preprocess_cfg, sort_keys=True, default=list)
        return f"{PREPROCESS_VERSION}:{hashlib.sha256(cfg.encode()).hexdigest()[:12]}"

    def weights_digest(self) -> str:
        """SHA-256 over the state dict (names, shapes, bytes); use after training to re-tag the model."""
        h = hashlib.sha256()
        for name, t in sorted(self.model.state_dict().items()):
            h.update(f"{name}|{tuple(t.shape)}|{t.dtype}|".encode())
            h.update(t.detach().float().cpu().contiguous().numpy().tobytes())
        return h.hexdigest()

    def refresh_tag(self) -> str:
        """Re-tag after changing the weights in place (e.g. training), so caches keyed by the old tag are not reused."""
        arch = self.tag.split("@")[0].split(":")[0]
        self.tag = f"{arch}@{self.weights_digest()[:16]}"
        self.text_cache.clear()
        return self.tag

    # ----- embedding ------------------------------------------------------------------------
    def _param_dtype(self):
        # the dtype the image's first layer takes: open_clip's fp16 keeps some parameters (the class embedding,
        # listed first) in fp32 and casts only the layers' weights, so the first parameter is the wrong guide
        conv = getattr(getattr(self.model.visual, "conv1", None), "weight", None)
        return conv.dtype if conv is not None else next(self.model.visual.parameters()).dtype

    def preprocess(self, frames: np.ndarray) -> Any:
        """uint8 [B, H, W, 3] -> normalised float tensor [B, 3, S, S] on the model's device (torch ops, no PIL)."""
        import torch
        import torch.nn.functional as F

        cfg = self.preprocess_cfg
        th, tw = self.image_size
        x = torch.from_numpy(np.ascontiguousarray(frames)).to(self.device)
        x = x.permute(0, 3, 1, 2).float().div_(255.0)
        h, w = x.shape[-2:]
        mode = cfg.get("interpolation", "bicubic")
        mode = mode if mode in ("bicubic", "bilinear", "nearest") else "bicubic"
        kw = {"antialias": True, "align_corners": False} if mode != "nearest" else {}
        resize_mode = cfg.get("resize_mode", "shortest")
        if resize_mode == "squash":
            x = F.interpolate(x, size=(th, tw), mode=mode, **kw)
        elif resize_mode == "longest":
            scale = min(th / h, tw / w)
            nh, nw = max(1, round(h * scale)), max(1, round(w * scale))
            x = F.interpolate(x, size=(nh, nw), mode=mode, **kw)
            fill = float(cfg.get("fill_color", 0)) / 255.0
            out = torch.full((x.shape[0], 3, th, tw), fill, device=x.device)
            top, left = (th - nh) // 2, (tw - nw) // 2
            out[:, :, top : top + nh, left : left + nw] = x
            x = out
        else:  # shortest side to the target, then centre crop (open_clip's default eval transform)
            scale = max(th / h, tw / w)
            nh, nw = max(th, round(h * scale)), max(tw, round(w * scale))
            if (nh, nw) != (h, w):
                x = F.interpolate(x, size=(nh, nw), mode=mode, **kw)
            top, left = (nh - th) // 2, (nw - tw) // 2
            x = x[:, :, top : top + th, left : left + tw]
        x = x.clamp_(0.0, 1.0)
        mean = torch.tensor(cfg["mean"], device=x.device).view(1, 3, 1, 1)
        std = torch.tensor(cfg["std"], device=x.device).view(1, 3, 1, 1)
        return ((x - mean) / std).to(self._param_dtype())

    def embed_images(
        self, frames: np.ndarray | Sequence[Any], batch_size: int | None = None, progress: bool | None = None
    ) -> np.ndarray:
        """Images (uint8 [N, H, W, 3] array, or a list of HxWx3 arrays / PIL images) -> float32 [N, D], unit norm."""
        import torch
        from tqdm.auto import tqdm

        batches = _image_batches(frames, batch_size or self.batch_size)
        n = len(frames)
        out = np.empty((n, self.dim), dtype=np.float32)
        show = progress if progress is not None else n >= 8 * (batch_size or self.batch_size)
        done = 0
        with torch.inference_mode(), tqdm(total=n, desc="embed images", unit="img", disable=not show) as bar:
            for batch in batches:
                feats = self.model.encode_image(self.preprocess(batch)).float()
                feats = torch.nn.functional.normalize(feats, dim=-1)
                out[done : done + len(batch)] = feats.cpu().numpy()
                done += len(batch)
                bar.update(len(batch))
        return out

    def token_count(self, text: str) -> int:
        """Number of tokens ``text`` needs including start/end tokens (for the truncation warning)."""
        tok = self.tokenizer
        if hasattr(tok, "encode"):
            return len(tok.encode(text)) + 2
        inner = getattr(tok, "tokenizer", None)
        if inner is not None:
            return len(inner(text)["input_ids"])
        return 0

    def text_tower(self) -> Any:
        """The text tower run over each prompt's own tokens (:mod:`vidlab.clip.text_tower`), or None where only
        the full padded pass is exact."""
        if self._text_tower is None:
            from vidlab.clip.text_tower import text_encoder

            self._text_tower = text_encoder(self.model) or False
        return self._text_tower or None

    def encode_tokens(self, tokens: Any, batch_size: int | None = None) -> Any:
        """Unit-norm float features of token ids [N, context]: the text tower up to each row's end token,
        rows batched by the length they need (the full padded pass where that is not exact)."""
        import torch

        tower = self.text_tower() if self.text_prefix else None
        if tower is None:
            feats = self.model.encode_text(tokens)
        else:
            from vidlab.clip.text_tower import encode_by_length

            feats = encode_by_length(tower, tokens, batch_size or self.batch_size)
        return torch.nn.functional.normalize(feats.float(), dim=-1)

    def embed_texts(
        self, texts: Sequence[str], batch_size: int | None = None, progress: bool | None = None
    ) -> np.ndarray:
        """Texts -> float32 [N, D], unit norm; texts longer than the context are truncated with a warning.

        The text tower runs only over each text's own tokens (:meth:`encode_tokens`); embeddings are kept in a
        bounded cache (:class:`TextCache`, ``text_cache``), so a text asked again costs a lookup."""
        import torch
        from tqdm.auto import tqdm

        if isinstance(texts, str):
            raise TypeError("embed_texts takes a list of strings; wrap a single query as [query]")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"embed_texts: item {i} is {type(t).__name__}, not str")
            n_tok = self.token_count(t)
            if n_tok > self.context_length:
                short = t if len(t) <= 60 else t[:57] + "..."
                warnings.warn(
                    f"query {short!r} has {n_tok} tokens, more than the model's context of {self.context_length}; "
                    "it was truncated",
                    QueryTruncatedWarning,
                    stacklevel=2,
                )
        bs = batch_size or self.batch_size
        cache = self.text_cache
        cache.check(self.model)
        found = [cache.get(t) for t in texts]
        todo = list(dict.fromkeys(t for t, e in zip(texts, found) if e is None))  # each new text once
        fresh: dict[str, np.ndarray] = {}
        chunk = max(bs, 8 * bs)  # tokenise a few batches at a time, so that batching by length has choice
        show = progress if progress is not None else len(todo) >= 8 * bs
        with torch.inference_mode(), tqdm(total=len(todo), desc="embed texts", disable=not show) as bar:
            for s in range(0, len(todo), chunk):
                part = todo[s : s + chunk]
                tokens = self.tokenizer(part).to(self.device)
                feats = self.encode_tokens(tokens, bs).cpu().numpy()
                for t, e in zip(part, feats):
                    fresh[t] = e
                    cache.put(t, e.copy())
                bar.update(len(part))
        dim = next((len(e) for e in [*fresh.values(), *(f for f in found if f is not None)]), self.dim)
        out = np.empty((len(texts), dim), dtype=np.float32)
        for i, (t, e) in enumerate(zip(texts, found)):
            out[i] = e if e is not None else fresh[t]
        return out

    # ----- persistence ----------------------------------------------------------------------
    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``open_clip_config.json`` + ``open_clip_model.safetensors`` (atomically); load with ``load_model(dir)``."""
        from safetensors.torch import save_file

        if self.model_cfg is None:
            raise ModelLoadError(f"cannot save {self.tag!r}: its architecture config is unknown")
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        from vidlab.io import atomic_path, atomic_write_text, is_temporary

        others = [
            p.name
            for p in d.iterdir()
            if p.suffix in WEIGHT_SUFFIXES and p.name != WEIGHTS_NAME and not is_temporary(p.name)
        ]
        if others:
            raise AmbiguousWeightsError(
                f"cannot save into {str(d)!r}: it already holds other weight files {others}, and a model "
                "folder must hold exactly one (load_model would refuse it)"
            )
        state = {k: v.detach().cpu().contiguous() for k, v in self.model.state_dict().items()}
        with atomic_path(d / WEIGHTS_NAME) as tmp:
            save_file(state, str(tmp), metadata={"format": "pt", "vidlab_tag": self.tag})
        cfg = {
            "model_cfg": self.model_cfg,
            "preprocess_cfg": self.preprocess_cfg,
            "vidlab": {"source_tag": self.tag},
        }
        atomic_write_text(d / CONFIG_NAME, json.dumps(cfg, indent=2, default=list))
        return d


def _image_batches(frames: np.ndarray | Sequence[Any], bs: int):
    """Yield uint8 [B, H, W, 3] arrays; lists of differently sized images go one by one."""
    if isinstance(frames, np.ndarray):
        if frames.ndim == 3:
            raise ValueError(f"frames has shape {frames.shape}; pass a batch [N, H, W, 3] (use frames[None])")
        if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
            raise ValueError(f"frames must be uint8 [N, H, W, 3], got {frames.dtype} {frames.shape}")
        for s in range(0, len(frames), bs):
            yield frames[s : s + bs]
        return
    arrays = []
    for i, f in enumerate(frames):
        a = np.asarray(f.convert("RGB")) if hasattr(f, "convert") else np.asarray(f)
        if a.ndim != 3 or a.shape[-1] != 3 or a.dtype != np.uint8:
            raise ValueError(f"frame {i} must be uint8 [H, W, 3], got {a.dtype} {a.shape}")
        arrays.append(a)
    start = 0
    while start < len(arrays):
        end = start + 1
        while end < len(arrays) and end - start < bs and arrays[end].shape == arrays[start].shape:
            end += 1
        yield np.stack(arrays[start:end])
        start = end


@contextlib.contextmanager
def _quiet_open_clip():
    """Silence open_clip's root-logger 'initialized randomly' warning when random weights are what was asked."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.ERROR))
    try:
        yield
    finally:
        root.setLevel(level)


def _check_safetensors_file(path: Path, spec: str) -> None:
    if not path.is_file():
        raise MissingWeightsError(f"model {spec!r}: weights file {str(path)!r} does not exist")
    if path.suffix != ".safetensors":
        raise ModelLoadError(
            f"model {spec!r}: {str(path)!r} is not a .safetensors file; vidlab never unpickles weight files "
            "(convert with safetensors.torch.save_file(torch.load(p, weights_only=True), 'w.safetensors'))"
        )


def _weights_tag(arch: str, weights: Path) -> str:
    from vidlab.identity import file_fingerprint

    return f"{arch}@{file_fingerprint(weights)[:16]}"


def load_model(
    spec: str | os.PathLike,
    device: str | None = "auto",
    precision: str | None = "auto",
    batch_size: int = 64,
    seed: int | None = None,
) -> ClipModel:
    """Load a CLIP model by spec (see module docstring); no network for built-ins and local files."""
    import open_clip
    import torch

    register_builtin_configs()
    spec = str(spec)
    dev = _resolve_device(device)
    prec = _resolve_precision(precision, dev)
    folder = _local_folder(spec)
    if folder is not None:
        d, weights = folder
        cfg_path = d / CONFIG_NAME
        from vidlab.io import require_regular_file

        require_regular_file(cfg_path, "model config")
        try:
            full_cfg = json.loads(cfg_path.read_text())
        except json.JSONDecodeError as e:
            raise ModelLoadError(f"model {spec!r}: {str(cfg_path)!r} is not valid JSON: {e}") from e
        model_cfg = full_cfg.get("model_cfg") if isinstance(full_cfg, dict) else None
        if not isinstance(model_cfg, dict):
            raise ModelLoadError(f"model {spec!r}: {str(cfg_path)!r} has no 'model_cfg' mapping")
        with _quiet_open_clip():  # architecture only: the weights come from exactly `weights` below
            module = open_clip.create_model(
                f"local-dir:{d}", device=dev, precision=prec, load_weights=False, pretrained_text=False
            )
        try:
            open_clip.load_checkpoint(module, str(weights), strict=True)
        except Exception as e:  # noqa: BLE001 - mismatched keys/shapes, corrupt file
            raise ModelLoadError(f"model {spec!r}: cannot load {str(weights)!r}: {e}") from e
        tokenizer = open_clip.get_tokenizer(f"local-dir:{d}")
        arch = full_cfg.get("vidlab", {}).get("source_tag", d.name).split("@")[0].split(":")[0]
        return ClipModel(
            module, tokenizer, _weights_tag(arch, weights), model_cfg, dev, prec, batch_size, spec
        )

    if spec.startswith("hf-hub:"):
        from vidlab.hub import require_hub

        require_hub(
            spec[len("hf-hub:") :],
            what="CLIP model",
            markers=_HUB_MARKERS,
            use=_HUB_USE,
            download_args=_HUB_FILES,
        )
        try:
            module = open_clip.create_model(spec, device=dev, precision=prec)
            tokenizer = open_clip.get_tokenizer(spec)
        except Exception as e:  # network/offline/missing repo
            raise ModelLoadError(f"model {spec!r}: could not load from the Hugging Face hub: {e}") from e
        return ClipModel(
            module, tokenizer, spec, open_clip.get_model_config(spec), dev, prec, batch_size, spec
        )

    arch, _, pretrained = spec.partition(":")
    if arch not in open_clip.list_models():
        raise _unknown_arch(arch, spec)
    model_cfg = open_clip.get_model_config(arch)
    tokenizer = open_clip.get_tokenizer(arch)
    m = _SEED_RE.match(pretrained or "")
    if not pretrained or m:
        s = int(m.group(1)) if m else (0 if seed is None else seed)
        with torch.random.fork_rng(devices=[]), _quiet_open_clip():
            torch.manual_seed(s)
            module = open_clip.create_model(arch, device=dev, precision=prec, pretrained_text=False)
        return ClipModel(module, tokenizer, f"{arch}:seed{s}", model_cfg, dev, prec, batch_size, spec)
    tags = open_clip.list_pretrained_tags_by_model(arch)
    if pretrained in tags:
        repo = (open_clip.get_pretrained_cfg(arch, pretrained) or {}).get("hf_hub", "").strip("/")
        if repo:  # weights on the hub: fail fast offline instead of open_clip's retries
            from vidlab.hub import require_hub

            require_hub(
                repo,
                what=f"CLIP weights {spec!r}, hub repo",
                markers=_HUB_MARKERS,
                use=_HUB_USE,
                download_args=_HUB_FILES,
            )
        try:
            module = open_clip.create_model(arch, pretrained=pretrained, device=dev, precision=prec)
        except Exception as e:
            raise ModelLoadError(
                f"model {spec!r}: could not fetch pretrained weights {pretrained!r}: {e}"
            ) from e
        return ClipModel(module, tokenizer, f"{arch}:{pretrained}", model_cfg, dev, prec, batch_size, spec)
    looks_like_file = any(c in pretrained for c in "/\\.") or pretrained.endswith(
        ("safetensors", "bin", "pt", "pth")
    )
    if looks_like_file:
        weights = Path(pretrained).expanduser()
        _check_safetensors_file(weights, spec)
        module = open_clip.create_model(arch, pretrained=str(weights), device=dev, precision=prec)
        return ClipModel(
            module, tokenizer, _weights_tag(arch, weights), model_cfg, dev, prec, batch_size, spec
        )
    close = _close(pretrained, tags)
    raise UnknownModelError(
        f"unknown model {spec!r}: {arch!r} has no pretrained tag {pretrained!r}. "
        f"Close: {', '.join(close) or '-'}; all tags: {', '.join(tags) or '(none)'}; or use 'seedN' for random weights."
    )
