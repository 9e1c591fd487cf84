"""Comp-Attn's cost on a GPU at the paper's scale: one denoising step of Wan2.1-T2V-1.3B / 14B, off vs on.

The transformers are built from Wan2.1's published configurations (``WAN21`` below: 30 x 12 heads and
40 x 40 heads of 128) with random bf16 weights, straight on the GPU: nothing is downloaded. One denoising
step = the cond and the uncond forward at 480 x 832 x 81 frames (21 x 30 x 52 = 32,760 video tokens,
512 text tokens), as ``WanPipeline`` runs them (inside ``transformer.cache_context("cond"|"uncond")``,
``pipe._current_timestep`` set). Two modes on the same weights and inputs, alternating round by round:
diffusers' own processors, and Comp-Attn installed with SCI + LAM active (step 0, inside LAM's window; two
subjects with boxes). For each attention backend (``native`` = PyTorch SDPA, ``xformers`` where installed)
it reports the median step time of each mode, the paired ratio on / off per round, and the peak GPU memory.

The paper's figure to compare with: about +5% time for Wan2.1-T2V-14B. LAM is active only on the first
``lam.step_fraction`` of the steps; the end-to-end estimate is ``f * active + (1 - f) * inactive``, where the
inactive overhead is timed the same way on a step outside the window.

  python benchmarks/gpu_overhead.py                       # both models, both backends (~5 min on one H100/H200)
  python benchmarks/gpu_overhead.py --models 1.3b --rounds 2
  python benchmarks/gpu_overhead.py --quick               # 1.3B, native SDPA, 2 rounds
  python benchmarks/gpu_overhead.py --smoke               # on the CPU: both models shrunk to 1 layer x 1 head
On a machine without a CUDA GPU it refuses with one line and exit status 2 (nothing is built); with --quick
(`vidlab bench --quick`) it says so in one line and ends with {"skipped": ...}. --smoke runs every part of
the benchmark on the CPU at 32x32x5 with one layer and one head: its figures only show that it runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import emit_json, print_table  # noqa: E402

# Wan2.1-T2V transformer configurations (the ``transformer/config.json`` of the Wan-AI diffusers repos)
_COMMON = dict(
    patch_size=(1, 2, 2),
    attention_head_dim=128,
    in_channels=16,
    out_channels=16,
    text_dim=4096,
    freq_dim=256,
    cross_attn_norm=True,
    qk_norm="rms_norm_across_heads",
    eps=1e-6,
    rope_max_seq_len=1024,
)
WAN21: dict[str, dict[str, Any]] = {
    "1.3b": dict(_COMMON, num_attention_heads=12, ffn_dim=8960, num_layers=30),
    "14b": dict(_COMMON, num_attention_heads=40, ffn_dim=13824, num_layers=40),
}
BACKENDS = ("native", "xformers")


class NoGPUError(RuntimeError):
    """Raised (and reported as one line, exit 2) when no CUDA device is present."""


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--models", nargs="+", choices=sorted(WAN21), default=["1.3b", "14b"])
    ap.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per mode (after one warm-up)")
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--width", type=int, default=832)
    ap.add_argument("--frames", type=int, default=81)
    ap.add_argument("--text-len", type=int, default=512)
    ap.add_argument("--layers", type=int, default=None, help="override the layer count (tests, smoke runs)")
    ap.add_argument("--heads", type=int, default=None, help="override the head count (tests, smoke runs)")
    ap.add_argument("--device", default="cuda", help="cuda[:N]; 'cpu' only for the tiny smoke test")
    ap.add_argument("--quick", action="store_true", help="Wan2.1-1.3B, native SDPA, 2 rounds")
    ap.add_argument(
        "--smoke", action="store_true", help="on the CPU, both models at 1 layer x 1 head, 32x32x5, 1 round"
    )
    args = ap.parse_args(argv)
    if args.smoke:
        args.device, args.layers, args.heads, args.rounds = "cpu", 1, 1, 1
        args.height, args.width, args.frames, args.text_len = 32, 32, 5, 16
    elif args.quick:
        args.models, args.backends, args.rounds = ["1.3b"], ["native"], 2
    return args


def require_gpu(device: str) -> None:
    """Refuse (NoGPUError) unless ``device`` is a CUDA device that is present."""
    import torch

    if not device.startswith("cuda"):
        raise NoGPUError(f"device={device!r}: this benchmark measures a GPU; use --device cuda")
    if not torch.cuda.is_available():
        raise NoGPUError(
            "no CUDA GPU here (torch.cuda.is_available() is False): this benchmark times Wan2.1-1.3B/14B "
            "on a GPU; nothing was built"
        )


def transformer_config(model: str, layers: int | None = None, heads: int | None = None) -> dict[str, Any]:
    """Keyword arguments of ``WanTransformer3DModel`` for ``model`` ('1.3b' or '14b'), optionally shrunk."""
    cfg = dict(WAN21[model])
    if layers is not None:
        cfg["num_layers"] = layers
    if heads is not None:  # keep the ffn / hidden ratio of the real model
        ratio = cfg["ffn_dim"] / (cfg["num_attention_heads"] * cfg["attention_head_dim"])
        cfg["num_attention_heads"] = heads
        cfg["ffn_dim"] = int(round(ratio * heads * cfg["attention_head_dim"]))
    return cfg


def build_transformer(cfg: dict[str, Any], device: str, dtype: Any) -> Any:
    """Random-weight ``WanTransformer3DModel`` created directly on ``device``, its weights then cast to
    ``dtype`` except those diffusers keeps in float32 (``_keep_in_fp32_modules``: rope, time embedder,
    norms, scale-shift tables), as ``from_pretrained(..., dtype=dtype)`` loads them. Peak memory while
    building: the float32 model (56 GiB for 14B), freed before anything is timed."""
    import torch
    from diffusers import WanTransformer3DModel

    torch.manual_seed(0)
    with torch.device(device):
        tr = WanTransformer3DModel(**cfg)
    keep = tuple(getattr(tr, "_keep_in_fp32_modules", None) or ())
    with torch.no_grad():
        for name, p in tr.named_parameters():
            if not any(k in name.split(".") for k in keep):
                p.data = p.data.to(dtype)
    return tr.eval()


def make_inputs(cfg: dict[str, Any], height: int, width: int, frames: int, text_len: int, device: str, dtype):
    """Latents, cond/uncond text embeddings, LAM targets for two subjects, an SCI plan; and the token count."""
    import numpy as np
    import torch

    from vidlab.generation.config import CompAttnConfig
    from vidlab.generation.lam import build_targets
    from vidlab.generation.layout import Layout, SubjectLayout, TokenGrid
    from vidlab.generation.sci import compute_sci

    g = torch.Generator().manual_seed(0)
    t_lat, h_lat, w_lat = (frames - 1) // 4 + 1, height // 8, width // 8
    p = cfg["patch_size"]
    tokens = t_lat * (h_lat // p[1]) * (w_lat // p[2])
    latents = torch.randn(1, cfg["in_channels"], t_lat, h_lat, w_lat, generator=g).to(device, dtype)
    text = torch.zeros(1, text_len, cfg["text_dim"])
    n_text = min(24, text_len)  # the prompt's tokens; the rest is padding, as umT5's output is
    text[:, :n_text] = torch.randn(1, n_text, cfg["text_dim"], generator=g)
    neg = torch.zeros(1, text_len, cfg["text_dim"])
    neg[:, : min(8, text_len)] = torch.randn(1, min(8, text_len), cfg["text_dim"], generator=g)
    lay = Layout(
        "a red cat on the left of a blue dog",
        [
            SubjectLayout("red cat", [(0.0, (0.05, 0.2, 0.45, 0.9)), (1.0, (0.15, 0.2, 0.55, 0.9))]),
            SubjectLayout("blue dog", [(0.0, (0.55, 0.3, 0.95, 0.9))]),
        ],
    )
    grid = TokenGrid(patch=tuple(p))
    masks = torch.from_numpy(np.asarray(lay.latent_masks(frames, height, width, grid), dtype=bool))
    targets = build_targets([[1, 2], [8]], masks)
    cc = CompAttnConfig()
    anchors = torch.randn(2, cfg["text_dim"], generator=g)
    sci = compute_sci(text[0], [[1, 2], [8]], anchors, cc.sci.tau, cc.sci.rescale)
    return SimpleNamespace(
        latents=latents, text=text.to(device, dtype), neg=neg.to(device, dtype), targets=targets, sci=sci,
        tokens=tokens,
    )  # fmt: skip


class StepRunner:
    """One denoising step (cond + uncond forward) as WanPipeline runs it, with Comp-Attn off or on."""

    def __init__(self, tr: Any, inputs: SimpleNamespace, num_steps: int = 50):
        import torch

        from vidlab.generation.config import CompAttnConfig

        self.tr, self.x = tr, inputs
        self.timesteps = torch.linspace(999, 20, num_steps)
        self.pipe = SimpleNamespace(
            transformer=tr, scheduler=SimpleNamespace(timesteps=self.timesteps), _current_timestep=None
        )
        self.cfg = CompAttnConfig()
        self.comp: Any = None
        self.lam_entries = 0

    def _install(self, on: bool) -> None:
        from vidlab.generation.comp_attn import apply_comp_attn

        if on and self.comp is None:
            self.comp = apply_comp_attn(self.pipe, self.cfg)
        if not on and self.comp is not None:
            self.comp.remove()
            self.comp = None

    def step(self, comp_on: bool, step: int = 0) -> None:
        """Run step ``step`` of the schedule (0: inside LAM's window) and wait for the device."""
        import torch

        from vidlab.generation.controller import CallState

        self._install(comp_on)
        x = self.x
        t = self.timesteps[step : step + 1].to(x.latents.device)
        self.pipe._current_timestep = t
        if comp_on:
            self.comp.controller.begin(
                CallState(cond_ref=x.text, uncond_ref=x.neg, targets=x.targets, sci=x.sci)
            )
        with torch.no_grad():
            for name, emb in (("cond", x.text), ("uncond", x.neg)):
                with self.tr.cache_context(name):
                    self.tr(hidden_states=x.latents, timestep=t, encoder_hidden_states=emb, return_dict=False)
        if x.latents.is_cuda:
            torch.cuda.synchronize()
        if comp_on:
            call = self.comp.controller.end()
            self.lam_entries = len(call.lam_log) if call is not None else 0

    def close(self) -> None:
        self._install(False)


def measure(model: str, backend: str, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    cfg = transformer_config(model, args.layers, args.heads)
    dtype = torch.bfloat16
    if args.device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    tr = build_transformer(cfg, args.device, dtype)
    row: dict[str, Any] = {"model": model, "backend": backend, "layers": cfg["num_layers"]}
    try:
        tr.set_attention_backend(backend)
    except Exception as e:  # noqa: BLE001 - e.g. xformers not installed: report and go on
        del tr
        return {**row, "error": f"{type(e).__name__}: {e}"[:200]}
    x = make_inputs(cfg, args.height, args.width, args.frames, args.text_len, args.device, dtype)
    run = StepRunner(tr, x)
    mem: dict[str, float] = {}
    times: dict[str, list[float]] = {"off": [], "lam": [], "inactive": []}
    try:
        modes = {"off": (False, 0), "lam": (True, 0), "inactive": (True, len(run.timesteps) - 1)}
        for r in range(1 + args.rounds):  # round 0: warm-up (kernels, allocator)
            for mode, (on, step) in modes.items():
                if args.device.startswith("cuda"):
                    torch.cuda.reset_peak_memory_stats()
                t0 = time.perf_counter()
                run.step(on, step)
                dt = time.perf_counter() - t0
                if mode == "lam" and run.lam_entries == 0:
                    raise RuntimeError("LAM did not run on the step inside its window")
                if r:
                    times[mode].append(dt)
                if args.device.startswith("cuda"):
                    mem[mode] = max(mem.get(mode, 0.0), torch.cuda.max_memory_allocated() / 2**30)
    finally:
        run.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    on_off = [a / b for a, b in zip(times["lam"], times["off"])]
    inactive = [a / b for a, b in zip(times["inactive"], times["off"])]
    f = run.cfg.lam.step_fraction
    act, ina = statistics.median(on_off) - 1, statistics.median(inactive) - 1
    row.update(
        {
            "video_tokens": x.tokens,
            "step_off_s": round(med["off"], 4),
            "step_lam_s": round(med["lam"], 4),
            "step_inactive_s": round(med["inactive"], 4),
            "lam_overhead_paired": round(act, 4),
            "lam_overhead_range": [round(min(on_off) - 1, 4), round(max(on_off) - 1, 4)],
            "inactive_overhead_paired": round(ina, 4),
            "end_to_end_overhead_est": round(f * act + (1 - f) * ina, 4),
            "step_fraction": f,
            "peak_gib_off": round(mem["off"], 2) if "off" in mem else None,  # None: not on a GPU
            "peak_gib_lam": round(mem["lam"], 2) if "lam" in mem else None,
            "rounds": args.rounds,
        }
    )
    del run, tr, x
    return row


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        if not args.smoke:
            require_gpu(args.device)
    except NoGPUError as e:
        if args.quick:
            from benchmarks._common import emit_skipped

            return emit_skipped("gpu_overhead", str(e))
        print(f"gpu_overhead: {e}", file=sys.stderr)
        return 2
    import torch

    t0 = time.perf_counter()
    out: dict[str, Any] = {
        "benchmark": "gpu_overhead",
        "smoke": bool(args.smoke),
        "gpu": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "none (cpu smoke run)",
        "torch": torch.__version__,
        "resolution": f"{args.width}x{args.height}x{args.frames}",
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    rows = []
    for model in args.models:
        for backend in args.backends:
            print(f"[gpu_overhead] Wan2.1-{model} on {backend} ...", file=sys.stderr, flush=True)
            rows.append(measure(model, backend, args))
            torch.cuda.empty_cache()
    print_table(
        rows,
        ["model", "backend", "step_off_s", "step_lam_s", "lam_overhead_paired", "inactive_overhead_paired",
         "end_to_end_overhead_est", "peak_gib_off", "peak_gib_lam", "error"],
    )  # fmt: skip
    out["rows"] = rows
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    emit_json(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
