"""compbench generate -> score -> report as a user chains them: the installed ``vidlab`` run from a folder that
is neither the checkout nor the data's, the preset and ``out=`` typed relative to it, locally and on Ray.
Every command exits 0 (all made), the report reads the manifest's videos from where generate wrote them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("backend", ["local", pytest.param("ray", marks=pytest.mark.ray)])
def test_generate_score_report_from_another_folder(tmp_path, compbench_suite, vidlab_cli, backend):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    cfg = yaml.safe_load((ROOT / "configs" / "compbench" / "tiny.yaml").read_text())
    cfg.update(
        data=str(compbench_suite),
        out="../runs/cb",  # relative to the working directory, as a user types it
        categories=["numeracy"],
        prompts_per_category=1,
        methods=["baseline", "both"],
    )
    cfg["run"].update(backend=backend, workers=1, gpus_per_worker=0, progress=False, retries=0)
    cfg["score"]["metrics"] = ["clip_alignment"]
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "cb.yaml").write_text(yaml.safe_dump(cfg))
    preset = "../presets/cb.yaml"
    for command in ("generate", "score", "report"):
        res = vidlab_cli(cwd, "compbench", command, "--preset", preset)
        assert res.returncode == 0, f"{command}: {res.stderr[-3000:]}"
    out = tmp_path / "runs" / "cb"
    rows = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and {r["status"] for r in rows} == {"ok"}
    assert all(not Path(r["video"]).is_absolute() and (out / r["video"]).is_file() for r in rows)
    assert not (out / "failures.jsonl").exists() and not (out / "score_failures.jsonl").exists()
    scores = [json.loads(x) for x in (out / "scores" / "clip_alignment.jsonl").read_text().splitlines()]
    assert len(scores) == 2 and all(isinstance(s["score"], float) for s in scores)
    assert (out / "report" / "report.md").is_file()
