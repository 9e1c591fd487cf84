"""The prepared GPU suite: Comp-Attn's per-step cost at Wan2.1-1.3B / 14B size on each attention backend and under
torch.compile, and the whole frame-index pipeline on the GPU. One command, at most 8 minutes on one H100.

    python benchmarks/gpu_overhead.py --out gpu.json            # the suite (budget: 440 s of sections)
    python benchmarks/gpu_overhead.py --dry-run --out dry.json  # every section on the CPU at tiny size
    python benchmarks/gpu_overhead.py --models 1.3b --sections native compile --out part.json
    python benchmarks/gpu_overhead.py --quick                   # 1.3B, native SDPA only (skipped without a GPU)

**Comp-Attn sections** (``MODEL/VARIANT``): the transformer is built from Wan2.1-T2V's published configuration
(``WAN21``: 30 x 12 heads and 40 x 40 heads of 128) with random bf16 weights straight on the GPU (nothing is
downloaded). One denoising step = the cond and the uncond forward at 480 x 832 x 81 frames (21 x 30 x 52 = 32,760
video tokens, 512 text tokens) as ``WanPipeline`` runs them (inside ``transformer.cache_context``, the timestep
set on the pipeline). Three modes on the same weights and inputs, alternating round by round after one warm-up
round: ``off`` (diffusers' own processors), ``lam`` (Comp-Attn with SCI and LAM active: step 0, two subjects with
boxes) and ``inactive`` (Comp-Attn installed, a step outside LAM's window). Variants: ``native`` (PyTorch SDPA),
``flash`` (flash-attn: attn1 and unmodulated attn2 stay on it, LAM's masked calls go to SDPA), ``sage``
(sageattention, the same routing) and ``compile`` (SDPA, ``transformer.compile_repeated_blocks(fullgraph=True)``:
one compiled block reused by all, one graph per mode; the warm-up round holds the compile time). Each row: median
step time per mode, the paired ratio lam / off per round (the figure to set beside the paper's +5 %), the end-to-
end estimate ``f * active + (1 - f) * inactive`` (f = ``lam.step_fraction``), and the peak GPU memory per mode.

**Index section** (``index``): ``benchmarks/longvideo.py --device cuda`` on a 10-minute and a 60-minute 720p video
(GOP 250): decode-only rates, the encoder alone (ViT-B-32, random weights), the whole pipelined index against
min(encoder, decode), peak RSS, and a question's cost over the indexed hour.

**Time guard**: sections run in ``PLAN`` order within ``--budget`` seconds (440 by default: the 8 minutes less
start-up). A section starts only if its estimated minimum (build, warm-up and one round, from the FLOPs of a step
at the rate the first section measured) fits in what is left; a Comp-Attn section stops adding rounds at its
share; the index section runs under a subprocess timeout. A section whose package is missing (flash-attn,
sageattention, triton for compile) or which does not fit is listed as skipped with the reason. The JSON (``--out``)
is rewritten atomically after every section, so a run cut short keeps what it measured.

``--dry-run`` (also ``--smoke``) runs every section on the CPU: both models at 1 layer x 1 head, 32 x 32 x 5,
one round, compile with the ``eager`` backend, the index through ``longvideo.py --smoke``; its figures only show
that every part runs. Without a CUDA GPU the suite refuses in one line (exit 2); ``--quick`` says so and ends
with ``{"skipped": ...}``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import add_smoke_arg, emit_json, print_table  # noqa: E402

NAME = "gpu_overhead"
PAPER_OVERHEAD = 0.05  # the paper: about +5 % time for Wan2.1-T2V-14B
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
VARIANTS = ("native", "flash", "sage", "compile")
# Section order: what matters most first (SDPA at both sizes, the paper's comparison; the backends users run;
# compile; the index pipeline), so the time guard drops the least needed. A model is reused by the next section
# when that one is of the same size, and compiled last (compiling changes its modules in place).
PLAN = (
    "1.3b/native", "14b/native",
    "1.3b/flash", "1.3b/compile",
    "index",
    "14b/flash", "1.3b/sage", "14b/sage", "14b/compile",
)  # fmt: skip
# seconds a section may take at most on the GPU (its share of the budget; the guard also stops at the budget):
# 1.3B ~2 s a step on an H100 (3-4 rounds), 14B ~10 s (warm-up and one or two rounds)
SHARE = {"1.3b": 45.0, "14b": 85.0, "compile": 120.0, "index": 120.0}
MODES = ("off", "lam", "inactive")
GPU_TFLOPS_PRIOR = 300.0  # bf16 rate assumed for the first estimate, before a step has been timed


class NoGPUError(RuntimeError):
    """Raised (and reported as one line, exit 2) when no CUDA device is present."""


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--out", default=None, help="write the JSON here (atomically, after every section)")
    ap.add_argument("--models", nargs="+", choices=sorted(WAN21), default=["1.3b", "14b"])
    ap.add_argument(
        "--sections",
        nargs="+",
        choices=[*VARIANTS, "index"],
        default=[*VARIANTS, "index"],
        help="which variants (and the index section) to run",
    )
    ap.add_argument("--budget", type=float, default=440.0, help="seconds for all sections (time guard)")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per mode at most (after one warm-up)")
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--width", type=int, default=832)
    ap.add_argument("--frames", type=int, default=81)
    ap.add_argument("--text-len", type=int, default=512)
    ap.add_argument("--layers", type=int, default=None, help="override the layer count (tests, dry runs)")
    ap.add_argument("--heads", type=int, default=None, help="override the head count (tests, dry runs)")
    ap.add_argument("--device", default="cuda", help="cuda[:N]; 'cpu' only for the tiny dry run")
    ap.add_argument("--compile-backend", default="inductor", help="torch.compile backend of the compile rows")
    ap.add_argument("--quick", action="store_true", help="Wan2.1-1.3B, native SDPA, 2 rounds")
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="every section on the CPU at tiny size (1 layer x 1 head, 32x32x5, 1 round): shows that it runs",
    )
    add_smoke_arg(ap)  # `vidlab bench --smoke`: the same as --dry-run
    args = ap.parse_args(argv)
    args.dry_run = args.dry_run or args.smoke
    if args.dry_run:
        args.device, args.layers, args.heads, args.rounds = "cpu", 1, 1, 1
        args.height, args.width, args.frames, args.text_len = 32, 32, 5, 16
        args.compile_backend = "eager"  # inductor on a CPU needs a C++ toolchain and minutes
    elif args.quick:
        args.models, args.sections, args.rounds = ["1.3b"], ["native"], 2
    return args


def require_gpu(device: str) -> None:
    """Refuse (NoGPUError) unless ``device`` is a CUDA device that is present."""
    import torch

    if not device.startswith("cuda"):
        raise NoGPUError(
            f"device={device!r}: this benchmark measures a GPU; use --device cuda (or --dry-run)"
        )
    if not torch.cuda.is_available():
        raise NoGPUError(
            "no CUDA GPU here (torch.cuda.is_available() is False): this suite times Wan2.1-1.3B/14B and the "
            "index pipeline on a GPU; nothing was built (--dry-run runs it on the CPU at tiny size)"
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


def video_tokens(cfg: dict[str, Any], height: int, width: int, frames: int) -> int:
    """Video tokens of one forward: latent frames x (H/8/p) x (W/8/p) (Wan's VAE: 4x time, 8x space)."""
    p = cfg["patch_size"]
    return ((frames - 1) // 4 + 1) * (height // 8 // p[1]) * (width // 8 // p[2])


def step_flops(cfg: dict[str, Any], tokens: int, text_len: int) -> float:
    """Matmul FLOPs of one denoising step (cond + uncond forward): the time guard's size of a section."""
    d = cfg["num_attention_heads"] * cfg["attention_head_dim"]
    s, ln, f = tokens, text_len, cfg["ffn_dim"]
    layer = 8 * s * d * d + 4 * s * s * d  # self-attention: q, k, v, out projections; scores and values
    layer += 4 * s * d * d + 4 * ln * d * d + 4 * s * ln * d  # cross-attention
    layer += 4 * s * d * f  # feed-forward
    return 2.0 * cfg["num_layers"] * layer


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
        latents=latents, text=text.to(device, dtype), neg=neg.to(device, dtype), targets=targets.to(torch.device(device)),
        sci=sci, tokens=video_tokens(cfg, height, width, frames),
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


# ------------------------------------------------------------------------------------------------ sections
def missing_package(variant: str, device: str) -> str | None:
    """Why ``variant`` cannot run here (a missing package, named), or None."""
    if variant == "flash" and importlib.util.find_spec("flash_attn") is None:
        return "flash-attn is not installed (pip install flash-attn --no-build-isolation)"
    if variant == "sage" and importlib.util.find_spec("sageattention") is None:
        return "sageattention is not installed (pip install sageattention)"
    if variant in ("flash", "sage") and not device.startswith("cuda"):
        return f"the {variant} kernels run on CUDA only"
    if variant == "compile" and device.startswith("cuda") and importlib.util.find_spec("triton") is None:
        return "triton is not installed (torch.compile's inductor needs it for CUDA kernels)"
    return None


class Guard:
    """The suite's clock: seconds left of the budget, and what a section is estimated to need."""

    def __init__(self, budget: float, gpu: bool):
        self.t0 = time.perf_counter()
        self.budget = budget
        self.rate = GPU_TFLOPS_PRIOR * 1e12 if gpu else None  # FLOP/s, updated from every timed step

    def left(self) -> float:
        return self.budget - (time.perf_counter() - self.t0)

    def need(self, section: str, args: argparse.Namespace) -> float:
        """Estimated minimum seconds of a section: build + warm-up + one round (+ compile), or the index's."""
        if self.rate is None:  # the CPU dry run: tiny, no estimate needed
            return 0.0
        if section == "index":
            return 60.0
        model, variant = section.split("/")
        cfg = transformer_config(model, args.layers, args.heads)
        step = (
            step_flops(cfg, video_tokens(cfg, args.height, args.width, args.frames), args.text_len)
            / self.rate
        )
        build = 5.0 + cfg["num_layers"] * cfg["num_attention_heads"] * 0.01
        compile_s = 60.0 if variant == "compile" else 0.0
        return build + 2 * len(MODES) * step + compile_s

    def observe(self, flops: float, seconds: float) -> None:
        if self.rate is not None and seconds > 0:
            self.rate = flops / seconds


def measure(
    model: str, variant: str, args: argparse.Namespace, tr: Any = None, deadline: float | None = None
):
    """One Comp-Attn section: the three modes alternating round by round on ``tr`` (built when None).

    Returns the row; rounds stop early at ``deadline`` (perf_counter seconds), after at least one timed round."""
    import torch

    cfg = transformer_config(model, args.layers, args.heads)
    gpu = args.device.startswith("cuda")
    dtype = torch.bfloat16
    row: dict[str, Any] = {"section": f"{model}/{variant}", "model": model, "backend": variant}
    row["layers"], row["heads"] = cfg["num_layers"], cfg["num_attention_heads"]
    if tr is None:
        free_memory(gpu)
        tr = build_transformer(cfg, args.device, dtype)
    backend = "native" if variant == "compile" else variant
    tr.set_attention_backend(backend)
    compiled = variant == "compile"
    if compiled:
        import torch._dynamo
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()
        tr.compile_repeated_blocks(fullgraph=True, backend=args.compile_backend)
        row["compile_backend"] = args.compile_backend
    x = make_inputs(cfg, args.height, args.width, args.frames, args.text_len, args.device, dtype)
    run = StepRunner(tr, x)
    modes = {"off": (False, 0), "lam": (True, 0), "inactive": (True, len(run.timesteps) - 1)}
    times: dict[str, list[float]] = {m: [] for m in MODES}
    warm: dict[str, float] = {}
    mem: dict[str, float] = {}
    try:
        for r in range(1 + args.rounds):  # round 0: warm-up (kernels, allocator; compile under torch.compile)
            if r >= 2 and deadline is not None:
                per_round = sum(statistics.median(v) for v in times.values())
                if time.perf_counter() + per_round > deadline:
                    break
            for mode, (on, step) in modes.items():
                if gpu:
                    torch.cuda.reset_peak_memory_stats()
                t0 = time.perf_counter()
                run.step(on, step)
                dt = time.perf_counter() - t0
                if mode == "lam" and run.lam_entries == 0:
                    raise RuntimeError("LAM did not run on the step inside its window")
                if r:
                    times[mode].append(dt)
                else:
                    warm[mode] = dt
                if gpu:
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
            "warmup_s": {k: round(v, 3) for k, v in warm.items()},  # compile rows: the compile is in here
            "peak_gib": {k: round(v, 2) for k, v in mem.items()} or None,  # None: not on a GPU
            "rounds": len(times["off"]),
            "step_tflops": round(step_flops(cfg, x.tokens, args.text_len) / med["off"] / 1e12, 1),
        }
    )
    if compiled:
        from torch._dynamo.utils import counters

        row["graphs"] = int(counters["stats"]["unique_graphs"])
        row["graph_breaks"] = int(sum(counters["graph_break"].values()))
    row["status"] = "ok"
    return row, tr


