"""Draw the README picture: Comp-Attn off vs on, same seeds, on the shipped toy-world Wan, layout drawn.

    OMP_NUM_THREADS=1 python docs/scripts/comp_attn_figure.py --out docs/assets/comp_attn_toyworld.png

Both rows use the preset ``generate/toyworld-calibrated`` (the quickstart's) and one rule-planned layout for
the prompt; the top row has Comp-Attn off (plain diffusers on the same seeds), the bottom row on. Every tile is
the middle frame of its video with the layout's boxes drawn over it, and under it the exact detector's verdict
on the whole video (every subject drawn? the relation? IoU with the layout). Nothing is picked: the seeds are
0..N-1. About a minute of one CPU core.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

PROMPT = "a red circle to the left of a blue square"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/assets/comp_attn_toyworld.png")
    ap.add_argument("--seeds", type=int, default=6, help="seeds 0..N-1 (default 6)")
    ap.add_argument("--prompt", default=PROMPT)
    args = ap.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch
    from matplotlib.patches import Rectangle

    from vidlab.config import resolve
    from vidlab.generation.config import CompAttnConfig
    from vidlab.generation.pipeline import (
        GenerateConfig,
        generate_video,
        load_pipeline,
        model_source,
        planner_kwargs,
    )
    from vidlab.generation.planners import plan_layout
    from vidlab.generation.toyworld.metrics import judge_toyworld_videos

    torch.set_num_threads(1)
    cfg = resolve(GenerateConfig, "generate/toyworld-calibrated", [])
    pipe = load_pipeline(cfg)
    layout = plan_layout(args.prompt, cfg.planner, **(planner_kwargs(cfg) or {}))
    seeds = list(range(args.seeds))
    rows = {
        "Comp-Attn off": CompAttnConfig(enabled=False),
        "Comp-Attn on (SCI + LAM)": cfg.comp_attn,
    }
    results = {}
    for name, comp in rows.items():
        gen = generate_video(pipe, cfg, args.prompt, layout, seed=seeds, comp_attn=comp)
        verdicts = judge_toyworld_videos(model_source(cfg.model), args.prompt, gen.videos, layout)
        results[name] = (gen.videos, verdicts)

    colours = ["#ff5050", "#50a0ff", "#50ff50", "#ffd040"]
    fig, axes = plt.subplots(2, len(seeds), figsize=(1.9 * len(seeds), 5.6), squeeze=False)
    summary = {}
    for r, (name, (videos, verdicts)) in enumerate(results.items()):
        summary[name] = verdicts
        for c, seed in enumerate(seeds):
            ax = axes[r][c]
            frames = videos[c]
            h, w = frames.shape[1:3]
            ax.imshow(frames[len(frames) // 2], interpolation="nearest")
            for k, subj in enumerate(layout.subjects):
                x0, y0, x1, y1 = subj.box_at(0.5)
                ax.add_patch(
                    Rectangle(
                        (x0 * w - 0.5, y0 * h - 0.5),
                        (x1 - x0) * w,
                        (y1 - y0) * h,
                        fill=False,
                        lw=1.5,
                        ls="--",
                        ec=colours[k % len(colours)],
                    )
                )
            v = verdicts[c] if verdicts else {}
            yes = {True: "yes", False: "no", None: "-"}
            ax.set_title(f"seed {seed}", fontsize=9)
            ax.set_xlabel(
                f"shapes: {yes[v.get('presence')]}  colours: {yes[v.get('presence_colour')]}\n"
                f"relation: {yes[v.get('relation')]}  IoU {v.get('iou', float('nan')):.2f}",
                fontsize=8,
            )
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ious = [x.get("iou") or 0.0 for x in verdicts or []]
                mean = sum(ious) / len(ious) if ious else float("nan")
                ax.set_ylabel(f"{name}\nmean IoU {mean:.2f}", fontsize=9)
    labels = ", ".join(f"{s.phrase} (box {colours[k % len(colours)]})" for k, s in enumerate(layout.subjects))
    fig.suptitle(
        f'"{args.prompt}": toy-world Wan, same seeds, middle frame; dashed: the planned layout\n'
        "under each video, the exact detector on the whole video: both shapes drawn? both colours? "
        "the relation (needs both shapes)? IoU with the layout",
        fontsize=9,
    )
    fig.tight_layout()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"wrote {out} ({labels})")
    print(json.dumps({"prompt": args.prompt, "seeds": seeds, "verdicts": summary}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
