"""run_job on a real local Ray: an actor lost while it builds its worker is replaced and the job goes on; a
constructor that raises still fails the job at once, in one line."""

import logging
import os
import signal
import threading
import time

import numpy as np
import pytest

from vidlab.distributed import read_records, run_job
from vidlab.distributed.toy import SlowStartWorker
from vidlab.distributed.worker import WorkerInitError
from vidlab.errors import UserError

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture
def ray_session(ray_local):
    return ray_local


def _kill_when_built(paths, killed):
    """kill -9 each process that writes its PID into one of ``paths`` (while it sleeps in its constructor)."""
    deadline = time.time() + 240
    for p in paths:
        while time.time() < deadline and not (p.exists() and p.read_text().strip()):
            time.sleep(0.05)
        pid = int(p.read_text())
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    from vidlab.video.synth import render_synthetic

    d = tmp_path_factory.mktemp("startup-videos")
    for seed in range(3):
        render_synthetic(d / f"v{seed}.mp4", 48, fps=24, width=96, height=72, seed=seed)
    return sorted(d.glob("*.mp4"))


def _index_items(videos):
    return [{"id": str(v.resolve()), "path": str(v)} for v in videos]


def _embeddings(cache_dir):
    from vidlab.clip.store import read_arrays

    out = {}
    for f in sorted(cache_dir.glob("*.safetensors")):
        arrays, meta = read_arrays(f)
        out[f.name] = (
            np.asarray(arrays["embeddings"]).tobytes(),
            np.asarray(arrays["frame_indices"]).tobytes(),
        )
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_actor_killed_while_building_is_replaced_and_results_match_local(
    ray_session, videos, tmp_path, caplog, workers
):
    """The issue's case: kill -9 of the actors while they load the CLIP model (each first build hangs), with the
    real IndexWorker on 3 videos. Every lost actor is replaced, 3/3 items are ok, the embeddings equal a local run's."""
    from vidlab.clip.indexing import IndexWorker

    index_kwargs = {"model": "vidlab-tiny", "sampling": "every=6", "torch_threads": 1}
    local = run_job(
        _index_items(videos),
        IndexWorker,
        tmp_path / "local-job",
        worker_kwargs={**index_kwargs, "cache_dir": str(tmp_path / "local-cache")},
        progress=False,
    )
    assert (local.done, local.failed) == (3, 0)

    hang = [tmp_path / f"hang{i}" for i in range(workers)]  # every first build of a slot hangs and is killed
    killed: list[int] = []
    killer = threading.Thread(target=_kill_when_built, args=(hang, killed), daemon=True)
    killer.start()
    with caplog.at_level(logging.WARNING, logger="vidlab.distributed"):
        s = run_job(
            _index_items(videos),
            SlowStartWorker,
            tmp_path / "ray-job",
            backend="ray",
            num_workers=workers,
            max_retries=0,
            progress=False,
            worker_kwargs={
                "init_dir": str(tmp_path / "inits"),
                "hang_files": [str(p) for p in hang],
                "inner": "vidlab.clip.indexing:IndexWorker",
                "inner_kwargs": {**index_kwargs, "cache_dir": str(tmp_path / "ray-cache")},
            },
        )
    killer.join(10)
    assert len(killed) == workers
    assert (s.done, s.failed) == (3, 0)
    assert all(
        r["status"] == "ok" and r["attempts"] == 1 for r in read_records(tmp_path / "ray-job").values()
    )
    assert len(list((tmp_path / "inits").iterdir())) == workers  # one replacement built per lost actor
    lost = [r for r in caplog.records if "lost while starting" in r.getMessage()]
    assert len(lost) == workers and all("\n" not in r.getMessage() for r in lost)
    ray_emb = _embeddings(tmp_path / "ray-cache")
    assert len(ray_emb) == 3 and ray_emb == _embeddings(tmp_path / "local-cache")  # bit-identical


def test_constructor_error_still_fails_fast_in_one_line(ray_session, tmp_path):
    with pytest.raises(UserError, match="unknown model 'no-such-model'") as err:
        run_job(
            [{"id": "a", "value": 1}],
            SlowStartWorker,
            tmp_path / "out",
            backend="ray",
            num_workers=2,
            progress=False,
            worker_kwargs={"fail": True},
        )
    assert "\n" not in str(err.value) and type(err.value) is UserError  # itself, not Ray's wrapper
    assert not read_records(tmp_path / "out")  # nothing was processed


def test_an_actor_that_can_never_start_is_given_up_after_bounded_attempts(ray_session, tmp_path, caplog):
    from vidlab.distributed.ray_backend import START_ATTEMPTS

    with caplog.at_level(logging.WARNING, logger="vidlab.distributed"):
        with pytest.raises(WorkerInitError, match=f"{START_ATTEMPTS} lost while starting") as err:
            run_job(
                [{"id": "a", "value": 1}],
                SlowStartWorker,
                tmp_path / "out",
                backend="ray",
                num_workers=1,
                progress=False,
                worker_kwargs={"crash": True},
            )
    assert "\n" not in str(err.value)
    assert len([r for r in caplog.records if "lost while starting" in r.getMessage()]) == START_ATTEMPTS
