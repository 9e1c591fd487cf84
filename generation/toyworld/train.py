"""Train the toy world's Wan on CPU: a small AutoencoderKLWan, then WanTransformer3DModel + UMT5 with flow matching.

Stages (each resumes from its last checkpoint after a kill, bit for bit: every batch and every noise draw comes
from a generator seeded by (seed, stage, step), and model + optimiser state are checkpointed atomically):

1. **vae** -- ``AutoencoderKLWan`` (4x in space, 4x in time) on whole full-frame clips of every kind, so both causal
   chunks (frame 0 alone, then frames 1-4) and the per-frame attention see what the pipeline will decode.
   Loss: MSE + L1 on the reconstruction (shape pixels weighted ``vae_fg_weight`` x), a small KL.
2. **latents** -- a fixed training set of ``clips`` scenes (caption mix ``mix``, mostly single subjects; the held-out
   validation and test captions never appear) is rendered and encoded once (posterior mean); the per-channel
   mean/std go into the VAE config (``latents_mean``/``latents_std``), where ``WanPipeline`` reads them.
3. **vaedec** -- the decoder alone, encoder frozen (the latents do not change), so it can run in a second process
   beside stage 4 (``stages=[vae,vaedec]``); the shipped VAE is the stage-1 encoder + this decoder.
4. **dit** -- ``WanTransformer3DModel`` trained from scratch with rectified flow matching (``x_t = (1 - s) x0 +
   s eps``, target ``eps - x0``, timestep ``1000 s``: what ``FlowMatchEulerDiscreteScheduler`` integrates), the
   UMT5 text encoder frozen at its seeded initialisation (``train_text_encoder``: or trained jointly). Noise levels
   ``s`` are drawn with ``dit_sigma_shift`` (1: uniform, so the low-noise end where edges are decided gets 30% of
   the samples; Wan's shift 3 gave it 12.5%). Prompts are encoded the way ``WanPipeline`` encodes them (zero
   padding to ``model.text_len`` rows), computed compactly with an exactly equivalent pad-count bias
   (``PadBiasCrossAttn``); ``caption_dropout`` of them are "" for classifier-free guidance. The shipped weights are
   an exponential moving average (``ema``); every ``eval_every`` steps the EMA model's gate figures are recorded
   (``gates.single_presence``, ``gates.denoise_probe``).

Stages 3 and 4 use a constant learning rate after warm-up, so a run with more steps continues a shorter one exactly
(the step counts are not part of their checkpoints' identity); stage 4 may end with ``dit_anneal_steps`` at
``dit_anneal_lr`` (a checkpoint inside that phase resumes only with the same start and rate).

The result is a diffusers ``WanPipeline`` folder (safetensors) at ``out``; ``vidlab generate --model DIR`` loads it.
The command line (``vidlab train-gen-toyworld``) and the training figure live in ``vidlab.generation.toyworld.cli``.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vidlab.errors import UserError
from vidlab.generation.subjects import WAN_TEXT_LENGTH
from vidlab.generation.toyworld.model import ModelConfig

STAGES = ("vae", "latents", "vaedec", "dit")
TEXT_ENCODERS = ("umt5", "minilm")
# "a yellow triangle to the right of a purple triangle" + </s> (tests check it against the grammar)
LONGEST_CAPTION_TOKENS = 11


class TrainStateError(UserError):
    """A checkpoint folder that belongs to another configuration."""


@dataclass
class TrainConfig:
    """Everything ``vidlab train-gen-toyworld`` uses (defaults reproduce the shipped weights)."""

    seed: int = 0
    size: int = 64
    frames: int = 5
    model: ModelConfig = field(default_factory=ModelConfig)
    # the shipped weights were trained at 1; each count is deterministic run to run, but 1 and 2 give different
    # bits (2 measured 1.4x faster on an idle 2-core machine)
    threads: int = 1
    # stage 1: VAE
    vae_steps: int = 1500
    vae_batch: int = 4
    vae_lr: float = 3e-3
    vae_noise: float = 0.0  # scale of the posterior noise in training (0: the mean, which is what is encoded)
    vae_fg_weight: float = 10.0  # loss weight of shape pixels (they are a small share of each frame)
    vae_kl: float = 1e-6
    # loss weight of frame 0 against each later frame: frame 0 is its own causal chunk and latent frame, so at
    # weight 1 it got a fifth of the gradient and was the worst frame of the round trip (0.48 vs 0.67-0.75)
    vae_frame0_weight: float = 4.0
    # stage 2: the fixed training set (mostly single subjects: multi-subject prompts stay the hard case)
    clips: int = 5000
    # the training clips' world (``WorldConfig.grid`` / ``radius``): 0 = shape centres anywhere (the shipped
    # model); 0.125 = on the toy Wan's 8 px token grid, so a shape covers its tokens in one pattern, not at any
    # sub-token phase. The VAE trains on the default world either way (its gate is measured there)
    world_grid: float = 0.0
    world_radius: list[float] = field(default_factory=lambda: [0.12, 0.15])
    mix: dict[str, float] = field(
        default_factory=lambda: {"single": 0.6, "motion": 0.1, "relation": 0.2, "count": 0.1}
    )
    # stage 3: decoder refinement with the encoder frozen (0: none)
    vae_dec_steps: int = 1500
    vae_dec_lr: float = 1e-3
    # Gaussian noise added to the frozen encoder's latents in stage 3, as a fraction of each channel's std in the
    # batch: the decoder learns to draw a crisp shape from a slightly-off latent, as the transformer's are
    vae_dec_noise: float = 0.1
    # stage 4: transformer + text encoder
    dit_steps: int = 16000
    dit_batch: int = 16
    dit_lr: float = 1e-3
    # then this many more steps at dit_anneal_lr (0: none). The shipped run: 16000 constant + 6000 annealed; the
    # shape word started to count only after ~8000 constant steps (docs/results/toyworld-wan-training.md)
    dit_anneal_steps: int = 6000
    dit_anneal_lr: float = 1e-4
    dit_sigma_shift: float = 1.0  # training noise levels: shift 1 = uniform (30% below 0.3, where edges form)
    # loss weight of the latent positions a shape covers (its 4x4-pooled pixels, grown by one latent pixel) against
    # the background's 1: shapes fill ~6% of a frame, so at 1 the shape-level error that tells a square from a
    # circle is a sliver of the loss (1: plain flow matching, the shipped model; 5 was tried: clutter)
    dit_fg_weight: float = 1.0
    caption_dropout: float = 0.1
    # train the transformer on the clips of these captions only (empty: all), and evaluate checkpoints on them: a
    # fast diagnostic ("a red square" alone: ~140 clips, 1000 steps in ~8 min on one thread) of whether the
    # model can draw a shape at all, before a full run
    dit_captions: list[str] = field(default_factory=list)
    # the UMT5 text encoder frozen at its random initialisation (the shipped model, as Wan keeps its pretrained
    # UMT5 frozen), or trained jointly from scratch (the earlier weights): trained jointly it collapsed the shape
    # words (cosine 0.97 between "circle" and "square" at their token; 0.16 at initialisation)
    train_text_encoder: bool = False
    # the text encoder's learning rate as a multiple of the transformer's (only with train_text_encoder=true)
    dit_te_lr_scale: float = 1.0
    # "umt5": the toy UMT5 over the word tokenizer (the shipped model); "minilm": the frozen pretrained
    # all-MiniLM-L6-v2 (the ``minilm`` extra) through a linear projection into ``model.text_dim``
    # (``vidlab.generation.toyworld.minilm``), its own WordPiece tokenizer; with train_text_encoder=true only the
    # projection trains. From a UMT5 ``init_from`` the projection starts as the least-squares map onto that
    # folder's UMT5 states over the training captions
    text_encoder: str = "umt5"
    # a saved toy-world pipeline folder to start from: its VAE is used as it is (stages vae and vaedec are
    # skipped), the training latents are encoded with it, and the transformer, the text encoder and their EMA
    # copies start from its weights (a fine-tune, e.g. with train_text_encoder=true); None: from scratch
    init_from: str | None = None
    ema: float = 0.999
    eval_every: int = 2000  # gate figures (EMA model) every this many transformer steps; 0: never
    eval_seeds: list[int] = field(default_factory=lambda: [100])
    eval_steps: int = 12
    # the classifier-free guidance the shipped model samples at (saved in its ``toyworld.json`` ``generate`` entry,
    # which the gates, the benchmark and the presets read); chosen on validation seeds, never on the gate's
    sample_guidance: float = 6.0
    ckpt_every: int = 50
    ckpt_dir: str | None = None  # default: <cache>/toyworld-train/<config hash>
    stages: list[str] | None = None  # run only these stages (the pipeline is written when all ran)
    # tests only: SIGKILL this process right after the checkpoint of this (stage, step) is written
    kill_after: str | None = None


def config_hash(cfg: TrainConfig) -> str:
    d = stage_identity(cfg, "vae")
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def _identity(cfg: TrainConfig) -> dict[str, Any]:
    d = asdict(cfg)
    for k in ("ckpt_dir", "kill_after", "threads", "ckpt_every", "stages"):
        d.pop(k)
    return d


STAGE_KEYS = {
    "vae": (
        "seed",
        "size",
        "model.z_dim",
        "model.vae_base_dim",
        "model.vae_dim_mult",
        "vae_steps",
        "vae_batch",
        "frames",
        "model.vae_temporal_downsample",
        "vae_lr",
        "vae_kl",
        "vae_fg_weight",
        "vae_noise",
        "vae_frame0_weight",
        "model.vae_decoder_base_dim",
    ),
    "latents": ("clips", "mix", "world_grid", "world_radius", "init_from"),
    # not the step counts of stages 3-4: their schedule is constant, so more steps extend a run exactly
    "vaedec": ("vae_dec_lr", "vae_dec_noise"),
    "dit": (
        "model",
        "dit_batch",
        "dit_lr",
        "dit_sigma_shift",
        "dit_fg_weight",
        "caption_dropout",
        "dit_captions",
        "train_text_encoder",
        "dit_te_lr_scale",
        "text_encoder",
        "ema",
        "eval_every",
        "eval_seeds",
        "eval_steps",
    ),
}
# the stages whose settings each stage's result depends on
DEPENDS = {
    "vae": ("vae",),
    "latents": ("vae", "latents"),
    "vaedec": ("vae", "vaedec"),
    "dit": ("vae", "latents", "dit"),
}


# options added after checkpoints existed: part of a checkpoint's identity only when set away from these values
# (which reproduce the older training exactly), so those checkpoints still resume
LATER_OPTIONS: dict[str, Any] = {
    "dit_fg_weight": 1.0,
    "world_grid": 0.0,
    "world_radius": [0.12, 0.15],
    "dit_captions": [],
    "dit_te_lr_scale": 1.0,
    "init_from": None,
    "text_encoder": "umt5",
}


def stage_identity(cfg: TrainConfig, stage: str) -> dict[str, Any]:
    """The settings a stage's checkpoint depends on (its own and every earlier stage's)."""
    flat: dict[str, Any] = {}
    d = asdict(cfg)
    for k, v in d.items():
        flat[k] = v
        if isinstance(v, dict) and k == "model":
            flat.update({f"model.{kk}": vv for kk, vv in v.items()})
    keys: list[str] = []
    for st in DEPENDS[stage]:
        keys += STAGE_KEYS[st]
    out = {k: flat[k] for k in keys if k not in LATER_OPTIONS or flat[k] != LATER_OPTIONS[k]}
    if out.get("init_from") is not None:  # the start's weights, not where its folder happens to be
        out["init_from"] = init_digest(out["init_from"])
    if "model" in out:  # the sampler's shift is not a training setting
        out["model"] = {k: v for k, v in out["model"].items() if k != "flow_shift"}
    return out


INIT_PARTS = ("vae", "transformer", "text_encoder")


def init_digest(folder: str | Path) -> str:
    """A short hash of a pipeline folder's VAE, transformer and text encoder weight files (``init_from``'s identity)."""
    h = hashlib.sha256()
    root = Path(folder)
    for part in INIT_PARTS:
        for f in sorted((root / part).glob("*.safetensors")):
            h.update(f"{part}/{f.name}".encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def load_init(cfg: TrainConfig, vocab_size: int) -> dict[str, Any]:
    """The parts of ``cfg.init_from`` as modules built from ``cfg.model`` (a mismatch is one clear error).

    Returns ``{"vae", "transformer", "text_encoder", "latents_mean", "latents_std"}``.
    """
    from diffusers import AutoencoderKLWan, WanTransformer3DModel
    from transformers import UMT5EncoderModel

    from vidlab.generation.toyworld.model import build_text_encoder, build_transformer, build_vae

    root = Path(str(cfg.init_from))
    minilm_init = init_text_encoder_kind(root) == "minilm"
    te_cls: Any = UMT5EncoderModel
    if minilm_init:
        from vidlab.generation.toyworld.minilm import MiniLMTextEncoder, build_minilm_text_encoder

        te_cls = MiniLMTextEncoder
    loaders = {
        "vae": AutoencoderKLWan,
        "transformer": WanTransformer3DModel,
        "text_encoder": te_cls,
    }
    loaded = {part: cls.from_pretrained(root / part) for part, cls in loaders.items()}
    mean = [float(v) for v in loaded["vae"].config.latents_mean]
    std = [float(v) for v in loaded["vae"].config.latents_std]
    built = {
        "vae": build_vae(cfg.model, mean, std),
        "transformer": build_transformer(cfg.model),
        "text_encoder": build_minilm_text_encoder(cfg.model.text_dim)
        if minilm_init
        else build_text_encoder(cfg.model, vocab_size),
    }
    for part, module in built.items():
        try:
            module.load_state_dict(loaded[part].state_dict())
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[-1].strip()[:200]
            raise UserError(
                f"init_from={root}: its {part} does not fit this config's model.* settings ({first})"
            ) from None
    return {**built, "latents_mean": mean, "latents_std": std}


def init_text_encoder_kind(folder: str | Path) -> str:
    """``"minilm"`` when a pipeline folder's text encoder is the MiniLM projection, else ``"umt5"``."""
    try:
        index = json.loads((Path(folder) / "model_index.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "umt5"
    return "minilm" if (index.get("text_encoder") or [None, None])[1] == "MiniLMTextEncoder" else "umt5"


def build_text_parts(cfg: TrainConfig, init: dict[str, Any] | None, fit: bool = True) -> tuple[Any, Any, Any]:
    """The tokenizer and text encoder stage 4 trains with (``cfg.text_encoder``), from ``init`` where given, and a
    record of how the MiniLM projection started (None otherwise). ``fit=False``: skip the least-squares start (a
    resumed run loads the projection from its checkpoint)."""
    from vidlab.generation.toyworld.model import build_text_encoder
    from vidlab.generation.toyworld.tokenizer import build_word_tokenizer

    word_tok = build_word_tokenizer(model_max_length=cfg.model.text_len)
    if cfg.text_encoder != "minilm":
        te = init["text_encoder"] if init else build_text_encoder(cfg.model, len(word_tok))
        return word_tok, te, None
    from vidlab.generation.toyworld.minilm import (
        MiniLMTextEncoder,
        build_minilm_text_encoder,
        fit_projection,
        load_tokenizer,
    )

    tok = load_tokenizer(cfg.model.text_len)
    te = build_minilm_text_encoder(cfg.model.text_dim)
    if init is None:
        return tok, te, {"projection_start": "random"}
    if isinstance(init["text_encoder"], MiniLMTextEncoder):
        te.load_state_dict(init["text_encoder"].state_dict())
        return tok, te, {"projection_start": "init_from's projection"}
    if not fit:
        return tok, te, None
    caps = sorted({c for pool in training_captions().values() for c in pool} | {""})
    fitted = fit_projection(te, tok, word_tok, init["text_encoder"].eval(), caps)
    return tok, te, {"projection_start": "least squares onto init_from's UMT5 states", **fitted}


def _check_identity(st: dict, cfg: TrainConfig, stage: str, path: Path) -> None:
    want = stage_identity(cfg, stage)
    have = st.get("identity")
    if have != want:
        diff = sorted(k for k in set(want) | set(have or {}) if (have or {}).get(k) != want.get(k))
        raise TrainStateError(
            f"checkpoint {path} belongs to another training config (differs in: {', '.join(diff)}); "
            "pass another ckpt_dir=... or delete it"
        )


def _ckpt_root(cfg: TrainConfig) -> Path:
    if cfg.ckpt_dir:
        return Path(cfg.ckpt_dir)
    from vidlab.paths import cache_dir

    return cache_dir("toyworld-train") / config_hash(cfg)


def _save(obj: dict[str, Any], path: Path) -> None:
    """One checkpoint, atomically, as safetensors (``vidlab.io.save_checkpoint``: nothing is ever unpickled)."""
    from vidlab.io import save_checkpoint

    path.parent.mkdir(parents=True, exist_ok=True)
    save_checkpoint(obj, path)


def _load(path: Path) -> dict[str, Any]:
    from vidlab.io import load_checkpoint

    return load_checkpoint(path)


def _resume(
    path: Path, cfg: TrainConfig, stage: str, modules: dict[str, Any], opt: Any, max_step: int | None = None
) -> dict[str, Any] | None:
    """Load a stage's checkpoint into ``modules`` (checkpoint key -> module) and ``opt``; None when there is none.

    Refuses a checkpoint of another configuration, and one beyond ``max_step`` (a constant-rate stage can be
    extended by more steps, never shortened)."""
    if not path.is_file():
        return None
    st = _load(path)
    _check_identity(st, cfg, stage, path)
    if max_step is not None and st["step"] > max_step:
        raise TrainStateError(f"checkpoint {path} is at step {st['step']}, beyond {stage} steps={max_step}")
    for key, module in modules.items():
        module.load_state_dict(st[key])
    opt.load_state_dict(st["opt"])
    return st


def _checkpoint(
    path: Path, cfg: TrainConfig, stage: str, modules: dict[str, Any], opt: Any, step: int, **extra: Any
) -> None:
    """Write a stage's checkpoint (modules, optimiser, step, ``extra``, identity) atomically."""
    st = {key: module.state_dict() for key, module in modules.items()}
    _save(
        {**st, "opt": opt.state_dict(), "step": step, **extra, "identity": stage_identity(cfg, stage)}, path
    )
    _maybe_kill(cfg, stage, step)


def _maybe_kill(cfg: TrainConfig, stage: str, step: int) -> None:
    if cfg.kill_after and cfg.kill_after == f"{stage}:{step}":
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def _gen(seed: int, stage: str, step: int):
    import torch

    salt = {"vae": 1, "latents": 2, "dit": 3, "vaedec": 4}[stage]
    return torch.Generator().manual_seed(seed * 1_000_003 + salt * 100_003 + step)


def _np_rng(seed: int, stage: str, step: int) -> np.random.Generator:
    salt = {"vae": 1, "latents": 2, "dit": 3, "vaedec": 4}[stage]
    return np.random.default_rng([seed, salt, step])


def _to_tensor(clips: list[np.ndarray]):
    import torch

    x = torch.from_numpy(np.stack(clips)).permute(0, 4, 1, 2, 3).float()
    return x / 127.5 - 1.0


# ---- stage 1 ----------------------------------------------------------------------------------------------
def _vae_batch(cfg: TrainConfig, step: int):
    """Full-frame clips of every kind, and per-pixel loss weights (shape pixels count ``fg_weight`` x).

    Full frames and whole ``frames``-long clips: both causal chunks (frame 0 alone, then frames 1-4) and the
    per-frame attention at the size the pipeline decodes (crops centred on a shape left full frames out of
    distribution; measured before commit 063fd2f, 2026-12-01).
    """
    import torch

    from vidlab.generation.toyworld.world import KINDS, WorldConfig, render, sample_scene

    rng = _np_rng(cfg.seed, "vae", step)
    wc = WorldConfig(size=cfg.size, frames=cfg.frames)
    clips, weights = [], []
    for _ in range(cfg.vae_batch):
        scene = sample_scene(KINDS[int(rng.integers(len(KINDS)))], rng, wc)
        clip = render(scene)
        fg = np.abs(clip.astype(np.int16) - scene.background).max(-1) > 12
        clips.append(clip)
        weights.append(1.0 + (cfg.vae_fg_weight - 1.0) * fg)
    w = torch.from_numpy(np.stack(weights)).float()[:, None]  # [B, 1, F, H, W]
    w[:, :, 0] *= cfg.vae_frame0_weight
    return _to_tensor(clips), w


def train_vae(cfg: TrainConfig, root: Path, progress: bool = True):
    import torch
    from tqdm.auto import tqdm

    from vidlab.generation.toyworld.model import build_vae

    path = root / "vae.safetensors"
    torch.manual_seed(cfg.seed)
    vae = build_vae(cfg.model).train()
    opt = torch.optim.AdamW(vae.parameters(), lr=cfg.vae_lr, weight_decay=0.0)
    st = _resume(path, cfg, "vae", {"model": vae}, opt)
    step, losses = (st["step"], st["losses"]) if st else (0, [])
    bar = tqdm(total=cfg.vae_steps, initial=step, desc="vae", disable=not progress, dynamic_ncols=True)
    while step < cfg.vae_steps:
        x, w = _vae_batch(cfg, step)
        lr = cfg.vae_lr * min(1.0, (step + 1) / 20) * (0.1 + 0.9 * (1 - step / cfg.vae_steps))
        for g in opt.param_groups:
            g["lr"] = lr
        post = vae.encode(x).latent_dist
        z = post.mean
        if cfg.vae_noise > 0:  # sampling the posterior at full std drowns the small latent early in training
            z = z + cfg.vae_noise * post.std * torch.randn(
                post.mean.shape, generator=_gen(cfg.seed, "vae", step)
            )
        rec = vae.decode(z).sample
        kl = post.kl().mean() / float(np.prod(x.shape[1:]))
        err = rec - x
        loss = (w * (err.pow(2) + 0.5 * err.abs())).mean() / w.mean() + cfg.vae_kl * kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(vae.parameters(), 1.0)
        opt.step()
        step += 1
        losses.append(loss.item())
        bar.update(1)
        bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}")
        if step % cfg.ckpt_every == 0 or step == cfg.vae_steps:
            _checkpoint(path, cfg, "vae", {"model": vae}, opt, step, losses=losses)
    bar.close()
    return vae.eval(), losses


# ---- stage 2 ----------------------------------------------------------------------------------------------
def training_captions() -> dict[str, list[str]]:
    """Captions the transformer may see, per kind (held-out validation/test captions removed)."""
    from vidlab.generation.toyworld.splits import held_out_captions
    from vidlab.generation.toyworld.world import KINDS, all_captions

    held = held_out_captions()
    return {k: [c for c in all_captions(k) if c not in held] for k in KINDS}


def training_scene(cfg: TrainConfig, i: int):
    """Clip ``i`` of the fixed training set: (kind, caption, scene), the same every time it is drawn."""
    from vidlab.generation.toyworld.world import WorldConfig, scene_for_caption

    pools = training_captions()
    kinds = sorted(cfg.mix)
    probs = np.array([cfg.mix[k] for k in kinds], dtype=np.float64)
    probs /= probs.sum()
    rng = _np_rng(cfg.seed, "latents", i)
    kind = kinds[int(rng.choice(len(kinds), p=probs))]
    pool = pools[kind]
    cap = pool[int(rng.integers(len(pool)))]
    wc = WorldConfig(
        size=cfg.size,
        frames=cfg.frames,
        radius=(cfg.world_radius[0], cfg.world_radius[1]),
        grid=cfg.world_grid,
    )
    return kind, cap, scene_for_caption(cap, rng, wc)


def latent_fg_weights(cfg: TrainConfig, captions: list[str], progress: bool = False):
    """Per-clip loss weights on the latent grid, ``[N, 1, T', H', W']``: ``dit_fg_weight`` where a shape is.

    Each training clip is drawn again (``training_scene``; its caption must match the stored one), its shape
    pixels (as the VAE stage finds them) are max-pooled to the VAE's grid -- latent frame 0 is frame 0, each later
    latent frame the next ``vae_scale_temporal`` frames -- and grown by one latent pixel, so the rim counts too.
    """
    import torch
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    from vidlab.generation.toyworld.world import render

    m = cfg.model
    ks, kt = m.vae_scale_spatial, m.vae_scale_temporal
    masks = []
    for i, cap in enumerate(tqdm(captions, desc="shape masks", disable=not progress)):
        _, cap_i, scene = training_scene(cfg, i)
        if cap_i != cap:
            raise TrainStateError(f"training clip {i} is {cap_i!r} now but {cap!r} in the latents")
        clip = render(scene)
        fg = torch.from_numpy(np.abs(clip.astype(np.int16) - scene.background).max(-1) > 12).float()
        first, rest = fg[:1], fg[1:].reshape(-1, kt, *fg.shape[1:]).amax(1)
        masks.append(torch.cat([first, rest]))
    mk = torch.stack(masks)[:, None]  # [N, 1, T', S, S]
    n, _, t, s, _ = mk.shape
    mk = F.max_pool2d(mk.reshape(n * t, 1, s, s), ks)
    mk = F.max_pool2d(mk, 3, stride=1, padding=1).reshape(n, 1, t, s // ks, s // ks)
    return 1.0 + (cfg.dit_fg_weight - 1.0) * mk


def build_latents(cfg: TrainConfig, vae, root: Path, progress: bool = True) -> dict[str, Any]:
    """Render and encode the fixed training set once (resumable in chunks)."""
    import torch
    from tqdm.auto import tqdm

    from vidlab.generation.toyworld.world import render

    path = root / "latents.safetensors"
    if path.is_file():
        st = _load(path)
        _check_identity(st, cfg, "latents", path)
        if st.get("done"):
            return st
    else:
        st = {
            "latents": [],
            "captions": [],
            "kinds": [],
            "done": False,
            "identity": stage_identity(cfg, "latents"),
        }
    chunk = 50
    bar = tqdm(total=cfg.clips, initial=len(st["captions"]), desc="latents", disable=not progress)
    while len(st["captions"]) < cfg.clips:
        i0 = len(st["captions"])
        clips, caps, kk = [], [], []
        for i in range(i0, min(cfg.clips, i0 + chunk)):
            kind, cap, scene = training_scene(cfg, i)
            clips.append(render(scene))
            caps.append(cap)
            kk.append(kind)
        with torch.no_grad():
            z = vae.encode(_to_tensor(clips)).latent_dist.mean
        st["latents"].append(z)
        st["captions"] += caps
        st["kinds"] += kk
        bar.update(len(caps))
        _save(st, path)
        _maybe_kill(cfg, "latents", len(st["captions"]))
    bar.close()
    z = torch.cat(st["latents"])
    st["latents"] = [z]
    st["mean"] = z.mean(dim=(0, 2, 3, 4))
    st["std"] = z.std(dim=(0, 2, 3, 4)).clamp_min(1e-4)
    st["done"] = True
    _save(st, path)
    return st


# ---- stage 3: decoder refinement -------------------------------------------------------------------------
def train_vae_decoder(cfg: TrainConfig, vae, root: Path, progress: bool = True):
    """Fine-tune the decoder (and ``post_quant_conv``) with the encoder frozen.

    The latents the transformer learns are the frozen encoder's, so this stage may run beside the transformer
    (``stages=[vae,vaedec]`` in a second process); the shipped VAE is the stage-1 encoder + this decoder.
    Batches continue stage 1's stream (steps ``vae_steps + k``): new clips, same distribution.
    """
    import copy

    import torch
    from tqdm.auto import tqdm

    path = root / "vaedec.safetensors"
    dec = copy.deepcopy(vae).train()
    dec.encoder.requires_grad_(False)
    dec.quant_conv.requires_grad_(False)
    params = [p for p in dec.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.vae_dec_lr, weight_decay=0.0)
    st = _resume(path, cfg, "vaedec", {"model": dec}, opt, max_step=cfg.vae_dec_steps)
    step, losses = (st["step"], st["losses"]) if st else (0, [])
    bar = tqdm(
        total=cfg.vae_dec_steps, initial=step, desc="vae decoder", disable=not progress, dynamic_ncols=True
    )
    while step < cfg.vae_dec_steps:
        x, w = _vae_batch(cfg, cfg.vae_steps + step)
        # constant after warm-up: a longer run continues a shorter one exactly
        lr = cfg.vae_dec_lr * min(1.0, (step + 1) / 20)
        for g in opt.param_groups:
            g["lr"] = lr
        with torch.no_grad():
            z = dec.encode(x).latent_dist.mean
            if cfg.vae_dec_noise > 0:
                scale = z.std(dim=(0, 2, 3, 4), keepdim=True)
                noise = torch.randn(z.shape, generator=_gen(cfg.seed, "vaedec", step))
                z = z + cfg.vae_dec_noise * scale * noise
        err = dec.decode(z).sample - x
        loss = (w * (err.pow(2) + 0.5 * err.abs())).mean() / w.mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        losses.append(loss.item())
        bar.update(1)
        bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}")
        if step % cfg.ckpt_every == 0 or step == cfg.vae_dec_steps:
            _checkpoint(path, cfg, "vaedec", {"model": dec}, opt, step, losses=losses)
    bar.close()
    return dec.eval(), losses


def caption_subset(captions: list[str], wanted: list[str]):
    """Indices (a LongTensor) of the training clips whose caption is in ``wanted`` (all when it is empty)."""
    import torch

    if not wanted:
        return torch.arange(len(captions))
    missing = sorted(set(wanted) - set(captions))
    if missing:
        raise UserError(f"dit_captions: no training clip has the caption(s) {missing}; e.g. 'a red square'")
    chosen = set(wanted)
    return torch.tensor([i for i, c in enumerate(captions) if c in chosen])


# ---- stage 4: transformer + text encoder ------------------------------------------------------------------
def encode_prompts(tokenizer, text_encoder, texts: list[str], max_len: int = 512):
    """Prompt embeddings exactly as ``WanPipeline._get_t5_prompt_embeds`` makes them (zero-padded to ``max_len``).

    The encoder runs on the batch's longest prompt only: with its attention mask and relative positions, the
    real tokens' outputs do not depend on how much padding follows.
    """
    emb, _ = encode_prompts_compact(tokenizer, text_encoder, texts, max_len)
    import torch

    out = torch.zeros(len(texts), max_len, emb.shape[-1], dtype=emb.dtype)
    out[:, : emb.shape[1]] = emb
    return out


def encode_prompts_compact(tokenizer, text_encoder, texts: list[str], max_len: int = 512):
    """``encode_prompts`` without the zero rows beyond one: (embeddings ``[B, L + 1, D]``, pad-count bias ``[B, L + 1]``).

    Every zero-padding row of a Wan prompt is the same vector, so it gives the same key and value in every
    cross-attention; ``n`` equal keys weigh as one key whose logit is raised by ``log n``. ``bias`` holds that
    ``log n`` on the pad rows (0 on real tokens): cross-attention over the compact rows with this additive bias
    equals cross-attention over all ``max_len`` rows, at a fraction of the cost (see ``PadBiasCrossAttn``).
    """
    import torch

    enc = tokenizer(texts, padding="longest", truncation=True, max_length=max_len, return_tensors="pt")
    ids, mask = enc.input_ids, enc.attention_mask
    h = text_encoder(ids, mask).last_hidden_state * mask[..., None].to(torch.float32)
    b, length = ids.shape
    emb = torch.cat([h, h.new_zeros(b, 1, h.shape[-1])], dim=1)  # at least one pad row per prompt
    n_real = mask.sum(1)
    rows = torch.arange(length + 1)[None]
    n_pad_rows = (length + 1 - n_real)[:, None]
    n_pad_total = (max_len - n_real)[:, None]
    bias = torch.where(rows >= n_real[:, None], torch.log(n_pad_total / n_pad_rows), torch.zeros(()))
    return emb, bias.to(torch.float32)


class PadBiasCrossAttn:
    """Training-time cross-attention processor: diffusers' own ``WanAttnProcessor`` given the pad-count bias.

    ``WanTransformerBlock`` calls ``attn2`` without a mask; this passes ``self.bias`` (``[B, 1, 1, L]``, set before
    each forward) as the additive mask. Only the training copy of the transformer carries it; the saved model
    and every sampler use the stock processor over the full 512 rows.
    """

    def __init__(self) -> None:
        from diffusers.models.transformers.transformer_wan import WanAttnProcessor

        self.inner = WanAttnProcessor()
        self.bias: Any = None

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_emb=None):
        return self.inner(attn, hidden_states, encoder_hidden_states, self.bias, rotary_emb)


