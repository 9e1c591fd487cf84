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

from vidlab.errors import UserError
from vidlab.generation.compbench.config import CompbenchConfig
from vidlab.generation.compbench.suite import CATEGORIES

BY_CATEGORY = [c.key for c in CATEGORIES]
SCORES_DIR = "scores"  # = scoring.SCORES (not imported: scoring loads the metric registry)


class ReportError(UserError):
    """Nothing to report yet (no scores, no manifest)."""


# The papers' own headline figures (relative change of the mean over T2V-CompBench's categories, and the time
# it costs), printed as reference rows beside this run's gain in the same form. Sources: research notes in
# shared/research/comp-attn.md (the v2 abstract; MagicComp's project page).
PAPER_REFERENCES: tuple[dict[str, str], ...] = (
    {
        "source": "Comp-Attn paper (ICML 2026, arXiv 2503.14428v2, abstract)",
        "model": "Wan2.1-T2V-14B",
        "gain": "+15.7%",
        "time": "+5%",
    },
    {
        "source": "Comp-Attn paper (ICML 2026, arXiv 2503.14428v2, abstract)",
        "model": "Wan2.2-T2V-A14B",
        "gain": "+11.7%",
        "time": "+5%",
    },
    {
        "source": "MagicComp (arXiv 2503.14428v1, project page)",
        "model": "CogVideoX-2B",
        "gain": "+15.2%",
        "time": "+16%",
    },
)


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


def metric_rows(
    cfg: CompbenchConfig, name: str, rows: list[dict[str, Any]], expected: list[str] | None = None
) -> list[dict[str, Any]]:
    """Per category and method: mean, paired delta, CI. The ``all`` row pools every video, and only when every
    ``expected`` category has scores; otherwise the pooled row is ``all-scored`` (a subset, named as such)."""
    fields = ["score"] + sorted({k for r in rows for k in r if k.startswith("control_")})
    out = []
    seeds = sorted({int(r["seed"]) for r in rows})
    for field in fields:
        label = name if field == "score" else f"{name}:{field[len('control_') :]}"
        tabs = _tables(rows, field)
        covered = [c.key for c in CATEGORIES if c.key in tabs]
        if "all" in tabs and expected and set(expected) - set(covered):
            tabs[ALL_SUBSET] = tabs.pop("all")  # never an "all" that silently averages a subset
        for cat in [c.key for c in CATEGORIES] + ["all", ALL_SUBSET]:
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


ALL_SUBSET = "all-scored"  # the pooled row when some expected categories have no scores


def expected_categories(cfg: CompbenchConfig, manifest: list[dict[str, Any]]) -> list[str]:
    """The categories this run generated (or tried to): the manifest's, in the official order."""
    seen = {r.get("category") for r in manifest if r.get("method") in cfg.methods}
    return [c.key for c in CATEGORIES if c.key in seen]


def coverage(
    cfg: CompbenchConfig, name: str, srows: list[dict[str, Any]], manifest: list[dict[str, Any]]
) -> dict[str, Any]:
    """What a metric did not score: per category, videos generated vs scored, and why the rest were not."""
    generated: dict[str, int] = defaultdict(int)
    failed_gen: dict[str, int] = defaultdict(int)
    for r in manifest:
        if r.get("method") in cfg.methods:
            (generated if r.get("status") == "ok" else failed_gen)[r.get("category", "")] += 1
    scored: dict[str, int] = defaultdict(int)
    reasons: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in srows:
        if isinstance(r.get("score"), (int, float)) and not isinstance(r.get("score"), bool):
            scored[r["category"]] += 1
        else:
            reasons[r["category"]][str(r.get("reason") or "no score")[:120]] += 1
    missing, partial = [], []
    for cat in expected_categories(cfg, manifest) or sorted(generated):
        n, k = generated.get(cat, 0), scored.get(cat, 0)
        listed = sum(reasons[cat].values())
        why = [f"{c} x {w}" for w, c in sorted(reasons[cat].items(), key=lambda x: -x[1])]
        if n - k - listed > 0:
            why.append(f"{n - k - listed} failed (see `vidlab compbench score`, {SCORES_DIR}/{name}/)")
        if n == 0:
            bad = failed_gen.get(cat, 0)
            why = why or [
                "no video was generated"
                + (f": {bad} failed in generation, rerun `vidlab compbench generate`" if bad else "")
            ]
        entry = {"category": cat, "generated": n, "scored": k, "why": why}
        if k == 0:
            missing.append(entry)
        elif k < n:
            partial.append(entry)
    return {"missing": missing, "partial": partial}