def index_command(args: argparse.Namespace, work: str) -> list[str]:
    """The ``longvideo.py`` command line of the index section (GPU: 10- and 60-minute 720p, GOP 250, half the
    cores as decode workers, PyAV making the videos where Debian's ffmpeg CLI is missing)."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "longvideo.py"), "--workdir", work, "--no-processes"]
    if args.dry_run:
        return cmd + ["--smoke", "--device", "cpu", "--no-questions"]
    workers = max(2, min(8, (os.cpu_count() or 4) // 2))
    maker = "ffmpeg" if shutil.which("ffmpeg") else "pyav"
    return cmd + ["--device", args.device, "--lengths", "10min", "60min", "--sizes", "720p", "--gops", "250",
                  "--workers", str(workers), "--maker", maker]  # fmt: skip


def index_section(args: argparse.Namespace, timeout: float) -> dict[str, Any]:
    """The whole index pipeline: ``benchmarks/longvideo.py`` on the GPU (10- and 60-minute 720p videos), or its
    ``--smoke`` size on the CPU in a dry run; its JSON is the row's ``longvideo``."""
    from vidlab.bench import last_json_line

    row: dict[str, Any] = {"section": "index"}
    work = tempfile.mkdtemp(prefix="vidlab-gpu-index-")
    cmd = index_command(args, work)
    row["command"] = " ".join(cmd[1:]).replace(str(ROOT) + "/", "")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=max(1.0, timeout), cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {**row, "status": "error", "reason": f"time guard: stopped after {timeout:.0f} s"}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    record = last_json_line(proc.stdout)
    if proc.returncode != 0 or record is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        return {**row, "status": "error", "reason": f"exit {proc.returncode}: {tail[0][:300]}"}
    if "skipped" in record:
        return {**row, "status": "skipped", "reason": str(record["skipped"])}
    keep = (
        "ideal_ratio",
        "decode_speedup_2",
        "rss_ratio_60_10",
        "question_ms",
        "workers",
        "batch_size",
        "model",
    )
    row.update({k: record[k] for k in keep if k in record})
    row["cells"] = [
        {k: c.get(k) for k in ("cell", "index_frames", "decode_n_fps", "encoder_fps", "index_fps", "ideal_ratio",
                               "rss_peak_mb", "decoded_once")}
        for c in record.get("cells", [])
    ]  # fmt: skip
    row["longvideo"] = record
    row["status"] = "ok"
    return row


