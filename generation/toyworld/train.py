"""Train the toy world's Wan on CPU: a small AutoencoderKLWan, then WanTransformer3DModel + UMT5 with flow matching.

Stages (each resumes from its last checkpoint after a kill, bit for bit: every batch and every noise draw comes
from a generator seeded by (seed, stage, step), and model + optimiser state are checkpointed atomically):

1. **vae** -- ``AutoencoderKLWan`` on random 5-frame clips (one causal chunk: first frame + 4), cropped to
   ``vae_crop`` px; it is fully convolutional (plus a per-frame attention block), so it runs on full frames and
   longer clips after. Loss: MSE + L1 on the reconstruction, a small KL.
2. **latents** -- a fixed training set of ``clips`` scenes (caption mix ``mix``; the held-out validation and test
   captions never appear) is rendered and encoded once (posterior mean); the per-channel mean/std go into the VAE
   config (``latents_mean``/``latents_std``), exactly where ``WanPipeline`` reads them to un-normalise.
3. **dit** -- ``WanTransformer3DModel`` and the UMT5 text encoder trained **jointly** from scratch with rectified
   flow matching (``x_t = (1 - s) x0 + s eps``, target ``eps - x0``, ``s`` drawn with the scheduler's shift, timestep
   ``1000 s``: what ``FlowMatchEulerDiscreteScheduler`` integrates). Prompts are encoded the way ``WanPipeline``
   encodes them (attention mask, zero padding to 512 tokens); ``caption_dropout`` of them are "" so that
   classifier-free guidance has an unconditional model.

The result is a diffusers ``WanPipeline`` folder (safetensors) at ``--out``; ``vidlab generate --model DIR`` loads it.
"""

from __future__ import annotations

import argparse
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

from generation.toyworld.model import ModelConfig
from vidlab.errors import UserError

STAGES = ("vae", "latents", "dit")


class TrainStateError(UserError):
    """A checkpoint folder that belongs to another configuration."""


@dataclass
class TrainConfig:
    """Everything ``vidlab train-gen-toyworld`` uses (defaults reproduce the shipped weights)."""

    seed: int = 0
    size: int = 64
    frames: int = 9
    model: ModelConfig = field(default_factory=ModelConfig)
    threads: int = 1  # one thread: bit-reproducible, and fastest when other jobs share the cores
    # stage 1: VAE
    vae_steps: int = 2000
    vae_batch: int = 4
    vae_crop: int = 32
    vae_frames: int = 5
    vae_lr: float = 3e-3
    vae_noise: float = 0.0  # scale of the posterior noise in training (0: the mean, which is what is encoded)
    vae_fg_weight: float = 10.0  # loss weight of shape pixels (they are a small share of each frame)
    vae_kl: float = 1e-6
    # stage 2: the fixed training set
    clips: int = 800
    mix: dict[str, float] = field(
        default_factory=lambda: {"single": 0.55, "motion": 0.30, "relation": 0.10, "count": 0.05}
    )
    # stage 3: transformer + text encoder
    dit_steps: int = 3000
    dit_batch: int = 16
    dit_lr: float = 2e-3
    caption_dropout: float = 0.1
    ckpt_every: int = 50
    ckpt_dir: str | None = None  # default: <cache>/toyworld-train/<config hash>
    # tests only: SIGKILL this process right after the checkpoint of this (stage, step) is written
    kill_after: str | None = None


def config_hash(cfg: TrainConfig) -> str:
    d = stage_identity(cfg, "vae")
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def _identity(cfg: TrainConfig) -> dict[str, Any]:
    d = asdict(cfg)
    for k in ("ckpt_dir", "kill_after", "threads", "ckpt_every"):
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
        "vae_crop",
        "vae_frames",
        "vae_lr",
        "vae_kl",
        "vae_fg_weight",
        "vae_noise",
    ),
    "latents": ("frames", "clips", "mix"),
    "dit": ("model", "dit_steps", "dit_batch", "dit_lr", "caption_dropout"),
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
    for st in STAGES[: STAGES.index(stage) + 1]:
        keys += STAGE_KEYS[st]
    return {k: flat[k] for k in keys}


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


def _save(obj: Any, path: Path) -> None:
    import torch

    from vidlab.io import atomic_path

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def _load(path: Path) -> Any:
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)


