"""VideoBrain inside lmms-eval: the real `lmms-eval` CLI finds `--model videobrain` through its entry-point
group and runs vidlab's episode loop on a tiny local task built here (offline, needle videos, a frame-reading
policy that makes tool calls). Control: the same docs with the answers swapped must score the complement."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vidlab.understanding.lmms.requests import (
    LmmsRequestError,
    parse_context,
    question_and_options,
    video_path,
)

TASK_UTILS = """
def doc_to_visual(doc):
    return [doc["video"]]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    opts = doc.get("options") or doc["opts"]
    lines = "\\n".join(f"{chr(65 + i)}. {o}" for i, o in enumerate(opts))
    q = doc.get("question") or doc["prompt"]
    return f"Watch the video.\\n{q}\\n{lines}\\nAnswer with the option's letter from the given choices directly."


def process_results(doc, results):
    return {"accuracy": float(results[0].strip() == doc["answer"])}
"""

TASK_YAML = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {docs}
test_split: test
output_type: generate_until
doc_to_visual: !function utils.doc_to_visual
doc_to_text: !function utils.doc_to_text
doc_to_target: answer
process_results: !function utils.process_results
metric_list:
  - metric: accuracy
    aggregation: mean
    higher_is_better: true
"""


# ------------------------------------------------------------------------------------- request parsing (fast)
def test_parse_context_reads_lettered_options_and_drops_instructions():
    ctx = "Watch it.\nWhat colour was the car?\nA. red\nB. blue\n(C) green\nAnswer with the option's letter."
    q, opts = parse_context(ctx)
    assert q == "Watch it.\nWhat colour was the car?" and opts == ["red", "blue", "green"]
    assert parse_context("How many birds fly by?") == ("How many birds fly by?", None)
    # a lone "A." line is not a list of options
    assert parse_context("Say A. then stop.\nA. one")[1] is None


def test_doc_fields_win_over_the_context():
    doc = {"question": "Q?", "candidates": ["A. x", "B. y"]}
    assert question_and_options(doc, "ignored\nA. p\nB. q") == ("Q?", ["x", "y"])
    # options inline in the doc's question (MLVU style)
    doc = {"question": "Which?\n(A) cat\n(B) dog"}
    assert question_and_options(doc, "") == ("Which?", ["cat", "dog"])
    with pytest.raises(LmmsRequestError):
        question_and_options({}, "   ")


def test_video_path_needs_exactly_one_video(tmp_path):
    assert video_path(["/d/a.mp4"]) == "/d/a.mp4"
    assert video_path(["/d/a.mp4", object()]) == "/d/a.mp4"
    with pytest.raises(LmmsRequestError, match="2 video path"):
        video_path(["/d/a.mp4", "/d/b.mkv"], doc_id=3)
    with pytest.raises(LmmsRequestError, match="0 video path"):
        video_path([object()])


# ------------------------------------------------------------------------------------ the real CLI (slow)
def _task(root: Path, name: str, rows: list[dict]) -> None:
    docs = root / f"{name}.jsonl"
    docs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / f"{name}.yaml").write_text(TASK_YAML.format(name=name, docs=docs))


def _lmms_eval(tmp_path: Path, model_args: str, tasks: list[str], task_dir: Path) -> dict:
    """Run the real `lmms-eval` CLI offline; return its results JSON (it exits 0 even on errors: check both)."""
    pytest.importorskip("lmms_eval")
    exe = Path(sys.executable).with_name("lmms-eval")
    if not exe.is_file():
        exe = Path(shutil.which("lmms-eval") or "")
    assert exe.is_file(), "lmms-eval is importable but its CLI script is missing"
    out = tmp_path / "out"
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    env["OMP_NUM_THREADS"] = "1"
    cmd = [str(exe), "--model", "videobrain", "--model_args", model_args, "--tasks", ",".join(tasks),
           "--include_path", str(task_dir), "--batch_size", "1", "--output_path", str(out)]  # fmt: skip
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    results = sorted(out.rglob("*_results.json"))
    assert results, "lmms-eval wrote no results (it logs errors and still exits 0): " + res.stderr[-3000:]
    report = json.loads(results[-1].read_text())
    # resolved through lmms-eval's registry to vidlab's class
    assert report["config"]["model_backend"] == "vidlab.understanding.lmms.model.VideoBrainLMM (simple)"
    return report


def _scored_as_recorded(
    report: dict, traj: Path, docs_by_task: dict[str, list[dict]]
) -> dict[str, list[dict]]:
    """lmms-eval's accuracy per task equals what the recorded episodes answered against the docs' keys."""
    by_task: dict[str, list[dict]] = {}
    for line in traj.read_text().splitlines():
        rec = json.loads(line)
        by_task.setdefault(rec["task"], []).append(rec)
    for name, docs in docs_by_task.items():
        got = sorted(by_task[name], key=lambda r: r["doc_id"])
        assert len(got) == len(docs)
        expected = sum(g["response"] == d["answer"] for g, d in zip(got, docs)) / len(docs)
        assert report["results"][name]["accuracy,none"] == pytest.approx(expected)
        by_task[name] = got
    return by_task


