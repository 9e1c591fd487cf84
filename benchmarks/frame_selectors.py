"""Training-free frame selectors beside the VideoBrain agent, at equal frames, on one frame index.

Contenders (every one over the same toy CLIP frame index and answered by the same policy):

  agent                         the shipped ``toy:where`` policy, its own episode (tool calls, greedy)
  uniform:K clip:K topk:K aks:K bolt:K
                                pick K frames once, answered by the same policy with no tools
                                (``vidlab.understanding.policies.baselines``, ``vidlab.understanding.selectors``)

at K = 16, 32 and the agent's own mean frame count, measured on a validation split (the one choice made here;
the selectors run with their published parameters). Worlds:

  default   the default toy world, test splits of fresh base seeds (``--seeds``; 24 videos x 4 kinds each)
  where     the where-to-look world, the same seeds (24 videos x 5 kinds)
  corpus    the 50-video long corpus (20-60 minute videos, 11 questions each) of a fresh base seed, through
            ``vidlab eval-qa --strategies`` itself

Per world: accuracy, mean distinct frames shown and calls per strategy and per question kind; the agent minus each
strategy paired per question with a 95% bootstrap interval (questions resampled within each seed), overall and per
kind; and per question whether the frames shown hold the answer (``in_view``: ``evidence_in_view`` of the world's
ground truth), which separates what a selector picks from what the reader reads. For the where world's count
questions: accuracy and ``in_view`` by circle length (8-12, 13-18, 19-24 frames).

Everything is cached under ``--out`` (one JSON per world and seed, eval-qa's own resumable folders), so a rerun
resumes; a finished run only aggregates. Ends with one JSON line.

    python benchmarks/frame_selectors.py --out outputs/frame-selectors              # the record (CPU: ~1 h)
    python benchmarks/frame_selectors.py --quick --out /tmp/fs-quick                 # small splits, every part
    python benchmarks/frame_selectors.py --smoke --out /tmp/fs-smoke                 # seconds
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from benchmarks._common import add_smoke_arg, emit_json, print_table  # noqa: E402

POLICY = "toy:where"
METHODS = ("uniform", "clip", "topk", "aks", "bolt")
FIXED_BUDGETS = (16, 32)
EVENT_BINS = ((8, 12), (13, 18), (19, 24))
BOOT = 2000


def _args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small splits and a 3-video corpus (minutes)")
    add_smoke_arg(ap)
    ap.add_argument("--out", type=Path, default=Path("outputs/frame-selectors"), help="run folder (resumed)")
    ap.add_argument(
        "--worlds", nargs="+", default=["default", "where", "corpus"], choices=["default", "where", "corpus"]
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=[20, 21, 22], help="fresh test base seeds")
    ap.add_argument("--val-seed", type=int, default=19, help="base seed of the validation split (the budget)")
    ap.add_argument(
        "--corpus-seed", type=int, default=1, help="base seed of the long corpus (0 is the recorded one)"
    )
    ap.add_argument("--test-videos", type=int, default=24)
    ap.add_argument("--val-videos", type=int, default=8)
    ap.add_argument(
        "--budgets", nargs="+", type=int, default=list(FIXED_BUDGETS), help="fixed K beside the agent's own"
    )
    ap.add_argument(
        "--plot", type=Path, default=None, help="also draw accuracy against frames per world (PNG)"
    )
    args = ap.parse_args(argv)
    args.quick = args.quick or args.smoke
    if args.smoke:  # one video per part, one fixed budget
        args.seeds, args.test_videos, args.val_videos, args.budgets = args.seeds[:1], 1, 1, [8]
    elif args.quick:
        args.seeds, args.test_videos, args.val_videos = args.seeds[:2], 3, 2
    return args


def strategies(budget: int, fixed: list[int] | tuple[int, ...] = FIXED_BUDGETS) -> list[str]:
    """Every method at the fixed budgets and at the agent's own mean frame count."""
    ks = sorted({*fixed, int(budget)})
    return [f"{m}:{k}" for k in ks for m in METHODS]


# ------------------------------------------------------------------------------------------------ toy worlds
def _world(root: Path, name: str, seed: int, split: str, n: int) -> Any:
    from vidlab.understanding.toyworld.train import ToyTrainConfig, World
    from vidlab.understanding.toyworld.world import world_config

    cfg = ToyTrainConfig(
        out=str(root),
        seed=seed,
        train_videos=0,
        val_videos=n if split == "val" else 0,
        test_videos=n if split == "test" else 0,
        world=world_config(name),
        progress=False,
    )
    return World(root / "data", cfg)


