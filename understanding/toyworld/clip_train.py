"""Train the toy world's CLIP: open_clip's own ``CLIP`` class with a tiny config, contrastive on frames + captions.

Frames are the decoded mp4 frames of the training videos (what the frame index will embed); captions come from
the world's ground truth (``world.caption``) with random attribute dropping ("a red triangle, blue border",
"a triangle", "blue border", ...). Because many frames share a caption, the loss is a multi-positive InfoNCE:
an image's targets are every caption in the batch that is *true of it* (and vice versa). The result is saved with
``vidlab.clip.ClipModel.save`` (``open_clip_config.json`` + safetensors) and loads with
``vidlab.clip.load_model(DIR)`` like any open_clip model.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vidlab.understanding.toyworld.world import MemoryReader, VideoSpec

TOY_CLIP_CFG: dict[str, Any] = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "head_width": 32, "patch_size": 8},
    "text_cfg": {"context_length": 24, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2},
}
ARCH = "vidlab-toyworld"


@dataclass
class ClipTrainConfig:
    steps: int = 400
    batch_size: int = 128
    lr: float = 2e-3
    weight_decay: float = 0.05
    event_fraction: float = 0.6  # share of each batch drawn from frames that show an event
    seed: int = 0
    # draw event frames with equal weight per shape (and grey apart) instead of per frame: rare, brief events
    # (the where world's lit needle, upright plus, star) are then seen as often as the common circles and squares
    balance: bool = False


def _attrs(spec: VideoSpec, t: int) -> tuple[str, str | None, str | None]:
    ev = spec.event_at(t)
    return spec.border, (ev.shape if ev else None), (ev.colour if ev else None)


def caption_variants(border: str, shape: str | None, colour: str | None) -> list[str]:
    """Every caption the trainer may pair with a frame of these attributes."""
    if shape is None:
        return [f"no shape, {border} border", f"{border} border", "no shape"]
    if shape == "cross":  # the where world's foil: "a tilted plus", so "plus" is true of it too
        return [
            f"a {colour} tilted plus, {border} border",
            f"a {colour} tilted plus",
            f"{colour} tilted plus",
            "a tilted plus",
            "tilted plus",
            "a plus",
            "plus",
            f"{border} border",
        ]
    return [
        f"a {colour} {shape}, {border} border",
        f"a {colour} {shape}",
        f"{colour} {shape}",
        f"a {shape}",
        shape,
        f"{border} border",
    ]


def caption_true(cap: str, border: str, shape: str | None, colour: str | None) -> bool:
    """Is this caption (from ``caption_variants``) a true description of a frame with these attributes?"""
    return cap in caption_variants(border, shape, colour)


def new_model(seed: int = 0):
    """A freshly initialised toy CLIP wrapped as ``vidlab.clip.ClipModel`` (open_clip's own CLIP class)."""
    import open_clip
    import torch

    from vidlab.clip.models import ClipModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = open_clip.CLIP(**TOY_CLIP_CFG)
    module.visual.preprocess_cfg = {
        "size": 32,
        "mode": "RGB",
        "mean": (0.5, 0.5, 0.5),
        "std": (0.25, 0.25, 0.25),
        "interpolation": "bilinear",
        "resize_mode": "squash",
        "fill_color": 0,
    }
    tok = open_clip.SimpleTokenizer(context_length=TOY_CLIP_CFG["text_cfg"]["context_length"])
    return ClipModel(module, tok, f"{ARCH}:seed{seed}", dict(TOY_CLIP_CFG), "cpu", "fp32")


def train_clip(
    videos: Sequence[tuple[VideoSpec, str | os.PathLike]],
    cfg: ClipTrainConfig | None = None,
    log: Any = None,
    progress: bool = True,
):
    """Train a toy CLIP on ``(spec, mp4 path)`` pairs; returns the ``ClipModel`` (re-tagged by its weights)."""
    import torch
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    cfg = cfg or ClipTrainConfig()  # torch threads: the caller's (train.run sets ToyTrainConfig.threads)
    rng = np.random.default_rng(cfg.seed)
    clip = new_model(cfg.seed)
    model = clip.model.train()
    frames, attrs = [], []
    for spec, path in videos:
        r = MemoryReader(path)
        frames.append(r.get_frames(np.arange(r.num_frames)))
        attrs.extend(_attrs(spec, t) for t in range(r.num_frames))
    pix = np.concatenate(frames)
    has_event = np.array([a[1] is not None for a in attrs])
    ev_idx, bg_idx = np.flatnonzero(has_event), np.flatnonzero(~has_event)
    ev_p = None
    if cfg.balance:  # each (shape, grey or not) group gets the same share of the event frames drawn
        group = [(attrs[i][1], attrs[i][2] == "grey") for i in ev_idx]
        sizes: dict[Any, int] = {}
        for gkey in group:
            sizes[gkey] = sizes.get(gkey, 0) + 1
        ev_p = np.array([1.0 / sizes[gkey] for gkey in group])
        ev_p /= ev_p.sum()
    vocab = sorted({c for a in set(attrs) for c in caption_variants(*a)})
    cap_pos = {c: i for i, c in enumerate(vocab)}
    tokens = clip.tokenizer(vocab)
    truth = {a: np.array([caption_true(c, *a) for c in vocab]) for a in set(attrs)}
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps, pct_start=0.1)
    bar = tqdm(range(cfg.steps), desc="train toy CLIP", disable=not progress)
    for step in bar:
        n_ev = int(cfg.batch_size * cfg.event_fraction)
        idx = np.concatenate([rng.choice(ev_idx, n_ev, p=ev_p), rng.choice(bg_idx, cfg.batch_size - n_ev)])
        batch_attrs = [attrs[i] for i in idx]
        caps = [rng.choice(caption_variants(*a)) for a in batch_attrs]
        cap_ids = np.array([cap_pos[c] for c in caps])
        match = np.stack([truth[a][cap_ids] for a in batch_attrs]).astype(np.float32)  # [img, cap]
        x = clip.preprocess(pix[idx])
        img = F.normalize(model.encode_image(x), dim=-1)
        txt = F.normalize(model.encode_text(tokens[torch.from_numpy(cap_ids)]), dim=-1)
        logits = model.logit_scale.exp().clamp(max=100) * img @ txt.T
        m = torch.from_numpy(match)
        loss_i = -(F.log_softmax(logits, 1) * (m / m.sum(1, keepdim=True))).sum(1).mean()
        loss_t = -(F.log_softmax(logits, 0) * (m / m.sum(0, keepdim=True))).sum(0).mean()
        loss = (loss_i + loss_t) / 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 20 == 0 or step == cfg.steps - 1:
            bar.set_postfix(loss=f"{loss.item():.3f}")
            if log is not None:
                log({"stage": "clip", "step": step, "loss": round(loss.item(), 4)})
    model.eval()
    clip.refresh_tag()
    return clip


