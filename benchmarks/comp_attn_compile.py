"""torch.compile with Comp-Attn on: graph breaks, graphs and the output against eager, on the tiny pipelines.

    python benchmarks/comp_attn_compile.py            # Wan2.1 and Wan2.2 forms, eager and aot_eager backends
    python benchmarks/comp_attn_compile.py --quick    # 2 steps
    python benchmarks/comp_attn_compile.py --smoke    # 1 step, the eager backend only

For each (variant, backend): Comp-Attn installed (SCI, LAM in both experts' windows, map capture), one eager
``comp.generate`` as the reference, then the transformer(s) compiled with ``fullgraph=True`` and the same call
through a plain ``pipe(prompt=...)``. Prints one row per case and a JSON line: graph breaks (dynamo's
counter), distinct graphs compiled, max |compiled - eager| on the latents, LAM log entries of each run.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

PROMPT = "a red cat on the left and a blue dog on the right"


def run(variant: str, backend: str, steps: int) -> dict:
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    from vidlab.generation.comp_attn import apply_comp_attn
    from vidlab.generation.config import CompAttnConfig
    from vidlab.generation.tiny import build_tiny_pipeline

    kw = dict(height=32, width=32, num_frames=9, num_inference_steps=steps, output_type="latent")
    pipe = build_tiny_pipeline(variant)
    cfg = CompAttnConfig(capture_attention=True)
    cfg.lam.step_fraction = cfg.lam.step_fraction_2 = 0.5
    names = [n for n in ("transformer", "transformer_2") if getattr(pipe, n, None) is not None]
    originals = {n: getattr(pipe, n) for n in names}
    with apply_comp_attn(pipe, cfg) as comp:
        t0 = time.perf_counter()
        eager = comp.generate(PROMPT, generator=torch.Generator().manual_seed(0), **kw)
        t_eager = time.perf_counter() - t0
        torch._dynamo.reset()
        counters.clear()
        for n in names:
            setattr(pipe, n, torch.compile(originals[n], fullgraph=True, backend=backend))
        try:
            t0 = time.perf_counter()
            out = pipe(PROMPT, generator=torch.Generator().manual_seed(0), **kw).frames
            t_compiled = time.perf_counter() - t0
            res = comp.last_result
        finally:
            for n in names:
                setattr(pipe, n, originals[n])
    return {
        "variant": variant,
        "backend": backend,
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "graphs": int(counters["stats"]["unique_graphs"]),
        "max_abs_diff": float((torch.as_tensor(out) - torch.as_tensor(eager.output.frames)).abs().max()),
        "lam_entries_eager": len(eager.lam_log),
        "lam_entries_compiled": len(res.lam_log),
        "first_call_s_eager": round(t_eager, 2),
        "first_call_s_compiled": round(t_compiled, 2),  # includes compilation
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=None, help="denoising steps (default 4; quick 2; smoke 1)")
    ap.add_argument("--backends", nargs="+", default=None, help="default eager aot_eager; smoke: eager")
    ap.add_argument("--quick", action="store_true", help="2 steps")
    from benchmarks._common import add_smoke_arg

    add_smoke_arg(ap)
    args = ap.parse_args()
    args.steps = args.steps or (1 if args.smoke else 2 if args.quick else 4)
    args.backends = args.backends or (["eager"] if args.smoke else ["eager", "aot_eager"])
    rows = [run(v, b, args.steps) for v in ("wan2.1", "wan2.2") for b in args.backends]
    for r in rows:
        print(
            f"{r['variant']:7s} {r['backend']:10s} graph breaks {r['graph_breaks']}  graphs {r['graphs']}  "
            f"max|diff| {r['max_abs_diff']:.3g}  LAM entries {r['lam_entries_compiled']}/{r['lam_entries_eager']}"
        )
    print(json.dumps({"benchmark": "comp_attn_compile", "steps": args.steps, "rows": rows}))


if __name__ == "__main__":
    main()