def _models() -> tuple[Any, Any]:
    from vidlab.clip import load_model
    from vidlab.understanding.evaluate import policy_clip_model
    from vidlab.understanding.policies import load_policy

    policy = load_policy(POLICY)
    clip = load_model(policy_clip_model(POLICY), device="cpu", precision="fp32")
    return policy, clip


def run_split(world: Any, split: str, policy: Any, clip: Any, cache: Path, specs: list[str]) -> list[dict]:
    """Every question of ``split`` answered by the agent and by each baseline in ``specs``: one record each."""
    from vidlab.understanding.env import run_episode
    from vidlab.understanding.policies.baselines import BaselineSpec, run_baseline
    from vidlab.understanding.toyworld.rl import TOY_EPISODE
    from vidlab.understanding.toyworld.world import evidence_in_view, seed_of, video_spec

    greedy = dataclasses.replace(TOY_EPISODE, temperature=0.0)
    out = []
    for row in world.splits[split].rows:
        agents = world.agents(world.video_path(split, row), clip, cache)
        spec = video_spec(seed_of(row), world.cfg.world)
        base = {"video": row["video"], "category": row["category"]}
        if row["category"] == "count":
            a, b = spec.count_interval
            base.update(event=int(spec.facts.get("count_event", 0)), interval=b - a, count=int(spec.count))
        trajs = {
            "agent": run_episode(policy, None, row["question"], row["options"], config=greedy, agents=agents)
        }
        for s in specs:
            trajs[BaselineSpec.parse(s).label] = run_baseline(
                s,
                policy,
                agents["uniform_sample"].reader,
                row["question"],
                row["options"],
                clip_agent=agents["clip_sample"],
                config=greedy,
            )
        for name, t in trajs.items():
            out.append(
                {
                    **base,
                    "strategy": name,
                    "right": bool(t.valid and t.predicted == row["answer"]),
                    "frames": int(t.num_frames_used),
                    "calls": int(t.num_tool_calls),
                    "in_view": bool(evidence_in_view(spec, row["category"], t.frames_used)),
                }
            )
    return out


def count_views(world: Any, split: str, clip: Any, cache: Path, specs: list[str]) -> list[dict]:
    """Count questions (with circles): what each baseline's frames show, without reading them: frames inside the
    interval, circles hit, and ``check.reason`` (why the count is not in view). ``interval-uniform:K`` is a
    reference no selector has: K frames evenly over the question's interval (it knows where to look)."""
    from vidlab.understanding.agents import linspace_frames
    from vidlab.understanding.policies.baselines import BaselineSpec, baseline_indices
    from vidlab.understanding.toyworld.check import reason
    from vidlab.understanding.toyworld.world import seed_of, video_spec

    ks = sorted({BaselineSpec.parse(s).k for s in specs})
    out = []
    for row in world.splits[split].rows:
        if row["category"] != "count":
            continue
        spec = video_spec(seed_of(row), world.cfg.world)
        if spec.count == 0:
            continue
        a, b = spec.count_interval
        agents = world.agents(world.video_path(split, row), clip, cache)
        views = {
            BaselineSpec.parse(s).label: baseline_indices(
                s, agents["uniform_sample"].reader, row["question"], agents["clip_sample"]
            )
            for s in specs
        }
        views.update({f"interval-uniform-{k}": linspace_frames(a, b, k) for k in ks})
        circles = [e for e in spec.events if e.role == "count"]
        for name, frames in views.items():
            inside = [t for t in frames if a <= t < b]
            hit = sum(any(e.start <= t < e.end for t in inside) for e in circles)
            out.append(
                {
                    "video": row["video"],
                    "strategy": name,
                    "event": int(spec.facts.get("count_event", 0)),
                    "count": int(spec.count),
                    "inside": len(inside),
                    "circles_hit": int(hit),
                    "reason": reason(spec, "count", frames),
                }
            )
    return out


