"""Comp-Attn cost per denoising step (SCI + LAM active vs diffusers' default processor) and its effect.

Part 1, cost: one ``WanTransformer3DModel`` with Wan2.1-1.3B's head layout (12 heads x 128, ffn 8960,
text_dim 4096) and fewer layers, at the realistic token count (480x832x81 -> 32,760 video tokens, 512 text
tokens). The same transformer and inputs run with the default processors and with Comp-Attn installed,
alternating in one process. Also timed side by side: one attn2 call (default / Comp-Attn pass-through /
LAM active), which gives a low-noise estimate of the per-step overhead (layers x extra attn2 time / step time),
and every attn2 call is also timed inside the real forwards (attn2 is the only module Comp-Attn changes; the
whole-step ratio on a shared CPU mostly measures load noise in the identical self-attention).
End to end with the default schedule = step_fraction x (LAM-active overhead) + rest x (inactive overhead).

Part 2, effect (tiny offline pipeline), measured on attention LAM did NOT write
(``vidlab.generation.attention_measure.layout_faithfulness``): the share of each subject's cross-attention inside
its layout box (a) on the steps after LAM's window and (b) in a block LAM does not modulate (lam.blocks=[0],
block 1 read inside the window), for three runs on the same seed: LAM off, LAM following the prompt's
layout, and LAM following a placebo layout (every box mirrored through the centre, contradicting the
prompt's relations). Each run reports the share inside the real boxes and inside the placebo boxes; the
circular figure (biased probabilities on biased steps) is printed beside them for reference only. Also
SCI's effect on how alike the subjects' pooled token embeddings are (mean pairwise cosine before / after).

  python benchmarks/comp_attn_overhead.py --quick        # < 60 s on a CPU: 1 layer, 1 head x 128
  python benchmarks/comp_attn_overhead.py --smoke        # seconds: 160x272x21 (1,020 video tokens), 1 prompt
  python benchmarks/comp_attn_overhead.py --skip-cost    # part 2 only
  python benchmarks/comp_attn_overhead.py --device cuda  # 12 heads x 128, 2 layers, bf16 on a GPU
"""

from __future__ import annotations

import pathlib
import sys
import time
from types import SimpleNamespace

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks._common import bench_args, emit_json, print_table, time_side_by_side  # noqa: E402

WAN13B = dict(heads=12, head_dim=128, ffn_dim=8960, text_dim=4096)


def _extra(ap) -> None:
    ap.add_argument("--layers", type=int, default=None, help="transformer blocks (default 2, quick 1)")
    ap.add_argument("--heads", type=int, default=None, help="attention heads (default 12, quick 1)")
    ap.add_argument("--head-dim", type=int, default=WAN13B["head_dim"])
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--width", type=int, default=832)
    ap.add_argument("--frames", type=int, default=81)
    ap.add_argument("--text-len", type=int, default=512)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default=None, help="float32 (cpu default) | bfloat16 (cuda default)")
    ap.add_argument("--skip-effect", action="store_true", help="skip part 2 (tiny-pipeline effect)")
    ap.add_argument("--skip-cost", action="store_true", help="skip part 1 (real-size cost)")


def _targets(height: int, width: int, frames: int):
    """Two subjects (2 and 1 tokens) with left/right boxes, rasterised on the real token grid."""
    from vidlab.generation.lam import build_targets
    from vidlab.generation.layout import Layout, SubjectLayout

    lay = Layout(
        "a red cat on the left of a blue dog",
        [
            SubjectLayout("red cat", [(0.0, (0.05, 0.2, 0.45, 0.9)), (1.0, (0.15, 0.2, 0.55, 0.9))]),
            SubjectLayout("blue dog", [(0.0, (0.55, 0.3, 0.95, 0.9))]),
        ],
    )
    masks = torch.from_numpy(np.asarray(lay.latent_masks(frames, height, width), dtype=bool))
    return build_targets([[1, 2], [8]], masks)


