"""End to end on the tiny pipeline, local backend: plan -> generate (a failure recorded, then retried) ->
resume -> identity refusal -> export -> score -> report, all through ``vidlab compbench``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from vidlab.errors import run_command
from vidlab.generation.compbench.cli import compbench_main

pytestmark = pytest.mark.slow


def _preset(tmp_path: Path, suite: Path, out: Path) -> Path:
    cfg = yaml.safe_load(
        (Path(__file__).resolve().parents[3] / "configs" / "compbench" / "tiny.yaml").read_text()
    )
    cfg.update(
        data=str(suite),
        out=str(out),
        categories=["spatial_relationship", "numeracy"],
        prompts_per_category=1,
        methods=["baseline", "sci", "lam", "both"],
    )
    cfg["run"]["progress"] = False
    cfg["run"]["retries"] = 0
    p = tmp_path / "cb.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "gen" / "results.jsonl").read_text().splitlines() if x.strip()]


def test_tiny_end_to_end(tmp_path, compbench_suite, capsys):
    from vidlab.generation.compbench.jobs import read_manifest
    from vidlab.video import open_video

    out = tmp_path / "run"
    preset = _preset(tmp_path, compbench_suite, out)
    cli = lambda *a: run_command("vidlab compbench", compbench_main, [a[0], "--preset", str(preset), *a[1:]])  # noqa: E731

    assert cli("plan") == 0
    layouts = sorted(p.name for p in (out / "layouts").glob("*-*.json"))
    assert layouts == ["numeracy-0001.json", "spatial_relationship-0001.json"]
    # a damaged layout (its phrases do not occur in its prompt) is planned again before generation
    num = json.loads((out / "layouts" / "numeracy-0001.json").read_text())
    num["prompt"] = "a completely different prompt"
    (out / "layouts" / "numeracy-0001.json").write_text(json.dumps(num))
    # one item fails (an injected fault): it is recorded with its error, the others finish
    from vidlab.config import resolve
    from vidlab.generation.compbench.config import CompbenchConfig
    from vidlab.generation.compbench.jobs import generate_run
    from vidlab.generation.compbench.testing import FailUntilFixedWorker

    cfg = resolve(CompbenchConfig, str(preset), [])
    fix = tmp_path / "fixed"
    extra = {"fail_ids": ["spatial_relationship-0001|s0|lam"], "fix_file": str(fix)}
    res = generate_run(cfg, worker_cls=FailUntilFixedWorker, worker_extra=extra)
    assert res["planned"] == 1 and res["plans_reused"] == 1 and res["status"] == {"ok": 7, "error": 1}
    assert json.loads((out / "layouts" / "numeracy-0001.json").read_text())["prompt"] != num["prompt"]
    rows = {r["id"]: r for r in read_manifest(out)}
    assert len(rows) == 8
    bad = rows["spatial_relationship-0001|s0|lam"]
    assert bad["status"] == "error" and "injected failure" in bad["error"]
    listed = [json.loads(x) for x in (out / "failures.jsonl").read_text().splitlines()]
    assert [f["id"] for f in listed] == [bad["id"]] and Path(listed[0]["path"]) == out / bad["video"]
    failed = [bad["id"]]
    fix.touch()

    n_before = len(_records(out))
    assert cli("generate") == 0
    assert not (out / "failures.jsonl").exists()  # all made: no stale list of failures
    recs = _records(out)
    assert len(recs) == n_before + len(failed)  # only the failed items ran again
    rows = read_manifest(out)
    assert [r["status"] for r in rows] == ["ok"] * 8 and len({r["id"] for r in rows}) == 8
    for r in rows:
        with open_video(out / r["video"]) as v:
            assert v.num_frames == 5 and (v.width, v.height) == (16, 16)
        assert r["seconds"] > 0 and r["peak_rss_mb"] > 0
    by_prompt = {}
    for r in rows:
        by_prompt.setdefault(r["prompt_id"], set()).add((r["layout"], r["seed"]))
    assert all(len(v) == 1 for v in by_prompt.values())  # every method: same layout file, same seed

    assert cli("generate") == 0
    assert len(_records(out)) == len(recs)  # a finished job: nothing runs again
    capsys.readouterr()
    assert cli("generate", "generate.steps=3") == 2  # other settings, same folder: refused in one line
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "steps" in err

    assert cli("export", "--root", str(tmp_path / "official")) == 0
    for m in ("baseline", "sci", "lam", "both"):
        for cat in ("spatial_relationship", "numeracy"):
            f = tmp_path / "official" / m / cat / "0001.mp4"
            src = out / "videos" / m / "seed0" / cat / "0001.mp4"
            assert f.read_bytes() == src.read_bytes()

    assert cli("score") == 0
    for metric in ("clip_alignment", "clip_presence"):
        srows = [json.loads(x) for x in (out / "scores" / f"{metric}.jsonl").read_text().splitlines()]
        assert len(srows) == 8 and all(isinstance(s["score"], float) for s in srows)
    pres = json.loads((out / "scores" / "clip_presence.jsonl").read_text().splitlines()[0])
    assert pres["threshold_from"] == "calibrated" and pres["phrases_from"] == "metadata"
    assert cli("score", "score.metrics=[no_such_metric]") == 2
    assert cli("report") == 0
    md = (out / "report" / "report.md").read_text()
    assert "## clip_alignment" in md and "## Time per video" in md
    assert (out / "report" / "report.png").stat().st_size > 1000
