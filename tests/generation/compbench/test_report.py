"""Report maths on hand-made score files: means, paired deltas, bootstrap CIs, controls, time overhead, files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vidlab.generation.compbench.config import CompbenchConfig
from vidlab.generation.compbench.report import ReportError, bootstrap_ci, build_report


def _write(out, methods, seeds=(0,)):
    rng = np.random.default_rng(1)
    manifest, scores = [], []
    effect = {"baseline": 0.0, "sci": 0.1, "lam": 0.0, "both": 0.2}
    seconds = {"baseline": 10.0, "sci": 10.5, "lam": 11.0, "both": 11.5}
    for cat in ("spatial_relationship", "numeracy"):
        for i in range(1, 9):
            base = rng.uniform(0.2, 0.6)
            for s in seeds:
                for m in methods:
                    pid = f"{cat}-{i:04d}"
                    rid = f"{pid}|s{s}|{m}"
                    manifest.append(
                        {
                            "id": rid,
                            "prompt_id": pid,
                            "category": cat,
                            "index": i,
                            "method": m,
                            "seed": s,
                            "status": "ok",
                            "seconds": seconds[m] + 0.01 * i,
                            "peak_rss_mb": 900.0,
                        }
                    )
                    scores.append(
                        {
                            "id": rid,
                            "prompt_id": pid,
                            "category": cat,
                            "index": i,
                            "method": m,
                            "seed": s,
                            "score": base + effect[m] + 0.01 * s,
                            "control_mismatched": base,
                        }
                    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in manifest))
    (out / "scores").mkdir()
    (out / "scores" / "clip_alignment.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scores))


def test_bootstrap_ci_brackets_the_mean_and_narrows_with_n():
    vals = {f"p{i}": float(v) for i, v in enumerate(np.random.default_rng(0).normal(1.0, 1.0, 200))}
    lo, hi = bootstrap_ci(vals, 2000, 0.95, 0)
    m = np.mean(list(vals.values()))
    assert lo < m < hi and hi - lo == pytest.approx(2 * 1.96 / np.sqrt(200), rel=0.25)
    few = dict(list(vals.items())[:20])
    lo2, hi2 = bootstrap_ci(few, 2000, 0.95, 0)
    assert hi2 - lo2 > hi - lo
    assert bootstrap_ci({"a": 1.0}, 100, 0.95, 0) == (None, None)


def test_report_deltas_controls_and_time(tmp_path):
    out = tmp_path / "run"
    methods = ["baseline", "sci", "lam", "both"]
    _write(out, methods, seeds=(0, 1))
    cfg = CompbenchConfig(out=str(out), methods=methods, seeds=[0, 1])
    res = build_report(cfg)
    rows = list(__import__("csv").DictReader(open(res["csv"])))
    get = {(r["metric"], r["category"], r["method"]): r for r in rows}
    both = get[("clip_alignment", "all", "both")]
    assert float(both["delta"]) == pytest.approx(0.2) and float(both["ci_low"]) == pytest.approx(0.2)
    assert float(get[("clip_alignment", "numeracy", "sci")]["delta"]) == pytest.approx(0.1)
    assert float(get[("clip_alignment", "all", "lam")]["delta"]) == pytest.approx(0.0, abs=1e-12)
    # the control (alignment to a mismatched prompt) does not move with the method
    assert float(get[("clip_alignment:mismatched", "all", "both")]["delta"]) == pytest.approx(0.0, abs=1e-12)
    # seed-noise floor: baseline seed 1 vs seed 0 differs by the 0.01 written above
    assert float(get[("clip_alignment", "all", "baseline@seed1")]["delta"]) == pytest.approx(0.01)
    times = {r["method"]: r for r in __import__("csv").DictReader(open(out / "report" / "time.csv"))}
    assert float(times["both"]["overhead"]) == pytest.approx(1.5 / (10.0 + 0.045), rel=1e-3)
    md = (out / "report" / "report.md").read_text()
    assert "## clip_alignment" in md and "| both |" in md and "+0.2000" in md
    png = out / "report" / "report.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in (out / "report").iterdir() if p.name.startswith(".")]  # no temporaries left


def test_report_without_scores_is_one_clear_error(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "manifest.jsonl").write_text("")
    with pytest.raises(ReportError, match="run `vidlab compbench score`"):
        build_report(CompbenchConfig(out=str(out)))


def test_official_csv_scores_enter_the_report(tmp_path):
    import csv as _csv

    from vidlab.generation.compbench.official.csv_ingest import ingest_dir

    out = tmp_path / "run"
    _write(out, ["baseline", "both"])
    d = tmp_path / "csvs"
    for method, scores, total in (("baseline", [3, 2, 4, 3], 0.5), ("both", [4, 3, 5, 4], 0.75)):
        (d / method).mkdir(parents=True)
        rows = [["name", "prompt", "Score"]] + [[f"{i:04d}.png", "p", s] for i, s in enumerate(scores, 1)]
        with open(d / method / f"wan_{method}_consistent_attr_score.csv", "w", newline="") as f:
            _csv.writer(f).writerows(rows + [["score: ", total]])
    (out / "scores" / "official.json").write_text(json.dumps(ingest_dir(d)))
    cfg = CompbenchConfig(out=str(out), methods=["baseline", "both"])
    res = build_report(cfg)
    rows = {(r["metric"], r["category"], r["method"]): r for r in _csv.DictReader(open(res["csv"]))}
    both = rows[("official", "consistent_attr", "both")]
    assert float(both["mean"]) == 0.75 and float(both["baseline_mean"]) == 0.5
    assert float(both["delta"]) == pytest.approx(0.25)
    assert (
        float(both["ci_low"]) == pytest.approx(0.25) == float(both["ci_high"])
    )  # every video +1 raw = +0.25
    assert "## official" in (out / "report" / "report.md").read_text()


@pytest.mark.parametrize(
    ("model", "prompts", "smoke"),
    [("tiny", None, "model `tiny` has random weights"), ("toyworld", 2, "2 prompt(s) per category x 1 seed(s)"),
     ("toyworld", None, None)],
)  # fmt: skip
def test_a_smoke_size_run_says_its_figures_mean_nothing(model, prompts, smoke, tmp_path):
    """Random weights or a handful of prompts: the report says so at its top and under its gains; a run whose
    figures can be read gets no such line."""
    from vidlab.generation.pipeline import GenerateConfig

    out = tmp_path / "run"
    _write(out, ["baseline", "both"])
    cfg = CompbenchConfig(
        out=str(out),
        methods=["baseline", "both"],
        prompts_per_category=prompts,
        generate=GenerateConfig(model=model),
    )
    build_report(cfg)
    md = (out / "report" / "report.md").read_text()
    line = f"**SMOKE-SIZE RUN ({smoke}): it checks the plumbing; its scores, gains and times mean nothing.**"
    for part in md.split("\n## Gain over the baseline"):  # at the top, and under the gains
        assert ("SMOKE-SIZE" not in part) if smoke is None else (line in part)