def plan(args: argparse.Namespace) -> list[str]:
    """The sections this run asks for, in ``PLAN`` order."""
    wanted = set(args.sections)
    return [
        s
        for s in PLAN
        if (s == "index" and "index" in wanted)
        or (s != "index" and s.split("/")[0] in args.models and s.split("/")[1] in wanted)
    ]


def share(section: str) -> float:
    if section == "index" or section.endswith("/compile"):
        return SHARE["index" if section == "index" else "compile"]
    return SHARE[section.split("/")[0]]


def free_memory(gpu: bool) -> None:
    """Give the previous section's tensors back before the next one builds (a 14B model is 28 GiB in bf16)."""
    import gc

    gc.collect()
    if gpu:
        import torch

        torch.cuda.empty_cache()


def run_suite(args: argparse.Namespace, out: dict[str, Any]) -> list[dict[str, Any]]:
    """Every planned section under the time guard; ``out["sections"]`` grows and is written after each one."""

    gpu = args.device.startswith("cuda")
    guard = Guard(args.budget, gpu)
    rows: list[dict[str, Any]] = out.setdefault("sections", [])
    built: tuple[str, Any] | None = None  # (model, transformer) kept for the model's next section
    for section in plan(args):
        model = section.split("/")[0]
        if built is not None and built[0] != model:
            built = None
            free_memory(gpu)
        skip = missing_package(section.split("/")[-1], args.device) if section != "index" else None
        need, left = guard.need(section, args), guard.left()
        if skip is None and need > left:
            skip = f"time guard: {left:.0f} s of the {args.budget:.0f} s budget left, this section needs ~{need:.0f} s"
        print(f"[{NAME}] {section}: {'skipped: ' + skip if skip else 'running'}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        if skip:
            row: dict[str, Any] = {"section": section, "status": "skipped", "reason": skip}
        elif section == "index":
            row = index_section(args, min(share(section), left) if gpu else 600.0)
        else:
            deadline = t0 + min(share(section), left) if gpu else None
            try:
                row, tr = measure(model, section.split("/")[1], args, built[1] if built else None, deadline)
                built = None if section.endswith("/compile") else (model, tr)
                del tr  # the next section of another size frees it (``built``)
                cfg = transformer_config(model, args.layers, args.heads)
                guard.observe(step_flops(cfg, row["video_tokens"], args.text_len), row["step_off_s"])
            except Exception as e:  # noqa: BLE001 - one section's failure is reported, the suite goes on
                row = {"section": section, "status": "error", "reason": f"{type(e).__name__}: {e}"[:400]}
                built = None
                free_memory(gpu)
        row["section_s"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        out["wall_s"] = round(time.perf_counter() - guard.t0, 1)
        if args.out:
            from vidlab.io import atomic_write_json

            atomic_write_json(Path(args.out), out)
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        if not args.dry_run:
            require_gpu(args.device)
    except NoGPUError as e:
        if args.quick:
            from benchmarks._common import emit_skipped

            return emit_skipped(NAME, str(e))
        print(f"{NAME}: {e}", file=sys.stderr)
        return 2
    import diffusers
    import torch

    gpu = args.device.startswith("cuda")
    out: dict[str, Any] = {
        "benchmark": NAME,
        "dry_run": bool(args.dry_run),
        "gpu": torch.cuda.get_device_name(0) if gpu else "none (cpu dry run)",
        "torch": torch.__version__,
        "diffusers": diffusers.__version__,
        "resolution": f"{args.width}x{args.height}x{args.frames}",
        "budget_s": args.budget,
        "paper_overhead": PAPER_OVERHEAD,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    rows = run_suite(args, out)
    print_table(
        rows,
        ["section", "status", "step_off_s", "step_lam_s", "lam_overhead_paired", "inactive_overhead_paired",
         "end_to_end_overhead_est", "ideal_ratio", "section_s", "reason"],
    )  # fmt: skip
    emit_json(out, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
