"""Cost per ``clip_sample`` call on a rollout worker: one CLIP per worker vs a shared Ray actor for text queries.

    python benchmarks/rl_clip_tool.py [--calls 20] [--frames 1200] [--no-ray] [--quick | --smoke]

Measured side by side in one run, all on CPU with one intra-op thread:
1. the ViT-B/16 text tower (OpenAI CLIP's architecture, random weights: the cost is the architecture's) embedding
   one short prompt in-process (what every rollout worker does with its own CLIP);
2. the same model inside one Ray actor, called from the driver (``ray.get(actor.embed.remote(prompt))``):
   what a shared embedding actor would cost per call, serialization and scheduling included;
3. a whole ``ClipSampleTool.execute`` (tiny built-in CLIP over a warm, memory-mapped ``FrameIndex``): the part of a
   call that does not depend on where the text is embedded (index lookup, top-4, decoding 4 frames).
Prints medians and the actor / in-process ratio, then one JSON line (``vidlab bench rl_clip_tool``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, when run as a script


def _median_ms(fn, n: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def _text_model():
    import open_clip
    import torch

    model = open_clip.create_model("ViT-B-16", pretrained=None).eval()
    tok = open_clip.get_tokenizer("ViT-B-16")

    def embed(prompt: str):
        with torch.inference_mode():
            e = model.encode_text(tok([prompt]))
            return (e / e.norm(dim=-1, keepdim=True)).numpy()

    return embed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--frames", type=int, default=1200)
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray actor measurement")
    ap.add_argument("--quick", action="store_true", help="5 calls over 240 frames")
    ap.add_argument("--smoke", action="store_true", help="2 calls over 60 frames (every part, seconds)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.calls, args.frames = 2, 60
    elif args.quick:
        args.calls, args.frames = 5, 240
    import torch

    torch.set_num_threads(1)
    prompt = "person opening a red door"
    embed = _text_model()
    local = _median_ms(lambda: embed(prompt), args.calls)
    print(f"in-process ViT-B/16 text embedding: {local:.1f} ms / call (median of {args.calls})")

    actor_ms = None
    if not args.no_ray:
        import ray

        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
        try:

            @ray.remote(num_cpus=1)
            class TextEmbedder:
                def __init__(self):
                    import torch

                    torch.set_num_threads(1)
                    self.embed = _text_model()

                def embed_one(self, p: str):
                    return self.embed(p)

            actor = TextEmbedder.remote()
            ray.get(actor.embed_one.remote(prompt))
            actor_ms = _median_ms(lambda: ray.get(actor.embed_one.remote(prompt)), args.calls)
        finally:
            ray.shutdown()
        print(
            f"Ray actor ViT-B/16 text embedding:   {actor_ms:.1f} ms / call ({actor_ms / local:.2f}x in-process)"
        )

    from vidlab.understanding.rl.tools import SESSION_KEY, ClipSampleTool, new_session
    from vidlab.video.synth import render_synthetic

    with tempfile.TemporaryDirectory() as tmp:
        video = render_synthetic(Path(tmp) / "v.mp4", args.frames, fps=10, width=320, height=240, seed=0)
        tool = ClipSampleTool(
            {
                "clip_model": "vidlab-tiny",
                "device": "cpu",
                "index_cache_dir": str(Path(tmp) / "idx"),
                "max_calls": 10**9,
            }
        )

        class Data:
            extra_fields = {SESSION_KEY: new_session(str(video), args.frames, 10.0, [], 10**9)}

        i = [0]

        def call():
            i[0] += 1  # a new prompt each call: the duplicate rule never fires
            coro = tool.execute(
                "x",
                {"start_frame": 0, "end_frame": args.frames, "prompt": f"red square {i[0]}"},
                agent_data=Data,
            )
            _, _, m = asyncio.run(coro)
            assert m["error"] is None, m["error"]

        call()  # builds the index once (decode + embed every grid frame)
        whole = _median_ms(call, args.calls)
    print(f"ClipSampleTool.execute, tiny CLIP, warm index ({args.frames} frames): {whole:.1f} ms / call")
    figures = {
        "in_process_text_ms": round(local, 2),
        "ray_actor_text_ms": None if actor_ms is None else round(actor_ms, 2),
        "actor_over_in_process": None if actor_ms is None else round(actor_ms / local, 3),
        "tool_call_ms": round(whole, 2),
        "calls": args.calls,
        "frames": args.frames,
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