def use_pad_bias(transformer) -> PadBiasCrossAttn:
    """Install one shared ``PadBiasCrossAttn`` on every block's cross-attention; returns it (set ``.bias``)."""
    proc = PadBiasCrossAttn()
    for block in transformer.blocks:
        block.attn2.set_processor(proc)
    return proc


def _sigmas(u, shift: float):
    return shift * u / (1 + (shift - 1) * u)


def _ema_update(ema, model, decay: float) -> None:
    import torch

    with torch.no_grad():
        for pe, pm in zip(ema.parameters(), model.parameters()):
            pe.lerp_(pm.detach(), 1.0 - decay)


def _eval_pipeline(cfg: TrainConfig, tok, te, tr, vae_state: dict, data: dict[str, Any]):
    from vidlab.generation.toyworld.model import assemble_pipeline, build_vae

    vae = build_vae(cfg.model, data["mean"].tolist(), data["std"].tolist())
    vae.load_state_dict(vae_state)
    return assemble_pipeline(tok, te, vae, tr, cfg.model)


SWAP_LEVEL = 0.7  # noise level of the shape-swap control at checkpoints


def evaluate_checkpoint(cfg: TrainConfig, pipe, step: int) -> dict[str, Any]:
    """Gate figures of the current (EMA) model: single-subject presence (also per shape), the noise-and-denoise
    probe, and the shape-swap control (does the model draw the shape it is told, or the one the clip shows?)."""
    from vidlab.generation.toyworld.gates import denoise_probe, single_presence

    sp = single_presence(
        pipe,
        captions=cfg.dit_captions or None,
        seeds=tuple(cfg.eval_seeds),
        steps=cfg.eval_steps,
        frames=cfg.frames,
        height=cfg.size,
        width=cfg.size,
    )
    dp = denoise_probe(pipe, level=0.3)  # both at the model's own text length, as vidlab samples
    # the control that shows whether the caption's shape word is used at all: real clips noised to 0.7 and
    # denoised told their own shape vs the swapped one (circle <-> square, triangle <-> star)
    own = denoise_probe(pipe, level=SWAP_LEVEL)
    swap = denoise_probe(pipe, level=SWAP_LEVEL, swap_shape=True)
    shapes: dict[str, list[bool]] = {}
    for r in sp["records"]:
        shapes.setdefault(r["prompt"].split()[-1], []).append(bool(r["presence"]))
    return {
        "step": step,
        "single_presence": sp["presence"],
        "single_colour": sp["presence_colour"],
        "single_frame0": sp["presence_frame0"],
        "single_per_shape": {k: sum(v) / len(v) for k, v in shapes.items()},
        "denoise_0.3": dp["presence"],
        "denoise_vae_only": dp["presence_vae_only"],
        f"swap_{SWAP_LEVEL}": {
            "own_kept_told_own": own["presence"],
            "own_kept_told_other": swap["presence"],
            "other_drawn": swap["presence_told"],
        },
    }


