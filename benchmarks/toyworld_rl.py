"""VideoBrain's RL in the toy world: does the behaviour-aware reward teach the policy *when* to call?

For each seed, trains (or resumes) the whole pipeline -- world, toy CLIP, SFT, classification, GRPO with the
behaviour-aware reward, and the ablation GRPO with the accuracy-only reward (no bonus, no classification) -- then
evaluates on the held-out test split (disjoint seeds):

  uniform-16, uniform-56, clip-topk (16 CLIP frames for the question), answered by the GRPO policy without tools;
  sft, grpo, grpo-acc-only as agents (greedy) through the real Episode.

Also reports the toy CLIP's needle recall@4 (``clip_sample(0, total, shape)`` finds the event) and the share of
``clip_sample`` calls whose cached top-4 equals a fresh fp32 re-embed. With several seeds, every figure gets a
95% t-interval over seeds. Ends with ONE JSON line.

``--world where`` runs the where-to-look world (``WORLDS["where"]``, preset ``train-agent/toyworld-where``: the
policy chooses tool arguments, ``understanding/toyworld/where.py``) and adds: per kind the mean calls and the
call-count distribution; the world check (what each one-call strategy shows and why it falls short, with an
ideal retriever and with the trained toy CLIP, ``understanding/toyworld/check.py``); the classification's looks
per kind; the GRPO policy on the default world's test split; the where targets; and per-stage wall/CPU time.

    python benchmarks/toyworld_rl.py --quick
    python benchmarks/toyworld_rl.py --seeds 0 1 2 --out outputs/toyworld-bench
    python benchmarks/toyworld_rl.py --world where --seeds 0 1 2 --out outputs/toyworld-bench-where
"""

from __future__ import annotations

import json
import math
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from benchmarks._common import bench_args, emit_json, print_table, smoke_size_note  # noqa: E402

METHODS = ("uniform-16", "uniform-56", "clip-topk", "sft", "grpo", "grpo-acc-only")
KINDS = ("static", "needle", "count", "distractor")
WHERE_KINDS = (*KINDS, "twolook")
NEEDS_LOOKS = ("needle", "count", "distractor", "twolook")  # where-world kinds that need more than one call
PRESETS = {"default": "toyworld", "where": "toyworld-where"}


def quick_config(out: str, seed: int, world: str = "default"):
    from vidlab.understanding.toyworld.clip_train import ClipTrainConfig
    from vidlab.understanding.toyworld.train import GRPOConfig, SFTConfig, ToyTrainConfig
    from vidlab.understanding.toyworld.world import WorldConfig, world_config

    if world == "where":
        return ToyTrainConfig(
            out=out,
            seed=seed,
            train_videos=4,
            val_videos=1,
            test_videos=3,
            world=world_config("where", max_frames=700),
            clip=ClipTrainConfig(steps=60),
            sft=SFTConfig(steps=40, video_fraction=0.5, later_action_weight=0.0),
            actions="where",
            classify_k=2,
            grpo=GRPOConfig(steps=2, questions_per_step=2, checkpoint_every=1),
            progress=False,
        )
    return ToyTrainConfig(
        out=out,
        seed=seed,
        train_videos=4,
        val_videos=1,
        test_videos=3,
        world=WorldConfig(min_frames=120, max_frames=300),
        clip=ClipTrainConfig(steps=60),
        sft=SFTConfig(steps=40, video_fraction=0.5),
        classify_k=2,
        grpo=GRPOConfig(steps=2, questions_per_step=2, checkpoint_every=1),
        progress=False,
    )


def full_config(out: str, seed: int, preset: str, overrides: list[str]):
    from vidlab.config import resolve
    from vidlab.understanding.toyworld.train import ToyTrainConfig

    return resolve(ToyTrainConfig, preset, [f"out={out}", f"seed={seed}", *overrides])