def save_clip(clip: Any, directory: str | os.PathLike, half: bool = True) -> Path:
    """Save as open_clip config + safetensors (fp16 weights by default: half the size; loads as fp32)."""
    import torch

    if half:
        clip.model.half()
        try:
            return clip.save(directory)
        finally:
            clip.model.float()
    with torch.no_grad():
        return clip.save(directory)


def needle_recall(
    clip: Any,
    split_root: str | os.PathLike,
    specs: Sequence[VideoSpec],
    k: int = 4,
    cache_dir: str | os.PathLike | None = None,
) -> dict[str, float]:
    """Text->frame recall@k for the needle events: does ``clip_sample(0, total, prompt)`` (the real agent over the
    cached frame index) return at least one frame of the event? Prompts: the shape ("triangle", "plus")."""
    from vidlab.clip import FrameIndex, Sampling
    from vidlab.understanding.agents import ClipAgent

    hits: dict[str, list[int]] = {"triangle": [], "plus": []}
    for spec in specs:
        path = Path(split_root) / "videos" / f"{spec.seed:06d}.mp4"
        idx = FrameIndex.build(path, clip, Sampling.fps(spec.fps), cache_dir=cache_dir, progress=False)
        agent = ClipAgent(idx, clip, parity=True, reader=MemoryReader(path))
        for shape in hits:
            ev = [e for e in spec.events if e.shape == shape]
            if not ev:
                continue
            got = agent.indices(0, spec.num_frames, shape)
            hits[shape].append(int(any(ev[0].start <= f < ev[0].end for f in got)))
    return {f"recall@{k}_{s}": float(np.mean(v)) if v else float("nan") for s, v in hits.items()}
