"""Helpers shared by every benchmark script: ``--quick``, side-by-side timing, a table, the final JSON line.

Use from a script run as ``python benchmarks/x.py`` (repo root as working directory)::

    import sys, pathlib
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from benchmarks._common import bench_args, time_side_by_side, print_table, emit_json

Conventions: every script accepts ``--quick`` (finishes in under 60 s) and ``--smoke`` (the whole benchmark on
its smallest inputs, seconds: ``vidlab bench --smoke`` and tests/benchmarks/test_smoke.py run it; its figures
only show that every part runs) and ends by printing ONE line of JSON with its figures (``emit_json``); ratios are
measured side by side in one run (``time_side_by_side`` alternates the contenders round by round, so machine
load hits all alike). A benchmark that cannot run on this machine at all (no GPU, no data) says why in one line
and ends with ``{"skipped": "<why>"}`` (``emit_skipped``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def bench_args(description: str, epilog: str = "", argv: Sequence[str] | None = None, extra=None):
    """Parse ``--quick``, ``--smoke``, ``--repeats`` and ``--budget`` (plus ``extra(parser)``); return the
    namespace (``--smoke`` implies ``--quick``)."""
    ap = argparse.ArgumentParser(
        description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="small sizes; finishes in under 60 s")
    add_smoke_arg(ap)
    ap.add_argument(
        "--repeats", type=int, default=None, help="timed rounds per contender (default 3, quick 2)"
    )
    ap.add_argument(
        "--budget", type=float, default=None, help="seconds per contender per case before it stops repeating"
    )
    if extra is not None:
        extra(ap)
    args = ap.parse_args(argv)
    args.quick = args.quick or args.smoke
    if args.repeats is None:
        args.repeats = 1 if args.smoke else 5
    if args.budget is None:
        args.budget = 0.6 if args.quick else 4.0
    return args


def smoke_size_note(what: str) -> str:
    """The line a ``--quick``/``--smoke`` run prints beside its figures, which come from too few items (or too few
    steps) to mean anything: a failed gate or a large gain there says nothing about the method."""
    return f"SMOKE-SIZE RUN ({what}): it shows that the benchmark runs; its gates, gains and accuracies mean nothing."


def add_smoke_arg(ap: argparse.ArgumentParser) -> None:
    """The ``--smoke`` flag every benchmark takes (scripts with a parser of their own call this)."""
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="the whole benchmark on its smallest inputs (seconds; the figures only show that it runs)",
    )


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux; else what ``platform`` says), for a record's machine."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def time_side_by_side(
    fns: dict[str, Callable[[], object]], repeats: int = 3, budget_s: float = 4.0, warmup: bool = False
) -> dict[str, dict[str, float]]:
    """Time each callable in alternating rounds; a contender stops repeating once it has spent ``budget_s``.

    Returns ``{name: {"best": s, "median": s, "runs": n}}`` (best = minimum, the least noisy estimate).
    """
    if warmup:
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(max(1, repeats)):
        for name, fn in fns.items():
            if times[name] and sum(times[name]) >= budget_s:
                continue
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {k: {"best": min(v), "median": statistics.median(v), "runs": len(v)} for k, v in times.items()}


def print_table(rows: list[dict], columns: Sequence[str], file=None) -> None:
    """Print ``rows`` (dicts) as an aligned text table with the given column order (floats to 3 s.f.)."""
    file = file or sys.stdout

    def fmt(v):
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
        return "-" if v is None else str(v)

    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [
        max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(columns)
    ]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)), file=file)
    print("  ".join("-" * w for w in widths), file=file)
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)), file=file)
    file.flush()


def emit_skipped(name: str, why: str) -> int:
    """Say in one line why ``name`` cannot run on this machine, end with ``{"skipped": why}``; exit status 0."""
    print(f"{name}: skipped: {why}", file=sys.stderr, flush=True)
    emit_json({"benchmark": name, "skipped": why})
    return 0


def emit_json(figures: dict, out: str | Path | None = None) -> None:
    """Print the script's figures as the final single line of JSON (machine-readable summary); with ``out``, write
    them there first (atomically, indented)."""
    if out:
        from vidlab.io import atomic_write_json

        atomic_write_json(Path(out), figures)
    sys.stdout.flush()
    print(json.dumps(figures, separators=(",", ":"), default=float), flush=True)
