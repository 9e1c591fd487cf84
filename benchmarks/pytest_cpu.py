"""Where the test suite's time goes, measured in CPU seconds (independent of the machine's load).

    VIDLAB_TEST_PROFILE=/tmp/prof nice -n 10 env OMP_NUM_THREADS=1 python -m pytest -q -n 2 --dist loadgroup
    python benchmarks/pytest_cpu.py /tmp/prof [--lint-s 6] [--write-costs tests/cpu_seconds.json]
    python benchmarks/pytest_cpu.py --quick     # profiles two small test modules itself (-n 2), then reports
    python benchmarks/pytest_cpu.py --smoke     # the same on one worker (no pytest-xdist)

The profile (tests/conftest.py, ``_CpuProfile``) records per test the CPU seconds of the xdist worker, of its
reaped children and of its descendants sampled every 0.2 s; a test's cost here is its own CPU plus the larger
of the two child figures. This script prints the slowest tests, the modules and groups (the units
``tests/conftest.py`` hands to the workers), each worker's start-up, and an estimate of the idle wall time of
``make test``: the xdist schedule replayed with every test taking its CPU seconds on an idle core (the units in
the order ``LongestFirst`` gives them, a worker taking the next unit once 2 or fewer of its tests are left, as
pytest-xdist's scheduler does), plus the workers' start-up and ``--lint-s``. Tests that wait (servers, polling,
sleeps) take longer than their CPU seconds: the script lists those whose wall time exceeded their CPU time the
most, so the estimate's blind spot is visible. ``--write-costs`` writes the cost table LongestFirst reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vidlab.io import atomic_write_text  # noqa: E402

PHASES = ("setup", "call", "teardown")


def _plain(nodeid: str) -> str:
    """The node id without pytest-xdist's "@group" suffix (its own rule: an "@" after the last "]")."""
    return nodeid.rsplit("@", 1)[0] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid


def load(folder: Path) -> tuple[dict[str, dict], dict[str, dict]]:
    tests: dict[str, dict] = {}
    workers: dict[str, dict] = {}
    for f in sorted(folder.glob("*.json")):
        data = json.loads(f.read_text())
        workers[data["worker"]] = data["startup"]
        for nodeid, r in data["tests"].items():
            cpu = sum(r.get(f"{p}_cpu", 0.0) for p in PHASES)
            kids = sum(max(r.get(f"{p}_reaped", 0.0), r.get(f"{p}_desc", 0.0)) for p in PHASES)
            tests[_plain(nodeid)] = {
                "worker": data["worker"],
                "group": nodeid[len(_plain(nodeid)) + 1 :] or None,
                "cost": cpu + kids,
                "self": cpu,
                "children": kids,
                "wall": sum(r.get(f"{p}_wall", 0.0) for p in PHASES),
                "start": r.get("start", 0.0),
            }
    if not tests:
        raise SystemExit(f"no profile in {folder} (run pytest with VIDLAB_TEST_PROFILE={folder})")
    return tests, workers


def units(tests: dict[str, dict]) -> dict[str, list[str]]:
    """Work units as tests/conftest.py forms them: a group, else the module; longest first, ties in order."""
    out: dict[str, list[str]] = {}
    for nodeid, t in tests.items():
        out.setdefault("@" + t["group"] if t["group"] else nodeid.split("::", 1)[0], []).append(nodeid)
    return dict(sorted(out.items(), key=lambda kv: -sum(tests[n]["cost"] for n in kv[1])))


def replay(tests: dict[str, dict], order: dict[str, list[str]], workers: int = 2) -> list[float]:
    """Each worker's busy seconds when every test takes its CPU seconds (pytest-xdist's LoadScope rule:
    a node gets the next unit when 2 or fewer of its tests are pending)."""
    queue = list(order.values())
    pending: list[list[str]] = [[] for _ in range(workers)]
    clock = [0.0] * workers

    def top_up(w: int) -> None:  # at most one unit per event, as xdist's _reschedule
        if queue and len(pending[w]) <= 2:
            pending[w].extend(queue.pop(0))

    for w in range(workers):  # one unit each first, then top up (xdist's schedule())
        if queue:
            pending[w].extend(queue.pop(0))
    for w in range(workers):
        top_up(w)
    while any(pending):
        w = min((w for w in range(workers) if pending[w]), key=lambda w: clock[w])
        clock[w] += tests[pending[w].pop(0)]["cost"]
        top_up(w)
    return clock


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "profile", type=Path, nargs="?", help="the VIDLAB_TEST_PROFILE folder (--quick/--smoke: made here)"
    )
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--lint-s", type=float, default=0.0, help="seconds of ruff + mypy to add to the estimate")
    ap.add_argument("--write-costs", type=Path, help="write the per-test CPU seconds table here")
    ap.add_argument("--quick", action="store_true", help=f"profile {' '.join(SAMPLE)} with -n 2 first")
    ap.add_argument("--smoke", action="store_true", help="profile the same on one worker first")
    args = ap.parse_args(argv)
    if args.profile is None and not (args.quick or args.smoke):
        ap.error("give the profile folder, or --quick / --smoke to profile a small sample of the tests here")
    if args.profile is not None:
        return report(args, args.profile)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="vidlab-pytest-profile-") as tmp:
        profile_sample(Path(tmp), workers=0 if args.smoke else 2)
        return report(args, Path(tmp))