def count_view_table(rows: list[dict]) -> dict[str, Any]:
    """Per circle-length bin and strategy: mean frames inside the interval, share of circles hit, and the tally
    of ``check.reason``."""
    out: dict[str, Any] = {}
    for lo, hi in EVENT_BINS:
        sel = [r for r in rows if lo <= r["event"] <= hi]
        per: dict[str, Any] = {}
        for n in dict.fromkeys(r["strategy"] for r in sel):
            rs = [r for r in sel if r["strategy"] == n]
            tally: dict[str, int] = {}
            for r in rs:
                tally[r["reason"]] = tally.get(r["reason"], 0) + 1
            per[n] = {
                "n": len(rs),
                "inside": round(float(np.mean([r["inside"] for r in rs])), 2),
                "circles_hit": round(
                    sum(r["circles_hit"] for r in rs) / max(1, sum(r["count"] for r in rs)), 4
                ),
                "in_view": round(tally.get("answer in view", 0) / len(rs), 4),
                "reasons": tally,
            }
        out[f"{lo}-{hi} frames"] = per
    return out


def _cached(path: Path, make: Any) -> Any:
    if path.is_file():
        return json.loads(path.read_text())
    from vidlab.io import atomic_write_json

    value = make()
    atomic_write_json(path, value)
    return value


