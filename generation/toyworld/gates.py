"""Gates that come before any Comp-Attn figure: does the toy-world Wan carry and draw shapes at all?

* ``vae_roundtrip(vae, ...)`` -- encode + decode fresh full-frame clips (scenes drawn from a seed stream the
  training set never uses) and ask the exact detector, frame by frame, whether every object of the scene is still
  there (colour AND shape). Reported per frame position (frame 0 is its own causal chunk): the gate is the minimum.
* ``denoise_probe(pipe, level, ...)`` -- the denoiser's own shape loss: real clips encoded, noised to ``level``,
  denoised with the pipeline's transformer and Euler steps (classifier-free guidance as in sampling), decoded,
  scored by the caption's presence. Beside it the same clips through the VAE alone (level 0).
* ``single_presence(pipe, ...)`` -- the base model (no Comp-Attn) generating every single-subject caption
  ("a red circle", ...): the share of videos where the detector finds the subject in at least half the frames.
  The 24 colour x shape captions are all training captions (there are no others); what is new is every scene:
  the sampling noise decides position and size, and no training clip is reproduced.

All functions are deterministic for a given seed and never touch the training RNG streams.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vidlab.generation.subjects import model_text_length
from vidlab.generation.toyworld.detect import detect_frame
from vidlab.generation.toyworld.metrics import score_video
from vidlab.generation.toyworld.world import (
    KINDS,
    WorldConfig,
    all_captions,
    render,
    sample_scene,
    scene_for_caption,
)

GATE_SALT = 7  # seed stream of gate scenes: training uses salts 1-3 (see train._np_rng)
VAE_GATE = 0.9
SINGLE_GATE = 0.8


def _to_tensor(clips: Sequence[np.ndarray]):
    import torch

    x = torch.from_numpy(np.stack(list(clips))).permute(0, 4, 1, 2, 3).float()
    return x / 127.5 - 1.0


def _to_uint8(x) -> np.ndarray:
    """Decoded ``[B, 3, F, H, W]`` in [-1, 1] -> uint8 ``[B, F, H, W, 3]``."""
    arr = ((x.clamp(-1, 1) + 1) * 127.5).round().to(dtype=__import__("torch").uint8)
    return arr.permute(0, 2, 3, 4, 1).cpu().numpy()


def _objects_kept(frame: np.ndarray, scene: Any) -> bool:
    dets = detect_frame(frame)
    return all(any(d.colour == o.colour and d.shape == o.shape for d in dets) for o in scene.objects)


def gate_scenes(kind: str, n_per_caption: int, seed: int, size: int = 64, frames: int = 5) -> list:
    """Fresh scenes of ``kind`` from the gate seed stream (single: every caption ``n_per_caption`` times)."""
    wc = WorldConfig(size=size, frames=frames)
    rng = np.random.default_rng([seed, GATE_SALT, KINDS.index(kind)])
    if kind == "single":
        return [scene_for_caption(c, rng, wc) for c in all_captions("single") for _ in range(n_per_caption)]
    return [sample_scene(kind, rng, wc) for _ in range(24 * n_per_caption)]


def vae_roundtrip(
    vae: Any,
    kinds: Sequence[str] = ("single",),
    n_per_caption: int = 2,
    seed: int = 0,
    size: int = 64,
    frames: int = 5,
    batch: int = 8,
) -> dict[str, Any]:
    """Share of frames whose every object survives encode -> decode (posterior mean), per frame position.

    Returns ``{"per_frame": [...], "min": .., "mean": .., "clips": n, "clean": ..}``; ``clean`` is the same
    check on the unencoded renders (the detector's ceiling on these scenes).
    """
    import torch

    scenes = [s for k in kinds for s in gate_scenes(k, n_per_caption, seed, size, frames)]
    kept = np.zeros((len(scenes), frames), dtype=bool)
    clean = np.zeros((len(scenes), frames), dtype=bool)
    vae = vae.eval()
    for i0 in range(0, len(scenes), batch):
        chunk = scenes[i0 : i0 + batch]
        clips = [render(s) for s in chunk]
        with torch.no_grad():
            z = vae.encode(_to_tensor(clips)).latent_dist.mean
            rec = _to_uint8(vae.decode(z).sample)
        for j, (s, clip, r) in enumerate(zip(chunk, clips, rec)):
            for f in range(frames):
                kept[i0 + j, f] = _objects_kept(r[f], s)
                clean[i0 + j, f] = _objects_kept(clip[f], s)
    per = kept.mean(axis=0)
    return {
        "per_frame": [round(float(v), 4) for v in per],
        "min": float(per.min()),
        "mean": float(kept.mean()),
        "clean": float(clean.mean()),
        "clips": len(scenes),
        "kinds": list(kinds),
        "gate": VAE_GATE,
        "passed": bool(per.min() >= VAE_GATE),
    }


def _encode_text(pipe: Any, prompts: list[str], max_sequence_length: int | None):
    import torch

    with torch.no_grad():
        cond, uncond = pipe.encode_prompt(
            prompts,
            negative_prompt=[""] * len(prompts),
            do_classifier_free_guidance=True,
            device="cpu",
            max_sequence_length=model_text_length(pipe.tokenizer, max_sequence_length),
        )
    return cond, uncond


SHAPE_SWAP = {"circle": "square", "square": "circle", "triangle": "star", "star": "triangle"}


def _swap_shape(caption: str) -> str:
    """ "a red circle" -> "a red square" (single-subject captions: the shape is the last word)."""
    head, shape = caption.rsplit(" ", 1)
    return f"{head} {SHAPE_SWAP[shape]}"


def denoise_probe(
    pipe: Any,
    level: float = 0.3,
    n_per_caption: int = 1,
    seed: int = 0,
    steps: int = 8,
    guidance: float = 4.0,
    batch: int = 8,
    max_sequence_length: int | None = None,
    swap_shape: bool = False,
) -> dict[str, Any]:
    """Presence after noising real single-subject clips to ``level`` and denoising them (vs the VAE alone).

    Euler steps of the flow (``x <- x + (s_next - s) v``) on a uniform grid from ``level`` to 0, the velocity
    from the pipeline's transformer with classifier-free guidance, latents normalised as ``WanPipeline`` does.

    ``swap_shape``: denoise with the caption's shape swapped (circle <-> square, triangle <-> star), a control
    that asks whether the model draws the shape it is told or the one the noisy clip shows: ``presence`` is then
    the clip's own subject kept, ``presence_told`` the told one drawn (without the swap both are the same).
    """
    import torch

    vae, tr = pipe.vae, pipe.transformer
    cfgv = vae.config
    mean = torch.tensor(cfgv.latents_mean).view(1, -1, 1, 1, 1)
    std = torch.tensor(cfgv.latents_std).view(1, -1, 1, 1, 1)
    scenes = gate_scenes("single", n_per_caption, seed + 1)
    hits_vae = hits = told = 0
    for i0 in range(0, len(scenes), batch):
        chunk = scenes[i0 : i0 + batch]
        clips = [render(s) for s in chunk]
        with torch.no_grad():
            z = vae.encode(_to_tensor(clips)).latent_dist.mean
            x0 = (z - mean) / std
            g = torch.Generator().manual_seed(seed * 1000 + i0)
            x = (1 - level) * x0 + level * torch.randn(x0.shape, generator=g)
            captions = [_swap_shape(s.caption) if swap_shape else s.caption for s in chunk]
            cond, uncond = _encode_text(pipe, captions, max_sequence_length)
            grid = np.linspace(level, 0.0, steps + 1)
            for s_now, s_next in zip(grid[:-1], grid[1:]):
                t = torch.full((len(chunk),), float(s_now) * 1000.0)
                vc = tr(hidden_states=x, timestep=t, encoder_hidden_states=cond, return_dict=False)[0]
                vu = tr(hidden_states=x, timestep=t, encoder_hidden_states=uncond, return_dict=False)[0]
                v = vu + guidance * (vc - vu)
                x = x + float(s_next - s_now) * v
            den = _to_uint8(vae.decode(x * std + mean).sample)
            ref = _to_uint8(vae.decode(z).sample)
        for s, c, d, r in zip(chunk, captions, den, ref):
            hits += score_video(s.caption, d).presence
            told += score_video(c, d).presence
            hits_vae += score_video(s.caption, r).presence
    n = len(scenes)
    return {
        "level": level,
        "presence": hits / n,
        "presence_told": told / n,
        "swap_shape": swap_shape,
        "presence_vae_only": hits_vae / n,
        "clips": n,
        "steps": steps,
    }


def single_presence(
    pipe: Any,
    seeds: Sequence[int] = (0, 1),
    steps: int = 12,
    guidance: float = 4.0,
    height: int = 64,
    width: int = 64,
    frames: int = 5,
    batch: int = 8,
    captions: Sequence[str] | None = None,
    max_sequence_length: int | None = None,
) -> dict[str, Any]:
    """Base-model presence (colour AND shape, half the frames) on every single-subject caption x ``seeds``.

    Also reports colour-only presence and presence in frame 0 alone (its own latent frame), so a model that
    draws the right colour as a blob, or ignores the prompt in the first frame, shows as such.
    """
    import torch

    caps = list(captions) if captions is not None else all_captions("single")
    jobs = [(c, int(sd)) for sd in seeds for c in caps]
    recs: list[dict[str, Any]] = []
    for i0 in range(0, len(jobs), batch):
        chunk = jobs[i0 : i0 + batch]
        gens = [torch.Generator("cpu").manual_seed(sd) for _, sd in chunk]
        with torch.no_grad():
            out = pipe(
                prompt=[c for c, _ in chunk],
                negative_prompt=[""] * len(chunk),
                height=height,
                width=width,
                num_frames=frames,
                num_inference_steps=steps,
                guidance_scale=guidance,
                max_sequence_length=model_text_length(pipe.tokenizer, max_sequence_length),
                generator=gens,
                output_type="np",
            ).frames
        for (c, sd), video in zip(chunk, np.asarray(out)):
            sc = score_video(c, video)
            f0 = score_video(c, video[:1])
            recs.append(
                {
                    "prompt": c,
                    "seed": sd,
                    "presence": sc.presence,
                    "colour": sc.presence_colour,
                    "frame0": f0.presence,
                }
            )
    n = len(recs)
    pres = sum(bool(r["presence"]) for r in recs) / n
    return {
        "presence": pres,
        "presence_colour": sum(bool(r["colour"]) for r in recs) / n,
        "presence_frame0": sum(bool(r["frame0"]) for r in recs) / n,
        "videos": n,
        "gate": SINGLE_GATE,
        "passed": bool(pres >= SINGLE_GATE),
        "records": recs,
    }


def record_gates(
    pipeline_dir: Any, seeds: Sequence[int] = (0, 1), steps: int | None = None, guidance: float | None = None
) -> dict:
    """Measure both gates on a saved toy-world pipeline folder and record them in its ``toyworld.json``.

    The VAE round trip (``vae_roundtrip``, 24 captions x 2 fresh scenes) and the base model's single-subject
    presence (``single_presence`` at ``seeds``, ``steps``, ``guidance``; None: the model's own sampling settings,
    its ``toyworld.json`` ``generate`` entry, else 12 steps at guidance 4), each with how it was measured; the
    per-video records stay out of the file. Returns the ``gates`` entry.
    """
    import json
    from pathlib import Path

    from diffusers import WanPipeline

    from vidlab.generation.toyworld.evaluate import SamplingConfig
    from vidlab.io import atomic_write_json

    folder = Path(pipeline_dir)
    own = SamplingConfig.from_model(folder)  # the folder's `generate` entry, else 12 steps at guidance 4
    steps = own.steps if steps is None else steps
    guidance = own.guidance if guidance is None else guidance
    meta_path = folder / "toyworld.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    from vidlab.generation.pipeline import import_own_components

    import_own_components(folder)  # a MiniLM text encoder's module
    pipe = WanPipeline.from_pretrained(folder)
    pipe.set_progress_bar_config(disable=True)
    vae = vae_roundtrip(pipe.vae)
    sp = single_presence(pipe, seeds=seeds, steps=steps, guidance=guidance)
    sp.pop("records")
    sp["presence"] = round(sp["presence"], 3)
    gates = {
        "vae_roundtrip": {
            **vae,
            "how": "gates.vae_roundtrip(pipe.vae, n_per_caption=2): 24 single captions x 2 fresh full-frame scenes",
        },
        "single_presence": {
            **sp,
            "how": f"gates.single_presence(pipe, seeds={tuple(seeds)}, steps={steps}, guidance={guidance}): "
            f"24 single captions x {len(seeds)} seeds, at the model's own text length",
        },
    }
    meta["gates"] = gates
    atomic_write_json(meta_path, meta)
    return gates


__all__ = [
    "SINGLE_GATE",
    "VAE_GATE",
    "denoise_probe",
    "gate_scenes",
    "record_gates",
    "single_presence",
    "vae_roundtrip",
]