def one_seed(cfg, ablation: bool = True) -> dict:
    """Train (or resume) and evaluate one seed; the result is cached in OUT/seedN/result.json. ``ablation``
    (where world): also train and evaluate the accuracy-only GRPO."""
    cached = pathlib.Path(cfg.out) / "result.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    if cfg.actions == "where":
        return where_seed(cfg, ablation)
    from vidlab.understanding.toyworld.clip_train import needle_recall
    from vidlab.understanding.toyworld.evaluate import cache_parity, evaluate_methods, oracle_table
    from vidlab.understanding.toyworld.train import _specs, run

    t0, c0 = time.perf_counter(), time.process_time()
    res = run(cfg, stages=("sft",))
    world, clip = res["world"], res["clip"]
    # the gate, before any RL figure: can the cold-started reader read the ground-truth frames?
    oracle = {"sft": oracle_table(world, res["sft"])}
    print(f"seed {cfg.seed} oracle (sft): {json.dumps(oracle['sft'])}", flush=True)
    res = run(cfg, stages=("grpo", "grpo-acc-only"))
    t_train = time.perf_counter() - t0
    cache = pathlib.Path(cfg.out) / "index_cache"
    policies = {"sft": res["sft"], "grpo": res["grpo"], "grpo-acc-only": res["grpo-acc-only"]}
    methods = evaluate_methods(world, clip, policies, res["grpo"], cache)
    test = world.splits["test"]
    recall = needle_recall(clip, test.root, _specs(test, cfg), cache_dir=cache)
    parity = cache_parity(world, clip, cache, seed=cfg.seed)
    labels: dict[str, int] = {}
    for r in res["labels"]:
        labels[r["classification"]] = labels.get(r["classification"], 0) + 1
    label_by_kind: dict[str, dict[str, int]] = {}
    for r in res["labels"]:
        d = label_by_kind.setdefault(r["category"], {})
        d[r["classification"]] = d.get(r["classification"], 0) + 1
    oracle["grpo"] = oracle_table(world, res["grpo"])
    noise_path = pathlib.Path(cfg.out) / "label_noise.json"
    result = {
        "seed": cfg.seed,
        "oracle": oracle,
        "label_noise": json.loads(noise_path.read_text()) if noise_path.is_file() else None,
        "methods": methods,
        "clip": {**recall, **parity},
        "labels": labels,
        "labels_by_kind": label_by_kind,
        "train_seconds": round(t_train, 1),
        "seconds": round(time.perf_counter() - t0, 1),
        "cpu_seconds": round(
            time.process_time() - c0, 1
        ),  # this process's CPU time: the idle-machine estimate
    }
    from vidlab.io import atomic_write_json

    atomic_write_json(cached, result)
    return result


def default_world(cfg, clip, policy) -> dict:
    """The where policy on the default world's test split (same seeds as the default benchmark's seed
    ``cfg.seed``): does one policy serve both worlds?"""
    from vidlab.understanding.toyworld.evaluate import evaluate_methods
    from vidlab.understanding.toyworld.train import ToyTrainConfig, World
    from vidlab.understanding.toyworld.world import WorldConfig

    root = pathlib.Path(cfg.out) / "default_world"
    dcfg = ToyTrainConfig(
        out=str(root),
        seed=cfg.seed,
        train_videos=0,
        val_videos=0,
        test_videos=cfg.test_videos,
        world=WorldConfig(),
        progress=False,
    )
    world = World(root / "data", dcfg)
    return evaluate_methods(
        world, clip, {"grpo": policy}, policy, root / "index_cache", baselines=("uniform:56",)
    )