# Two small, fast test modules: enough for every part of the report (workers, units, the replayed schedule).
SAMPLE = ("tests/vidlab/test_io.py", "tests/vidlab/test_config.py")


def profile_sample(folder: Path, workers: int) -> None:
    """Run pytest on :data:`SAMPLE` with ``VIDLAB_TEST_PROFILE=folder`` (``workers`` 0: without xdist)."""
    import os
    import subprocess

    dist = ["-n", str(workers), "--dist", "loadgroup"] if workers else ["-p", "no:xdist"]
    env = {**os.environ, "VIDLAB_TEST_PROFILE": str(folder), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *dist, *SAMPLE]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        raise SystemExit(f"pytest on the sample failed (exit {proc.returncode}): " + " | ".join(tail))


def report(args: argparse.Namespace, profile: Path) -> int:
    """Print where the profiled run's CPU time went and the final JSON line."""
    tests, starts = load(profile)
    total = sum(t["cost"] for t in tests.values())
    print(
        f"{len(tests)} tests, {total:.1f} CPU s ({sum(t['self'] for t in tests.values()):.1f} in the workers)"
    )
    for w, s in sorted(starts.items()):
        mine = [t for t in tests.values() if t["worker"] == w]
        if not mine:
            continue  # xdist's controller: it runs no test
        print(
            f"  {w}: start-up {s.get('cpu', 0):.1f} CPU s ({s.get('modules', 0)} modules), "
            f"{len(mine)} tests, {sum(t['cost'] for t in mine):.1f} CPU s, wall {sum(t['wall'] for t in mine):.1f} s"
        )
    print(f"\nthe {args.top} slowest tests (CPU s = self + children; wall s at this run's load)")
    for nodeid, t in sorted(tests.items(), key=lambda kv: -kv[1]["cost"])[: args.top]:
        print(
            f"  {t['cost']:6.1f}  (self {t['self']:5.1f}, children {t['children']:5.1f}, wall {t['wall']:6.1f})  {nodeid}"
        )
    order = units(tests)
    print(f"\nthe {args.top} largest units (a group, else a module), in the order they go out")
    for name, ids in list(order.items())[: args.top]:
        print(f"  {sum(tests[n]['cost'] for n in ids):6.1f}  {len(ids):4d} tests  {name}")
    print("\nwaiting most (wall - CPU at this run's load; these run longer than their CPU seconds when idle)")
    for nodeid, t in sorted(tests.items(), key=lambda kv: -(kv[1]["wall"] - kv[1]["cost"]))[:8]:
        print(f"  {t['wall'] - t['cost']:6.1f}  {nodeid}")
    busy = replay(tests, order)
    startup = max((s.get("cpu", 0.0) for s in starts.values()), default=0.0)
    estimate = max(busy) + startup + args.lint_s
    print(
        f"\nidle estimate: workers busy {busy[0]:.1f} / {busy[1]:.1f} s + start-up {startup:.1f} s "
        f"+ lint {args.lint_s:.1f} s = {estimate:.1f} s"
    )
    if args.write_costs:
        table = {n: round(t["cost"], 2) for n, t in sorted(tests.items()) if t["cost"] >= 0.05}
        atomic_write_text(args.write_costs, json.dumps(table, indent=0, sort_keys=True) + "\n")
        print(f"wrote {len(table)} costs to {args.write_costs}")
    summary = {
        "tests": len(tests),
        "cpu_s": round(total, 1),
        "startup_cpu_s": round(startup, 1),
        "busy_s": [round(b, 1) for b in busy],
        "idle_estimate_s": round(estimate, 1),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
