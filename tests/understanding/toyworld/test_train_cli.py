"""``vidlab train-agent --engine toy``: resumes after a kill, writes curves + resolved config; the toy policy spec."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TINY = [
    "train_videos=2",
    "val_videos=1",
    "test_videos=1",
    "world.min_frames=100",
    "world.max_frames=140",
    "clip.steps=3",
    "clip.batch_size=16",
    "sft.steps=3",
    "classify_k=1",
    "grpo.steps=6",
    "grpo.questions_per_step=1",
    "grpo.group_size=2",
    "grpo.checkpoint_every=1",
]


def _cmd(out):
    return [
        sys.executable,
        "-m",
        "vidlab.cli",
        "train-agent",
        "--engine",
        "toy",
        "--preset",
        "toyworld",
        "--no-progress",
        f"out={out}",
        *TINY,
    ]


def _steps(log: Path) -> list[int]:
    if not log.is_file():
        return []
    return [json.loads(ln)["step"] for ln in log.read_text().splitlines() if ln.strip()]


@pytest.mark.slow
def test_kill_mid_grpo_then_rerun_continues(tmp_path):
    out = tmp_path / "run"
    # the run waits before GRPO step 2 while this file exists (vidlab.holds), and is killed there: in that state,
    # never in a race with a machine fast enough to finish between two polls
    hold = tmp_path / "hold"
    hold.touch()
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "VIDLAB_GRPO_HOLD_FILE": str(hold),
        "VIDLAB_GRPO_HOLD_AFTER": "2",
    }
    proc = subprocess.Popen(
        _cmd(out), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    log = out / "grpo" / "log.jsonl"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and len(_steps(log)) < 2:
        time.sleep(0.2)
    assert proc.poll() is None, f"ended before the hold: {proc.stdout.read().decode()[-2000:]}"
    assert _steps(log) == [0, 1]  # held before step 2
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    clip_mtime = (out / "clip" / "open_clip_model.safetensors").stat().st_mtime_ns
    done_before = max(_steps(log))
    assert not (out / "grpo" / "done.json").exists()
    # the rerun goes through the same command line in this process (the kill above was the real CLI's)
    import torch

    from vidlab.cli import main

    threads = torch.get_num_threads()
    try:
        assert main(_cmd(out)[3:]) == 0
    finally:
        torch.set_num_threads(threads)
    steps = _steps(log)
    assert steps == list(range(6))  # every step once: resumed from the checkpoint, nothing repeated or lost
    assert done_before >= 1
    assert (out / "clip" / "open_clip_model.safetensors").stat().st_mtime_ns == clip_mtime  # not retrained
    assert (out / "grpo" / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "grpo:" in (out / "config.yaml").read_text()
    labels = [json.loads(ln) for ln in (out / "labels.jsonl").read_text().splitlines()]
    assert labels and all(r["classification"] in ("direct", "adaptive", "active", "filtered") for r in labels)
    # the preset's 4 initial views per question, and the label noise under both rules
    assert all(len(r["classification_info"]["acc_initial_views"]) == 4 for r in labels)
    noise = json.loads((out / "label_noise.json").read_text())
    assert (
        noise["initial_views"] == 4 and noise["all"]["n"] == len(labels) == noise["single_view"]["all"]["n"]
    )

    from vidlab.understanding.policies import load_policy

    pol = load_policy(f"toy:{out / 'grpo'}")
    assert pol.name.startswith("toy:")


def test_toy_spec_mistakes_are_typed(tmp_path):
    from vidlab.understanding.policies import PolicySpecError, check_policy_spec

    with pytest.raises(PolicySpecError, match="policy.json"):
        check_policy_spec(f"toy:{tmp_path}")


def test_unknown_engine_is_one_line():
    res = subprocess.run(
        [sys.executable, "-m", "vidlab.cli", "train-agent", "--engine", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    assert "invalid choice" in res.stderr and "Traceback" not in res.stderr


def test_shipped_weights_answer_through_the_real_episode(tmp_path):
    from vidlab.clip import FrameIndex, Sampling, load_model
    from vidlab.understanding.agents import UniformAgent
    from vidlab.understanding.env import run_episode
    from vidlab.understanding.policies import load_policy
    from vidlab.understanding.toyworld import SHIPPED_CLIP
    from vidlab.understanding.toyworld.clip_agent import RescoringClipAgent
    from vidlab.understanding.toyworld.rl import TOY_EPISODE
    from vidlab.understanding.toyworld.world import MemoryReader, WorldConfig, build_split

    pol = load_policy("toy:shipped")
    clip = load_model(SHIPPED_CLIP)
    assert clip.tag == pol.clip.tag and clip.dim == 32
    split = build_split(tmp_path, "test", 1, WorldConfig(min_frames=150, max_frames=200))
    path = split.root / split.rows[0]["video"]
    reader = MemoryReader(path)
    idx = FrameIndex.build(path, clip, Sampling.fps(1.0), cache_dir=tmp_path / "cache", progress=False)
    agents = [UniformAgent(reader, resize="fit"), RescoringClipAgent(idx, clip, reader=reader, resize="fit")]
    for row in split.rows:
        t = run_episode(pol, None, row["question"], row["options"], config=TOY_EPISODE, agents=agents)
        assert t.valid, t.invalid_reason
        assert t.predicted in "ABCD"
