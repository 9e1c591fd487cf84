"""A benchmark's worth of questions: ``vidlab eval-qa`` on an LVBench-shaped corpus of the toy world.

The corpus (:mod:`vidlab.understanding.toyworld.corpus`, rendered once under ``--workdir`` and reused): 50 videos of
20-60 minutes at 1 fps from the where-to-look world, 11 multiple-choice questions each (six kinds). Then
``vidlab eval-qa`` runs, each in a subprocess, with the shipped toy policies: ``toy:shipped`` answering as the agent
and as the uniform-16 / uniform-56 baselines, ``toy:where`` as the agent. Three runs, each from an empty output
folder and an empty frame-index cache:

* ``local``: the local backend, uninterrupted (the reference);
* ``ray``: the Ray backend with ``--workers`` actors on a local Ray bound to 127.0.0.1;
* ``resume``: the local backend, the ``toy:shipped`` invocation killed with SIGKILL once ``--kill-at`` of its
  agent questions are recorded (where one job holds them all, it is held there, ``vidlab.holds``, so the kill
  lands mid-run on any machine), then rerun to the end;
* ``nocache``: the local backend with the decoded-frame cache off (``frame_cache_mb=0``): the path before the
  cache, strategy by strategy, every question decoding its frames again.

Each frame shown is decoded once per run: ``local`` (the cache on, its default budget unless ``--frame-cache-mb``)
is compared with ``nocache`` in the same invocation: frames decoded against distinct frames shown (each eval-qa
process's ``frame_cache.json``), wall time against the cache-off run, and the cache's peak bytes against its
budget. Targets: decoded <= 1.05 x distinct shown; wall <= 0.6 x the cache-off run's; the cache within its budget.

It checks, and exits 1 when one fails: every run's per-question records equal the local run's (without the
run-dependent fields ``clip_index`` and ``seconds``, order-independent); the rerun after the kill redid none of
the questions recorded before it; each video's frame index was built once per CLIP model in every run (the
records' ``clip_index`` fields: one ``"built"`` per video and CLIP, ``"cached"`` everywhere else, across strategies).
It reports, per run, the wall time and the peak memory of the whole process tree (Ray's processes included), the
speed-up of Ray over local, and accuracy and mean frames per strategy and per question kind. Ends with one JSON line.

    python benchmarks/qa_corpus.py --workdir /tmp/qa-corpus --lock /tmp/vidlab-timing.lock   # the full corpus
    python benchmarks/qa_corpus.py --quick                  # 3 videos of 15-20 minutes, every part
    python benchmarks/qa_corpus.py --smoke --workdir /tmp/x  # 1 video, toy:shipped agent + uniform-16 only
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import add_smoke_arg, emit_json, print_table  # noqa: E402
from vidlab.holds import JOB  # noqa: E402

# (policy, strategies) per eval-qa invocation; each policy brings its own CLIP (clip_model=auto)
POLICIES: list[tuple[str, list[str]]] = [
    ("toy:shipped", ["agent", "uniform:16", "uniform:56"]),
    ("toy:where", ["agent"]),
]
CLI = "import sys; from vidlab.cli import main; sys.exit(main(sys.argv[1:]))"


def _args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 videos of 15-20 minutes (a few minutes)")
    add_smoke_arg(ap)
    ap.add_argument(
        "--workdir", type=Path, default=None, help="corpus, caches and runs (default outputs/qa-corpus-SIZE)"
    )
    ap.add_argument("--workers", type=int, default=2, help="Ray actors of the ray run")
    ap.add_argument(
        "--kill-at", type=float, default=0.4, help="share of agent questions recorded before the kill"
    )
    ap.add_argument(
        "--lock",
        type=Path,
        default=None,
        help="a lock file held (flock) during each timed run (local, ray), so timing benchmarks take turns",
    )
    ap.add_argument(
        "--runs",
        nargs="+",
        default=["local", "nocache", "ray", "resume"],
        choices=["local", "nocache", "ray", "resume"],
    )
    ap.add_argument(
        "--frame-cache-mb",
        type=int,
        default=None,
        help="the cache's budget in the local run (default: eval-qa's)",
    )
    args = ap.parse_args(argv)
    args.size = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.workdir is None:
        args.workdir = Path("outputs") / f"qa-corpus-{args.size}"
    return args


def corpus_config(size: str) -> Any:
    from vidlab.understanding.toyworld.corpus import CorpusConfig, quick_config

    if size == "smoke":
        return quick_config(videos=1)
    if size == "quick":
        return quick_config(videos=3)
    return CorpusConfig()


# ------------------------------------------------------------------------------------------------ processes
class TreeMemory:
    """Polls the summed RSS of a process and all its descendants (Ray's raylet, GCS and actors included)."""

    def __init__(self, pid: int, every: float = 0.25) -> None:
        self.pid, self.every, self.peak = pid, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while not self._stop.is_set():
            total = 0
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            for p in procs:
                try:
                    total += p.memory_info().rss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    pass
            self.peak = max(self.peak, total)
            self._stop.wait(self.every)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self.peak


def eval_command(data: Path, policy: str, strategies: list[str], out: Path, cache: Path, backend: str,
                 workers: int, frame_cache_mb: int | None = None) -> list[str]:  # fmt: skip
    cmd = [sys.executable, "-c", CLI, "eval-qa", "--benchmark", "jsonl", "--data", str(data), "--policy", policy,
           "--clip-model", "auto", "--strategies", *strategies, "--out", str(out), f"cache_dir={cache}",
           "episode.frame_resize=fit"]  # fmt: skip
    if frame_cache_mb is not None:
        cmd.append(f"frame_cache_mb={frame_cache_mb}")
    if backend == "ray":
        cmd += ["--backend", "ray", "--num-workers", str(workers)]
    return cmd


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[k] = "1"
    env.setdefault("TQDM_DISABLE", "1")
    return env


def run_eval(
    cmd: list[str], log: Path, kill_when: Any = None, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run one eval-qa invocation; ``kill_when()`` true -> SIGKILL to its process group. Wall time, peak tree RSS."""
    t0 = time.perf_counter()
    with log.open("a") as sink:
        sink.write("$ " + " ".join(cmd) + "\n")
        sink.flush()
        proc = subprocess.Popen(
            cmd, stdout=sink, stderr=subprocess.STDOUT, env={**_env(), **(env or {})}, start_new_session=True
        )
        mem = TreeMemory(proc.pid)
        killed = False
        while proc.poll() is None:
            if kill_when is not None and not killed and kill_when():
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
            time.sleep(0.2)
        peak = mem.stop()
    rc = proc.wait()
    if rc != 0 and not killed:
        raise RuntimeError(f"eval-qa exited {rc}; see {log}")
    return {"seconds": time.perf_counter() - t0, "peak_rss_mb": peak / 2**20, "rc": rc, "killed": killed}


@contextlib.contextmanager
def timing_lock(path: Path | None) -> Iterator[None]:
    """Hold ``flock(path)`` while a timed run runs (nothing when ``path`` is None)."""
    if path is None:
        yield
        return
    import fcntl

    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# ------------------------------------------------------------------------------------------------ records
def _lines(path: Path) -> list[dict[str, Any]]:
    out = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by the kill
            if isinstance(rec, dict):
                out.append(rec)
    return out


def content(folder: Path) -> dict[str, str]:
    """{id: the record's result without the run-dependent fields, as canonical JSON} of one strategy folder."""
    from vidlab.understanding.evaluate import RUN_FIELDS, load_results

    return {
        r["id"]: json.dumps({k: v for k, v in r.items() if k not in RUN_FIELDS}, sort_keys=True)
        for r in load_results(folder)
    }


def strategy_dirs(run_dir: Path) -> list[Path]:
    return sorted(p.parent for p in run_dir.glob("*/*/results.jsonl"))


def index_counts(run_dir: Path, policy_dir: str) -> dict[str, int]:
    """clip_index values over every record of one policy's strategies: {"built": n, "cached": m, ...}."""
    counts: dict[str, int] = {}
    for d in sorted((run_dir / policy_dir).glob("*/results.jsonl")):
        for rec in _lines(d):
            if rec.get("status") == "ok":
                k = str(rec["result"].get("clip_index"))
                counts[k] = counts.get(k, 0) + 1
    return counts


def built_per_video(run_dir: Path, policy_dir: str) -> dict[str, int]:
    """{video: how many records say its index was built} over one policy's strategies."""
    out: dict[str, int] = {}
    for d in sorted((run_dir / policy_dir).glob("*/results.jsonl")):
        for rec in _lines(d):
            if rec.get("status") == "ok":
                res = rec["result"]
                out.setdefault(res["video_path"], 0)
                out[res["video_path"]] += res.get("clip_index") == "built"
    return out


def _policy_dir(policy: str) -> str:
    return policy.split(":", 1)[1]


# ------------------------------------------------------------------------------------------------ runs
def do_run(name: str, args: argparse.Namespace, data: Path, n_questions: int) -> dict[str, Any]:
    run_dir = args.workdir / "runs" / name
    cache = args.workdir / "cache" / name
    for d in (run_dir, cache):  # every run from scratch: an empty output folder and an empty index cache
        shutil.rmtree(d, ignore_errors=True)
    run_dir.mkdir(parents=True)
    log = args.workdir / "runs" / f"{name}.log"
    log.unlink(missing_ok=True)
    backend = "ray" if name == "ray" else "local"
    parts: list[dict[str, Any]] = []
    resume: dict[str, Any] = {}
    for policy, strategies in POLICIES:
        if name == "resume" and policy != POLICIES[0][0]:
            continue  # the kill and rerun concern the first invocation; the others are the local run's
        out = run_dir / _policy_dir(policy)
        budget = 0 if name == "nocache" else args.frame_cache_mb
        cmd = eval_command(data, policy, strategies, out, cache, backend, args.workers, budget)
        if name != "resume":
            parts.append(run_eval(cmd, log))
            continue
        agent_results = out / "agent" / "results.jsonl"
        target = max(1, int(args.kill_at * n_questions))

        def far_enough(path: Path = agent_results, target: int = target) -> bool:
            return (
                sum("status" in r for r in _lines(path)) >= target
            )  # any status: the held job wrote `target`

        # the first invocation's job waits before its item number `target` while the hold file exists
        # (vidlab.holds; the agent is the first strategy, so its job reaches the hold first): the kill lands
        # mid-run however fast the machine, never after a small corpus has already finished between two polls.
        # A full corpus runs video group by video group (one job per group, its item count restarting), where
        # the poll alone times the kill, as before.
        hold = run_dir / "hold"
        hold.touch()
        hold_env = {JOB[0]: str(hold), JOB[1]: str(target)}
        try:
            first = run_eval(cmd, log, kill_when=far_enough, env=hold_env)
        finally:
            hold.unlink(missing_ok=True)
        before = {r["id"] for r in _lines(agent_results) if r.get("status") == "ok"}
        second = run_eval(cmd, log)
        counts: dict[str, int] = {}
        for r in _lines(agent_results):
            if r.get("status") == "ok":
                counts[r["id"]] = counts.get(r["id"], 0) + 1
        job = json.loads((out / "agent" / "summary.json").read_text())["job"]
        resume = {
            "killed": first["killed"],
            "kill_rc": first["rc"],
            "done_before_kill": len(before),
            "redone": sum(counts.get(i, 0) > 1 for i in before),
            "skipped_by_rerun": job["skipped"],
            "done_by_rerun": job["done"],
            "first_seconds": first["seconds"],
            "rerun_seconds": second["seconds"],
        }
        parts += [first, second]
    return {
        "name": name,
        "backend": backend,
        "seconds": sum(p["seconds"] for p in parts),
        "peak_rss_mb": max(p["peak_rss_mb"] for p in parts),
        "dir": run_dir,
        "resume": resume,
    }


def frames_decoded(run_dir: Path) -> dict[str, Any]:
    """Per eval-qa invocation (policy) of a local run: frames decoded, distinct frames shown, the cache's peak
    and budget (its ``frame_cache.json``), and the distinct frames shown counted again from the records."""
    out: dict[str, Any] = {}
    for policy, _ in POLICIES:
        d = run_dir / _policy_dir(policy)
        path = d / "frame_cache.json"
        if not path.is_file():
            continue
        st = json.loads(path.read_text())
        shown = {
            (r["result"]["video_path"], i)
            for sd in sorted(d.glob("*/results.jsonl"))
            for r in _lines(sd)
            if r.get("status") == "ok"
            for i in r["result"]["frame_indices"]
        }
        out[_policy_dir(policy)] = {
            "decoded": st["decoded"],
            "distinct_shown": len(shown),
            "distinct_requested": st["distinct"],
            "hits": st["hits"],
            "peak_mb": st["peak_mb"],
            "budget_mb": st["budget_mb"],
            "decoded_per_distinct": round(st["decoded"] / max(1, len(shown)), 4),
        }
    return out


def summaries(run_dir: Path) -> dict[str, Any]:
    """{"policy/strategy": {accuracy, mean frames, index builds, by kind: accuracy and frames}}."""
    out: dict[str, Any] = {}
    for policy, _ in POLICIES:
        path = run_dir / _policy_dir(policy) / "summary.json"
        if not path.is_file():
            continue
        for label, s in json.loads(path.read_text()).items():
            out[f"{policy}/{label}"] = {
                "n": s["n"],
                "accuracy": s["accuracy"],
                "mean_frames": s["mean_frames"],
                "index_builds": s.get("index_builds"),
                "by_kind": {
                    k: {"accuracy": v["accuracy"], "frames": v["mean_frames"], "n": v["n"]}
                    for k, v in sorted(s["by_category"].items())
                },  # fmt: skip
            }
    return out


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    from vidlab.understanding.toyworld.corpus import build_corpus

    if args.size == "smoke":  # one invocation (one Ray start per run): every part, fewer processes
        POLICIES[:] = [("toy:shipped", ["agent", "uniform:16"])]

    t0 = time.perf_counter()
    corpus = build_corpus(args.workdir / "corpus", corpus_config(args.size), progress=args.size == "full")
    frames = corpus.frames()
    per_video: dict[str, int] = {}
    for r in corpus.rows:
        per_video[r["video"]] = per_video.get(r["video"], 0) + 1
    n_q = len(corpus.rows)
    print(f"corpus: {len(frames)} videos of {min(frames.values()) / 60:.1f}-{max(frames.values()) / 60:.1f} min "
          f"({sum(frames.values())} frames), {n_q} questions ({min(per_video.values())}-{max(per_video.values())} "
          f"per video); rendered {corpus.rendered} in {time.perf_counter() - t0:.1f} s", flush=True)  # fmt: skip
    runs: dict[str, dict[str, Any]] = {}
    for name in args.runs:
        with timing_lock(args.lock if name != "resume" else None):
            load0 = os.getloadavg()[0]
            runs[name] = do_run(name, args, corpus.jsonl.resolve(), n_q)
        runs[name]["load_avg"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
        print(f"run {name}: {runs[name]['seconds']:.1f} s, peak RSS {runs[name]['peak_rss_mb']:.0f} MB "
              f"(load average {runs[name]['load_avg']})", flush=True)  # fmt: skip

    checks: dict[str, bool] = {}
    n_videos = len(frames)
    for name, r in runs.items():
        for policy, _ in POLICIES:
            pd = _policy_dir(policy)
            if not (r["dir"] / pd).is_dir():
                continue
            built = built_per_video(r["dir"], pd)
            # a kill can fall between a build and its question's record: then the rerun finds it (0 "built")
            once = (lambda v: v <= 1) if name == "resume" else (lambda v: v == 1)
            checks[f"{name}:{pd}:index_once"] = len(built) == n_videos and all(
                once(v) for v in built.values()
            )
        n_clips = sum((r["dir"] / _policy_dir(p)).is_dir() for p, _ in POLICIES)
        files = len(list((args.workdir / "cache" / name).glob("*.safetensors")))
        r["cache_files"] = files
        checks[f"{name}:cache_files"] = files == n_videos * n_clips
    ref = runs.get("local")
    if ref is not None:
        for name, r in runs.items():
            if name == "local":
                continue
            for d in strategy_dirs(r["dir"]):
                rel = d.relative_to(r["dir"])
                same = content(d) == content(ref["dir"] / rel)
                checks[f"{name}:{rel}:same_as_local"] = same and len(content(d)) == n_q
    if "resume" in runs:
        res = runs["resume"]["resume"]
        checks["resume:killed_mid_run"] = bool(res["killed"]) and 0 < res["done_before_kill"] < n_q
        checks["resume:redone_0"] = res["redone"] == 0

    figures: dict[str, Any] = {
        "benchmark": "qa_corpus",
        "size": args.size,
        "videos": n_videos,
        "questions": n_q,
        "questions_per_video": [min(per_video.values()), max(per_video.values())],
        "minutes": [round(min(frames.values()) / 60, 1), round(max(frames.values()) / 60, 1)],
        "frames": sum(frames.values()),
        "runs": {
            n: {k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items() if k != "dir"}
            for n, r in runs.items()
        },  # fmt: skip
        "index_records": {
            n: {_policy_dir(p): index_counts(r["dir"], _policy_dir(p)) for p, _ in POLICIES}
            for n, r in runs.items()
        },  # fmt: skip
    }
    if "local" in runs and "ray" in runs:
        figures["ray_speedup"] = round(runs["local"]["seconds"] / runs["ray"]["seconds"], 3)
    decodes = {n: frames_decoded(runs[n]["dir"]) for n in ("local", "nocache") if n in runs}
    if decodes:
        figures["frames_decoded"] = decodes
    if "local" in decodes and "nocache" in decodes:
        on, off = decodes["local"], decodes["nocache"]
        decoded_ratio = max(v["decoded_per_distinct"] for v in on.values())
        wall_ratio = runs["local"]["seconds"] / runs["nocache"]["seconds"]
        figures["frame_cache"] = {
            "decoded_per_distinct_shown": decoded_ratio,  # the worst invocation
            "decoded_per_distinct_shown_without": max(v["decoded_per_distinct"] for v in off.values()),
            "decoded": sum(v["decoded"] for v in on.values()),
            "decoded_without": sum(v["decoded"] for v in off.values()),
            "distinct_shown": sum(v["distinct_shown"] for v in on.values()),
            "wall_ratio": round(wall_ratio, 3),
            "peak_rss_mb": round(runs["local"]["peak_rss_mb"], 1),
            "peak_rss_mb_without": round(runs["nocache"]["peak_rss_mb"], 1),
            "cache_peak_mb": max(v["peak_mb"] for v in on.values()),
            "budget_mb": max(v["budget_mb"] for v in on.values()),
        }
        fc = figures["frame_cache"]
        met = {
            "decoded <= 1.05 x distinct shown": decoded_ratio <= 1.05,
            "wall <= 0.6 x the cache-off run": wall_ratio <= 0.6,
            "cache within its budget": fc["cache_peak_mb"] <= fc["budget_mb"],
            "RSS above the cache-off run within the budget": fc["peak_rss_mb"] - fc["peak_rss_mb_without"]
            <= fc["budget_mb"],
        }
        figures["frame_cache"]["targets"] = {k: "met" if v else "not met" for k, v in met.items()}
        for k, v in figures["frame_cache"]["targets"].items():
            print(f"target {k}: {v}", flush=True)
        print(f"frames decoded {fc['decoded']} (without the cache {fc['decoded_without']}), distinct shown "
              f"{fc['distinct_shown']}; wall {wall_ratio:.3f} of the cache-off run", flush=True)  # fmt: skip
    if ref is not None:
        figures["results"] = summaries(ref["dir"])
        rows = []
        for key, s in figures["results"].items():
            row = {"strategy": key, "n": s["n"], "acc": s["accuracy"], "frames": s["mean_frames"]}
            row.update({k: v["accuracy"] for k, v in s["by_kind"].items()})
            rows.append(row)
        kinds = sorted({k for s in figures["results"].values() for k in s["by_kind"]})
        print_table(rows, ["strategy", "n", "acc", "frames", *kinds])
    print_table([{"run": n, "s": r["seconds"], "peak_rss_mb": r["peak_rss_mb"], "load": str(r["load_avg"])}
                 for n, r in runs.items()], ["run", "s", "peak_rss_mb", "load"])  # fmt: skip
    failed = sorted(k for k, v in checks.items() if not v)
    for k in failed:
        print(f"CHECK FAILED: {k}", file=sys.stderr)
    figures["checks_passed"] = len(checks) - len(failed)
    figures["checks_failed"] = failed
    emit_json(figures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
