"""On Ray with 2 CPU actors (loopback only): every item done, one pipeline load per actor, and an actor
killed in the middle of an item is replaced, the item retried and recorded."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.slow, pytest.mark.ray]
ROOT = Path(__file__).resolve().parents[3]


def test_ray_two_actors_and_a_killed_actor(tmp_path, compbench_suite, ray_local):
    ray = ray_local
    from vidlab.config import resolve
    from vidlab.generation.compbench.config import CompbenchConfig
    from vidlab.generation.compbench.jobs import generate_run, read_manifest
    from vidlab.generation.compbench.testing import HangOnceWorker
    from vidlab.video import open_video

    out = tmp_path / "run"
    cfg = yaml.safe_load((ROOT / "configs" / "compbench" / "tiny.yaml").read_text())
    cfg.update(
        data=str(compbench_suite),
        out=str(out),
        categories=["numeracy"],
        prompts_per_category=2,
        methods=["baseline", "both"],
    )
    cfg["run"].update(backend="ray", workers=2, cpus_per_worker=1, gpus_per_worker=0, progress=False)
    preset = tmp_path / "cb.yaml"
    preset.write_text(yaml.safe_dump(cfg))
    marker = tmp_path / "hanging"
    victim = "numeracy-0002|s0|baseline"
    killed: list[str] = []

    def killer() -> None:
        deadline = time.monotonic() + 600
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        if marker.exists():
            name = marker.read_text()
            ray.kill(ray.get_actor(name), no_restart=True)
            killed.append(name)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    res = generate_run(
        resolve(CompbenchConfig, str(preset), []),
        worker_cls=HangOnceWorker,
        worker_extra={"hang_id": victim, "marker": str(marker)},
    )
    t.join(timeout=5)
    assert killed and killed[0].endswith("-g0"), killed  # a first-generation actor was killed mid-item
    assert res["status"] == {"ok": 4} and res["job"]["num_workers"] == 2
    rows = read_manifest(out)
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows)
    assert next(r for r in rows if r["id"] == victim)["attempts"] == 2
    recs = [json.loads(x) for x in (out / "gen" / "results.jsonl").read_text().splitlines() if x.strip()]
    assert sorted(r["id"] for r in recs) == sorted(r["id"] for r in rows)  # one record each, nothing lost
    loads: dict[int, set] = {}
    for r in recs:
        loads.setdefault(r["result"]["pid"], set()).add(r["result"]["load_seconds"])
    assert 2 <= len(loads) <= 3 and all(len(v) == 1 for v in loads.values())  # one pipeline load per actor
    for r in rows:
        with open_video(out / r["video"]) as v:
            assert v.num_frames == 5
