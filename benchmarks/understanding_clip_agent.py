"""clip_sample per-call cost: the reference path (decode + embed K candidates on every call) vs FrameIndex-served.

Usage (repo root, venv active): python benchmarks/understanding_clip_agent.py [--frames 2400]
Prints a table of ms/call and ratios measured side by side in one run, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--frames",
        type=int,
        default=None,
        help="length of the synthetic video (10 fps, 320x240; default 2400)",
    )
    ap.add_argument("--quick", action="store_true", help="a 1,000-frame video (under a minute)")
    ap.add_argument("--smoke", action="store_true", help="a 450-frame video (seconds)")
    args = ap.parse_args()
    args.frames = args.frames or (450 if args.smoke else 1000 if args.quick else 2400)
    if args.frames < 401:
        ap.error(f"--frames {args.frames}: the ranges are at least 400 frames long, give 401 or more")

    n = args.frames
    with tempfile.TemporaryDirectory(prefix="vidlab-bench-") as tmp:
        run(n, Path(tmp))


def run(n: int, d: Path) -> None:
    from vidlab.clip import TINY_MODEL, FrameIndex, Sampling, load_model
    from vidlab.understanding.agents import ClipAgent
    from vidlab.video.synth import render_synthetic

    video = render_synthetic(d / "v.mp4", n, fps=10, width=320, height=240, seed=0)
    model = load_model(TINY_MODEL)
    t = time.perf_counter()
    idx = FrameIndex.build(video, model, Sampling.fps(1.0), cache_dir=d / "cache", progress=False)
    build = time.perf_counter() - t
    ref = ClipAgent(str(video), model)  # reference behaviour: no cache
    par = ClipAgent(idx, model)  # parity: same candidates, embeddings cached in the index
    dense = ClipAgent(idx, model, parity=False)  # search every indexed frame in the range
    prompts = [
        "red circle",
        "blue square",
        "green triangle",
        "white text",
        "counter",
        "yellow",
        "ball",
        "dark",
    ]
    rng = np.random.default_rng(0)
    starts = rng.integers(0, n - 400, len(prompts))
    fresh = [(int(s), int(s) + int(rng.integers(400, n - s + 1))) for s in starts]
    scenarios = {
        "same range, 8 prompts": [((0, n), p) for p in prompts],
        "8 fresh ranges": list(zip(fresh, prompts)),
    }

    def timed(agent, calls):
        t0 = time.perf_counter()
        out = [agent.indices(s, e, p) for (s, e), p in calls]
        return (time.perf_counter() - t0) / len(calls) * 1e3, out

    result = {"frames": n, "model": model.tag, "index_build_s": round(build, 2), "cases": {}}
    print(f"video {n} frames 320x240 @10fps, model {model.tag}, index build (fps=1): {build:.2f}s")
    print(
        f"{'calls':24s} {'ref ms':>8s} {'parity cold':>12s} {'parity warm':>12s} {'search':>8s}  ratios ref/(cold, warm, search)"
    )
    for name, calls in scenarios.items():
        r, o_ref = timed(ref, calls)
        cold, o_par = timed(par, calls)
        warm, _ = timed(par, calls)
        srch, _ = timed(dense, calls)
        overlap = float(np.mean([len(set(a) & set(b)) / 4 for a, b in zip(o_ref, o_par)]))
        print(
            f"{name:24s} {r:8.1f} {cold:12.1f} {warm:12.1f} {srch:8.1f}  {r / cold:.1f}x {r / warm:.1f}x {r / srch:.1f}x"
            f"  (top-4 overlap ref vs parity {overlap:.2f})"
        )
        result["cases"][name] = {
            "ref_ms": r,
            "parity_cold_ms": cold,
            "parity_warm_ms": warm,
            "search_ms": srch,
            "top4_overlap": overlap,
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
