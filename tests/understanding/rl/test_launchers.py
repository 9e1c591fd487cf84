"""The verl launch scripts run as written: ray_job.sh's --runtime-env-json goes through Ray's own `ray job
submit` parsing (click + parse_runtime_env_args + RuntimeEnv) after bash has expanded the script; launch.sh
validates on a held-out parquet, never the training file, and needs no PYTHONPATH pointing at a checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytest.importorskip("pyarrow")

# Stands in for the `ray` CLI: Ray's own click command parses the arguments bash produced, then Ray's own
# runtime_env parsing and validation run; only the network submission is left out.
RAY_SHIM = """#!{python}
import json, sys
from ray.dashboard.modules.job.cli import submit
from ray.dashboard.modules.dashboard_sdk import parse_runtime_env_args
from ray.runtime_env import RuntimeEnv

assert sys.argv[1:3] == ["job", "submit"], sys.argv
ctx = submit.make_context("submit", sys.argv[3:])
p = ctx.params
env = parse_runtime_env_args(
    runtime_env=p["runtime_env"], runtime_env_json=p["runtime_env_json"], working_dir=p["working_dir"]
)
RuntimeEnv(**env)
with open({record!r}, "w") as f:
    json.dump({{"address": p["address"], "runtime_env": env, "entrypoint": list(p["entrypoint"])}}, f)
"""

# Stands in for python3 in launch.sh: the preflight import runs for real, the trainer's argv is recorded.
PY_SHIM = """#!/usr/bin/env bash
if [ "$1" = "-c" ]; then exec {python} "$@"; fi
printf '%s\\n' "$@" > {record}
"""


@pytest.fixture(scope="module")
def launch(needles, rl_root):
    """`vidlab train-agent --engine verl` output for the needle questions (no val data given)."""
    from understanding.rl.cli import verl_main

    out = rl_root / "launchers"
    rc = verl_main(["--preset", "verl-qwen3-vl-8b", "--data", f"jsonl:{needles}", "--out", str(out)])
    assert rc == 0
    return out


def _shim(folder: Path, name: str, text: str) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    (folder / name).chmod(0o755)


def test_ray_job_runtime_env_parses_with_rays_own_cli(launch, tmp_path):
    record = tmp_path / "submitted.json"
    shims = tmp_path / "bin"
    _shim(shims, "ray", RAY_SHIM.format(python=sys.executable, record=str(record)))
    env = dict(os.environ, PATH=f"{shims}{os.pathsep}{os.environ['PATH']}", RAY_ADDRESS="http://head:8265")
    env.pop("PYTHONPATH", None)
    res = subprocess.run(
        ["bash", str(launch / "ray_job.sh")], env=env, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    sub = json.loads(record.read_text())
    assert sub["address"] == "http://head:8265"
    renv = sub["runtime_env"]
    # vidlab's packages travel with the job, from wherever this Python imports them; no checkout on PYTHONPATH
    import understanding
    import vidlab

    assert sorted(renv["py_modules"]) == sorted(
        str(Path(m.__file__).resolve().parent) for m in (vidlab, understanding)
    )
    assert "PYTHONPATH" not in renv.get("env_vars", {}) and "working_dir" not in renv
    ep = sub["entrypoint"]
    assert ep[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    assert f"data.val_files={launch / 'val.parquet'}" in ep
    assert f"data.train_files={launch / 'train.parquet'}" in ep


def test_launch_sh_validates_on_held_out_rows_and_needs_no_pythonpath(launch, tmp_path):
    import pyarrow.parquet as pq

    text = (launch / "launch.sh").read_text()
    assert "PYTHONPATH" not in text
    record = tmp_path / "argv.txt"
    shims = tmp_path / "bin"
    _shim(shims, "python3", PY_SHIM.format(python=sys.executable, record=str(record)))
    env = dict(os.environ, PATH=f"{shims}{os.pathsep}{os.environ['PATH']}")
    env.pop("PYTHONPATH", None)
    res = subprocess.run(
        ["bash", str(launch / "launch.sh")], env=env, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    argv = record.read_text().splitlines()
    assert argv[:2] == ["-m", "verl.trainer.main_ppo"]
    val = dict(a.split("=", 1) for a in argv[2:] if "=" in a)["data.val_files"]
    train = dict(a.split("=", 1) for a in argv[2:] if "=" in a)["data.train_files"]
    assert val != train and Path(val).name == "val.parquet"
    tr, va = pq.read_table(train).to_pylist(), pq.read_table(val).to_pylist()
    assert len(tr) >= 1 and len(va) >= 1
    key = "extra_info"
    assert not {json.dumps(r[key], sort_keys=True, default=str) for r in tr} & {
        json.dumps(r[key], sort_keys=True, default=str) for r in va
    }, "a validation row is also a training row"


def test_launch_sh_says_how_to_install_when_vidlab_is_missing(launch, tmp_path):
    """A Python without vidlab: one line on stderr, exit 2, before verl starts."""
    # this interpreter without its site-packages (-S) and without the working directory (-I): no vidlab
    _shim(tmp_path / "bin", "bare-python", f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    bare = str(tmp_path / "bin" / "bare-python")
    assert subprocess.run([bare, "-c", "import understanding"], capture_output=True).returncode != 0
    assert subprocess.run([bare, "-c", "import json"], capture_output=True).returncode == 0
    env = dict(os.environ, PYTHON=bare)
    env.pop("PYTHONPATH", None)
    res = subprocess.run(
        ["bash", str(launch / "launch.sh")], env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1
    assert "vidlab is not installed" in res.stderr and "pip install" in res.stderr


def test_one_row_cannot_be_split(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from understanding.rl.verl_launch import LaunchError, hold_out_validation

    pq.write_table(pa.table({"x": [1]}), str(tmp_path / "t.parquet"))
    with pytest.raises(LaunchError, match="val_data"):
        hold_out_validation(tmp_path / "t.parquet", tmp_path / "v.parquet", 0.05)
    pq.write_table(pa.table({"x": list(range(40))}), str(tmp_path / "t.parquet"))
    assert hold_out_validation(tmp_path / "t.parquet", tmp_path / "v.parquet", 0.05) == (38, 2)
    left = pq.read_table(str(tmp_path / "t.parquet")).column("x").to_pylist()
    held = pq.read_table(str(tmp_path / "v.parquet")).column("x").to_pylist()
    assert sorted(left + held) == list(range(40)) and not set(left) & set(held)
