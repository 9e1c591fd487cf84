"""End to end on the trained toy-world model: a suite in the official layout whose spatial prompts follow the
toy world's caption grammar, generated with baseline and +both, scored by the exact shape detector, reported.
Baseline and +both must give different videos (decoded frames), or the job machinery shows no method at all."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from vidlab.errors import run_command
from vidlab.generation.compbench.cli import compbench_main

pytestmark = pytest.mark.slow

GRAMMAR = [
    "a red circle to the left of a blue square",
    "a green star above a yellow triangle",
    "a blue square to the right of a red circle",
]


def test_toyworld_model_end_to_end(tmp_path, suite_writer):
    suite = suite_writer(tmp_path / "suite", meta=False)
    prompts = [GRAMMAR[i % len(GRAMMAR)] for i in range(100)]
    (suite / "prompts" / "3_spatial_relationship.txt").write_text("\n".join(prompts), encoding="utf-8")
    cfg = yaml.safe_load(
        (Path(__file__).resolve().parents[3] / "configs" / "compbench" / "tiny.yaml").read_text()
    )
    out = tmp_path / "run"
    cfg.update(
        data=str(suite),
        out=str(out),
        categories=["spatial_relationship"],
        prompts_per_category=2,
        methods=["baseline", "both"],
    )
    from vidlab.generation.toyworld.evaluate import SamplingConfig

    s = SamplingConfig.from_model()  # the shipped model's own frames, size and guidance
    cfg["generate"].update(
        model="toyworld",
        height=s.height,
        width=s.width,
        frames=s.frames,
        steps=4,
        guidance=s.guidance,
        planner_max_box=0.34,  # a preset's box cap reaches the planning stage (checked below)
    )
    cfg["generate"]["comp_attn"].pop("max_sequence_length", None)
    cfg["score"]["metrics"] = ["toyworld_shapes"]
    cfg["run"]["progress"] = False
    preset = tmp_path / "toy.yaml"
    preset.write_text(yaml.safe_dump(cfg))
    cli = lambda *a: run_command("vidlab compbench", compbench_main, [a[0], "--preset", str(preset), *a[1:]])  # noqa: E731

    assert cli("generate") == 0
    from vidlab.generation.compbench.jobs import read_manifest

    rows = read_manifest(out)
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows)
    from vidlab.generation.layout import Layout

    # the layouts were planned as `vidlab generate` plans them with this preset: boxes capped
    layouts = [Layout.load(p) for p in sorted((out / "layouts").glob("*.json")) if p.name != "failed.json"]
    assert len(layouts) == 2
    for lay in layouts:
        assert all(
            max(b[2] - b[0], b[3] - b[1]) <= 0.34 + 1e-9 for su in lay.subjects for _, b in su.keyframes
        )
    from vidlab.video import open_video

    def frames(row):
        r = open_video(out / row["video"])
        return r.get_frames(list(range(r.num_frames))).astype(int)

    by = {(r["prompt_id"], r["method"]): frames(r) for r in rows}
    for prompt in {r["prompt_id"] for r in rows}:
        base, both = by[(prompt, "baseline")], by[(prompt, "both")]
        assert base.shape == both.shape and base.shape[0] == s.frames
        # more than codec noise: +both changes what is drawn (mean absolute difference in grey levels)
        assert np.abs(base - both).mean() > 2.0, prompt
    assert cli("score") == 0
    scores = [json.loads(x) for x in (out / "scores" / "toyworld_shapes.jsonl").read_text().splitlines()]
    assert len(scores) == 4
    for s in scores:  # every prompt is in the grammar: the detector scores it (0..1), never "not applicable"
        assert isinstance(s["score"], float) and 0.0 <= s["score"] <= 1.0 and s["kind"] == "relation"
    assert cli("report") == 0
    assert "## toyworld_shapes" in (out / "report" / "report.md").read_text()