def train_dit(cfg: TrainConfig, data: dict[str, Any], vae_state: dict, root: Path, progress: bool = True):
    """Transformer + text encoder with flow matching; EMA weights are what ships (and what is evaluated)."""
    import copy

    import torch
    from tqdm.auto import tqdm

    from vidlab.generation.toyworld.model import build_transformer, save_pipeline
    from vidlab.generation.toyworld.tokenizer import build_word_tokenizer

    path = root / "dit.safetensors"
    torch.manual_seed(cfg.seed + 1)
    init = None
    if cfg.init_from:  # a fine-tune: both parts (and so their EMA copies) start from the saved folder
        init = load_init(cfg, len(build_word_tokenizer(model_max_length=cfg.model.text_len)))
    tok, te, start = build_text_parts(cfg, init, fit=not path.is_file())
    if start and progress:
        tqdm.write(json.dumps(start))
    tr = init["transformer"] if init else build_transformer(cfg.model)
    te.train(cfg.train_text_encoder)
    te.requires_grad_(cfg.train_text_encoder)
    tr.train()
    ema_te, ema_tr = copy.deepcopy(te).eval(), copy.deepcopy(tr).eval()
    pad_bias = use_pad_bias(tr)
    params = list(tr.parameters()) + (list(te.parameters()) if cfg.train_text_encoder else [])
    if cfg.train_text_encoder and cfg.dit_te_lr_scale != 1.0:
        groups: list[dict[str, Any]] = [
            {"params": list(tr.parameters()), "lr_scale": 1.0},
            {"params": list(te.parameters()), "lr_scale": float(cfg.dit_te_lr_scale)},
        ]
        opt = torch.optim.AdamW(groups, lr=cfg.dit_lr, weight_decay=0.01)
    else:  # one group (what older checkpoints hold)
        opt = torch.optim.AdamW(params, lr=cfg.dit_lr, weight_decay=0.01)
    parts = {"transformer": tr, "text_encoder": te, "ema_transformer": ema_tr, "ema_text_encoder": ema_te}
    total = cfg.dit_steps + cfg.dit_anneal_steps
    st = _resume(path, cfg, "dit", parts, opt, max_step=total)
    if st:  # an annealing phase resumes only with the same start and rate, and nothing else resumes it
        anneal = (int(st["anneal_from"]), float(st["anneal_lr"])) if "anneal_from" in st else None
        if (anneal or st["step"] > cfg.dit_steps) and anneal != (cfg.dit_steps, cfg.dit_anneal_lr):
            raise TrainStateError(
                f"checkpoint {path} (step {st['step']}) belongs to another annealing phase "
                f"({'none' if anneal is None else f'from step {anneal[0]} at lr {anneal[1]}'}; this run: from "
                f"dit_steps={cfg.dit_steps} at dit_anneal_lr={cfg.dit_anneal_lr}); pass another ckpt_dir=..."
            )
    step, losses, evals = (st["step"], st["losses"], st["evals"]) if st else (0, [], [])
    z = data["latents"][0]
    mean = data["mean"].view(1, -1, 1, 1, 1)
    std = data["std"].view(1, -1, 1, 1, 1)
    keep = caption_subset(data["captions"], cfg.dit_captions)
    x_all = ((z - mean) / std)[keep]
    caps = [data["captions"][i] for i in keep.tolist()]
    w_all = latent_fg_weights(cfg, data["captions"], progress)[keep] if cfg.dit_fg_weight != 1.0 else None
    bar = tqdm(total=total, initial=step, desc="transformer", disable=not progress, dynamic_ncols=True)
    while step < total:
        g = _gen(cfg.seed, "dit", step)
        idx = torch.randint(len(caps), (cfg.dit_batch,), generator=g)
        drop = torch.rand(cfg.dit_batch, generator=g) < cfg.caption_dropout
        texts = ["" if d else caps[int(i)] for i, d in zip(idx, drop)]
        x0 = x_all[idx]
        noise = torch.randn(x0.shape, generator=g)
        sigma = _sigmas(torch.rand(cfg.dit_batch, generator=g), cfg.dit_sigma_shift).view(-1, 1, 1, 1, 1)
        xt = (1 - sigma) * x0 + sigma * noise
        # constant after warm-up (the EMA averages): a longer run continues a shorter one exactly
        lr = cfg.dit_lr * min(1.0, (step + 1) / 50) if step < cfg.dit_steps else cfg.dit_anneal_lr
        for gr in opt.param_groups:
            gr["lr"] = lr * gr.get("lr_scale", 1.0)
        with torch.set_grad_enabled(cfg.train_text_encoder):
            emb, bias = encode_prompts_compact(tok, te, texts, cfg.model.text_len)
        pad_bias.bias = bias[:, None, None, :]
        pred = tr(
            hidden_states=xt, timestep=sigma.flatten() * 1000.0, encoder_hidden_states=emb, return_dict=False
        )[0]
        err = (pred - (noise - x0)).pow(2)
        if w_all is None:
            loss = err.mean()
        else:  # weighted mean: the loss keeps its scale, the shapes get dit_fg_weight x the say
            w = w_all[idx].expand_as(err)
            loss = (w * err).sum() / w.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        decay = min(cfg.ema, (1 + step) / (10 + step))
        _ema_update(ema_tr, tr, decay)
        if cfg.train_text_encoder:
            _ema_update(ema_te, te, decay)
        step += 1
        losses.append(loss.item())
        bar.update(1)
        bar.set_postfix(loss=f"{np.mean(losses[-50:]):.4f}")
        if cfg.eval_every and (step % cfg.eval_every == 0 or step in (cfg.dit_steps, total)):
            pipe = _eval_pipeline(cfg, tok, ema_te, ema_tr, vae_state, data)
            save_pipeline(pipe, root / "pipeline_latest", {"step": step})
            ev = evaluate_checkpoint(cfg, pipe, step)
            ev["loss"] = float(np.mean(losses[-50:]))
            evals.append(ev)
            bar.write(json.dumps(ev))
        if step % cfg.ckpt_every == 0 or step in (cfg.dit_steps, total):
            extra = (
                {"anneal_from": cfg.dit_steps, "anneal_lr": cfg.dit_anneal_lr} if step > cfg.dit_steps else {}
            )
            _checkpoint(path, cfg, "dit", parts, opt, step, losses=losses, evals=evals, **extra)
    bar.close()
    return tok, ema_te.eval(), ema_tr.eval(), losses, evals


