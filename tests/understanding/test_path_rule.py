"""One path rule and one ending for every batch command, tried as a user chains them.

A question file names its videos relative to its own folder. ``vidlab classify`` must find them from any
working directory (it used to look under the working directory and label nothing, exit 0), its labelled file
must feed ``vidlab eval-qa`` from wherever it is written, and a missing video is a failed item, named on
stderr and in the failures file, with exit 3 (some failed) or 4 (none succeeded), never a wrong answer
scored in silence.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vidlab.outcome import NONE_OK, SOME_FAILED
from vidlab.understanding.cli import classify_main, eval_qa_main

CHEAP = ["classify.k=1", "classify.rich_clip_frames=0"]


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    from vidlab.understanding.benchmarks.synthetic import write_needle_benchmark

    d = tmp_path_factory.mktemp("needles") / "data"
    return write_needle_benchmark(d, n=4, num_frames=60, width=48, height=32, needle_len=8)


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> Path:
    """A working directory that is neither the checkout nor the data's folder."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def _copy_with(bench: Path, dest: Path, missing: set[str]) -> Path:
    """A copy of the question file in ``dest`` (videos under ``dest/videos``) whose ``missing`` rows name no file."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(bench.parent / "videos", dest / "videos", dirs_exist_ok=True)
    rows = [json.loads(line) for line in bench.read_text().splitlines()]
    for r in rows:
        if r["id"] in missing:
            r["video"] = f"videos/gone_{r['id']}.mp4"
    out = dest / "questions.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def _err(capsys) -> str:
    return capsys.readouterr().err


def test_classify_finds_videos_beside_its_data_file_and_its_output_feeds_eval_qa(
    bench, elsewhere, tmp_path, capsys
):
    labelled = tmp_path / "runs" / "L.jsonl"
    rc = classify_main(["--data", str(bench), "--out", str(labelled), "--policy", "const:B", *CHEAP])
    err = _err(capsys)
    assert rc == 0, err
    rows = [json.loads(line) for line in labelled.read_text().splitlines()]
    assert len(rows) == 4 and all(r["classification"] in ("direct", "filtered") for r in rows)
    for r in rows:  # written relative to the labelled file's own folder: it resolves from there
        assert not Path(r["video"]).is_absolute()
        assert (labelled.parent / r["video"]).resolve() == (
            bench.parent / "videos" / f"{r['id']}.mp4"
        ).resolve()
    out = tmp_path / "eval"
    rc = eval_qa_main(
        ["--benchmark", "jsonl", "--data", str(labelled), "--policy", "const:B", "--strategies", "uniform:4"]
        + ["--out", str(out)]
    )
    err = _err(capsys)
    assert rc == 0, err
    recs = [json.loads(line) for line in (out / "uniform-4" / "results.jsonl").read_text().splitlines()]
    assert {r["status"] for r in recs} == {"ok"} and len(recs) == 4
    assert not (out / "failures.jsonl").exists()


def test_video_root_wins_over_the_data_files_folder(bench, elsewhere, tmp_path, capsys):
    rows = tmp_path / "rows" / "train.jsonl"  # the rows alone, their videos in another folder
    rows.parent.mkdir()
    shutil.copy(bench, rows)
    labelled = tmp_path / "L.jsonl"
    argv = ["--data", str(rows), "--out", str(labelled), "--policy", "const:B", *CHEAP]
    assert classify_main(argv) == NONE_OK  # no videos beside the rows: every row fails, named
    err = _err(capsys)
    assert "all 4 row(s) failed" in err and str(rows.parent / "videos" / "needle_000.mp4") in err
    rc = classify_main([*argv, "--video-root", str(bench.parent), "--overwrite"])
    assert rc == 0, _err(capsys)
    assert len(labelled.read_text().splitlines()) == 4
    # eval-qa takes the same flag (its --video-dir): the same rows, their videos under the root
    ev = ["--benchmark", "jsonl", "--data", str(rows), "--policy", "const:B", "--strategies", "uniform:4"]
    assert eval_qa_main([*ev, "--out", str(tmp_path / "e1")]) == NONE_OK
    _err(capsys)
    assert eval_qa_main([*ev, "--out", str(tmp_path / "e2"), "--video-root", str(bench.parent)]) == 0, _err(
        capsys
    )


def test_a_missing_video_is_a_named_failure_not_a_silent_wrong_answer(bench, elsewhere, tmp_path, capsys):
    data = _copy_with(bench, tmp_path / "some", {"needle_002"})
    out = tmp_path / "eval-some"
    argv = ["--benchmark", "jsonl", "--data", str(data), "--policy", "const:B", "--strategies", "uniform:4"]
    assert eval_qa_main([*argv, "--out", str(out)]) == SOME_FAILED
    err = _err(capsys)
    gone = str(data.parent / "videos" / "gone_needle_002.mp4")
    assert "1 of 4 question(s) failed" in err and "needle_002" in err and gone in err, err
    assert str(out / "failures.jsonl") in err
    failures = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    assert [(f["id"], f["path"]) for f in failures] == [("needle_002", gone)]
    assert "no such file" in failures[0]["reason"]

    data = _copy_with(bench, tmp_path / "none", {"needle_000", "needle_001", "needle_002", "needle_003"})
    assert eval_qa_main([*argv[:3], str(data), *argv[4:], "--out", str(tmp_path / "eval-none")]) == NONE_OK
    assert "all 4 question(s) failed" in _err(capsys)


def test_classify_names_a_missing_video_and_exits_some_failed(bench, elsewhere, tmp_path, capsys):
    data = _copy_with(bench, tmp_path / "some", {"needle_001"})
    labelled = tmp_path / "L.jsonl"
    rc = classify_main(["--data", str(data), "--out", str(labelled), "--policy", "const:B", *CHEAP])
    err = _err(capsys)
    assert rc == SOME_FAILED, err
    gone = str(data.parent / "videos" / "gone_needle_001.mp4")
    assert "1 of 4 row(s) failed" in err and gone in err and str(labelled) + ".errors.jsonl" in err
    errors = [json.loads(line) for line in Path(f"{labelled}.errors.jsonl").read_text().splitlines()]
    assert [(e["id"], e["path"]) for e in errors] == [("needle_001", gone)]
    assert len(labelled.read_text().splitlines()) == 3