def toy_world(name: str, args: argparse.Namespace, models: Any) -> dict[str, Any]:
    """Validation budget, then every seed's test split (each cached)."""
    policy, clip = models
    root = args.out / name
    cache = root / "index_cache"

    def validate() -> dict:
        w = _world(root / f"val{args.val_seed}", name, args.val_seed, "val", args.val_videos)
        recs = run_split(w, "val", policy, clip, cache, [])
        frames = [r["frames"] for r in recs]
        return {"seed": args.val_seed, "n": len(recs), "agent_frames": float(np.mean(frames))}

    val = _cached(root / f"val{args.val_seed}.json", validate)
    budget = int(round(val["agent_frames"]))
    specs = strategies(budget, args.budgets)
    per_seed = {}
    for seed in args.seeds:
        t0 = time.perf_counter()

        def test(seed: int = seed) -> dict:
            w = _world(root / f"test{seed}", name, seed, "test", args.test_videos)
            return {
                "seed": seed,
                "budget": budget,
                "records": run_split(w, "test", policy, clip, cache, specs),
            }

        per_seed[seed] = _cached(root / f"test{seed}.json", test)
        print(
            f"{name} seed {seed}: {len(per_seed[seed]['records'])} records, {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
    records = [dict(r, seed=s) for s, d in per_seed.items() for r in d["records"]]
    result = {"validation": val, "budget": budget, **aggregate(records)}
    if name == "where":  # why selectors do (not) count short circles: what their frames show
        views = []
        for seed in args.seeds:

            def make(seed: int = seed) -> list[dict]:
                w = _world(root / f"test{seed}", name, seed, "test", args.test_videos)
                return count_views(w, "test", clip, cache, specs)

            views += _cached(root / f"countview{seed}.json", make)
        result["count_views"] = count_view_table(views)
    return result


# ------------------------------------------------------------------------------------------------ the corpus
def corpus(args: argparse.Namespace) -> dict[str, Any]:
    """The long corpus through ``vidlab eval-qa`` (agent + every baseline in one invocation, one frame index)."""
    from vidlab.understanding.cli import eval_qa_main
    from vidlab.understanding.toyworld.corpus import CorpusConfig, build_corpus, quick_config

    root = args.out / "corpus"
    n = 1 if args.smoke else (3 if args.quick else 50)
    n_val = 1 if args.smoke else (2 if args.quick else 5)
    frames = (600, 700) if args.smoke else (900, 1200)  # quick sizes; the full corpus: 1200-3600 frames

    def config(videos: int, seed: int) -> Any:
        c = quick_config(videos, *frames) if args.quick else CorpusConfig(videos=videos)
        return dataclasses.replace(c, base_seed=seed)

    cfg, vcfg = config(n, args.corpus_seed), config(n_val, args.corpus_seed + 1)
    test_c = build_corpus(root / f"test{args.corpus_seed}", cfg)
    val_c = build_corpus(root / f"val{args.corpus_seed + 1}", vcfg)
    common = ["--benchmark", "jsonl", "--policy", POLICY, "--clip-model", "auto", f"cache_dir={root / 'index_cache'}",
              "episode.frame_resize=fit"]  # fmt: skip

    def run(data: Path, out: Path, strats: list[str]) -> list[dict]:
        rc = eval_qa_main(["--data", str(data), "--out", str(out), "--strategies", *strats, *common])
        if rc != 0:
            raise RuntimeError(f"eval-qa exited {rc} on {data}")
        recs = []
        for label_dir in sorted(p for p in out.iterdir() if (p / "results.jsonl").is_file()):
            for line in (label_dir / "results.jsonl").read_text().splitlines():
                r = json.loads(line)
                r = r.get("result") or r  # the job's line wraps the record
                if r.get("status", "ok") != "ok":
                    raise RuntimeError(f"eval-qa failed on {r.get('id')}: {r}")
                recs.append(
                    {
                        "video": r["video_path"],
                        "id": r["id"],
                        "category": r["category"],
                        "strategy": r["strategy"],
                        "right": bool(r["correct"]),
                        "frames": int(r["frames_used"]),
                        "calls": int(r["num_tool_calls"]),
                        "frame_indices": r["frame_indices"],
                    }
                )
        return recs

    val = run(val_c.jsonl, root / "val_run", ["agent"])
    budget = int(round(float(np.mean([r["frames"] for r in val]))))
    recs = run(test_c.jsonl, root / "test_run", ["agent", *strategies(budget, args.budgets)])
    _corpus_in_view(recs, test_c)
    for r in recs:
        r.pop("frame_indices", None)
        r["seed"] = args.corpus_seed
    return {
        "validation": {
            "seed": args.corpus_seed + 1,
            "n": len(val),
            "agent_frames": float(np.mean([r["frames"] for r in val])),
        },
        "budget": budget,
        "videos": n,
        **aggregate(recs, key="id"),
    }


def _corpus_in_view(recs: list[dict], c: Any) -> None:
    """``in_view`` for the world's own kinds (count_any has no ``evidence_in_view`` rule: None)."""
    from vidlab.understanding.toyworld.world import evidence_in_view, video_spec

    specs: dict[str, Any] = {}
    world = c.config.world_config() if hasattr(c, "config") else None
    for r in recs:
        if r["category"] not in ("static", "needle", "count", "distractor", "twolook") or world is None:
            r["in_view"] = None
            continue
        v = r["video"]
        if v not in specs:
            specs[v] = video_spec(int(Path(v).stem), world)
        r["in_view"] = bool(evidence_in_view(specs[v], r["category"], r["frame_indices"]))


# ------------------------------------------------------------------------------------------------ statistics
def paired_bootstrap(a: np.ndarray, b: np.ndarray, groups: np.ndarray, rng: np.random.Generator) -> dict:
    """Mean of a - b and its 95% percentile bootstrap interval, questions resampled within each group (seed)."""
    d = a.astype(float) - b.astype(float)
    idx_by = [np.flatnonzero(groups == g) for g in np.unique(groups)]
    means = np.empty(BOOT)
    for i in range(BOOT):
        pick = np.concatenate([rng.choice(ix, ix.size) for ix in idx_by])
        means[i] = d[pick].mean()
    lo, hi = np.percentile(means, [2.5, 97.5])
    return {
        "mean": round(float(d.mean()), 4),
        "ci95": [round(float(lo), 4), round(float(hi), 4)],
        "n": int(d.size),
    }


def aggregate(records: list[dict], key: str = "qid") -> dict[str, Any]:
    """Per strategy: accuracy / frames / calls / in_view overall and per kind; agent minus each strategy, paired."""
    for r in records:
        if key == "qid":
            r["qid"] = f"{r['seed']}:{r['video']}:{r['category']}"
    names = list(dict.fromkeys(r["strategy"] for r in records))
    kinds = sorted({r["category"] for r in records})
    by: dict[str, dict[str, dict]] = {n: {} for n in names}
    for r in records:
        by[r["strategy"]][r[key]] = r
    qids = sorted(by["agent"])
    summary: dict[str, Any] = {}
    rng = np.random.default_rng(0)
    for n in names:
        rows = [by[n][q] for q in qids if q in by[n]]
        s: dict[str, Any] = _stats(rows)
        s["kinds"] = {k: _stats([r for r in rows if r["category"] == k]) for k in kinds}
        if n != "agent":
            both = [q for q in qids if q in by[n]]
            a = np.array([by["agent"][q]["right"] for q in both])
            b = np.array([by[n][q]["right"] for q in both])
            g = np.array([by["agent"][q]["seed"] for q in both])
            cats = np.array([by["agent"][q]["category"] for q in both])
            s["agent_minus"] = paired_bootstrap(a, b, g, rng)
            s["agent_minus_kinds"] = {
                k: paired_bootstrap(a[cats == k], b[cats == k], g[cats == k], rng)
                for k in kinds
                if (cats == k).any()
            }
        summary[n] = s
    out: dict[str, Any] = {"n_questions": len(qids), "strategies": summary}
    counts = [r for r in records if r["category"] == "count" and r.get("event")]
    if counts:
        out["count_by_circle"] = count_bins(counts)
    return out


def _stats(rows: list[dict]) -> dict[str, Any]:
    if not rows:
        return {"n": 0}
    iv = [r["in_view"] for r in rows if r.get("in_view") is not None]
    return {
        "n": len(rows),
        "accuracy": round(float(np.mean([r["right"] for r in rows])), 4),
        "frames": round(float(np.mean([r["frames"] for r in rows])), 2),
        "calls": round(float(np.mean([r["calls"] for r in rows])), 3),
        "in_view": round(float(np.mean(iv)), 4) if iv else None,
    }


def _wilson(k: int, n: int) -> list[float]:
    if n == 0:
        return [float("nan"), float("nan")]
    z, p = 1.96, k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(c - h, 4), round(c + h, 4)]