# ---- driver -----------------------------------------------------------------------------------------------
def check_config(cfg: TrainConfig) -> None:
    """One-line errors for settings that cannot work, before anything is built."""
    m = cfg.model
    if cfg.frames < 1 or (cfg.frames - 1) % m.vae_scale_temporal:
        raise UserError(f"frames={cfg.frames} must be {m.vae_scale_temporal}k+1 (e.g. 5, 9)")
    if len(m.vae_temporal_downsample) != len(m.vae_dim_mult) - 1:
        raise UserError(
            f"model.vae_temporal_downsample has {len(m.vae_temporal_downsample)} entries; it needs one per VAE "
            f"downsampling (len(model.vae_dim_mult) - 1 = {len(m.vae_dim_mult) - 1})"
        )
    grid = m.vae_scale_spatial * int(m.patch[1])
    if cfg.size % grid:
        raise UserError(
            f"size={cfg.size} must be a multiple of {grid} (VAE {m.vae_scale_spatial}x x patch {m.patch[1]})"
        )
    if not LONGEST_CAPTION_TOKENS <= m.text_len <= WAN_TEXT_LENGTH:
        raise UserError(
            f"model.text_len={m.text_len} must lie between the world's longest caption "
            f"({LONGEST_CAPTION_TOKENS} tokens with its end token) and Wan's {WAN_TEXT_LENGTH} prompt rows"
        )
    lo, hi = (list(cfg.world_radius) + [0.0, 0.0])[:2]
    if len(cfg.world_radius) != 2 or not 0 < lo <= hi < 0.25:
        raise UserError(f"world_radius={cfg.world_radius} must be [low, high] with 0 < low <= high < 0.25")
    if not 0 <= cfg.world_grid < 0.5:
        raise UserError(
            f"world_grid={cfg.world_grid} must be 0 (anywhere) or a fraction of the side below 0.5"
        )
    if not cfg.sample_guidance >= 1.0:
        raise UserError(
            f"sample_guidance={cfg.sample_guidance} must be >= 1 (1: no classifier-free guidance)"
        )
    pool = {c for caps in training_captions().values() for c in caps}
    odd = sorted(set(cfg.dit_captions) - pool)
    if odd:
        raise UserError(
            f"dit_captions: {odd} are not training captions (e.g. 'a red square'; the test and validation "
            "multi-subject captions never occur in training)"
        )
    if cfg.dit_te_lr_scale <= 0:
        raise UserError(f"dit_te_lr_scale={cfg.dit_te_lr_scale} must be > 0")
    if cfg.text_encoder not in TEXT_ENCODERS:
        raise UserError(f"text_encoder={cfg.text_encoder!r}: choose one of {list(TEXT_ENCODERS)}")
    if cfg.text_encoder == "minilm":
        from vidlab.generation.toyworld.minilm import minilm_dir

        minilm_dir()  # a missing package or a wrong checksum: one line, before anything is built
    if cfg.init_from is not None:
        root = Path(cfg.init_from)
        missing = [p for p in INIT_PARTS if not any((root / p).glob("*.safetensors"))]
        if missing:
            raise UserError(
                f"init_from={cfg.init_from}: not a toy-world pipeline folder (no safetensors weights for "
                f"{', '.join(missing)})"
            )
    unknown = sorted(set(cfg.stages or ()) - set(STAGES))
    if unknown:
        raise UserError(f"stages: unknown {unknown}; known: {list(STAGES)}")