def where_seed(cfg, ablation: bool = True) -> dict:
    """``one_seed`` for the where world: the same pipeline and methods (the accuracy-only ablation unless
    ``ablation`` is false), plus the world check, the validation split, the looks of the classification labels,
    the default world, per-stage timing, and per-question records of the test split (``records``)."""
    from vidlab.understanding.toyworld.check import clip_check, view_check
    from vidlab.understanding.toyworld.evaluate import cache_parity, evaluate_methods, oracle_table
    from vidlab.understanding.toyworld.train import _specs, run
    from vidlab.understanding.toyworld.world import seed_of, video_spec

    out = pathlib.Path(cfg.out)
    t0, c0 = time.perf_counter(), time.process_time()
    res = run(cfg, stages=("sft",))
    world, clip = res["world"], res["clip"]
    oracle = {"sft": oracle_table(world, res["sft"])}
    print(f"seed {cfg.seed} oracle (sft): {json.dumps(oracle['sft'])}", flush=True)
    res = run(cfg, stages=("grpo", "grpo-acc-only") if ablation else ("grpo",))
    t_train = time.perf_counter() - t0
    cache = out / "index_cache"
    policies = {"sft": res["sft"], "grpo": res["grpo"]}
    if ablation:
        policies["grpo-acc-only"] = res["grpo-acc-only"]
    methods = evaluate_methods(world, clip, policies, res["grpo"], cache, records=True)
    val = evaluate_methods(
        world,
        clip,
        {"sft": res["sft"], "grpo": res["grpo"]},
        res["grpo"],
        cache,
        ("uniform:56", "clip:16"),
        "val",
    )
    check = {
        "ideal_retriever": view_check(_specs(world.splits["test"], cfg), cfg.world.kinds),
        "toy_clip": clip_check(world, clip, cache),
    }
    parity = cache_parity(world, clip, cache, seed=cfg.seed)
    labels: dict[str, int] = {}
    by_kind: dict[str, dict[str, int]] = {}
    for r in res["labels"]:
        looks = (r.get("classification_info") or {}).get("looks")
        key = r["classification"] + (f" ({looks} look{'s' if looks != 1 else ''})" if looks else "")
        labels[r["classification"]] = labels.get(r["classification"], 0) + 1
        d = by_kind.setdefault(r["category"], {})
        d[key] = d.get(key, 0) + 1
    oracle["grpo"] = oracle_table(world, res["grpo"])
    dflt = default_world(cfg, clip, res["grpo"])
    count_facts = []  # per test count question: its circles' length, interval and count (for the bins)
    for r in world.splits["test"].rows:
        if r["category"] == "count":
            spec = video_spec(seed_of(r), cfg.world)
            a, b = spec.count_interval
            count_facts.append(
                {
                    "video": r["video"],
                    "event": spec.facts["count_event"],
                    "interval": b - a,
                    "count": spec.count,
                }
            )
    timing_path = out / "timing.json"
    noise_path = out / "label_noise.json"
    result = {
        "seed": cfg.seed,
        "world": "where",
        "oracle": oracle,
        "label_noise": json.loads(noise_path.read_text()) if noise_path.is_file() else None,
        "methods": methods,
        "validation": val,
        "world_check": check,
        "clip": parity,
        "labels": labels,
        "labels_by_kind": by_kind,
        "default_world": dflt,
        "count_facts": count_facts,
        "timing": json.loads(timing_path.read_text()) if timing_path.is_file() else None,
        "train_seconds": round(t_train, 1),
        "seconds": round(time.perf_counter() - t0, 1),
        "cpu_seconds": round(time.process_time() - c0, 1),
    }
    from vidlab.io import atomic_write_json

    atomic_write_json(out / "result.json", result)
    return result


EVENT_BINS = ((8, 12), (13, 18), (19, 24))  # frames per counted circle (the where preset draws 8 to 24)
BIN_METHODS = ("grpo", "uniform-56", "clip-topk", "sft")