def count_bins(counts: list[dict]) -> dict[str, Any]:
    """Count questions with circles, by circle length: accuracy [Wilson 95%] and the share whose frames show the
    count, per strategy (questions without a circle apart)."""
    out: dict[str, Any] = {}
    for lo, hi in EVENT_BINS:
        sel = [r for r in counts if r["count"] > 0 and lo <= r["event"] <= hi]
        per: dict[str, Any] = {}
        for n in dict.fromkeys(r["strategy"] for r in sel):
            rs = [r for r in sel if r["strategy"] == n]
            k = sum(r["right"] for r in rs)
            per[n] = {
                "n": len(rs),
                "accuracy": round(k / len(rs), 4),
                "accuracy_ci95": _wilson(k, len(rs)),
                "in_view": round(float(np.mean([r["in_view"] for r in rs])), 4),
                "frames": round(float(np.mean([r["frames"] for r in rs])), 2),
            }
        out[f"{lo}-{hi} frames"] = per
    return out


def plot(figures: dict[str, Any], path: Path) -> None:
    """Accuracy against mean distinct frames, one panel per world: each method across its budgets, the agent as
    a star."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    worlds = figures["worlds"]
    fig, axes = plt.subplots(1, len(worlds), figsize=(4.2 * len(worlds), 3.6), squeeze=False)
    for ax, (name, res) in zip(axes[0], worlds.items()):
        s = res["strategies"]
        for m in METHODS:
            pts = sorted((v["frames"], v["accuracy"]) for n, v in s.items() if n.split("-")[0] == m)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=m)
        ax.plot([s["agent"]["frames"]], [s["agent"]["accuracy"]], marker="*", markersize=14, ls="", color="k",
                label=f"agent ({POLICY})")  # fmt: skip
        ax.set_title(f"{name} ({res['n_questions']} questions)")
        ax.set_xlabel("distinct frames shown (mean)")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("accuracy")
    axes[0][-1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    from vidlab.io import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    figures: dict[str, Any] = {
        "benchmark": "frame_selectors",
        "policy": POLICY,
        "seeds": args.seeds,
        "worlds": {},
    }
    models = _models() if {"default", "where"} & set(args.worlds) else None
    for name in args.worlds:
        res = corpus(args) if name == "corpus" else toy_world(name, args, models)
        figures["worlds"][name] = res
        rows = [
            {
                "strategy": n,
                **{k: s.get(k) for k in ("accuracy", "frames", "calls", "in_view")},
                "agent-minus": (s.get("agent_minus") or {}).get("mean"),
                "ci95": (s.get("agent_minus") or {}).get("ci95"),
            }
            for n, s in res["strategies"].items()
        ]
        print(f"\n{name}: {res['n_questions']} questions, agent budget {res['budget']} frames (validation)")
        print_table(rows, ["strategy", "accuracy", "frames", "calls", "in_view", "agent-minus", "ci95"])
    if args.plot:
        plot(figures, args.plot)
    figures["seconds"] = round(time.perf_counter() - t0, 1)
    emit_json(figures, args.out / "frame_selectors.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