def train(cfg: TrainConfig, out: str | Path, progress: bool = True) -> Path:
    """Run (or resume) the stages and save the pipeline folder at ``out`` (only when every stage ran); returns it."""
    import torch

    from vidlab.generation.toyworld.model import assemble_pipeline, build_vae, save_pipeline

    check_config(cfg)
    torch.set_num_threads(max(1, int(cfg.threads)))
    root = _ckpt_root(cfg)
    root.mkdir(parents=True, exist_ok=True)
    run = set(cfg.stages or STAGES)
    ident = _identity(cfg)
    t0 = time.perf_counter()
    if cfg.init_from:  # the saved VAE as it is: no VAE stages
        return _train_from_init(cfg, out, root, run, ident, t0, progress)
    vae, vae_losses = train_vae(cfg, root, progress)
    dec_losses: list[float] = []
    if "vaedec" in run and "dit" not in run:  # a side process refining the decoder beside the transformer
        vae, dec_losses = train_vae_decoder(cfg, vae, root, progress)
    if "latents" not in run and "dit" not in run:
        return root
    data = build_latents(cfg, vae, root, progress)
    if "dit" not in run:
        return root
    tok, te, tr, dit_losses, evals = train_dit(cfg, data, vae.state_dict(), root, progress)
    if "vaedec" in run and cfg.vae_dec_steps > 0:
        vae, dec_losses = train_vae_decoder(cfg, vae, root, progress)
    final = build_vae(cfg.model, data["mean"].tolist(), data["std"].tolist())
    final.load_state_dict(vae.state_dict())
    pipe = assemble_pipeline(tok, te, final, tr, cfg.model)
    meta = {
        "what": "toy-world Wan (coloured shapes), trained by vidlab train-gen-toyworld",
        "config": ident,
        "text_encoder": _text_encoder_note(
            cfg, "from scratch", "at its random initialisation (seed + 1), frozen"
        ),
        "weights": "exponential moving average of the transformer and text encoder",
        "vae_loss_last20": float(np.mean(vae_losses[-20:])),
        "vae_decoder_loss_last20": float(np.mean(dec_losses[-20:])) if dec_losses else None,
        **_dit_record(cfg, dit_losses, evals, t0),
    }
    return save_pipeline(pipe, out, meta)


