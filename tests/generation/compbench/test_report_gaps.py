"""`vidlab compbench report` names every gap, in every section, with the reason.

The run here is hand-made in the shape a small real run leaves: clip_presence scores every category, but its
control ``foreign_present`` is null for spatial_relationship (its neighbour prompts share its phrases, so there
is no foreign phrase to test); a second metric does not apply to one category (score null with a reason) and
fails on another (no row at all); one category generated no video; the official scores cover one category.
Before, the control section printed ``all-scored (NOT all: no scores for )`` with the name left empty."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from vidlab.generation.compbench.config import CompbenchConfig
from vidlab.generation.compbench.report import ALL_SUBSET, build_report

CATS = ("consistent_attr", "spatial_relationship", "numeracy", "motion_binding")
METHODS = ("baseline", "both")


def _row(cat: str, i: int, m: str) -> dict:
    pid = f"{cat}-{i:04d}"
    return {"id": f"{pid}|s0|{m}", "prompt_id": pid, "category": cat, "index": i, "method": m, "seed": 0}


def _write(out: Path) -> None:
    rng = np.random.default_rng(0)
    manifest, presence, layout = [], [], []
    for cat in CATS:
        for i in range(1, 5):
            for m in METHODS:
                row = _row(cat, i, m)
                if cat == "motion_binding":  # generation failed for this category
                    manifest.append({**row, "status": "failed", "error": "RuntimeError: out of memory"})
                    continue
                manifest.append({**row, "status": "ok", "seconds": 10.0 if m == "baseline" else 10.4})
                score = float(rng.uniform(0.3, 0.7)) + (0.05 if m == "both" else 0.0)
                foreign = None if cat == "spatial_relationship" else float(rng.uniform(0, 0.2))
                presence.append({**row, "score": score, "control_foreign_present": foreign})
                if cat == "numeracy":
                    continue  # the layout metric failed on every numeracy video: no row at all
                if cat == "consistent_attr":
                    layout.append({**row, "score": None, "reason": "relation 'next to' has no 2D check"})
                else:
                    layout.append({**row, "score": score, "control_placebo": score / 2})
    out.mkdir(parents=True)
    (out / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in manifest))
    (out / "scores").mkdir()
    for name, rows in (("clip_presence", presence), ("layout_relation", layout)):
        (out / "scores" / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    official = {m: {"numeracy": {"category_score": 0.5, "videos": {"1": 0.5, "2": 0.5}}} for m in METHODS}
    (out / "scores" / "official.json").write_text(json.dumps(official))


@pytest.fixture
def report(tmp_path):
    out = tmp_path / "run"
    _write(out)
    res = build_report(CompbenchConfig(out=str(out), methods=list(METHODS)))
    md = Path(res["markdown"]).read_text()
    sections = dict(re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", md, flags=re.M | re.S))
    return res, md, sections


def test_the_control_section_names_the_category_and_why(report):
    _, md, sections = report
    sec = sections["clip_presence:foreign_present"]
    assert f"| {ALL_SUBSET} (NOT all: no scores for spatial_relationship, motion_binding) |" in sec
    assert (
        "- **missing: spatial_relationship**: no foreign_present value (the metric does not apply: it gives no "
        "foreign_present value for its 8 scored video(s))" in sec
    )
    assert "- **missing: motion_binding**: no foreign_present value (no video was generated: 8 failed" in sec


def test_every_section_names_each_gap_with_a_reason(report):
    res, md, sections = report
    assert "no scores for )" not in md and "no scores for ," not in md
    for label in re.findall(r"NOT all: no scores for ([^)]*)\)", md):
        assert all(name.strip() for name in label.split(",")), label
    lay = sections["layout_relation"]
    assert f"| {ALL_SUBSET} (NOT all: no scores for consistent_attr, motion_binding, numeracy) |" in lay
    assert "**missing: consistent_attr**" in lay and "relation 'next to' has no 2D check" in lay
    assert "**missing: numeracy**" in lay and "8 failed" in lay
    placebo = sections["layout_relation:placebo"]
    assert (
        "- **missing: consistent_attr**: no placebo value (the metric did not score 8 video(s): relation"
        in placebo
    )
    assert "- **missing: numeracy**: no placebo value (8 of its 8 video(s) failed in scoring: see" in placebo
    official = sections["official"]
    for cat in ("consistent_attr", "spatial_relationship"):
        assert (
            f"- **missing: {cat}**: no official score (no CSV of the official scripts was ingested"
            in official
        )
    gain = sections["Gain over the baseline: the papers' figures and this run's, in the same form"]
    assert "- layout_relation, both: **numeracy** left out (8 of its 8 video(s) failed in scoring" in gain
    assert "- clip_presence, both: **motion_binding** left out (no video was generated" in gain
    assert res["gaps"]["clip_presence:foreign_present"].keys() == {"spatial_relationship", "motion_binding"}


def test_the_report_command_prints_no_empty_gap(tmp_path, capsys):
    from vidlab.errors import run_command
    from vidlab.generation.compbench.cli import compbench_main

    out = tmp_path / "run"
    _write(out)
    assert (
        run_command("vidlab compbench", compbench_main, ["report", f"out={out}", "methods=[baseline,both]"])
        == 0
    )
    md = (out / "report" / "report.md").read_text()
    assert "no scores for )" not in md and "no scores for spatial_relationship" in md
