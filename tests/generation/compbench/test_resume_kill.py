"""``kill -9`` in the middle of a generation run, then a rerun: no row lost or duplicated, no truncated mp4
counted as done, finished work not redone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]


def _ok_records(out: Path) -> list[dict]:
    path = out / "gen" / "results.jsonl"
    if not path.exists():
        return []
    recs = []
    for line in path.read_bytes().split(b"\n"):
        try:
            r = json.loads(line)
        except ValueError:
            continue  # a torn line from the kill
        if r.get("status") == "ok":
            recs.append(r)
    return recs


def test_kill_9_mid_run_then_resume(tmp_path, compbench_suite):
    from vidlab.config import resolve
    from vidlab.generation.compbench.config import CompbenchConfig
    from vidlab.generation.compbench.jobs import generate_run, read_manifest
    from vidlab.video import open_video

    out = tmp_path / "run"
    cfg = yaml.safe_load((ROOT / "configs" / "compbench" / "tiny.yaml").read_text())
    cfg.update(
        data=str(compbench_suite),
        out=str(out),
        categories=["consistent_attr"],
        # 8 items: the job is held after 2 (VIDLAB_JOB_HOLD_*), killed there, then resumed
        prompts_per_category=4,
        methods=["baseline", "both"],
    )
    cfg["run"]["progress"] = False
    preset = tmp_path / "cb.yaml"
    preset.write_text(yaml.safe_dump(cfg))
    hold = tmp_path / "hold"
    hold.touch()  # the job waits before its third item while this exists: the kill lands after exactly two
    env = {**os.environ, "VIDLAB_JOB_HOLD_FILE": str(hold), "VIDLAB_JOB_HOLD_AFTER": "2"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vidlab.generation.compbench", "generate", "--preset", str(preset)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 600
        while len(_ok_records(out)) < 2:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the run never finished two items"
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    done_before = {r["id"] for r in _ok_records(out)}
    assert len(done_before) == 2, done_before
    # damage one finished video (a truncated file must never count as done) and leave a writer's temporary
    victim = sorted(done_before)[0]
    vpath = out / next(r["result"]["video"] for r in _ok_records(out) if r["id"] == victim)
    data = vpath.read_bytes()
    vpath.write_bytes(data[: len(data) // 2])
    (vpath.parent / f".0009.{proc.pid}.deadbeef.tmp.mp4").write_bytes(b"partial")

    res = generate_run(resolve(CompbenchConfig, str(preset), []))
    assert res["status"] == {"ok": 8}
    rows = read_manifest(out)
    assert len(rows) == 8 and len({r["id"] for r in rows}) == 8 and all(r["status"] == "ok" for r in rows)
    for r in rows:
        with open_video(out / r["video"]) as v:
            assert v.num_frames == 5
    oks: dict[str, int] = {}
    for r in _ok_records(out):
        oks[r["id"]] = oks.get(r["id"], 0) + 1
    assert set(oks) == {r["id"] for r in rows}
    assert oks[victim] == 2  # the truncated video was made again
    assert all(oks[i] == 1 for i in done_before - {victim})  # finished work was not redone
    assert all(oks[i] == 1 for i in set(oks) - done_before)
    assert not list(vpath.parent.glob(".*.tmp*"))  # the dead writer's temporary was swept