def _text_encoder_note(cfg: TrainConfig, trained: str, frozen: str) -> str:
    if cfg.text_encoder == "minilm":
        from vidlab.generation.toyworld.minilm import PACKAGE, PACKAGE_VERSION

        how = "trained jointly with the transformer" if cfg.train_text_encoder else "frozen"
        return f"all-MiniLM-L6-v2 ({PACKAGE}=={PACKAGE_VERSION}), frozen, through a linear projection {how}"
    if cfg.train_text_encoder:
        return (
            "UMT5"
            + (
                ", trained jointly with the transformer "
                if trained == "from scratch"
                else " trained jointly with the transformer, "
            )
            + trained
        )
    return f"UMT5 {frozen}"


def _dit_record(cfg: TrainConfig, dit_losses: list[float], evals: Any, t0: float) -> dict[str, Any]:
    """The part of a saved folder's ``toyworld.json`` every transformer stage writes: its losses, evaluations,
    run time, and the sampling settings ``generate`` (what the folder is sampled with by default)."""
    return {
        "dit_loss_last50": float(np.mean(dit_losses[-50:])),
        "dit_losses": [round(float(v), 5) for v in dit_losses],
        "evals": evals,
        "seconds_this_run": round(time.perf_counter() - t0, 1),
        "generate": {
            "height": cfg.size,
            "width": cfg.size,
            "frames": cfg.frames,
            "steps": cfg.eval_steps,
            "guidance": cfg.sample_guidance,
        },
    }


