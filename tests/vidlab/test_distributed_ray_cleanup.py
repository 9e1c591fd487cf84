"""A job that starts its own local Ray shuts it down on SIGTERM; Ray's files live under our temp root."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

DRIVER = textwrap.dedent(
    """
    import sys
    from vidlab.distributed import run_job
    from vidlab.distributed.toy import EchoWorker
    items = [{"id": f"i{k}", "value": k} for k in range(4)]
    run_job(items, EchoWorker, sys.argv[1], backend="ray", num_workers=1,
            worker_kwargs={"init_dir": sys.argv[2], "hold_file": sys.argv[3]}, progress=False)
    """
)


def _ray_processes(marker: str) -> list[int]:
    import psutil

    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if any(marker in part for part in (p.info["cmdline"] or [])):
                found.append(p.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def test_sigterm_shuts_down_the_local_ray_it_started(tmp_path):
    pytest.importorskip("ray")
    import shutil
    import tempfile
    from pathlib import Path

    temp = Path(tempfile.mkdtemp(prefix="vr", dir="/tmp"))  # short: Ray's socket paths stop at 107 bytes
    env = {**os.environ, "VIDLAB_RAY_TMPDIR": str(temp), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    env.pop("RAY_ADDRESS", None)
    init, hold = tmp_path / "init", tmp_path / "hold"
    hold.touch()  # the items wait while it exists: the job is still running when SIGTERM lands, however slow
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tmp_path / "out"), str(init), str(hold)], env=env
    )
    try:
        deadline = time.time() + 600  # a hang guard: the wait is for the worker's state, not a time
        while time.time() < deadline and not (init.exists() and any(init.iterdir())):
            assert proc.poll() is None, "driver exited before the worker started"
            time.sleep(0.5)
        assert init.exists() and any(init.iterdir()), "the Ray worker never started"
        assert (temp / "session_latest").exists()  # Ray's session (logs, sockets) is under our root
        assert _ray_processes(str(temp)), "expected Ray's processes to name our temp root"
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=300)  # a hang guard
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc != 0
    deadline = time.time() + 120  # a hang guard: Ray's processes leave with the driver's shutdown
    while time.time() < deadline and _ray_processes(str(temp)):
        time.sleep(0.5)
    left = _ray_processes(str(temp))
    shutil.rmtree(temp, ignore_errors=True)
    assert not left, "Ray's processes outlived the driver"