def _wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson interval of a share k / n."""
    if n == 0:
        return (float("nan"), float("nan"))
    z, p = 1.96, k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (round(c - h, 4), round(c + h, 4))


def count_by_event(per_seed: list[dict]) -> dict | None:
    """Count questions by the length of their circles (``EVENT_BINS``; questions with no circle apart, and the
    split by the halves' stride: circles shorter than ``uniform_sample``'s stride over half the interval):
    per method, per seed accuracy and mean calls, and pooled over seeds: accuracy with a 95% Wilson interval,
    mean calls with a 95% t-interval over questions, and GRPO minus uniform-56 paired per question."""
    if not all(s.get("count_facts") and "records" in s["methods"].get("grpo", {}) for s in per_seed):
        return None

    def group(f: dict) -> list[str]:
        if f["count"] == 0:
            return ["no circle"]
        out = [f"{lo}-{hi} frames" for lo, hi in EVENT_BINS if lo <= f["event"] <= hi]
        half_stride = (f["interval"] // 2 - 1) / 7
        out.append(
            "shorter than the halves' stride" if f["event"] < half_stride else "halves' stride or longer"
        )
        return out

    names = [f"{lo}-{hi} frames" for lo, hi in EVENT_BINS]
    names += ["no circle", "shorter than the halves' stride", "halves' stride or longer"]
    rows: dict[str, dict] = {g: {"n": 0, "per_seed": [], "methods": {}} for g in names}
    pooled: dict[str, dict[str, dict[str, list]]] = {g: {} for g in names}
    for s in per_seed:
        facts = {f["video"]: f for f in s["count_facts"]}
        counts: dict[str, int] = {}
        for m in BIN_METHODS:
            if m not in s["methods"]:
                continue
            for r in s["methods"][m]["records"]:
                if r["category"] != "count":
                    continue
                for g in group(facts[r["video"]]):
                    d = pooled[g].setdefault(m, {"right": [], "calls": [], "seed": []})
                    d["right"].append(int(r["right"]))
                    d["calls"].append(r["calls"])
                    d["seed"].append(s["seed"])
                    if m == "grpo":
                        counts[g] = counts.get(g, 0) + 1
        for g in names:
            rows[g]["per_seed"].append({"seed": s["seed"], "n": counts.get(g, 0)})
    for g in names:
        rows[g]["n"] = sum(x["n"] for x in rows[g]["per_seed"])
        for m, d in pooled[g].items():
            right, calls = np.array(d["right"]), np.array(d["calls"], float)
            seeds = sorted(set(d["seed"]))
            per = [
                {
                    "seed": sd,
                    "accuracy": round(float(right[np.array(d["seed"]) == sd].mean()), 4),
                    "calls": round(float(calls[np.array(d["seed"]) == sd].mean()), 3),
                }
                for sd in seeds
            ]
            hw = 1.96 * calls.std(ddof=1) / math.sqrt(len(calls)) if len(calls) > 1 else float("nan")
            rows[g]["methods"][m] = {
                "accuracy": round(float(right.mean()), 4),
                "accuracy_ci95": _wilson(int(right.sum()), len(right)),
                "calls": round(float(calls.mean()), 3),
                "calls_ci95": round(float(hw), 3) if hw == hw else None,
                "per_seed": per,
            }
        if "grpo" in pooled[g] and "uniform-56" in pooled[g]:
            diff = np.array(pooled[g]["grpo"]["right"]) - np.array(pooled[g]["uniform-56"]["right"])
            hw = 1.96 * diff.std(ddof=1) / math.sqrt(len(diff)) if len(diff) > 1 else float("nan")
            rows[g]["grpo_minus_uniform56"] = {
                "mean": round(float(diff.mean()), 4),
                "ci95": round(float(hw), 4) if hw == hw else None,
            }
    return rows


def _present(per_seed: list[dict]) -> tuple[str, ...]:
    """The methods every seed evaluated (the accuracy-only ablation may be left out)."""
    return tuple(m for m in METHODS if all(m in s["methods"] for s in per_seed))


def where_aggregate(per_seed: list[dict]) -> dict:
    """Means and 95% intervals over seeds, per kind; call-count distributions; the where targets."""
    keys = ("accuracy", "frames", "calls")
    per_kind_keys = ("accuracy", "call_rate", "calls", "frames")
    methods: dict[str, dict] = {}
    ci: dict[str, dict] = {}
    present = _present(per_seed)
    for m in present:
        methods[m], ci[m] = {}, {}
        for k in (*keys, *[f"{p}_{x}" for x in WHERE_KINDS for p in per_kind_keys]):
            mean, hw = _ci([s["methods"][m].get(k, float("nan")) for s in per_seed])
            methods[m][k] = round(mean, 4)
            ci[m][k] = round(hw, 4) if hw == hw else None
    hist = {
        m: {
            k: np.sum([s["methods"][m].get(f"calls_hist_{k}", [0] * 6) for s in per_seed], 0).tolist()
            for k in WHERE_KINDS
        }
        for m in ("sft", "grpo", "grpo-acc-only")
        if m in present
    }
    per_kind = {
        m: {
            k: {p: methods[m][f"{p}_{k}"] for p in per_kind_keys} | {"accuracy_ci95": ci[m][f"accuracy_{k}"]}
            for k in WHERE_KINDS
        }
        for m in present
    }
    g, u56, clip16 = methods["grpo"], methods["uniform-56"], methods["clip-topk"]
    diff, diff_hw = _ci(
        [s["methods"]["grpo"]["accuracy"] - s["methods"]["uniform-56"]["accuracy"] for s in per_seed]
    )
    every = [s["methods"] for s in per_seed]
    dflt = [s["default_world"]["grpo"]["accuracy"] for s in per_seed if s.get("default_world")]
    targets = {
        "grpo_ge_uniform56_every_kind": all(g[f"accuracy_{k}"] >= u56[f"accuracy_{k}"] for k in WHERE_KINDS),
        "grpo_ge_cliptopk_every_kind": all(
            g[f"accuracy_{k}"] >= clip16[f"accuracy_{k}"] for k in WHERE_KINDS
        ),
        "grpo_ge_both_every_kind_every_seed": all(
            m["grpo"][f"accuracy_{k}"]
            >= max(m["uniform-56"][f"accuracy_{k}"], m["clip-topk"][f"accuracy_{k}"])
            for m in every
            for k in WHERE_KINDS
        ),
        "grpo_minus_uniform56_ci_excludes_0": bool(diff_hw == diff_hw and diff - diff_hw > 0),
        "grpo_frames_le_60pct_uniform56": g["frames"] <= 0.6 * u56["frames"],
        "calls_gt_1_on_kinds_that_need_looks": all(g[f"calls_{k}"] > 1 for k in NEEDS_LOOKS),
        "no_calls_on_static": g["calls_static"] == 0,
        "grpo_gt_sft_every_seed": all(m["grpo"]["accuracy"] > m["sft"]["accuracy"] for m in every),
        "default_world_ge_095": bool(dflt) and float(np.mean(dflt)) >= 0.95,
        "default_world_ge_095_every_seed": bool(dflt) and min(dflt) >= 0.95,
    }
    ablation = {
        k: {
            m: {p: methods[m][f"{p}_{k}"] for p in ("accuracy", "calls", "frames")}
            for m in ("grpo", "grpo-acc-only")
            if m in present
        }
        for k in WHERE_KINDS
    }
    seeds = [
        {
            "seed": s["seed"],
            "methods": {
                m: {
                    **{k: round(s["methods"][m][k], 4) for k in keys},
                    "per_kind": {
                        k: {p: s["methods"][m].get(f"{p}_{k}") for p in per_kind_keys} for k in WHERE_KINDS
                    },
                }
                for m in present
            },
            "grpo_minus_uniform56": round(
                s["methods"]["grpo"]["accuracy"] - s["methods"]["uniform-56"]["accuracy"], 4
            ),
            "grpo_minus_sft": round(s["methods"]["grpo"]["accuracy"] - s["methods"]["sft"]["accuracy"], 4),
            "default_world": {
                m: {k: round(v[k], 4) for k in keys} for m, v in (s.get("default_world") or {}).items()
            },
            "validation": {
                m: {k: round(v[k], 4) for k in keys} for m, v in (s.get("validation") or {}).items()
            },
            "labels_by_kind": s.get("labels_by_kind"),
            "timing": s.get("timing"),
        }
        for s in per_seed
    ]
    return {
        "world": "where",
        "methods": methods,
        "ci95": ci,
        "per_kind": per_kind,
        "calls_hist": hist,
        "grpo_minus_uniform56": {
            "mean": round(diff, 4),
            "ci95": round(diff_hw, 4) if diff_hw == diff_hw else None,
        },
        "default_world_grpo_accuracy": {
            "mean": round(float(np.mean(dflt)), 4) if dflt else None,
            "per_seed": dflt,
        },
        "ablation_by_kind": ablation,
        "count_by_event": count_by_event(per_seed),
        "world_check": [s.get("world_check") for s in per_seed],
        "oracle": {s["seed"]: s.get("oracle") for s in per_seed},
        "targets": targets,
        "seed_rows": seeds,
    }


def _ci(values: list[float]) -> tuple[float, float]:
    """Mean and 95% t half-width over seeds (half-width nan for one seed)."""
    v = [x for x in values if x == x]
    if not v:
        return float("nan"), float("nan")
    m = float(np.mean(v))
    if len(v) < 2:
        return m, float("nan")
    t = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776}.get(len(v), 2.262)
    return m, float(t * np.std(v, ddof=1) / math.sqrt(len(v)))


def _kind_row(m: dict) -> dict:
    return {k: {"accuracy": m.get(f"accuracy_{k}"), "call_rate": m.get(f"call_rate_{k}")} for k in KINDS}


def aggregate(per_seed: list[dict]) -> dict:
    methods: dict[str, dict] = {}
    ci: dict[str, dict] = {}
    for m in METHODS:
        methods[m], ci[m] = {}, {}
        for k in (
            "accuracy",
            "frames",
            "calls",
            *[f"accuracy_{x}" for x in KINDS],
            *[f"call_rate_{x}" for x in KINDS],
        ):
            mean, hw = _ci([s["methods"][m].get(k, float("nan")) for s in per_seed])
            methods[m][k] = round(mean, 4)
            ci[m][k] = round(hw, 4) if hw == hw else None
    per_kind = {
        m: {
            k: {
                "accuracy": methods[m][f"accuracy_{k}"],
                "accuracy_ci95": ci[m][f"accuracy_{k}"],
                "call_rate": methods[m][f"call_rate_{k}"],
                "call_rate_ci95": ci[m][f"call_rate_{k}"],
            }
            for k in KINDS
        }
        for m in METHODS
    }
    call_rate = {k: methods["grpo"][f"call_rate_{k}"] for k in KINDS}
    call_rate_abl = {k: methods["grpo-acc-only"][f"call_rate_{k}"] for k in KINDS}
    clip = {k: round(_ci([s["clip"][k] for s in per_seed])[0], 4) for k in per_seed[0]["clip"]}
    g, u56, sft = methods["grpo"], methods["uniform-56"], methods["sft"]
    diff, diff_hw = _ci(
        [s["methods"]["grpo"]["accuracy"] - s["methods"]["uniform-56"]["accuracy"] for s in per_seed]
    )
    every = [s["methods"] for s in per_seed]
    targets = {
        "grpo_acc_ge_uniform56_every_seed": all(
            m["grpo"]["accuracy"] >= m["uniform-56"]["accuracy"] for m in every
        ),
        "grpo_minus_uniform56_ci_excludes_0": bool(diff_hw == diff_hw and diff - diff_hw > 0),
        "grpo_acc_ge_uniform56": g["accuracy"] >= u56["accuracy"],
        "grpo_frames_le_60pct_uniform56": g["frames"] <= 0.6 * u56["frames"],
        "grpo_acc_gt_sft": g["accuracy"] > sft["accuracy"],
        "static_calls_le_20pct": call_rate["static"] <= 0.2,
        "needle_calls_ge_80pct_every_seed": all(m["grpo"].get("call_rate_needle", 0) >= 0.8 for m in every),
        "count_calls_ge_80pct_every_seed": all(m["grpo"].get("call_rate_count", 0) >= 0.8 for m in every),
        "needle_calls_ge_80pct": call_rate["needle"] >= 0.8,
        "count_calls_ge_80pct": call_rate["count"] >= 0.8,
        "cache_top4_agree_ge_99pct": clip["top4_agree"] >= 0.99,
    }
    oracle: dict = {}
    for pol in ("sft", "grpo"):
        for view in ("evidence", "initial+evidence", "initial", "blank"):
            for k in KINDS:
                vals = [s["oracle"][pol][view][k] for s in per_seed if s.get("oracle")]
                if vals:
                    mean, hw = _ci(vals)
                    oracle.setdefault(pol, {}).setdefault(view, {})[k] = round(mean, 4)
    seeds = [
        {
            "seed": s["seed"],
            "methods": {
                m: {
                    **{k: round(s["methods"][m][k], 4) for k in ("accuracy", "frames", "calls")},
                    "per_kind": _kind_row(s["methods"][m]),
                }
                for m in METHODS
            },
            "grpo_minus_uniform56": round(
                s["methods"]["grpo"]["accuracy"] - s["methods"]["uniform-56"]["accuracy"], 4
            ),
        }
        for s in per_seed
    ]
    return {
        "methods": methods,
        "label_noise": label_noise_summary(per_seed),
        "ci95": ci,
        "per_kind": per_kind,
        "grpo_minus_uniform56": {
            "mean": round(diff, 4),
            "ci95": round(diff_hw, 4) if diff_hw == diff_hw else None,
        },
        "call_rate_by_kind": call_rate,
        "call_rate_by_kind_acc_only": call_rate_abl,
        "clip": clip,
        "oracle": oracle,
        "targets": targets,
        "seed_rows": seeds,
    }


def label_noise_summary(per_seed: list[dict]) -> dict:
    """Per seed and kind: Direct labels whose initial 16 frames do not show the answer (lucky guesses) and their
    share of the Direct labels, under the labels used (``after``: ``classify_views`` initial views) and under the
    one-view rule on the same samples (``before``); ``n`` questions per kind, ``labels`` the labels used."""
    out: dict = {}
    for s in per_seed:
        noise = s.get("label_noise") or {}
        before = noise.get("single_view") or {}
        row: dict = {"initial_views": noise.get("initial_views", 1)}
        for k in (*KINDS, "all"):
            if k not in noise:
                continue
            a, b = noise[k], before.get(k, {})
            row[k] = {
                "n": a["n"],
                "labels": a.get("labels"),
                "direct_without_evidence": {
                    "before": b.get("direct_without_evidence"),
                    "after": a["direct_without_evidence"],
                },
                "direct_noise": {"before": b.get("direct_noise"), "after": a.get("direct_noise")},
                "direct_with_evidence": {
                    "before": b.get("direct_with_evidence"),
                    "after": a["direct_with_evidence"],
                },
            }
        out[str(s["seed"])] = row
    return out


def plot_accuracy_vs_frames(
    agg: dict, png: pathlib.Path, n_seeds: int, n_questions: int = 96, world: str = "toy long-video world"
) -> pathlib.Path:
    """Accuracy against mean frames per question, one point per method (95% intervals over seeds as bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from vidlab.io import atomic_path

    fig, ax = plt.subplots(figsize=(6, 4))
    for i, m in enumerate(m for m in METHODS if m in agg["methods"]):
        x, y = agg["methods"][m]["frames"], agg["methods"][m]["accuracy"]
        xe, ye = agg["ci95"][m]["frames"] or 0.0, agg["ci95"][m]["accuracy"] or 0.0
        ax.errorbar(x, y, xerr=xe, yerr=ye, fmt="o", color=f"C{i}", capsize=3, label=m)
    u = [agg["methods"][m] for m in ("uniform-16", "uniform-56")]
    ax.plot([v["frames"] for v in u], [v["accuracy"] for v in u], "--", color="grey", lw=0.8)
    ax.set_xlabel("frames shown per question (mean)")
    ax.set_ylabel(f"accuracy ({n_questions} test questions per seed)")
    ax.set_title(f"{world}, {n_seeds} seed(s), 95% intervals over seeds")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return png


def main(argv=None) -> int:
    def extra(ap):
        ap.add_argument(
            "--seeds", type=int, nargs="+", default=[0], help="pipeline seeds (>= 3 for intervals)"
        )
        ap.add_argument(
            "--world",
            choices=sorted(PRESETS),
            default="default",
            help="default: the shipped policy's world; where: the where-to-look world (preset toyworld-where)",
        )
        ap.add_argument(
            "--out", default=None, help="run folder (default outputs/toyworld-bench[-where][-quick])"
        )
        ap.add_argument(
            "--preset", default=None, help="training preset for the full run (default: the world's own)"
        )
        ap.add_argument("--set", dest="overrides", nargs="*", default=[], help="preset overrides key=value")
        ap.add_argument("--plot", default=None, help="also write the accuracy-vs-frames plot here (PNG)")
        ap.add_argument(
            "--no-ablation",
            action="store_true",
            help="where world: leave out the accuracy-only GRPO ablation (train and evaluate the behaviour reward)",
        )

    args = bench_args(__doc__.split("\n\n")[0], extra=extra, argv=argv)
    where = args.world == "where"
    stem = "outputs/toyworld-bench" + ("-where" if where else "")
    out = pathlib.Path(args.out or (stem + "-quick" if args.quick else stem))
    preset = args.preset or PRESETS[args.world]
    t0 = time.perf_counter()
    if args.quick:
        print(smoke_size_note(f"--quick: small world and training, {len(args.seeds)} seed(s)"), flush=True)
    per_seed = []
    for s in args.seeds:
        d = str(out / f"seed{s}")
        cfg = quick_config(d, s, args.world) if args.quick else full_config(d, s, preset, args.overrides)
        r = one_seed(cfg, ablation=not args.no_ablation)
        per_seed.append(r)
        print(f"seed {s}: trained in {r['train_seconds']} s, total {r['seconds']} s; labels {r['labels']}")
    if where:
        return where_report(per_seed, out, args, argv, t0)
    agg = aggregate(per_seed)
    print_method_table(agg, KINDS, "call_rate")
    for r in agg["seed_rows"]:
        print(
            f"seed {r['seed']}: "
            + "  ".join(f"{m} {v['accuracy']:.3f}/{v['frames']:.1f}f" for m, v in r["methods"].items())
        )
    print("grpo - uniform-56:", agg["grpo_minus_uniform56"])
    print("oracle (reader gate):", agg["oracle"])
    for seed, row in agg["label_noise"].items():
        print(
            f"seed {seed} lucky Direct labels (before -> after, {row['initial_views']} initial views):",
            {
                k: f"{v['direct_without_evidence']['before']} -> {v['direct_without_evidence']['after']}"
                for k, v in row.items()
                if isinstance(v, dict)
            },
        )
    print("clip:", agg["clip"])
    print("targets:", agg["targets"])

    if args.plot:
        print("plot:", plot_accuracy_vs_frames(agg, pathlib.Path(args.plot), len(per_seed)))
    return write_figures(agg, per_seed, out, args, argv, t0)


def write_figures(agg: dict, per_seed: list[dict], out: pathlib.Path, args, argv, t0: float) -> int:
    """Write ``OUT/figures.json`` (with each seed's per-method rows) and print the final JSON line."""
    from vidlab.io import atomic_write_json

    seed_rows = agg.pop("seed_rows")
    if args.quick:
        print(smoke_size_note(f"--quick: small world and training, {len(per_seed)} seed(s)"))
    figures = {
        "quick": bool(args.quick),
        **agg,
        "seeds": seed_rows,  # one row per seed (seed, per-method accuracy / frames / calls / per_kind)
        "per_seed": [{k: v for k, v in s.items() if k != "methods"} for s in per_seed],
        "seconds": round(time.perf_counter() - t0, 1),
        "command": " ".join(
            ["python", "benchmarks/toyworld_rl.py", *(argv if argv is not None else sys.argv[1:])]
        ),
    }
    atomic_write_json(out / "figures.json", {**figures, "per_seed_methods": [s["methods"] for s in per_seed]})
    emit_json(figures)
    return 0


def print_method_table(agg: dict, kinds, calls_key: str) -> None:
    """One row per method: accuracy, frames, calls, then accuracy and ``{calls_key}_{kind}`` per question kind."""
    rows = []
    for m in (m for m in METHODS if m in agg["methods"]):
        row = {"method": m, **{k: agg["methods"][m][k] for k in ("accuracy", "frames", "calls")}}
        for k in kinds:
            row[f"acc {k}"] = agg["methods"][m][f"accuracy_{k}"]
            row[f"calls {k}"] = agg["methods"][m][f"{calls_key}_{k}"]
        rows.append(row)
    print_table(rows, list(rows[0]))


def where_report(per_seed: list[dict], out: pathlib.Path, args, argv, t0: float) -> int:
    """Print the where world's tables and write/emit its figures (``main`` for ``--world where``)."""

    agg = where_aggregate(per_seed)
    print_method_table(agg, WHERE_KINDS, "calls")
    for m, per in agg["calls_hist"].items():
        print(f"{m} call-count distribution (0..5 calls) per kind:", per)
    for r in agg["seed_rows"]:
        print(
            f"seed {r['seed']}: "
            + "  ".join(f"{m} {v['accuracy']:.3f}/{v['frames']:.1f}f" for m, v in r["methods"].items())
            + f"; default world {r['default_world']}"
        )
    print("grpo - uniform-56:", agg["grpo_minus_uniform56"])
    print("targets:", agg["targets"])
    if agg.get("count_by_event"):
        rows = []
        for g, row in agg["count_by_event"].items():
            r = {"count questions": g, "n": row["n"]}
            for m, v in row["methods"].items():
                r[f"{m} acc"] = v["accuracy"]
                r[f"{m} calls"] = v["calls"]
            rows.append(r)
        print_table(rows, list(rows[0]))
    if args.plot:
        n = int(per_seed[0]["methods"]["grpo"]["n"])
        png = plot_accuracy_vs_frames(
            agg, pathlib.Path(args.plot), len(per_seed), n, "where-to-look toy world"
        )
        print("plot:", png)
    return write_figures(agg, per_seed, out, args, argv, t0)


if __name__ == "__main__":
    raise SystemExit(main())