def _train_from_init(
    cfg: TrainConfig,
    out: str | Path,
    root: Path,
    run: set[str],
    ident: dict[str, Any],
    t0: float,
    progress: bool,
) -> Path:
    """``train`` for ``init_from``: latents from the saved VAE, stage 4 from its transformer and text encoder.

    The latents are normalised by the saved VAE's own ``latents_mean``/``latents_std`` (what its transformer was
    trained with and what ``WanPipeline`` uses), not by statistics of the re-encoded set.
    """
    import torch

    from vidlab.generation.toyworld.model import assemble_pipeline, save_pipeline
    from vidlab.generation.toyworld.tokenizer import build_word_tokenizer

    vocab = len(build_word_tokenizer(model_max_length=cfg.model.text_len))
    vae = load_init(cfg, vocab)["vae"].eval()
    if "latents" not in run and "dit" not in run:
        return root
    data = build_latents(cfg, vae, root, progress)
    data = {
        **data,
        "mean": torch.tensor(vae.config.latents_mean, dtype=torch.float32),
        "std": torch.tensor(vae.config.latents_std, dtype=torch.float32),
    }
    if "dit" not in run:
        return root
    tok, te, tr, dit_losses, evals = train_dit(cfg, data, vae.state_dict(), root, progress)
    pipe = assemble_pipeline(tok, te, vae, tr, cfg.model)
    meta = {
        "what": "toy-world Wan (coloured shapes), fine-tuned by vidlab train-gen-toyworld init_from=...",
        "config": ident,
        "init_from": {"path": str(cfg.init_from), "digest": init_digest(str(cfg.init_from))},
        "text_encoder": _text_encoder_note(
            cfg, "starting from init_from's weights", "as in init_from, frozen"
        ),
        "weights": "exponential moving average of the transformer and text encoder",
        **_dit_record(cfg, dit_losses, evals, t0),
    }
    return save_pipeline(pipe, out, meta)