def _maybe_kill(cfg: TrainConfig, stage: str, step: int) -> None:
    if cfg.kill_after and cfg.kill_after == f"{stage}:{step}":
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def _gen(seed: int, stage: str, step: int):
    import torch

    salt = {"vae": 1, "latents": 2, "dit": 3}[stage]
    return torch.Generator().manual_seed(seed * 1_000_003 + salt * 100_003 + step)


def _np_rng(seed: int, stage: str, step: int) -> np.random.Generator:
    salt = {"vae": 1, "latents": 2, "dit": 3}[stage]
    return np.random.default_rng([seed, salt, step])


def _to_tensor(clips: list[np.ndarray]):
    import torch

    x = torch.from_numpy(np.stack(clips)).permute(0, 4, 1, 2, 3).float()
    return x / 127.5 - 1.0


# ---- stage 1 ----------------------------------------------------------------------------------------------
def _vae_batch(cfg: TrainConfig, step: int):
    """Clips cropped around one of their shapes, and per-pixel loss weights (shape pixels count ``fg_weight`` x)."""
    import torch

    from generation.toyworld.world import KINDS, WorldConfig, render, sample_scene

    rng = _np_rng(cfg.seed, "vae", step)
    wc = WorldConfig(size=cfg.size, frames=cfg.vae_frames)
    clips, weights, c = [], [], cfg.vae_crop
    for _ in range(cfg.vae_batch):
        scene = sample_scene(KINDS[int(rng.integers(len(KINDS)))], rng, wc)
        clip = render(scene)
        obj = scene.objects[int(rng.integers(len(scene.objects)))]
        cx, cy = obj.centre(float(rng.uniform()))
        jx, jy = rng.uniform(-c / 4, c / 4, size=2)
        x = int(np.clip(round(cx - c / 2 + jx), 0, cfg.size - c))
        y = int(np.clip(round(cy - c / 2 + jy), 0, cfg.size - c))
        crop = clip[:, y : y + c, x : x + c]
        fg = np.abs(crop.astype(np.int16) - scene.background).max(-1) > 12
        clips.append(crop)
        weights.append(1.0 + (cfg.vae_fg_weight - 1.0) * fg)
    w = torch.from_numpy(np.stack(weights)).float()[:, None]  # [B, 1, F, H, W]
    return _to_tensor(clips), w


def train_vae(cfg: TrainConfig, root: Path, progress: bool = True):
    import torch
    from tqdm.auto import tqdm

    from generation.toyworld.model import build_vae

    path = root / "vae.pt"
    torch.manual_seed(cfg.seed)
    vae = build_vae(cfg.model).train()
    opt = torch.optim.AdamW(vae.parameters(), lr=cfg.vae_lr, weight_decay=0.0)
    step, losses = 0, []
    if path.is_file():
        st = _load(path)
        _check_identity(st, cfg, "vae", path)
        vae.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, losses = st["step"], st["losses"]
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
            _save(
                {
                    "model": vae.state_dict(),
                    "opt": opt.state_dict(),
                    "step": step,
                    "losses": losses,
                    "identity": stage_identity(cfg, "vae"),
                },
                path,
            )
            _maybe_kill(cfg, "vae", step)
    bar.close()
    return vae.eval(), losses


# ---- stage 2 ----------------------------------------------------------------------------------------------
def training_captions() -> dict[str, list[str]]:
    """Captions the transformer may see, per kind (held-out validation/test captions removed)."""
    from generation.toyworld.splits import held_out_captions
    from generation.toyworld.world import KINDS, all_captions

    held = held_out_captions()
    return {k: [c for c in all_captions(k) if c not in held] for k in KINDS}