def cost(args) -> dict:
    """Part 1: per-step time with and without Comp-Attn on the same transformer and inputs."""
    from diffusers import WanTransformer3DModel

    from vidlab.generation.comp_attn import apply_comp_attn
    from vidlab.generation.config import CompAttnConfig
    from vidlab.generation.controller import CallState
    from vidlab.generation.sci import compute_sci

    dev = torch.device(args.device)
    dtype = getattr(torch, args.dtype or ("bfloat16" if dev.type == "cuda" else "float32"))
    heads, hd = args.heads, args.head_dim
    dim = heads * hd
    ffn = int(round(WAN13B["ffn_dim"] / (WAN13B["heads"] * WAN13B["head_dim"]) * dim))
    torch.manual_seed(0)
    tr = WanTransformer3DModel(
        num_attention_heads=heads,
        attention_head_dim=hd,
        text_dim=WAN13B["text_dim"],
        ffn_dim=ffn,
        num_layers=args.layers,
        in_channels=16,
        out_channels=16,
    ).eval()
    tr = tr.to(dev, dtype) if dtype != torch.float32 else tr.to(dev)
    t_lat, h_lat, w_lat = (args.frames - 1) // 4 + 1, args.height // 8, args.width // 8
    tokens = t_lat * (h_lat // 2) * (w_lat // 2)
    g = torch.Generator().manual_seed(0)
    latents = torch.randn(1, 16, t_lat, h_lat, w_lat, generator=g).to(dev, dtype)
    text = torch.zeros(1, args.text_len, WAN13B["text_dim"])
    text[:, :24] = torch.randn(1, 24, WAN13B["text_dim"], generator=g)
    text = text.to(dev, dtype)
    num_steps = 50
    timesteps = torch.linspace(999, 20, num_steps)
    pipe = SimpleNamespace(transformer=tr, scheduler=SimpleNamespace(timesteps=timesteps))
    cfg = CompAttnConfig()
    targets = _targets(args.height, args.width, args.frames)
    anchors = torch.randn(2, WAN13B["text_dim"], generator=g)
    sci = compute_sci(text[0].float().cpu(), [[1, 2], [8]], anchors, cfg.sci.tau, cfg.sci.rescale)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize()

    state = {"comp": None}
    # Time every attn2 call inside the real forwards: attn2 is the only module Comp-Attn changes, so its
    # time difference is the overhead, free of the load noise that hits the (identical) self-attention.
    clock = {"attn2": 0.0, "t0": 0.0}
    in_step: dict[str, list[float]] = {"default": [], "comp_attn_lam": []}

    def _pre(*_a) -> None:
        sync()
        clock["t0"] = time.perf_counter()

    def _post(*_a) -> None:
        sync()
        clock["attn2"] += time.perf_counter() - clock["t0"]

    for blk in tr.blocks:
        blk.attn2.register_forward_pre_hook(_pre)
        blk.attn2.register_forward_hook(_post)

    def install(on: bool) -> None:
        if on and state["comp"] is None:
            state["comp"] = apply_comp_attn(pipe, cfg)
        if not on and state["comp"] is not None:
            state["comp"].remove()
            state["comp"] = None

    def forward(comp_on: bool, step: int) -> None:
        install(comp_on)
        if comp_on:
            state["comp"].controller.begin(CallState(cond_ref=text, targets=targets, sci=sci))
        clock["attn2"] = 0.0
        # as WanPipeline calls it: the controller learns the pass from cache_context
        with torch.no_grad(), tr.cache_context("cond"):
            tr(hidden_states=latents, timestep=timesteps[step : step + 1].to(dev), encoder_hidden_states=text)
        sync()
        in_step["comp_attn_lam" if comp_on else "default"].append(clock["attn2"])
        if comp_on:
            call = state["comp"].controller.end()
            assert call is not None and (step > 0 or call.lam_log), "LAM did not run"

    # ---- full step, alternating --------------------------------------------------------------------
    print(
        f"[cost] {args.layers} layer(s), {heads} heads x {hd}, {tokens} video + {args.text_len} text tokens, "
        f"{dtype}, {dev}",
        flush=True,
    )
    if not args.quick:
        forward(False, 0)  # warm-up (allocations, kernels); on a CPU the quick run skips it
        in_step["default"].clear()
    step = time_side_by_side(
        {"default": lambda: forward(False, 0), "comp_attn_lam": lambda: forward(True, 0)},
        repeats=args.repeats,
        budget_s=float("inf"),
    )
    # ---- one attn2 call, alternating (low noise) ---------------------------------------------------
    attn2 = tr.blocks[0].attn2
    hid = torch.randn(1, tokens, dim, generator=g).to(dev, dtype)
    with torch.no_grad():
        ctx = tr.condition_embedder.text_embedder(text)

    def attn2_call(mode: str) -> None:
        install(mode != "default")
        if mode != "default":
            ctl = state["comp"].controller
            ctl.begin(CallState(cond_ref=text, targets=targets))
            ctl.on_forward("transformer", "cond")  # step 0: LAM's window
            ctl.lam_now = mode == "lam"  # passthrough: a cond forward outside the window
        with torch.no_grad():
            attn2(hid, ctx, None, None)
        sync()
        if mode != "default":
            state["comp"].controller.end()

    reps = 5 if args.quick else 7
    one = time_side_by_side(
        {m: (lambda m=m: attn2_call(m)) for m in ("default", "passthrough", "lam")},
        repeats=reps,
        budget_s=1e9,
    )
    t_sci = time_side_by_side({"sci": lambda: (sci.apply(text, 0.5), sync())}, repeats=5, budget_s=1e9)["sci"]
    install(False)
    # "best" (minimum) of the alternating rounds: the least noisy estimate on a shared machine
    d, c = step["default"]["best"], step["comp_attn_lam"]["best"]
    extra_lam = one["lam"]["best"] - one["default"]["best"]
    extra_pass = one["passthrough"]["best"] - one["default"]["best"]
    est_active = args.layers * extra_lam / d + t_sci["best"] / d
    est_inactive = args.layers * extra_pass / d
    f = cfg.lam.step_fraction
    attn2_step = {k: min(v) for k, v in in_step.items()}
    in_step_active = (attn2_step["comp_attn_lam"] - attn2_step["default"] + t_sci["best"]) / d
    rows = [
        {"what": "step, default processors (s)", "value": d},
        {"what": "step, Comp-Attn SCI+LAM active (s)", "value": c},
        {"what": "attn2 time inside the step, default (s)", "value": attn2_step["default"]},
        {"what": "attn2 time inside the step, Comp-Attn (s)", "value": attn2_step["comp_attn_lam"]},
        {"what": "attn2 call default (s)", "value": one["default"]["best"]},
        {"what": "attn2 call Comp-Attn pass-through (s)", "value": one["passthrough"]["best"]},
        {"what": "attn2 call LAM active (s)", "value": one["lam"]["best"]},
        {"what": "SCI embedding update per step (s)", "value": t_sci["best"]},
    ]
    print_table(rows, ["what", "value"])
    return {
        "layers": args.layers,
        "heads": heads,
        "head_dim": hd,
        "video_tokens": tokens,
        "text_tokens": args.text_len,
        "device": str(dev),
        "dtype": str(dtype).replace("torch.", ""),
        "step_default_s": round(d, 4),
        "step_comp_attn_s": round(c, 4),
        "overhead_lam_active_direct": round(c / d - 1, 4),
        "overhead_lam_active_in_step": round(in_step_active, 4),
        "overhead_lam_active_est": round(est_active, 4),
        "overhead_inactive_est": round(est_inactive, 5),
        "step_fraction": f,
        "overhead_end_to_end_est": round(f * est_active + (1 - f) * est_inactive, 4),
        "overhead_end_to_end_in_step": round(f * in_step_active + (1 - f) * est_inactive, 4),
        "attn2_default_s": round(one["default"]["best"], 5),
        "attn2_lam_s": round(one["lam"]["best"], 5),
        "rounds": step["default"]["runs"],
    }


def effect(quick: bool, smoke: bool = False) -> dict:
    """Part 2: non-circular in-box attention with LAM off / real layout / placebo layout; SCI cosine."""
    from vidlab.generation.attention_measure import layout_faithfulness, placebo_layout
    from vidlab.generation.comp_attn import apply_comp_attn
    from vidlab.generation.config import CompAttnConfig
    from vidlab.generation.planners import plan_layout
    from vidlab.generation.sci import compute_sci, encode_anchors, mean_pairwise_cosine, pooled
    from vidlab.generation.tiny import build_tiny_pipeline

    prompts = [
        "a red cat on the left of a blue dog",
        "a bird above a boat",
        "a yellow car to the right of a tree",
    ]
    if quick:
        prompts = prompts[:1] if smoke else prompts[:2]
    pipe = build_tiny_pipeline("wan2.1")
    steps = 8
    kw = dict(height=64, width=64, num_frames=17, num_inference_steps=steps, output_type="latent")
    window = 0.5  # LAM on steps 0-3, read steps 4-7 (after) and block 1 inside (unmodulated)
    after = list(range(int(window * steps), steps))
    inside = list(range(int(window * steps)))

    def run(prompt, layout, lam_on):
        cfg = CompAttnConfig(capture_attention=True)
        cfg.lam.enabled = lam_on
        cfg.lam.step_fraction = window
        cfg.lam.blocks = [0]
        comp = apply_comp_attn(pipe, cfg)
        try:
            return comp.generate(prompt, layout=layout, generator=torch.Generator().manual_seed(0), **kw), cfg
        finally:
            comp.remove()

    rows, agg = [], {}
    cos_before, cos_after = [], []
    for prompt in prompts:
        real = plan_layout(prompt)
        placebo = placebo_layout(real)
        for cond, layout, lam_on in (
            ("off", real, False),
            ("lam_real", real, True),
            ("lam_placebo", placebo, True),
        ):
            r, cfg = run(prompt, layout, lam_on)
            if cond == "lam_real":
                res_real = r
            swap = cond == "lam_placebo"  # the store's masks are the layout LAM followed: put real first
            row = {"prompt": prompt, "run": cond}
            for name, sel in (("after", dict(steps=after)), ("block1", dict(steps=inside, blocks=[1]))):
                f = layout_faithfulness(r.maps, **sel)
                assert not f.biased
                in_real, in_placebo = (f.placebo_share, f.share) if swap else (f.share, f.placebo_share)
                row[f"{name}_real"], row[f"{name}_placebo"] = in_real, in_placebo
                agg.setdefault((cond, name), []).append((in_real, in_placebo))
            if lam_on:
                circ = layout_faithfulness(r.maps, include_biased=True, steps=inside, blocks=[0])
                row["circular_followed"] = circ.share  # share in the boxes LAM followed, on its own bias
            rows.append(row)
        with torch.no_grad():
            emb = pipe.encode_prompt(prompt, do_classifier_free_guidance=False, max_sequence_length=512)[0][0]
            anchors = encode_anchors(pipe.tokenizer, pipe.text_encoder, res_real.subjects)
            plan = compute_sci(emb, res_real.token_indices, anchors, cfg.sci.tau, cfg.sci.rescale)
            cos_before.append(mean_pairwise_cosine(pooled(emb, res_real.token_indices)))
            cos_after.append(
                mean_pairwise_cosine(
                    pooled(plan.apply(emb[None], cfg.sci.strength)[0], res_real.token_indices)
                )
            )
    cols = [
        "prompt",
        "run",
        "after_real",
        "after_placebo",
        "block1_real",
        "block1_placebo",
        "circular_followed",
    ]
    print_table(rows, cols)
    out = {}
    for (cond, name), vals in agg.items():
        arr = np.array(vals, dtype=float)
        out[f"in_real_boxes_{name}_{cond}"] = round(float(arr[:, 0].mean()), 4)
        out[f"in_placebo_boxes_{name}_{cond}"] = round(float(arr[:, 1].mean()), 4)
    circular = [r["circular_followed"] for r in rows if r["run"] == "lam_real"]
    circular_pl = [r["circular_followed"] for r in rows if r["run"] == "lam_placebo"]
    out.update(
        {
            "circular_in_box_lam_real_biased_steps": round(float(np.mean(circular)), 4),
            "circular_in_box_lam_placebo_biased_steps": round(float(np.mean(circular_pl)), 4),
            "sci_pairwise_cosine_before": round(float(np.mean(cos_before)), 4),
            "sci_pairwise_cosine_after": round(float(np.mean(cos_after)), 4),
            "effect_prompts": len(prompts),
        }
    )
    return out


def main(argv=None) -> int:
    args = bench_args(__doc__.split("\n\n")[0], __doc__.split("\n\n", 1)[1], argv, extra=_extra)
    if args.layers is None:
        args.layers = 1 if args.quick else 2
    if args.heads is None:
        args.heads = 1 if args.quick else WAN13B["heads"]
    if args.quick:
        args.repeats = 1
    if args.smoke:  # the same parts on a small token grid: 6 x 10 x 17 video tokens, 64 text tokens
        args.height, args.width, args.frames, args.text_len = 160, 272, 21, 64
    torch.manual_seed(0)
    t0 = time.perf_counter()
    out = {"benchmark": "comp_attn_overhead", "quick": bool(args.quick)}
    if not args.skip_cost:
        out.update(cost(args))
    if not args.skip_effect:
        out.update(effect(args.quick, args.smoke))
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    emit_json(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
