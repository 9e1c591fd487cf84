"""``build_report(cfg)``: per-category tables of each method against the baseline, time overhead, a bar chart.

For every metric (``<out>/scores/<metric>.jsonl``) and every category (plus ``all``): each method's mean
over its videos, and, for every method but the baseline, the paired delta (method - baseline on the same
prompt and seed, seeds averaged within a prompt) with a percentile bootstrap confidence interval that
resamples prompts (``report.bootstrap`` resamples, ``report.ci``). Fields named ``control_*`` that a metric
writes (e.g. alignment to a *mismatched* prompt) are reported the same way as ``<metric>:<control>``,
beside the effect, so an effect that the control shows too can be seen for what it is. With two or more
seeds, ``baseline@seedN`` vs the first seed gives the seed-noise floor. Official CSV scores
(``scores/official.json``) appear as metric ``official`` (category score from the official file; deltas
and CIs where per-video scores are known). Time: mean generation seconds per item per method and the
paired overhead against the baseline. Writes ``report.md``, ``report.csv``, ``time.csv`` and
``report.png`` (all atomically) into ``<out>/report/``.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from generation.compbench.config import CompbenchConfig
from generation.compbench.suite import CATEGORIES
from vidlab.errors import UserError


class ReportError(UserError):
    """Nothing to report yet (no scores, no manifest)."""


def bootstrap_ci(
    deltas_by_prompt: dict[str, float], n: int, ci: float, seed: int
) -> tuple[float | None, float | None]:
    """Percentile CI of the mean of per-prompt values, resampling prompts with replacement."""
    vals = np.asarray(list(deltas_by_prompt.values()), dtype=np.float64)
    if len(vals) < 2 or n < 1:
        return None, None
    rng = np.random.default_rng(seed)
    means = vals[rng.integers(0, len(vals), size=(n, len(vals)))].mean(axis=1)
    a = (1 - ci) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def _per_prompt(values: dict[tuple[str, int], float]) -> dict[str, float]:
    acc: dict[str, list[float]] = defaultdict(list)
    for (pid, _seed), v in values.items():
        acc[pid].append(v)
    return {pid: float(np.mean(v)) for pid, v in acc.items()}


def compare(
    table: dict[str, dict[tuple[str, int], float]],
    method: str,
    ref: str,
    cfg: CompbenchConfig,
    ref_seed_map=None,
) -> dict[str, Any]:
    """Mean of ``method`` and its paired delta against ``ref`` (keys: (prompt id, seed))."""
    mine = table.get(method, {})
    base = table.get(ref, {})
    row: dict[str, Any] = {"n": len(mine), "mean": float(np.mean(list(mine.values()))) if mine else None}
    row["baseline_mean"] = float(np.mean(list(base.values()))) if base else None
    if method == ref or not mine or not base:
        return {**row, "delta": None, "ci_low": None, "ci_high": None, "paired": 0}
    paired = {}
    for key, v in mine.items():
        bkey = ref_seed_map(key) if ref_seed_map else key
        if bkey in base:
            paired[key] = v - base[bkey]
    per_prompt = _per_prompt(paired)
    lo, hi = bootstrap_ci(per_prompt, cfg.report.bootstrap, cfg.report.ci, cfg.report.seed)
    delta = float(np.mean(list(per_prompt.values()))) if per_prompt else None
    return {**row, "delta": delta, "ci_low": lo, "ci_high": hi, "paired": len(paired)}


def _tables(rows: list[dict[str, Any]], field: str) -> dict[str, dict[str, dict[tuple[str, int], float]]]:
    """category (and 'all') -> method -> (prompt id, seed) -> value."""
    t: dict[str, dict[str, dict[tuple[str, int], float]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        v = r.get(field)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        key = (r["prompt_id"], int(r["seed"]))
        t[r["category"]][r["method"]][key] = float(v)
        t["all"][r["method"]][key] = float(v)
    return t


def metric_rows(cfg: CompbenchConfig, name: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    fields = ["score"] + sorted({k for r in rows for k in r if k.startswith("control_")})
    out = []
    seeds = sorted({int(r["seed"]) for r in rows})
    for field in fields:
        label = name if field == "score" else f"{name}:{field[len('control_') :]}"
        tabs = _tables(rows, field)
        for cat in [c.key for c in CATEGORIES] + ["all"]:
            if cat not in tabs:
                continue
            tab = tabs[cat]
            for method in cfg.methods:
                if method in tab:
                    out.append(
                        {
                            "metric": label,
                            "category": cat,
                            "method": method,
                            **compare(tab, method, "baseline", cfg),
                        }
                    )
            if field == "score" and "baseline" in tab and len(seeds) >= 2:  # seed-noise control
                for s in seeds[1:]:
                    only = {"baseline": {k: v for k, v in tab["baseline"].items() if k[1] == seeds[0]}}
                    only[f"baseline@seed{s}"] = {k: v for k, v in tab["baseline"].items() if k[1] == s}
                    res = compare(only, f"baseline@seed{s}", "baseline", cfg, lambda k: (k[0], seeds[0]))
                    out.append({"metric": label, "category": cat, "method": f"baseline@seed{s}", **res})
    return out


def official_rows(cfg: CompbenchConfig, official: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    base = official.get("baseline", {})
    for method in cfg.methods:
        for cat, rec in official.get(method, {}).items():
            mine = {(f"{cat}-{int(i):04d}", 0): v for i, v in rec["videos"].items()}
            ref = {(f"{cat}-{int(i):04d}", 0): v for i, v in base.get(cat, {}).get("videos", {}).items()}
            res = compare({method: mine, "baseline": ref}, method, "baseline", cfg) if mine else {}
            bscore = base.get(cat, {}).get("category_score")
            score = rec.get("category_score")
            out.append(
                {
                    "metric": "official",
                    "category": cat,
                    "method": method,
                    "n": len(rec["videos"]) or None,
                    "mean": score if score is not None else res.get("mean"),
                    "baseline_mean": bscore,
                    "delta": (score - bscore)
                    if score is not None and bscore is not None and method != "baseline"
                    else None,
                    "ci_low": res.get("ci_low"),
                    "ci_high": res.get("ci_high"),
                    "paired": res.get("paired", 0),
                }
            )
    return out


def time_rows(cfg: CompbenchConfig, manifest: list[dict[str, Any]]) -> list[dict[str, Any]]:
    tab: dict[str, dict[tuple[str, int], float]] = defaultdict(dict)
    mem: dict[str, list[float]] = defaultdict(list)
    for r in manifest:
        if r["status"] == "ok" and r.get("seconds") is not None:
            tab[r["method"]][(r["prompt_id"], int(r["seed"]))] = float(r["seconds"])
            m = r.get("peak_gpu_mb") or r.get("peak_rss_mb")
            if m:
                mem[r["method"]].append(float(m))
    out = []
    for method in cfg.methods:
        if method not in tab:
            continue
        res = compare(tab, method, "baseline", cfg)
        b = res["baseline_mean"]
        overhead = None if method == "baseline" or not b or res["delta"] is None else res["delta"] / b
        out.append(
            {
                "method": method,
                "items": res["n"],
                "seconds_mean": res["mean"],
                "overhead": overhead,
                "overhead_ci_low": None if overhead is None or res["ci_low"] is None else res["ci_low"] / b,
                "overhead_ci_high": None
                if overhead is None or res["ci_high"] is None
                else res["ci_high"] / b,
                "peak_memory_mb": max(mem[method]) if mem[method] else None,
            }
        )
    return out


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "-"
    return f"{100 * v:+.1f}%" if pct else f"{v:.4f}"


def to_markdown(rows: list[dict[str, Any]], times: list[dict[str, Any]], cfg: CompbenchConfig) -> str:
    lines = [
        "# T2V-CompBench report",
        "",
        f"Run `{cfg.out}`: model `{cfg.generate.model}`, {cfg.generate.width}x{cfg.generate.height}, "
        f"{cfg.generate.frames} frames, {cfg.generate.steps} steps, seeds {cfg.seeds}, planner `{cfg.planner}`. "
        f"Cells: mean (delta vs baseline [{int(cfg.report.ci * 100)}% bootstrap CI over prompts]).",
    ]
    methods = [m for m in dict.fromkeys(r["method"] for r in rows)]
    for metric in dict.fromkeys(r["metric"] for r in rows):
        sub = [r for r in rows if r["metric"] == metric]
        lines += ["", f"## {metric}", "", "| category | " + " | ".join(methods) + " |"]
        lines.append("|---" * (len(methods) + 1) + "|")
        for cat in dict.fromkeys(r["category"] for r in sub):
            cells = []
            for m in methods:
                r = next((x for x in sub if x["category"] == cat and x["method"] == m), None)
                if r is None:
                    cells.append("")
                elif r["delta"] is None:
                    cells.append(_fmt(r["mean"]))
                else:
                    ci = f" [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]" if r["ci_low"] is not None else ""
                    cells.append(f"{_fmt(r['mean'])} ({r['delta']:+.4f}{ci})")
            lines.append(f"| {cat} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Time per video",
        "",
        "| method | items | seconds | overhead vs baseline | peak memory MB |",
    ]
    lines.append("|---|---|---|---|---|")
    for t in times:
        ci = (
            f" [{_fmt(t['overhead_ci_low'], True)}, {_fmt(t['overhead_ci_high'], True)}]"
            if t["overhead_ci_low"] is not None
            else ""
        )
        mem = f"{t['peak_memory_mb']:.0f}" if t["peak_memory_mb"] else "-"
        lines.append(
            f"| {t['method']} | {t['items']} | {_fmt(t['seconds_mean'])} | {_fmt(t['overhead'], True)}{ci} | {mem} |"
        )
    return "\n".join(lines) + "\n"


def _csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


def bar_chart(rows: list[dict[str, Any]], metric: str, path: Path) -> Path | None:
    """Grouped bars: per category, each method's mean of ``metric``; error bars = the delta's CI around the mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from vidlab.io import atomic_path

    sub = [r for r in rows if r["metric"] == metric and r["mean"] is not None and "@" not in r["method"]]
    if not sub:
        return None
    cats = list(dict.fromkeys(r["category"] for r in sub))
    methods = list(dict.fromkeys(r["method"] for r in sub))
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(cats) * max(1, len(methods)) / 2), 4))
    width = 0.8 / len(methods)
    for j, m in enumerate(methods):
        xs, ys, lo, hi = [], [], [], []
        for i, c in enumerate(cats):
            r = next((x for x in sub if x["category"] == c and x["method"] == m), None)
            if r is None:
                continue
            xs.append(i + (j - (len(methods) - 1) / 2) * width)
            ys.append(r["mean"])
            has_ci = r["ci_low"] is not None and r["baseline_mean"] is not None
            lo.append(r["mean"] - (r["baseline_mean"] + r["ci_low"]) if has_ci else 0.0)
            hi.append((r["baseline_mean"] + r["ci_high"]) - r["mean"] if has_ci else 0.0)
        ax.bar(xs, ys, width, label=m, yerr=[np.abs(lo), np.abs(hi)], capsize=2)
    ax.set_xticks(range(len(cats)))
    ax.set_xticklabels([c.replace("_", "\n") for c in cats], fontsize=8)
    ax.set_ylabel(metric)
    ax.set_title(f"T2V-CompBench: {metric} per category (error bars: CI of the paired delta)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)
    return path


def build_report(cfg: CompbenchConfig) -> dict[str, Any]:
    from generation.compbench.jobs import read_manifest
    from generation.compbench.scoring import SCORES, read_scores
    from vidlab.io import atomic_write_text

    out = Path(cfg.out)
    manifest = read_manifest(out)
    scores = read_scores(out)
    official_file = out / SCORES / "official.json"
    if not scores and not official_file.is_file():
        raise ReportError(f"no scores in {out / SCORES}: run `vidlab compbench score` with this config first")
    rows: list[dict[str, Any]] = []
    for name, srows in scores.items():
        rows += metric_rows(cfg, name, srows)
    if official_file.is_file():
        rows += official_rows(cfg, json.loads(official_file.read_text(encoding="utf-8")))
    times = time_rows(cfg, manifest)
    rep = out / "report"
    md = to_markdown(rows, times, cfg)
    atomic_write_text(rep / "report.md", md)
    atomic_write_text(rep / "report.csv", _csv(rows))
    atomic_write_text(rep / "time.csv", _csv(times))
    primary = (
        cfg.report.primary_metric if any(r["metric"] == cfg.report.primary_metric for r in rows) else None
    )
    primary = primary or (rows[0]["metric"] if rows else None)
    png = bar_chart(rows, primary, rep / "report.png") if primary else None
    return {
        "markdown": str(rep / "report.md"),
        "csv": str(rep / "report.csv"),
        "png": str(png) if png else None,
        "rows": len(rows),
    }
