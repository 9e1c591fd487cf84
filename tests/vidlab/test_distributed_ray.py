"""run_job on Ray (the local session the Ray tests share): loopback only, actor death, retries, resume, indexing."""

import os
import threading
import time

import pytest

from vidlab.distributed import read_records, run_job
from vidlab.distributed.toy import KILL_GUARD_S, CrashWorker, EchoWorker, FlakyWorker

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture
def ray_session(ray_local):
    """The local Ray the `ray` group shares (tests/conftest.py): started once, loopback only."""
    return ray_local


def _items(n):
    return [{"id": f"i{k}", "value": k} for k in range(n)]


def test_workers_built_once_each_and_nothing_listens_off_loopback(ray_session, tmp_path):
    import psutil

    s = run_job(
        _items(8),
        EchoWorker,
        tmp_path / "out",
        backend="ray",
        num_workers=2,
        worker_kwargs={"init_dir": str(tmp_path)},
    )
    assert (s.done, s.failed, s.num_workers) == (8, 0, 2)
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("init-")]) == 2
    assert len({r["result"]["pid"] for r in read_records(tmp_path / "out").values()}) == 2
    pids = {os.getpid()} | {p.pid for p in psutil.Process().children(recursive=True)}
    listening = [
        c for c in psutil.net_connections(kind="inet") if c.pid in pids and c.status == psutil.CONN_LISTEN
    ]
    assert listening, "expected Ray's own servers to be listening"
    loopback = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
    exposed = [(c.laddr, psutil.Process(c.pid).name()) for c in listening if c.laddr.ip not in loopback]
    assert not exposed, f"Ray listens beyond loopback: {exposed}"


def test_actor_killed_mid_item_is_replaced_and_item_retried(ray_session, tmp_path):
    ray = ray_session
    marker = tmp_path / "marker"
    items = _items(6)
    items[3]["hang_once"] = str(marker)
    killed = []

    def killer():
        deadline = time.time() + KILL_GUARD_S  # a hang guard: the worker waits for this kill as long
        while not marker.exists() and time.time() < deadline:
            time.sleep(0.05)
        name = marker.read_text()
        ray.kill(ray.get_actor(name))
        killed.append(name)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    s = run_job(items, FlakyWorker, tmp_path / "out", backend="ray", num_workers=2, max_retries=1)
    t.join(5)
    assert killed and killed[0].endswith("-g0")
    assert (s.done, s.failed) == (6, 0)
    rec = read_records(tmp_path / "out")["i3"]
    assert rec["status"] == "ok" and rec["attempts"] == 2 and rec["result"]["square"] == 9
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 6  # one record per item, none duplicated


def test_actor_death_after_retries_is_recorded(ray_session, tmp_path):
    items = _items(3)
    items[1]["crash"] = True
    s = run_job(items, CrashWorker, tmp_path / "out", backend="ray", num_workers=1, max_retries=1)
    assert (s.done, s.failed) == (2, 1)
    assert s.errors[0]["id"] == "i1" and "Actor" in s.errors[0]["type"] and s.errors[0]["attempts"] == 2


def test_failed_item_recorded_then_rerun_completes(ray_session, tmp_path):
    items = _items(5)
    items[2]["fail"] = True
    kw = {"fix_file": str(tmp_path / "fixed")}
    s = run_job(
        items, FlakyWorker, tmp_path / "out", backend="ray", num_workers=2, worker_kwargs=kw, max_retries=1
    )
    assert (s.done, s.failed) == (4, 1) and s.errors[0]["type"] == "ValueError"
    (tmp_path / "fixed").touch()
    s2 = run_job(items, FlakyWorker, tmp_path / "out", backend="ray", num_workers=2, worker_kwargs=kw)
    assert (s2.done, s2.skipped, s2.failed) == (1, 4, 0)
    assert all(r["status"] == "ok" for r in read_records(tmp_path / "out").values())


def test_index_videos_with_two_ray_workers(ray_session, tmp_path):
    from vidlab.clip.corpus import read_manifest
    from vidlab.clip.indexing import IndexConfig, collect_videos, index_videos
    from vidlab.distributed import RunConfig
    from vidlab.video.synth import render_synthetic

    vids = tmp_path / "videos"
    for seed in range(2):
        render_synthetic(vids / f"v{seed}.mp4", 48, fps=24, width=96, height=72, seed=seed)
    (vids / "broken.mp4").write_bytes(b"\x00" * 2000)
    cfg = IndexConfig(
        cache_dir=str(tmp_path / "idx"),
        model="vidlab-tiny",
        sampling="every=6",
        torch_threads=1,
        run=RunConfig(backend="ray", workers=2, retries=0),
    )
    report = index_videos(collect_videos([str(vids)]), cfg, progress=False)
    assert (report.videos, report.indexed, report.failures, report.frames) == (3, 2, 1, 16)
    assert report.errors[0]["type"] == "VideoReadError"
    _, manifest = read_manifest(tmp_path / "idx")
    assert len(manifest["videos"]) == 2
