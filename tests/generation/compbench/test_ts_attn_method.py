"""TS-Attn as a ``vidlab compbench`` method: planned, generated beside the baseline on the same layout and seed,
scored and reported, on the tiny pipeline (local backend)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vidlab.errors import run_command
from vidlab.generation.compbench.cli import compbench_main

pytestmark = pytest.mark.slow


def test_ts_attn_is_a_compbench_method_end_to_end(tmp_path, compbench_suite):
    from vidlab.generation.compbench.jobs import read_manifest

    cfg = yaml.safe_load(
        (Path(__file__).resolve().parents[3] / "configs" / "compbench" / "tiny.yaml").read_text()
    )
    out = tmp_path / "run"
    cfg.update(
        data=str(compbench_suite),
        out=str(out),
        categories=["spatial_relationship"],
        prompts_per_category=1,
        methods=["baseline", "ts_attn"],
    )
    cfg["generate"]["steps"] = 5  # TS-Attn's window: the first int(0.2 x 5) = 1 step
    cfg["run"]["progress"] = False
    cfg["score"]["metrics"] = ["clip_alignment"]
    preset = tmp_path / "cb.yaml"
    preset.write_text(yaml.safe_dump(cfg))

    def cli(*a):
        return run_command("vidlab compbench", compbench_main, [a[0], "--preset", str(preset), *a[1:]])

    assert cli("generate") == 0
    rows = read_manifest(out)
    assert sorted(r["method"] for r in rows) == ["baseline", "ts_attn"]
    assert all(r["status"] == "ok" for r in rows) and len({(r["layout"], r["seed"]) for r in rows}) == 1
    assert cli("score") == 0 and cli("report") == 0
    assert "| ts_attn |" in (out / "report" / "report.md").read_text()