def build_latents(cfg: TrainConfig, vae, root: Path, progress: bool = True) -> dict[str, Any]:
    """Render and encode the fixed training set once (resumable in chunks)."""
    import torch
    from tqdm.auto import tqdm

    from generation.toyworld.world import WorldConfig, render, scene_for_caption

    path = root / "latents.pt"
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
    pools = training_captions()
    kinds = sorted(cfg.mix)
    probs = np.array([cfg.mix[k] for k in kinds], dtype=np.float64)
    probs /= probs.sum()
    wc = WorldConfig(size=cfg.size, frames=cfg.frames)
    chunk = 25
    bar = tqdm(total=cfg.clips, initial=len(st["captions"]), desc="latents", disable=not progress)
    while len(st["captions"]) < cfg.clips:
        i0 = len(st["captions"])
        clips, caps, kk = [], [], []
        for i in range(i0, min(cfg.clips, i0 + chunk)):
            rng = _np_rng(cfg.seed, "latents", i)
            kind = kinds[int(rng.choice(len(kinds), p=probs))]
            pool = pools[kind]
            cap = pool[int(rng.integers(len(pool)))]
            clips.append(render(scene_for_caption(cap, rng, wc)))
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


# ---- stage 3 ----------------------------------------------------------------------------------------------
def encode_prompts(tokenizer, text_encoder, texts: list[str], max_len: int = 512):
    """Prompt embeddings exactly as ``WanPipeline._get_t5_prompt_embeds`` makes them (zero-padded to ``max_len``).

    The encoder runs on the batch's longest prompt only: with its attention mask and relative positions, the
    real tokens' outputs do not depend on how much padding follows.
    """
    import torch

    enc = tokenizer(texts, padding="longest", truncation=True, max_length=max_len, return_tensors="pt")
    ids, mask = enc.input_ids, enc.attention_mask
    h = text_encoder(ids, mask).last_hidden_state * mask[..., None].to(torch.float32)
    out = torch.zeros(len(texts), max_len, h.shape[-1], dtype=h.dtype)
    out[:, : h.shape[1]] = h
    return out


def _sigmas(u, shift: float):
    return shift * u / (1 + (shift - 1) * u)


def train_dit(cfg: TrainConfig, data: dict[str, Any], root: Path, progress: bool = True):
    import torch
    from tqdm.auto import tqdm

    from generation.toyworld.model import build_text_encoder, build_transformer
    from generation.toyworld.tokenizer import build_word_tokenizer

    path = root / "dit.pt"
    tok = build_word_tokenizer()
    torch.manual_seed(cfg.seed + 1)
    te = build_text_encoder(cfg.model, len(tok)).train()
    tr = build_transformer(cfg.model).train()
    params = list(tr.parameters()) + list(te.parameters())
    opt = torch.optim.AdamW(params, lr=cfg.dit_lr, weight_decay=0.01)
    step, losses = 0, []
    if path.is_file():
        st = _load(path)
        _check_identity(st, cfg, "dit", path)
        tr.load_state_dict(st["transformer"])
        te.load_state_dict(st["text_encoder"])
        opt.load_state_dict(st["opt"])
        step, losses = st["step"], st["losses"]
    z = data["latents"][0]
    mean = data["mean"].view(1, -1, 1, 1, 1)
    std = data["std"].view(1, -1, 1, 1, 1)
    x_all = (z - mean) / std
    caps = data["captions"]
    bar = tqdm(
        total=cfg.dit_steps, initial=step, desc="transformer", disable=not progress, dynamic_ncols=True
    )
    while step < cfg.dit_steps:
        g = _gen(cfg.seed, "dit", step)
        idx = torch.randint(len(caps), (cfg.dit_batch,), generator=g)
        drop = torch.rand(cfg.dit_batch, generator=g) < cfg.caption_dropout
        texts = ["" if d else caps[int(i)] for i, d in zip(idx, drop)]
        x0 = x_all[idx]
        noise = torch.randn(x0.shape, generator=g)
        sigma = _sigmas(torch.rand(cfg.dit_batch, generator=g), cfg.model.flow_shift).view(-1, 1, 1, 1, 1)
        xt = (1 - sigma) * x0 + sigma * noise
        lr = cfg.dit_lr * min(1.0, (step + 1) / 50) * (0.5 * (1 + np.cos(np.pi * step / cfg.dit_steps)))
        for gr in opt.param_groups:
            gr["lr"] = lr
        emb = encode_prompts(tok, te, texts)
        pred = tr(
            hidden_states=xt, timestep=sigma.flatten() * 1000.0, encoder_hidden_states=emb, return_dict=False
        )[0]
        loss = (pred - (noise - x0)).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        losses.append(loss.item())
        bar.update(1)
        bar.set_postfix(loss=f"{np.mean(losses[-50:]):.4f}")
        if step % cfg.ckpt_every == 0 or step == cfg.dit_steps:
            _save(
                {
                    "transformer": tr.state_dict(),
                    "text_encoder": te.state_dict(),
                    "opt": opt.state_dict(),
                    "step": step,
                    "losses": losses,
                    "identity": stage_identity(cfg, "dit"),
                },
                path,
            )
            _maybe_kill(cfg, "dit", step)
    bar.close()
    return tok, te.eval(), tr.eval(), losses


