"""A real TRL GRPOTrainer run on CPU through ``vidlab train-agent --engine trl`` (tiny random Qwen2.5-VL built
offline, group size 2, synthetic needle questions), and ``--engine verl`` writing data, tool config and launch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from vidlab.understanding import protocol as P
from vidlab.understanding.reward import compute_score

pytest.importorskip("trl")


@pytest.fixture(scope="module")
def trl_run(tmp_path_factory):
    from vidlab.understanding.rl.cli import trl_main

    out = tmp_path_factory.mktemp("trl-run")
    rc = trl_main(["--preset", "trl-tiny", f"out={out}", "max_steps=2"])
    assert rc == 0
    rows = [json.loads(x) for x in (out / "rollouts.jsonl").read_text().splitlines()]
    questions = {
        r["id"]: r for r in map(json.loads, (out / "data" / "questions.jsonl").read_text().splitlines())
    }
    return out, rows, questions


@pytest.mark.slow
def test_rewards_come_from_compute_score_with_a_spread_in_every_group(trl_run):
    out, rows, questions = trl_run
    assert len(rows) == 2 * 2 and {r["step"] for r in rows} == {0, 1}
    for r in rows:
        q = questions[r["id"]]
        extra = {"question_type": "mc", "options": q["options"], "frames_used": r["frames_used"]}
        assert r["reward"] == pytest.approx(
            compute_score("trl", r["assistant_text"], q["answer"], extra)["score"]
        )
    for step in (0, 1):
        group = [r for r in rows if r["step"] == step]
        assert [r["behaviour"] for r in group] == [False, True]  # last half of each group is scripted
        assert len({r["reward"] for r in group}) == 2  # the group has an advantage to learn from


@pytest.mark.slow
def test_loss_covers_assistant_tokens_only(trl_run):
    _, rows, _ = trl_run
    for step in (0, 1):
        group = [r for r in rows if r["step"] == step]
        assert sum(r["loss_tokens"] for r in group) == group[0]["batch_loss_tokens"]
    scripted = [r for r in rows if r["behaviour"]]
    for r in scripted:
        assert r["num_tool_calls"] == 1 and r["num_images"] == 16 + 8
        assert r["loss_text"] == "".join(t + "<|im_end|>" for t in r["assistant_turns"])
        assert r["observation_tokens"] > 8 * 4 and r["image_tokens_in_loss"] == 0
        assert P.observation_text(1, False) not in r["loss_text"]
    for r in rows:
        assert (
            r["image_tokens_in_loss"] == 0
            and r["loss_tokens"] + r["observation_tokens"] == r["completion_tokens"]
        )


@pytest.mark.slow
def test_parameters_change_vision_tower_stays_frozen_and_checkpoint_reloads_through_hf_policy(trl_run):
    import torch

    from vidlab.understanding.messages import Frame, Message
    from vidlab.understanding.policies.hf import HFPolicy

    out, _, _ = trl_run
    base = HFPolicy.from_pretrained(str(out / "base-model"))
    final = HFPolicy.from_pretrained(str(out / "final"))
    b, f = dict(base.model.named_parameters()), dict(final.model.named_parameters())
    assert b.keys() == f.keys()
    changed = {n for n in b if not torch.equal(b[n], f[n])}
    assert any(n.startswith("model.language_model.") for n in changed)
    assert not any("visual" in n.split(".") for n in changed)  # freeze_vision_tower=true
    import numpy as np

    frame = Frame(np.zeros((48, 64, 3), np.uint8), 0, 0.0)
    reply = final.generate([Message("user", ["hi", frame])], max_new_tokens=4)
    assert len(reply) == 1 and isinstance(reply[0], str)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["global_step"] == 2 and yaml.safe_load((out / "config.yaml").read_text())["max_steps"] == 2


def test_trl_user_errors_cost_one_line(capsys):
    from vidlab.understanding.rl.cli import trl_main

    assert trl_main(["--preset", "trl-tiny", "num_generations=1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "num_generations=1" in err[0]
    assert trl_main(["--preset", "trl-tiny", "behaviour=replay:/nope.json"]) == 2
    assert "file not found" in capsys.readouterr().err
    assert trl_main(["--preset", "trl-tiny", "no_such_key=1"]) == 2


def test_verl_engine_writes_dataset_tool_config_and_launch(needles, tmp_path, capsys):
    from verl.tools.tool_registry import initialize_tools_from_config

    from vidlab.config import resolve
    from vidlab.understanding.rl.cli import verl_main
    from vidlab.understanding.rl.verl_launch import VerlConfig, tool_config

    out = tmp_path / "vb"
    assert verl_main(["--preset", "verl-qwen3-vl-8b", "--data", f"jsonl:{needles}", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    # two questions: one trains, one is held out for verl's validation set (never the training file)
    assert "train rows: 1" in printed and "val rows: 1" in printed and f"bash {out / 'launch.sh'}" in printed
    launch = (out / "launch.sh").read_text()
    assert f"data.train_files={out / 'train.parquet'}" in launch and "Qwen/Qwen3-VL-8B-Instruct" in launch
    assert f"multi_turn.tool_config_path={out / 'tools.yaml'}" in launch
    assert {t.name for t in initialize_tools_from_config(str(out / "tools.yaml"))} == set(P.TOOL_NAMES)
    assert yaml.safe_load((out / "agent_loop.yaml").read_text())[0]["name"] == "videobrain_agent"
    # the shipped tool-config file is what the preset resolves to
    shipped = yaml.safe_load((Path(__file__).parents[3] / "configs/train-agent/verl-tools.yaml").read_text())
    assert shipped == tool_config(resolve(VerlConfig, "verl-qwen3-vl-8b"))
    assert verl_main(["--out", str(tmp_path / "x")]) == 2
    assert "no training data" in capsys.readouterr().err


def test_verl_names_each_unusable_row_and_exits_3_or_4(needles, tmp_path, capsys):
    """train-agent's data reading ends as every batch command does: a row whose video is not there is named
    (its path by the one path rule, the reason, the file listing all), exit 3; no usable row at all, exit 4."""
    from vidlab.outcome import NONE_OK, SOME_FAILED
    from vidlab.understanding.rl.cli import verl_main

    rows = [json.loads(x) for x in needles.read_text().splitlines()]
    gone = {**rows[0], "id": "gone", "video": "videos/gone.mp4"}
    some = needles.parent / "some_gone.jsonl"  # beside the videos: its relative paths resolve there
    some.write_text("".join(json.dumps(r) + "\n" for r in [*rows, gone]))
    out = tmp_path / "vb"
    assert (
        verl_main(["--preset", "verl-qwen3-vl-8b", "--data", f"jsonl:{some}", "--out", str(out)])
        == SOME_FAILED
    )
    err = capsys.readouterr().err
    missing = str(needles.parent / "videos" / "gone.mp4")
    assert "1 of 3 data row(s) failed:" in err and f"gone: video {missing!r} not found" in err, err
    assert str(out / "train.parquet.problems.jsonl") in err
    none = needles.parent / "all_gone.jsonl"
    none.write_text(json.dumps(gone) + "\n")
    assert (
        verl_main(["--preset", "verl-qwen3-vl-8b", "--data", f"jsonl:{none}", "--out", str(tmp_path / "n")])
        == NONE_OK
    )
    err = capsys.readouterr().err
    assert "no usable rows" in err and "all 1 data row(s) failed:" in err and missing in err


def test_verl_counts_the_validation_files_bad_rows_too(needles, tmp_path, capsys):
    """val_data is read by the same rule: a bad validation row is a failed item (exit 3, named as val:ID, its
    problems file listed); a validation file with no usable row launches nothing (exit 4)."""
    from vidlab.outcome import NONE_OK, SOME_FAILED
    from vidlab.understanding.rl.cli import verl_main

    rows = [json.loads(x) for x in needles.read_text().splitlines()]
    gone = {**rows[0], "id": "gone", "video": "videos/gone.mp4"}
    val = needles.parent / "val_some_gone.jsonl"
    val.write_text("".join(json.dumps(r) + "\n" for r in [rows[0], gone]))
    out = tmp_path / "vb"
    argv = ["--preset", "verl-qwen3-vl-8b", "--data", f"jsonl:{needles}", "--out", str(out)]
    assert verl_main([*argv, f"val_data=jsonl:{val}"]) == SOME_FAILED
    cap = capsys.readouterr()
    assert "val rows: 1" in cap.out and "1 bad rows" in cap.out
    missing = str(needles.parent / "videos" / "gone.mp4")
    assert "1 of 4 data row(s) failed:" in cap.err and f"val:gone: video {missing!r} not found" in cap.err, (
        cap.err
    )
    assert str(out / "val.parquet.problems.jsonl") in cap.err
    assert (out / "launch.sh").is_file()
    none = needles.parent / "val_all_gone.jsonl"
    none.write_text(json.dumps(gone) + "\n")
    out2 = tmp_path / "vb2"
    argv2 = ["--preset", "verl-qwen3-vl-8b", "--data", f"jsonl:{needles}", "--out", str(out2)]
    assert verl_main([*argv2, f"val_data=jsonl:{none}"]) == NONE_OK
    err = capsys.readouterr().err
    assert "error: val_data:" in err and "all 1 data row(s) failed:" in err and "val:gone" in err
    assert not (out2 / "launch.sh").exists()