def _is_value(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def field_gaps(
    cfg: CompbenchConfig,
    name: str,
    field: str,
    srows: list[dict[str, Any]],
    manifest: list[dict[str, Any]],
    expected: list[str],
) -> dict[str, str]:
    """Every expected category that has no value of ``field`` (``score`` or a ``control_*``) of metric ``name``,
    with the reason in words: no video was generated; the metric does not apply (it gave no value for the videos
    it scored, or said why it scored none); or its items failed (no row at all)."""
    label = "score" if field == "score" else field[len("control_") :] + " value"
    generated: dict[str, int] = defaultdict(int)
    failed_gen: dict[str, int] = defaultdict(int)
    for r in manifest:
        if r.get("method") not in cfg.methods:
            continue
        if r.get("status") == "ok":
            generated[r.get("category", "")] += 1
        else:
            failed_gen[r.get("category", "")] += 1
    by_cat: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in srows:  # every method's rows, as the tables pool them
        by_cat[r.get("category", "")].append(r)
    out: dict[str, str] = {}
    for cat in expected:
        rows = by_cat.get(cat, [])
        if any(_is_value(r.get(field)) for r in rows):
            continue
        n = generated.get(cat, 0)
        if n == 0:
            bad = failed_gen.get(cat, 0)
            out[cat] = "no video was generated" + (
                f": {bad} failed in generation, rerun `vidlab compbench generate`" if bad else ""
            )
            continue
        why = []
        scored = sum(1 for r in rows if _is_value(r.get("score")))
        if field != "score" and scored:
            why.append(f"the metric does not apply: it gives no {label} for its {scored} scored video(s)")
        reasons: dict[str, int] = defaultdict(int)
        for r in rows:
            if not _is_value(r.get("score")):
                reasons[str(r.get("reason") or "no score given")[:120]] += 1
        for text, c in sorted(reasons.items(), key=lambda x: -x[1]):
            why.append(f"the metric did not score {c} video(s): {text}")
        failed = n - len(rows)
        if failed > 0:
            why.append(
                f"{failed} of its {n} video(s) failed in scoring: see `vidlab compbench score` and {SCORES_DIR}/{name}/"
            )
        out[cat] = "; ".join(why) or f"no {label} for its {n} video(s)"
    return out


def gain_rows(
    cfg: CompbenchConfig, rows: list[dict[str, Any]], times: list[dict[str, Any]], expected: list[str]
) -> list[dict[str, Any]]:
    """This run's gain in the papers' form: the relative change of the mean over categories (each category's
    mean weighs the same), per metric and method, with the time overhead beside it."""
    overhead = {t["method"]: t["overhead"] for t in times}
    out = []
    for metric in dict.fromkeys(r["metric"] for r in rows if ":" not in r["metric"]):
        by = {
            (r["category"], r["method"]): r
            for r in rows
            if r["metric"] == metric and r["category"] in BY_CATEGORY and r["mean"] is not None
        }
        for method in cfg.methods:
            if method == "baseline":
                continue
            cats = [c for c in BY_CATEGORY if (c, method) in by and (c, "baseline") in by]
            if not cats:
                continue
            m = float(np.mean([by[(c, method)]["mean"] for c in cats]))
            b = float(np.mean([by[(c, "baseline")]["mean"] for c in cats]))
            out.append(
                {
                    "metric": metric,
                    "method": method,
                    "mean": m,
                    "baseline_mean": b,
                    "gain": (m - b) / abs(b) if b else None,
                    "time": overhead.get(method),
                    "categories": cats,
                    "missing": [c for c in expected if c not in cats],
                }
            )
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


def _category_label(cat: str, missing: list[str]) -> str:
    if cat == ALL_SUBSET:
        return f"{ALL_SUBSET} (NOT all: no scores for {', '.join(missing) or 'a category (see below)'})"
    return cat


def _gap_lines(label: str, gaps: dict[str, str]) -> list[str]:
    """One line per category a section has no values for, with the reason."""
    return [f"- **missing: {cat}**: no {label} ({why})" for cat, why in gaps.items()]


def _coverage_lines(cov: dict[str, Any]) -> list[str]:
    lines = []
    for e in cov["missing"]:
        lines.append(
            f"- **missing: {e['category']}**: 0 of {e['generated']} videos scored ({'; '.join(e['why'])})"
        )
    for e in cov["partial"]:
        lines.append(
            f"- partial: {e['category']}: {e['scored']} of {e['generated']} videos scored ({'; '.join(e['why'])})"
        )
    return lines


# fewer prompts per category than this, and a run's intervals are too wide to read anything from
SMOKE_PROMPTS = 10


def smoke_note(cfg: CompbenchConfig) -> str | None:
    """One line saying that a run's figures mean nothing, where they cannot mean anything: a tiny Wan (random
    weights, built in code) or a handful of prompts per category; None for a run whose figures can be read."""
    from vidlab.generation.pipeline import TINY_MODELS

    why = []
    if cfg.generate.model in TINY_MODELS:
        why.append(f"model `{cfg.generate.model}` has random weights")
    n = cfg.prompts_per_category
    if n is not None and n < SMOKE_PROMPTS:
        why.append(f"{n} prompt(s) per category x {len(cfg.seeds)} seed(s)")
    if not why:
        return None
    return f"SMOKE-SIZE RUN ({'; '.join(why)}): it checks the plumbing; its scores, gains and times mean nothing."


def to_markdown(
    rows: list[dict[str, Any]],
    times: list[dict[str, Any]],
    cfg: CompbenchConfig,
    coverages: dict[str, dict[str, Any]] | None = None,
    gains: list[dict[str, Any]] | None = None,
    gaps: dict[str, dict[str, str]] | None = None,
) -> str:
    """report.md. ``gaps``: per section (metric or ``metric:control``), each category it has no values for and
    why (:func:`field_gaps`); every section names its own."""
    coverages, gaps = coverages or {}, gaps or {}
    lines = [
        "# T2V-CompBench report",
        "",
        f"Run `{cfg.out}`: model `{cfg.generate.model}`, {cfg.generate.width}x{cfg.generate.height}, "
        f"{cfg.generate.frames} frames, {cfg.generate.steps} steps, seeds {cfg.seeds}, planner `{cfg.planner}`. "
        f"Cells: mean (delta vs baseline [{int(cfg.report.ci * 100)}% bootstrap CI over prompts]).",
    ]
    smoke = smoke_note(cfg)
    lines += ["", f"**{smoke}**"] if smoke else []
    methods = [m for m in dict.fromkeys(r["method"] for r in rows)]
    for metric in dict.fromkeys(r["metric"] for r in rows):
        sub = [r for r in rows if r["metric"] == metric]
        cov = coverages.get(metric.split(":")[0], {"missing": [], "partial": []})
        section_gaps = gaps.get(metric, {})
        missing = list(section_gaps) if metric in gaps else [e["category"] for e in cov["missing"]]
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
            lines.append(f"| {_category_label(cat, missing)} | " + " | ".join(cells) + " |")
        if ":" not in metric and metric != "official":
            lines += [""] + _coverage_lines(cov) if cov["missing"] or cov["partial"] else []
        elif section_gaps:
            what = f"{metric.split(':', 1)[1]} value" if ":" in metric else "official score"
            lines += [""] + _gap_lines(what, section_gaps)
    lines += _gain_section(gains or [], cfg, gaps)
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
    timed = {t["method"] for t in times}
    untimed = [m for m in cfg.methods if m not in timed]
    if untimed:
        lines += [""] + [f"- **missing: {m}**: no time (no video of it was generated)" for m in untimed]
    return "\n".join(lines) + "\n"


def _gain_section(
    gains: list[dict[str, Any]], cfg: CompbenchConfig, gaps: dict[str, dict[str, str]] | None = None
) -> list[str]:
    """The papers' headline figures as reference rows, and this run's gain in the same form under them; the
    categories a gain leaves out are named under the table with the reason."""
    gaps = gaps or {}
    lines = [
        "",
        "## Gain over the baseline: the papers' figures and this run's, in the same form",
        "",
        "Gain = relative change of the mean over categories (each category's mean weighs the same); time = "
        "extra generation time per video. The first rows are the papers' own headline figures on T2V-CompBench "
        "with its official metrics (reference only, not reproduced here); the rows below them are this run's, "
        "with its metric and categories, so compare the form, not the numbers, unless both match.",
        "",
        "| source | model | metric | gain | time |",
        "|---|---|---|---|---|",
    ]
    for ref in PAPER_REFERENCES:
        lines.append(
            f"| {ref['source']} | {ref['model']} | T2V-CompBench official | {ref['gain']} | {ref['time']} |"
        )
    for g in gains:
        cats = f"{len(g['categories'])} categories"
        if g["missing"]:
            cats += f"; no scores for {', '.join(g['missing'])}"
        gain = "-" if g["gain"] is None else f"{100 * g['gain']:+.1f}%"
        lines.append(
            f"| vidlab, this run: {g['method']} vs baseline | {cfg.generate.model} | {g['metric']} ({cats}) "
            f"| {gain} | {_fmt(g['time'], True)} |"
        )
    notes = []
    for g in gains:
        for cat in g["missing"]:
            why = gaps.get(g["metric"], {}).get(cat) or f"no scores of both {g['method']} and baseline"
            notes.append(f"- {g['metric']}, {g['method']}: **{cat}** left out ({why})")
    smoke = smoke_note(cfg)
    return (
        lines + ([""] + list(dict.fromkeys(notes)) if notes else []) + (["", f"**{smoke}**"] if smoke else [])
    )


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
    from vidlab.generation.compbench.jobs import read_manifest
    from vidlab.generation.compbench.scoring import SCORES, read_scores
    from vidlab.io import atomic_write_text

    out = Path(cfg.out)
    manifest = read_manifest(out)
    scores = read_scores(out)
    official_file = out / SCORES / "official.json"
    if not scores and not official_file.is_file():
        raise ReportError(f"no scores in {out / SCORES}: run `vidlab compbench score` with this config first")
    rows: list[dict[str, Any]] = []
    expected = expected_categories(cfg, manifest)
    coverages = {}
    gaps: dict[str, dict[str, str]] = {}
    for name, srows in scores.items():
        rows += metric_rows(cfg, name, srows, expected)
        coverages[name] = coverage(cfg, name, srows, manifest)
        for field in ["score"] + sorted({k for r in srows for k in r if k.startswith("control_")}):
            label = name if field == "score" else f"{name}:{field[len('control_') :]}"
            gaps[label] = field_gaps(cfg, name, field, srows, manifest, expected)
    if official_file.is_file():
        official = json.loads(official_file.read_text(encoding="utf-8"))
        rows += official_rows(cfg, official)
        have = {cat for per in official.values() for cat in per}
        gaps["official"] = {
            c: "no CSV of the official scripts was ingested for it: set score.ingest=DIR"
            for c in expected
            if c not in have
        }
    times = time_rows(cfg, manifest)
    gains = gain_rows(cfg, rows, times, expected)
    rep = out / "report"
    md = to_markdown(rows, times, cfg, coverages, gains, gaps)
    atomic_write_text(rep / "report.md", md)
    atomic_write_text(rep / "report.csv", _csv(rows))
    atomic_write_text(rep / "time.csv", _csv(times))
    atomic_write_text(
        rep / "gain.csv",
        _csv(
            [{**g, "categories": " ".join(g["categories"]), "missing": " ".join(g["missing"])} for g in gains]
        ),
    )
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
        "missing": {m: [e["category"] for e in c["missing"]] for m, c in coverages.items() if c["missing"]},
        "gaps": {section: g for section, g in gaps.items() if g},
        "gains": gains,
    }