# ---- driver -----------------------------------------------------------------------------------------------
def train(cfg: TrainConfig, out: str | Path, progress: bool = True) -> Path:
    """Run (or resume) every stage and save the pipeline folder at ``out``; returns it."""
    import torch

    from generation.toyworld.model import assemble_pipeline, build_vae, save_pipeline

    if cfg.frames < 1 or (cfg.frames - 1) % 4:
        raise UserError(f"frames={cfg.frames} must be 4k+1 (e.g. 5, 9, 17)")
    if cfg.size % 16:
        raise UserError(f"size={cfg.size} must be a multiple of 16 (VAE 8 x patch 2)")
    if not 16 <= cfg.vae_crop <= cfg.size or cfg.vae_crop % 8:
        raise UserError(f"vae_crop={cfg.vae_crop} must be a multiple of 8 between 16 and size={cfg.size}")
    torch.set_num_threads(max(1, int(cfg.threads)))
    root = _ckpt_root(cfg)
    root.mkdir(parents=True, exist_ok=True)
    ident = _identity(cfg)
    t0 = time.perf_counter()
    vae, vae_losses = train_vae(cfg, root, progress)
    data = build_latents(cfg, vae, root, progress)
    tok, te, tr, dit_losses = train_dit(cfg, data, root, progress)
    final = build_vae(cfg.model, data["mean"].tolist(), data["std"].tolist())
    final.load_state_dict(vae.state_dict())
    pipe = assemble_pipeline(tok, te, final, tr, cfg.model)
    meta = {
        "what": "toy-world Wan (coloured shapes), trained by vidlab train-gen-toyworld",
        "config": ident,
        "text_encoder": "UMT5, trained jointly with the transformer from scratch",
        "vae_loss_last20": float(np.mean(vae_losses[-20:])),
        "dit_loss_last50": float(np.mean(dit_losses[-50:])),
        "seconds_this_run": round(time.perf_counter() - t0, 1),
        "generate": {"height": cfg.size, "width": cfg.size, "frames": cfg.frames},
    }
    return save_pipeline(pipe, out, meta)


def _parser() -> argparse.ArgumentParser:
    from vidlab.config import add_config_args

    p = argparse.ArgumentParser(
        prog="vidlab train-gen-toyworld",
        description="Train the coloured-shapes Wan (AutoencoderKLWan, then WanTransformer3DModel + UMT5 with flow "
        "matching) on CPU and save it as a diffusers pipeline folder. Resumes after a kill from checkpoints in "
        "ckpt_dir (default: the vidlab cache, one folder per config).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="""examples:
  # reproduce the shipped weights (fixed seed; about 25 min on 2 free cores)
  vidlab train-gen-toyworld --out generation/toyworld/weights
  # a quicker, smaller run
  vidlab train-gen-toyworld --out outputs/toy vae_steps=100 dit_steps=300 clips=500
  # then generate with it
  vidlab generate "a red circle to the left of a blue square" --preset gen-toyworld model=outputs/toy --out outputs/g

keys: seed size frames threads vae_steps vae_batch vae_crop vae_frames vae_lr clips mix.single mix.motion
mix.relation mix.count dit_steps dit_batch dit_lr caption_dropout ckpt_every ckpt_dir model.* (z_dim, layers, ...)""",
    )
    p.add_argument("--out", required=True, help="pipeline folder to write (replaced atomically at the end)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_config_args(p)
    return p


def train_main(argv: list[str] | None = None) -> int:
    """Entry point of ``vidlab train-gen-toyworld``."""
    from vidlab.config import config_from_args

    args = _parser().parse_args(argv)
    cfg = config_from_args(TrainConfig, args)
    out = train(cfg, args.out, progress=not args.no_progress)
    print(f"wrote the toy-world Wan pipeline to {out}/ (checkpoints in {_ckpt_root(cfg)})")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(train_main())
