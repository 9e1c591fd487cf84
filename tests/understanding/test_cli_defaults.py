"""Defaults that never give garbage in ``vidlab qa`` / ``eval-qa``: a policy that ships its CLIP uses it unless told
otherwise (and a run without ``clip_sample`` says so), and a benchmark file with no usable question, a malformed
line or a video in place of annotations is one line and exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from vidlab.cli import main
from vidlab.understanding.cli import eval_qa_main, qa_main
from vidlab.understanding.toyworld import SHIPPED_CLIP


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    from vidlab.video.synth import render_synthetic

    d = tmp_path_factory.mktemp("defaults")
    render_synthetic(d / "a.mp4", 40, fps=8, width=64, height=48, seed=0)
    rows = [
        {
            "id": f"q{i}",
            "video": "a.mp4",
            "question": "Which colour?",
            "options": ["red", "blue"],
            "answer": "A",
        }
        for i in range(3)
    ]
    (d / "q.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    good = (d / "q.jsonl").read_text().splitlines()
    (d / "truncated.jsonl").write_text("\n".join([good[0], good[1][:25], good[2]]) + "\n")
    return d


def _qa(capsys, data, tmp_path, *extra):
    traj = tmp_path / "traj.json"
    argv = ["--video", str(data / "a.mp4"), "--question", "Which colour?", "--options", "red", "blue"]
    rc = qa_main([*argv, "--json", str(traj), *extra])
    return rc, capsys.readouterr().out.splitlines(), json.loads(traj.read_text()) if traj.is_file() else None


def test_a_policy_that_ships_its_clip_uses_it_unless_told_otherwise(data, tmp_path, capsys):
    rc, out, rec = _qa(capsys, data, tmp_path, "--policy", "toy:shipped", "episode.frame_resize=fit")
    assert (
        rc == 0
        and out[0] == f"tools: uniform_sample + clip_sample (CLIP model: the policy's own: {SHIPPED_CLIP})"
    )
    assert rec["tools"] == ["uniform_sample", "clip_sample"] and rec["clip_model"] == str(SHIPPED_CLIP)

    rc, out, rec = _qa(capsys, data, tmp_path, "--policy", "toy:shipped", "--clip-model", "none")
    assert rc == 0 and out[0].startswith(
        "tools: uniform_sample only: clip_sample is off because you turned it off"
    )
    assert rec["tools"] == ["uniform_sample"] and rec["clip_model"] is None


def test_a_policy_without_a_clip_says_clip_sample_is_off(data, tmp_path, capsys):
    rc, out, rec = _qa(capsys, data, tmp_path, "--policy", "const:A")
    assert rc == 0 and out[0].startswith(
        "tools: uniform_sample only: clip_sample is off because the policy const:A"
    )
    assert "--clip-model" in out[0] and rec["tools"] == ["uniform_sample"]
    # a CLIP named by the user is used as given (the tiny built-in one: no download)
    rc, out, rec = _qa(capsys, data, tmp_path, "--policy", "const:A", "--clip-model", "vidlab-tiny")
    assert rc == 0 and out[0] == "tools: uniform_sample + clip_sample (CLIP model: vidlab-tiny)"


def test_eval_qa_follows_the_same_rule_and_records_it(data, tmp_path, capsys):
    out = tmp_path / "run"
    argv = [
        "--benchmark",
        "jsonl",
        "--data",
        str(data / "q.jsonl"),
        "--policy",
        "toy:shipped",
        "--limit",
        "1",
    ]
    assert eval_qa_main([*argv, "--out", str(out), "episode.frame_resize=fit"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("tools: uniform_sample + clip_sample")
    summary = json.loads((out / "summary.json").read_text())["agent"]
    assert summary["tools"] == ["uniform_sample", "clip_sample"] and summary["clip_model"] == str(
        SHIPPED_CLIP
    )
    assert yaml.safe_load((out / "config.yaml").read_text())["clip_model"] == str(SHIPPED_CLIP)

    off = tmp_path / "off"
    assert eval_qa_main([*argv, "--out", str(off), "--clip-model", "none"]) == 0
    assert "clip_sample is off" in capsys.readouterr().out.splitlines()[0]
    summary = json.loads((off / "summary.json").read_text())["agent"]
    assert summary["tools"] == ["uniform_sample"] and summary["clip_model"] is None


def _one_line(capsys, argv):
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_benchmark_files_that_hold_no_questions_are_refused(data, tmp_path, capsys):
    readme = Path(__file__).resolve().parents[2] / "README.md"
    base = ["eval-qa", "--benchmark", "jsonl", "--policy", "const:A", "--out", str(tmp_path / "o")]
    err = _one_line(capsys, [*base, "--data", str(readme)])
    assert "line 1: not valid JSON" in err and "--skip-bad-lines" in err
    err = _one_line(capsys, [*base, "--data", str(readme), "--skip-bad-lines"])
    assert "no usable jsonl question" in err and "record(s) were skipped" in err
    err = _one_line(capsys, [*base, "--data", str(data / "a.mp4")])
    assert "not a UTF-8 text file" in err and "a video?" in err
    err = _one_line(capsys, [*base, "--data", str(data / "truncated.jsonl")])
    assert "truncated.jsonl: line 2: not valid JSON" in err
    assert not (tmp_path / "o").exists()  # refused before the output folder was made

    # asked for: the bad line is skipped into problems.jsonl and the rest is evaluated; the skipped line is a
    # failed item, named, and the run ends "finished with some failures" (exit 3)
    ok = tmp_path / "skip"
    argv = ["eval-qa", "--benchmark", "jsonl", "--data", str(data / "truncated.jsonl"), "--policy", "const:A"]
    assert main([*argv, "--out", str(ok), "--skip-bad-lines", "--strategies", "uniform:4"]) == 3
    assert "1 of 3 question(s) failed" in capsys.readouterr().err
    problems = [json.loads(x) for x in (ok / "problems.jsonl").read_text().splitlines()]
    assert [p["record"] for p in problems] == ["line 2"]
    assert json.loads((ok / "summary.json").read_text())["uniform-4"]["n"] == 2


def test_index_on_a_missing_path_says_it_does_not_exist(tmp_path, capsys):
    err = _one_line(capsys, ["index", str(tmp_path / "nope"), "--cache-dir", str(tmp_path / "i")])
    assert (
        err
        == f"vidlab index: error: input '{tmp_path / 'nope'}' does not exist (give video folders, list files or videos)"
    )
    assert not (tmp_path / "i").exists()
