"""``vidlab bench``: run the scripts in benchmarks/ and collect each one's final JSON line.

Every benchmark script accepts ``--quick`` (each under a minute or so) and ``--smoke`` (the whole benchmark on
its smallest inputs: seconds, figures that only show it runs), and ends by printing one JSON line with its
figures. This command runs them one after another (side by side measurements happen inside each script) and
appends the collected lines to ``--out`` as JSONL. A benchmark that cannot run on this machine (no GPU, no data)
ends with ``{"skipped": "<why>"}``: it is listed as skipped, not as a failure.

:data:`SMOKE` holds each benchmark's smoke command line; ``tests/benchmarks/test_smoke.py`` runs every one of
them, and fails for a script in benchmarks/ that has no entry.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

from vidlab.errors import UserError

BENCH_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
TMP = "{tmp}"  # in an argument list: a fresh temporary folder, removed after the run

# The smoke run of each benchmark: its smallest size, every part of it (`vidlab bench --smoke`).
SMOKE: dict[str, list[str]] = {
    "ann": ["--smoke"],
    "clip_index": ["--smoke"],
    "comp_attn_compile": ["--smoke"],
    "comp_attn_overhead": ["--smoke"],
    "compbench_throughput": ["--smoke"],
    "decode": ["--smoke"],
    "demo_latency": ["--smoke"],
    "failure_paths": ["--smoke"],
    # one video per world (default, where, the long corpus through eval-qa), every selector at 8 frames and at
    # the agent's own mean
    "frame_selectors": ["--smoke", "--out", TMP],
    # every stage (gates, the three calibration sweeps, every test method, single-subject and 2-D items) on one
    # or two items each, one seed, two denoising steps
    "gen_toyworld": (
        "--quick --prompts 2 --val-prompts 1 --single-prompts 1 --seeds 1 --grid2d-prompts 1 --alpha-grid 1 "
        "--step-grid 0.3 --sci-grid 2 --steps 2 --no-progress"
    ).split(),
    "gpu_overhead": ["--smoke"],
    "longvideo": ["--quick"],  # both lengths scaled down (10 s, 60 s), one 720p GOP-250 cell each, tiny model
    "planner_compbench": ["--smoke"],
    "pytest_cpu": ["--smoke"],
    # one 15-20 minute video, 11 questions: the local, Ray (2 actors) and kill -9 + resume runs, every check
    "qa_corpus": ["--smoke", "--workdir", TMP],
    "rl_clip_tool": ["--smoke"],
    "sci_leakage": ["--smoke"],
    "sci_study": ["--smoke"],
    "text_tower_kernels": ["--smoke"],
    "toyworld_rl": ["--smoke", "--out", TMP],  # a fresh run folder: the benchmark resumes from its folder
    "understanding_clip_agent": ["--smoke"],
}
# What `--quick` adds for a benchmark that would otherwise reuse an earlier run's results or builds
QUICK_EXTRA: dict[str, list[str]] = {
    "ann": ["--work", TMP],  # built indexes and ground truth are cached in the work folder
    "frame_selectors": ["--out", TMP],  # worlds, indexes and per-seed results are resumed from the run folder
    "qa_corpus": ["--workdir", TMP],  # the rendered corpus and the runs live in the work folder
    "toyworld_rl": ["--out", TMP],  # trained policies and result.json are resumed from the run folder
}


def available() -> list[str]:
    return sorted(p.stem for p in BENCH_DIR.glob("*.py") if not p.name.startswith("_"))


def last_json_line(text: str) -> dict | None:
    """The JSON object on the last non-empty line of ``text`` (None when that line is not one)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines or not lines[-1].startswith("{"):
        return None
    try:
        record = json.loads(lines[-1])
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def command(name: str, size: str) -> list[str]:
    """The argument list that runs benchmark ``name`` at ``size`` (``full``, ``quick`` or ``smoke``); it may
    hold :data:`TMP`."""
    if size == "smoke":
        return list(SMOKE[name])
    if size == "quick":
        return ["--quick", *QUICK_EXTRA.get(name, [])]
    return []


def run_benchmark(name: str, args: list[str], timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run ``benchmarks/NAME.py ARGS`` from the repository root (:data:`TMP` becomes a fresh folder)."""
    with tempfile.TemporaryDirectory(prefix=f"vidlab-bench-{name}-") as tmp:
        argv = [tmp if a == TMP else a for a in args]
        return subprocess.run(
            [sys.executable, str(BENCH_DIR / f"{name}.py"), *argv],
            cwd=BENCH_DIR.parent,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


class BenchError(UserError):
    """No benchmarks folder (an installed wheel), or an output that cannot be written."""


def _open_out(path: Path) -> IO[str]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("a")
    except OSError as e:
        raise BenchError(f"cannot write --out {str(path)!r}: {e.strerror or e}") from e


def main(argv: list[str] | None = None) -> int:
    if not BENCH_DIR.is_dir():
        raise BenchError(
            f"no benchmarks folder at {BENCH_DIR}: the benchmark scripts ship with a checkout of the repository, "
            "not with the installed package"
        )
    names = available()
    parser = argparse.ArgumentParser(
        prog="vidlab bench",
        description="Run vidlab's performance benchmarks; each prints a table and a final JSON line.",
        epilog="examples:\n  vidlab bench --quick\n  vidlab bench --smoke                 # every benchmark "
        "on its smallest inputs (a few minutes)\n  vidlab bench decode --out outputs/bench.jsonl",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {names})")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="short runs (each about a minute)")
    size.add_argument(
        "--smoke", action="store_true", help="the smallest runs: each benchmark works (seconds)"
    )
    parser.add_argument("--out", type=Path, default=Path("outputs/bench.jsonl"), help="JSONL of results")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(names))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; available: {names}")
    kind = "smoke" if args.smoke else "quick" if args.quick else "full"
    missing = [n for n in (args.names or names) if kind == "smoke" and n not in SMOKE]
    if missing:
        raise BenchError(f"no smoke command for {missing}: add it to SMOKE in vidlab/bench.py")
    failed, skipped, ran = [], [], []
    with _open_out(args.out) as sink:
        for name in args.names or names:
            extra = command(name, kind)
            print(f"== {name}: python benchmarks/{name}.py {' '.join(extra)}", flush=True)
            t0 = time.perf_counter()
            proc = run_benchmark(name, extra)
            seconds = round(time.perf_counter() - t0, 1)
            sys.stdout.write(proc.stdout)
            if proc.returncode != 0:
                failed.append(name)
                sys.stderr.write(proc.stderr[-4000:])
                print(f"!! {name} failed with exit code {proc.returncode} after {seconds} s", flush=True)
                continue
            record = last_json_line(proc.stdout)
            if record is None:
                failed.append(name)
                print(f"!! {name} did not end with a JSON line", flush=True)
                continue
            if "skipped" in record:
                skipped.append(name)
                print(f"-- {name} skipped: {record['skipped']}", flush=True)
            else:
                ran.append(name)
                print(f"-- {name} done in {seconds} s", flush=True)
            row = {
                **record,
                "benchmark": name,
                "quick": kind != "full",
                "size": kind,
                "bench_wall_s": seconds,
            }
            sink.write(json.dumps(row) + "\n")
    counts = [f"{len(ran)} ran"] + [
        f"{len(v)} {k} {v}" for k, v in (("skipped", skipped), ("failed", failed)) if v
    ]
    print(f"{', '.join(counts)}; results appended to {args.out}")
    return 1 if failed else 0
