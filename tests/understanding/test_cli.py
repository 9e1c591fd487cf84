"""``vidlab qa``, ``vidlab eval-qa`` and ``vidlab classify`` called through their ``main(argv)``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from vidlab.understanding.cli import classify_main, eval_qa_main, qa_main

CALL = '<thinking>The ball is small; look closer.</thinking><tool_call>{"name": "uniform_sample", "arguments": {"start_frame": 8, "end_frame": 40}}</tool_call>'
ANSWER = "<thinking>Now I see it.</thinking><answer>B</answer>"


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    from vidlab.video.synth import render_synthetic

    d = tmp_path_factory.mktemp("cli")
    render_synthetic(d / "a.mp4", 48, fps=8, width=64, height=48, seed=0)
    render_synthetic(d / "b.mp4", 40, fps=8, width=64, height=48, seed=1)
    rows = [
        {
            "id": "r1",
            "video": "a.mp4",
            "question": "Which shape?",
            "options": ["circle", "square"],
            "answer": "B",
            "category": "shape",
        },
        {
            "id": "r2",
            "video": "b.mp4",
            "question": "Which colour?",
            "options": ["red", "blue"],
            "answer": "A",
            "category": "colour",
        },
        {
            "id": "r3",
            "video": "a.mp4",
            "question": "How many?",
            "options": ["1", "2", "3"],
            "answer": "B",
            "category": "count",
        },
    ]
    (d / "q.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (d / "replay.json").write_text(json.dumps([CALL, ANSWER]))
    return d


def test_qa_prints_the_trajectory(data, tmp_path, capsys):
    out_json = tmp_path / "traj.json"
    rc = qa_main(
        [
            "--video",
            str(data / "a.mp4"),
            "--question",
            "Which shape?",
            "--options",
            "circle",
            "square",
            "--policy",
            f"replay:{data / 'replay.json'}",
            "--json",
            str(out_json),
        ]
    )
    text = capsys.readouterr().out
    assert rc == 0
    assert "options: A. circle  B. square" in text
    assert re.search(r"\[initial view\] 16 frames: 0 \(0\.00s\), 3 \(0\.38s\)", text)
    assert "[turn 1] thinking: The ball is small; look closer." in text
    assert 'tool call: uniform_sample {"start_frame": 8, "end_frame": 40}' in text
    assert re.search(r"-> 8 frames: 8 \(1\.00s\), 12 \(1\.50s\)", text)
    assert "[turn 2] thinking: Now I see it." in text and "answer: B" in text
    assert "result: predicted B (the reply is the letter); valid;" in text and "1 tool call(s)" in text
    saved = json.loads(out_json.read_text())
    assert saved["predicted"] == "B" and saved["num_tool_calls"] == 1


def test_qa_baseline_strategy_and_config_override(data, capsys):
    rc = qa_main(
        [
            "--video",
            str(data / "a.mp4"),
            "--question",
            "Which shape?",
            "--options",
            "circle",
            "square",
            "--policy",
            "const:B",
            "--strategy",
            "uniform:6",
            "--set",
            "episode.max_size=[32,24]",
        ]
    )
    text = capsys.readouterr().out
    assert rc == 0 and "[initial view] 6 frames" in text and "predicted B" in text


def test_qa_bad_input_exits_2_with_a_reason(data, tmp_path, capsys):
    bad = tmp_path / "x.mp4"
    bad.write_bytes(b"junk")
    assert qa_main(["--video", str(bad), "--question", "Q?", "--policy", "const:A"]) == 2
    assert "cannot read video" in capsys.readouterr().err
    assert qa_main(["--video", str(data / "a.mp4"), "--question", "Q?", "--policy", "gpt:x"]) == 2
    assert "bad policy spec" in capsys.readouterr().err
    assert qa_main(["--video", str(data / "a.mp4"), "--question", "Q?", "--policy", "pixel:purple"]) == 2
    assert "colour must be one of" in capsys.readouterr().err
    assert qa_main(["--video", str(data / "a.mp4"), "--question", "Q?", "--set", "episode.nope=1"]) == 2
    assert "unknown config key" in capsys.readouterr().err


def test_eval_qa_runs_resumes_and_compares(data, tmp_path, capsys):
    out = tmp_path / "run"
    argv = [
        "--benchmark",
        "jsonl",
        "--data",
        str(data / "q.jsonl"),
        "--policy",
        f"replay:{data / 'replay.json'}",
        "--out",
        str(out),
        "--strategies",
        "agent",
        "uniform:4",
        "--limit",
        "2",
        "--set",
        "run.retries=0",
    ]
    assert eval_qa_main(argv) == 0
    text = capsys.readouterr().out
    assert "| agent | 2 | 50.0 |" in text  # r1 (answer B) right, r2 (answer A) wrong
    summary = json.loads((out / "summary.json").read_text())
    assert summary["agent"]["mean_tool_calls"] == 1.0 and summary["uniform-4"]["mean_frames"] == 4.0
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["benchmark"] == "jsonl" and cfg["limit"] == 2 and cfg["run"]["retries"] == 0
    n_lines = len((out / "agent" / "results.jsonl").read_text().splitlines())
    assert eval_qa_main(argv) == 0  # rerun: everything already done
    assert len((out / "agent" / "results.jsonl").read_text().splitlines()) == n_lines

    other = tmp_path / "run2"
    argv2 = [
        "--benchmark",
        "jsonl",
        "--data",
        str(data / "q.jsonl"),
        "--policy",
        "const:B",
        "--out",
        str(other),
        "--strategies",
        "uniform:8",
        "--limit",
        "2",
    ]
    assert eval_qa_main(argv2) == 0
    capsys.readouterr()
    assert eval_qa_main(["--compare", str(out), str(other), "--out", str(tmp_path / "cmp")]) == 0
    text = capsys.readouterr().out
    assert "run/agent" in text and "run2/uniform-8" in text
    assert (tmp_path / "cmp" / "accuracy_vs_frames.png").stat().st_size > 1000


def test_eval_qa_bad_input(data, tmp_path, capsys):
    assert eval_qa_main(["--benchmark", "nope", "--data", str(data), "--out", str(tmp_path)]) == 2
    assert "unknown benchmark" in capsys.readouterr().err
    assert eval_qa_main(["--benchmark", "jsonl", "--out", str(tmp_path)]) == 2
    assert "--data is required" in capsys.readouterr().err
    base = ["--benchmark", "jsonl", "--data", str(data / "q.jsonl"), "--out", str(tmp_path / "o")]
    assert eval_qa_main(base + ["--strategies", "agent", "clip:4"]) == 2
    assert "needs clip_model" in capsys.readouterr().err
    assert eval_qa_main(base + ["--strategies", "random:3"]) == 2
    assert "uniform:K or clip:K" in capsys.readouterr().err
    assert not (tmp_path / "o" / "agent").exists()  # validated before any job started


def test_classify_writes_labels(data, tmp_path, capsys):
    out = tmp_path / "labelled.jsonl"
    rc = classify_main(
        [
            "--data",
            str(data / "q.jsonl"),
            "--policy",
            "const:B",
            "--out",
            str(out),
            "--video-root",
            str(data),
            "--k",
            "2",
            "--set",
            "classify.rich_clip_frames=0",
            "classify.rich_uniform_frames=8",
        ]
    )
    text = capsys.readouterr().out
    assert rc == 0, text
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    # const:B is always right on r1 and r3 (answer B): direct; always wrong on r2: filtered
    assert rows["r1"]["classification"] == "direct" and rows["r3"]["classification"] == "direct"
    assert rows["r2"]["classification"] == "filtered"
    assert "labelled 3 row(s)" in text and (tmp_path / "labelled.config.yaml").is_file()
    cfg = yaml.safe_load((tmp_path / "labelled.config.yaml").read_text())
    assert cfg["classify"]["k"] == 2 and cfg["classify"]["rich_uniform_frames"] == 8


@pytest.mark.parametrize("main", [qa_main, eval_qa_main, classify_main])
def test_help_teaches(main, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text and "vidlab" in text and "--set" in text


def test_one_preset_serves_qa_eval_and_classify(data, tmp_path, capsys):
    preset = tmp_path / "videobrain.yaml"
    preset.write_text(
        yaml.safe_dump(
            {
                "policy": "const:B",
                "judge": "rule",
                "episode": {"num_initial_frames": 8, "max_calls": 3},
                "classify": {"k": 1, "rich_clip_frames": 0, "rich_uniform_frames": 12},
            }
        )
    )
    video = str(data / "a.mp4")
    assert (
        qa_main(["--video", video, "--question", "Q?", "--options", "x", "y", "--config", str(preset)]) == 0
    )
    assert "[initial view] 8 frames" in capsys.readouterr().out
    out = tmp_path / "ev"
    assert (
        eval_qa_main(
            [
                "--config",
                str(preset),
                "--benchmark",
                "jsonl",
                "--data",
                str(data / "q.jsonl"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["policy"] == "const:B" and cfg["episode"]["max_calls"] == 3
    assert json.loads((out / "summary.json").read_text())["agent"]["mean_frames"] == 8.0
    labelled = tmp_path / "l.jsonl"
    rc = classify_main(
        [
            "--config",
            str(preset),
            "--data",
            str(data / "q.jsonl"),
            "--out",
            str(labelled),
            "--video-root",
            str(data),
        ]
    )
    assert rc == 0 and len(labelled.read_text().splitlines()) == 3
    preset.write_text(yaml.safe_dump({"policy": "const:B", "episode": {"max_cals": 3}}))
    assert qa_main(["--video", video, "--question", "Q?", "--config", str(preset)]) == 2
    assert "max_cals" in capsys.readouterr().err  # a typo in a preset is named, not ignored
