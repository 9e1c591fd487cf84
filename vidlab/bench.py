"""``vidlab bench``: run the scripts in benchmarks/ and collect each one's final JSON line.

Every benchmark script accepts ``--quick`` and ends by printing one JSON line with its figures; this
command runs them one after another (side by side measurements happen inside each script) and writes
the collected lines to ``--out`` as JSONL.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import IO

from vidlab.errors import UserError

BENCH_DIR = Path(__file__).resolve().parents[1] / "benchmarks"


def available() -> list[str]:
    return sorted(p.stem for p in BENCH_DIR.glob("*.py") if not p.name.startswith("_"))


def last_json_line(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


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
        epilog="examples:\n  vidlab bench --quick\n  vidlab bench decode --out outputs/bench.jsonl",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {names})")
    parser.add_argument("--quick", action="store_true", help="short runs (each under a minute)")
    parser.add_argument("--out", type=Path, default=Path("outputs/bench.jsonl"), help="JSONL of results")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(names))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; available: {names}")
    failures = 0
    with _open_out(args.out) as sink:
        for name in args.names or names:
            cmd = [sys.executable, str(BENCH_DIR / f"{name}.py")] + (["--quick"] if args.quick else [])
            print(f"== {name}: {' '.join(cmd)}", flush=True)
            proc = subprocess.run(cmd, cwd=BENCH_DIR.parent, capture_output=True, text=True)
            sys.stdout.write(proc.stdout)
            if proc.returncode != 0:
                failures += 1
                sys.stderr.write(proc.stderr[-4000:])
                print(f"!! {name} failed with exit code {proc.returncode}", flush=True)
                continue
            record = last_json_line(proc.stdout)
            if record is None:
                failures += 1
                print(f"!! {name} printed no final JSON line", flush=True)
                continue
            sink.write(json.dumps({"benchmark": name, "quick": args.quick, **record}) + "\n")
    print(f"results appended to {args.out}")
    return 1 if failures else 0