@pytest.mark.slow
def test_lmms_eval_cli_runs_videobrain_episodes(tmp_path):
    from vidlab.understanding.benchmarks.synthetic import write_needle_benchmark

    jsonl = write_needle_benchmark(tmp_path / "nb", n=4, num_frames=200, fps=10.0)
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    for r in rows:
        r["video"] = str(jsonl.parent / r.pop("video"))
        r.pop("extra", None)
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "utils.py").write_text(TASK_UTILS)
    _task(tasks, "vb_needle", rows)
    # control: the same videos and questions, the answer key swapped; no "question"/"options" fields, so
    # the plug-in must read them out of lmms-eval's rendered prompt
    swapped = [
        {
            "video": r["video"],
            "prompt": r["question"],
            "opts": r["options"],
            "answer": "B" if r["answer"] == "A" else "A",
        }
        for r in rows
    ]
    _task(tasks, "vb_needle_swapped", swapped)
    traj = tmp_path / "trajectories.jsonl"
    report = _lmms_eval(
        tmp_path,
        f"policy=pixel:red,max_calls=5,trajectories={traj}",
        ["vb_needle", "vb_needle_swapped"],
        tasks,
    )
    scores = report["results"]
    by_task = _scored_as_recorded(report, traj, {"vb_needle": rows, "vb_needle_swapped": swapped})
    for name in ("vb_needle", "vb_needle_swapped"):
        got = by_task[name]
        # the question and options reached the episode intact, from the doc or from the rendered prompt
        assert [g["options"] for g in got] == [["yes", "no"]] * len(rows)
        assert all(g["question"].endswith("Does a red square appear at any point in the video?") for g in got)
    needle = by_task["vb_needle"]
    # the episode loop ran: valid trajectories, and where the 16-frame first view missed the needle the policy
    # called uniform_sample and was shown more frames
    assert all(g["valid"] and g["policy"] == "pixel:red" for g in needle)
    assert any(g["num_tool_calls"] > 0 and len(g["frames_used"]) > 16 for g in needle)
    assert scores["vb_needle"]["accuracy,none"] == 1.0
    # control: a built-in or constant answer would score the same on both keys; the policy's answers score
    # exactly the complement on the swapped key
    assert scores["vb_needle_swapped"]["accuracy,none"] == pytest.approx(
        1.0 - scores["vb_needle"]["accuracy,none"]
    )


@pytest.mark.slow
def test_lmms_eval_cli_with_the_trained_toy_policy_and_its_clip(tmp_path):
    """The toy world's trained policy + toy CLIP (clip_sample offered) answer toy-world questions in lmms-eval."""
    from vidlab.understanding.toyworld import SHIPPED_CLIP, resolve_toy_dir
    from vidlab.understanding.toyworld.world import build_split

    try:
        resolve_toy_dir("shipped")
    except Exception as e:  # noqa: BLE001 - the toy weights are optional in a stripped install
        pytest.skip(f"no shipped toy weights: {e}")
    split = build_split(tmp_path / "tw", "test", 1)
    rows = [json.loads(line) for line in split.jsonl.read_text().splitlines()]
    for r in rows:
        r["video"] = str(split.root / r["video"])
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "utils.py").write_text(TASK_UTILS)
    _task(tasks, "vb_toy", rows)
    # control: every answer moved to the next letter; the recorded answers must score against that key too
    shifted = [{**r, "answer": chr(65 + (ord(r["answer"]) - 64) % len(r["options"]))} for r in rows]
    _task(tasks, "vb_toy_shifted", shifted)
    traj = tmp_path / "trajectories.jsonl"
    args = f"policy=toy:shipped,clip_model={SHIPPED_CLIP},frame_resize=fit,trajectories={traj}"
    report = _lmms_eval(tmp_path, args, ["vb_toy", "vb_toy_shifted"], tasks)
    by_task = _scored_as_recorded(report, traj, {"vb_toy": rows, "vb_toy_shifted": shifted})
    got = by_task["vb_toy"]
    assert all(g["policy"].startswith("toy:") for g in got)
    assert all(g["response"] in "ABCD" and g["response"] for g in got)  # a letter for every question
    # the same episodes answered both tasks (greedy, deterministic): identical responses per doc
    assert [g["response"] for g in got] == [g["response"] for g in by_task["vb_toy_shifted"]]


@pytest.mark.slow
def test_lmms_eval_cli_runs_a_frame_selector_with_its_parameters(tmp_path):
    """``strategy=aks:8:t1=0.6;max_depth=3`` through lmms-eval's own --model_args parsing: one turn, no tools, at
    most 8 frames picked from the CLIP frame index, scored as recorded."""
    from vidlab.understanding.benchmarks.synthetic import write_needle_benchmark

    jsonl = write_needle_benchmark(tmp_path / "nb", n=2, num_frames=200, fps=10.0)
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    for r in rows:
        r["video"] = str(jsonl.parent / r.pop("video"))
        r.pop("extra", None)
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "utils.py").write_text(TASK_UTILS)
    _task(tasks, "vb_sel", rows)
    traj = tmp_path / "trajectories.jsonl"
    args = (
        f"policy=pixel:red,clip_model=vidlab-tiny,cache_dir={tmp_path / 'cache'},"
        f"strategy=aks:8:t1=0.6;max_depth=3,trajectories={traj}"
    )
    report = _lmms_eval(tmp_path, args, ["vb_sel"], tasks)
    got = _scored_as_recorded(report, traj, {"vb_sel": rows})["vb_sel"]
    assert all(g["valid"] and g["num_tool_calls"] == 0 and 1 <= len(g["frames_used"]) <= 8 for g in got)
    assert all(g["response"] in ("A", "B") for g in got)
