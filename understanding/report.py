"""Long-video QA reports, apart from the job that makes the records: a strategy's summary (accuracy overall, by
category and by duration group, mean frames and tool calls, failures), the markdown tables, the accuracy-vs-frames
plot, and the comparison of finished runs.

    from vidlab.understanding.report import summarize, summary_table, write_report, compare_runs
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vidlab.understanding.config import StrategyError

SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
PLOT = "accuracy_vs_frames.png"


def _mean(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def _groups(records: Sequence[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by[str(r.get(key) or "?")].append(r)
    return {
        k: {
            "n": len(v),
            "accuracy": _mean([float(r["score"]) for r in v]),
            "mean_frames": _mean([r["frames_used"] for r in v if r.get("status", "ok") == "ok"]),
        }
        for k, v in sorted(by.items())
    }


def summarize(records: Sequence[dict[str, Any]], *, label: str = "") -> dict[str, Any]:
    """Accuracy overall / by category / by duration group, mean frames and tool calls, error and invalid counts.

    ``accuracy`` counts failed questions (undecodable video, policy errors) as wrong: the denominator is every
    question asked; ``accuracy_answered`` leaves them out. ``macro_accuracy`` is the mean of per-category
    accuracies (MLVU's M-avg). Frame and call means are over questions that ran.
    """
    ran = [r for r in records if r.get("status", "ok") == "ok"]
    failed = [r for r in records if r.get("status", "ok") != "ok"]
    cats = _groups(records, "category")
    macro = [g["accuracy"] for g in cats.values() if g["accuracy"] is not None]
    unparsable = [r for r in ran if r.get("question_type") == "mc" and r.get("prediction") is None]
    video_errors = [r for r in failed if r.get("error_type") == "VideoReadError"]
    return {
        "label": label,
        "n": len(records),
        "n_ran": len(ran),
        "n_failed": len(failed),
        "n_video_errors": len(video_errors),
        "accuracy": _mean([float(r["score"]) for r in records]),
        "accuracy_answered": _mean([float(r["score"]) for r in ran]),
        "macro_accuracy": _mean(macro),
        "by_category": cats,
        "by_duration": _groups(records, "duration_group"),
        "mean_frames": _mean([r["frames_used"] for r in ran]),
        "mean_tool_calls": _mean([r["num_tool_calls"] for r in ran]),
        "mean_turns": _mean([r.get("num_turns", 0) for r in ran]),
        "invalid_rate": _mean([0.0 if r.get("valid") else 1.0 for r in ran]),
        "n_unparsable": len(unparsable),
        "unparsable_examples": [{"id": r["id"], "reason": r.get("reason")} for r in unparsable[:5]],
        "failures": [{"id": r["id"], "error": r.get("error")} for r in failed[:20]],
    }


def summary_table(summaries: dict[str, dict[str, Any]]) -> str:
    """A markdown table: one row per strategy, then per-category and per-duration accuracy tables."""

    def pct(x: Any) -> str:
        return "-" if x is None else f"{100 * x:.1f}"

    def num(x: Any) -> str:
        return "-" if x is None else f"{x:.2f}"

    lines = [
        "| strategy | n | accuracy % | macro % | mean frames | mean tool calls | invalid % | unparsable | video errors | failed |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, s in summaries.items():
        lines.append(
            f"| {label} | {s['n']} | {pct(s['accuracy'])} | {pct(s['macro_accuracy'])} | {num(s['mean_frames'])} | "
            f"{num(s['mean_tool_calls'])} | {pct(s['invalid_rate'])} | {s['n_unparsable']} | "
            f"{s['n_video_errors']} | {s['n_failed']} |"
        )
    for key, title in (("by_category", "category"), ("by_duration", "duration group")):
        groups = sorted({g for s in summaries.values() for g in s[key]})
        if not groups:
            continue
        lines += [
            "",
            f"Accuracy % by {title}:",
            "",
            f"| {title} | " + " | ".join(summaries) + " |",
            "|---|" + "---|" * len(summaries),
        ]
        for g in groups:
            cells = [pct(s[key].get(g, {}).get("accuracy")) for s in summaries.values()]
            n = max(s[key].get(g, {}).get("n", 0) for s in summaries.values())
            lines.append(f"| {g} (n={n}) | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_accuracy_vs_frames(summaries: dict[str, dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Accuracy (y) against mean frames shown per question (x); baselines of one method joined by a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    series: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for label, s in summaries.items():
        if s.get("accuracy") is None or s.get("mean_frames") is None:
            continue
        family = label.rsplit("-", 1)[0] if label.rsplit("-", 1)[-1].isdigit() else label
        series[family].append((float(s["mean_frames"]), 100 * float(s["accuracy"]), label))
    markers = {"uniform": "o", "clip": "s"}
    for family, pts in sorted(series.items()):
        pts.sort()
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        m = markers.get(family.split("/")[-1], "*")
        ax.plot(
            xs,
            ys,
            marker=m,
            markersize=10 if m == "*" else 6,
            linestyle="-" if len(pts) > 1 else "none",
            label=family,
        )
        for x, y, lab in pts:
            ax.annotate(lab, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel("mean frames shown per question")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title or "accuracy vs frames")
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=8)
    fig.tight_layout()
    from vidlab.io import atomic_path

    out = Path(path)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return out


def write_report(
    summaries: dict[str, dict[str, Any]], out_dir: str | Path, title: str = ""
) -> dict[str, Path]:
    """``summary.json`` (all strategies), ``summary.md`` (tables) and the accuracy-vs-frames PNG in ``out_dir``."""
    from vidlab.io import atomic_write_json, atomic_write_text

    out = Path(out_dir)
    paths = {"json": out / SUMMARY_JSON, "table": out / SUMMARY_MD, "plot": out / PLOT}
    atomic_write_json(paths["json"], summaries)
    atomic_write_text(paths["table"], (f"# {title}\n\n" if title else "") + summary_table(summaries))
    plot_accuracy_vs_frames(summaries, paths["plot"], title)
    return paths


def load_summaries(run_dirs: Sequence[str | Path]) -> dict[str, dict[str, Any]]:
    """Strategy summaries from finished run folders (``OUT`` or ``OUT/<label>``), for comparing policies."""
    found: dict[str, dict[str, Any]] = {}
    for d in map(Path, run_dirs):
        f = d / SUMMARY_JSON
        if not f.is_file():
            raise StrategyError(f"{d}: no {SUMMARY_JSON} (run `vidlab eval-qa ... --out {d}` first)")
        data = json.loads(f.read_text())
        if "label" in data and "accuracy" in data:  # one strategy folder
            data = {data["label"]: data}
        for label, s in data.items():
            found[f"{d.name}/{label}" if len(run_dirs) > 1 else label] = s
    return found


def compare_runs(
    run_dirs: Sequence[str | Path], out_dir: str | Path
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Put finished runs on one table and plot in ``out_dir`` (a folder of its own: never an eval job's)."""
    from vidlab.distributed import make_identity, open_job

    summaries = load_summaries(run_dirs)  # every run readable before the output folder is touched
    ident = make_identity({"runs": [str(Path(d).resolve()) for d in run_dirs]}, command="eval-qa --compare")
    with open_job(out_dir, ident, overwrite=True):
        return summaries, write_report(summaries, out_dir, "comparison")
