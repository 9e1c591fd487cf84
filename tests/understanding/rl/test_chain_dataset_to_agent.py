"""From a dataset file to a trained agent, as docs/guides/dataset-to-agent.md gives it, run as a user runs it.

``vidlab toyworld-data`` -> ``vidlab classify`` (toy:where) -> ``vidlab train-agent --engine trl`` (the tiny
Qwen2.5-VL, one step) -> ``vidlab eval-qa`` with the trained policy, locally and on Ray, every command the
installed console script run from a folder that is neither the checkout nor the data's, with paths typed
relative to it. Each file one command writes is read by the next where it was written: the labelled rows name
their videos relative to the labelled file, so train-agent and eval-qa find them with no --video-root.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(labelled_chain, vidlab_cli) -> Path:
    res = vidlab_cli(
        labelled_chain["cwd"], "train-agent", "--engine", "trl", "--preset", "trl-tiny",
        "--data", "../runs/labelled.jsonl", "--out", "../runs/trl", "max_steps=1",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads((labelled_chain["runs"] / "trl" / "summary.json").read_text())
    used = [
        r for r in _rows(labelled_chain) if r["classification"] != "filtered"
    ]  # filtered: no signal, left out
    assert (
        summary["global_step"] == 1 and summary["data_rows"] == len(used) and summary["data_failures"] == []
    )
    return labelled_chain["runs"] / "trl" / "final"


def _rows(chain: dict[str, Path]) -> list[dict]:
    return [json.loads(x) for x in chain["labelled"].read_text().splitlines()]


def test_the_labelled_file_names_its_videos_from_where_it_lies(labelled_chain):
    rows = _rows(labelled_chain)
    assert len(rows) == 10 and {r["classification"] for r in rows} <= {
        "direct",
        "adaptive",
        "active",
        "filtered",
    }
    videos = labelled_chain["data"].parent / "videos"
    for r in rows:
        assert (
            not Path(r["video"]).is_absolute() and (labelled_chain["labelled"].parent / r["video"]).is_file()
        )
        assert (labelled_chain["labelled"].parent / r["video"]).resolve().parent == videos.resolve()


@pytest.mark.parametrize("backend", ["local", pytest.param("ray", marks=pytest.mark.ray)])
def test_eval_qa_with_the_trained_policy(labelled_chain, trained, vidlab_cli, backend):
    out = f"../runs/eval-{backend}"
    res = vidlab_cli(
        labelled_chain["cwd"], "eval-qa", "--benchmark", "jsonl", "--data", "../runs/labelled.jsonl",
        "--policy", "hf:../runs/trl/final", "--strategies", "uniform:4", "--limit", "2", "--backend", backend,
        "--out", out, "episode.max_new_tokens=8",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    folder = labelled_chain["cwd"] / out
    recs = [json.loads(x) for x in (folder / "uniform-4" / "results.jsonl").read_text().splitlines()]
    assert len(recs) == 2 and {r["status"] for r in recs} == {"ok"}
    assert not (folder / "failures.jsonl").exists()


def test_a_row_whose_video_is_gone_is_named_and_the_rest_still_trains(labelled_chain, vidlab_cli, tmp_path):
    """train-agent's data reading ends like every batch command: the row left out named, exit 3."""
    rows = _rows(labelled_chain)
    used = [r for r in rows if r["classification"] != "filtered"]
    used[0]["video"] = "videos/gone.mp4"
    part = labelled_chain["runs"] / "partial.jsonl"
    part.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = vidlab_cli(
        labelled_chain["cwd"], "train-agent", "--engine", "trl", "--preset", "trl-tiny",
        "--data", "../runs/partial.jsonl", "--out", str(tmp_path / "trl"), "max_steps=1", "save_model=false",
    )  # fmt: skip
    assert res.returncode == 3, res.stderr[-3000:]
    gone = str(labelled_chain["runs"] / "videos" / "gone.mp4")
    assert f"1 of {len(used)} data row(s) failed" in res.stderr and gone in res.stderr, res.stderr[-3000:]
    assert "video not found" in res.stderr
    listed = [json.loads(x) for x in (tmp_path / "trl" / "data_failures.jsonl").read_text().splitlines()]
    assert [(f["id"], f["path"]) for f in listed] == [(used[0]["id"], gone)]
