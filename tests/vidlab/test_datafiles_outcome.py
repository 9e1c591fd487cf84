"""The path rule (``vidlab.datafiles``) and the batch ending (``vidlab.outcome``) every batch command shares."""

from __future__ import annotations

import json
import os
from pathlib import Path

from vidlab.datafiles import relative_to_file, resolve_path
from vidlab.outcome import (
    ALL_OK,
    NONE_OK,
    SHOWN,
    SOME_FAILED,
    BatchOutcome,
    Failure,
    exit_code,
    failure_from,
    failure_lines,
    finish,
    write_failures,
)


def test_relative_paths_resolve_against_the_data_files_folder_or_the_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = Path("/data/set/questions.jsonl")
    assert resolve_path("videos/a.mp4", data) == Path("/data/set/videos/a.mp4")
    assert resolve_path("videos/a.mp4", data, root="/mnt/v") == Path("/mnt/v/videos/a.mp4")
    assert resolve_path("/abs/a.mp4", data, root="/mnt/v") == Path("/abs/a.mp4")
    assert resolve_path("~/a.mp4", data) == Path.home() / "a.mp4"
    assert resolve_path("a.mp4") == tmp_path / "a.mp4"  # typed on the command line: the working directory
    assert (
        resolve_path("v/a.mp4", "../d/rows.jsonl") == tmp_path.parent / "d" / "v" / "a.mp4"
    )  # always absolute


def test_a_written_path_resolves_back_to_the_same_file(tmp_path):
    video = tmp_path / "data" / "videos" / "a.mp4"
    out = tmp_path / "runs" / "x" / "labelled.jsonl"
    written = relative_to_file(video, out)
    assert not os.path.isabs(written)
    assert resolve_path(written, out).resolve() == video.resolve()


def test_exit_codes_say_how_a_batch_ended():
    assert (exit_code(5, 0), exit_code(5, 2), exit_code(5, 5), exit_code(0, 0)) == (
        ALL_OK,
        SOME_FAILED,
        NONE_OK,
        0,
    )
    assert len({ALL_OK, SOME_FAILED, NONE_OK, 2, 1}) == 5  # never a usage error's 2 nor a crash's 1


def test_the_summary_names_the_first_ten_and_the_file_with_all(tmp_path, capsys):
    fails = [Failure(f"q{i}", "VideoReadError: no such file", f"/v/{i}.mp4") for i in range(13)]
    path = write_failures(tmp_path / "failures.jsonl", fails)
    outcome = BatchOutcome(20, fails, str(path))
    lines = failure_lines("vidlab x", outcome, what="question")
    assert lines[0] == "vidlab x: 13 of 20 question(s) failed:"
    assert lines[1] == "  q0: /v/0.mp4: VideoReadError: no such file"
    assert len([ln for ln in lines if ln.startswith("  q")]) == SHOWN and "  ... and 3 more" in lines
    assert lines[-1] == f"vidlab x: all failures in {path}; rerun the same command to retry them"
    assert [json.loads(x)["id"] for x in path.read_text().splitlines()] == [f"q{i}" for i in range(13)]
    assert finish("vidlab x", outcome) == SOME_FAILED and capsys.readouterr().err.count("\n") == len(lines)
    assert finish("vidlab x", BatchOutcome(3)) == ALL_OK and capsys.readouterr().err == ""
    assert write_failures(path, []) is None and not path.exists()  # a clean rerun leaves no stale list


def test_failure_from_reads_job_and_loader_records():
    f = failure_from(
        {"id": "r1", "video": "/v/a.mp4", "error": {"type": "VideoReadError", "message": "gone"}}
    )
    assert (f.item, f.path, f.reason) == ("r1", "/v/a.mp4", "VideoReadError: gone")
    f = failure_from({"record": "line 3", "reason": "not valid JSON"})
    assert str(f) == "line 3: not valid JSON"
