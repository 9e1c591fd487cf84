"""vidlab.io: atomic writes (old or new file, never half), stale-temporary and lock sweeping, input checks."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from vidlab.io import (
    InputFileError,
    atomic_open,
    atomic_path,
    atomic_write_json,
    atomic_write_text,
    file_problem,
    is_temporary,
    require_regular_file,
    sweep_stale,
)


def _dead_pid() -> int:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return int(proc.stdout)


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "report.json"
    atomic_write_json(target, {"v": 1})
    with pytest.raises(RuntimeError):
        with atomic_open(target) as f:
            f.write('{"v": 2, "half')
            raise RuntimeError("killed mid-write")
    assert target.read_text() == '{\n  "v": 1\n}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_atomic_path_keeps_the_suffix_for_writers_that_need_a_name(tmp_path):
    target = tmp_path / "plot.png"
    with atomic_path(target) as tmp:
        assert tmp.suffix == ".png" and tmp.parent == tmp_path and is_temporary(tmp.name)
        tmp.write_bytes(b"png")
    assert target.read_bytes() == b"png" and [p.name for p in tmp_path.iterdir()] == ["plot.png"]


def test_sweep_removes_dead_writers_temporaries_and_unheld_empty_locks(tmp_path):
    import filelock

    dead = _dead_pid()
    stale = [tmp_path / f".summary.json.{dead}.deadbeef.tmp", tmp_path / f".plot.{dead}.deadbeef.tmp.png"]
    for p in stale:
        p.write_text("half")
    mine = tmp_path / f".x.json.{os.getpid()}.cafe0000.tmp"  # this process is alive and may be writing it
    mine.write_text("in progress")
    atomic_write_text(tmp_path / "done.txt", "ok")
    (tmp_path / "free.lock").touch()
    held = tmp_path / "held.lock"
    lock = filelock.FileLock(str(held), timeout=0)
    lock.acquire()
    try:
        removed = sweep_stale(tmp_path, locks=True)
    finally:
        lock.release()
    assert sorted(p.name for p in removed) == sorted([*(p.name for p in stale), "free.lock"])
    assert mine.exists() and held.exists() and (tmp_path / "done.txt").read_text() == "ok"
    assert sweep_stale(tmp_path / "absent") == []


def test_input_problems_have_true_reasons(tmp_path):
    loop = tmp_path / "loop.mp4"
    loop.symlink_to(loop)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    empty = tmp_path / "empty.json"
    empty.touch()
    assert "symlink loop" in file_problem(loop)
    assert "named pipe" in file_problem(fifo)  # and it never blocked opening it
    assert file_problem(tmp_path) == "is a folder, not a file"
    assert (
        file_problem(empty) == "is an empty file (0 bytes)" and file_problem(empty, allow_empty=True) is None
    )
    assert file_problem(tmp_path / "nope") == "no such file"
    with pytest.raises(InputFileError, match="cannot read video: symlink loop") as ei:
        require_regular_file(loop, what="video")
    assert ei.value.path == str(loop)


def test_ensure_output_dir_is_one_typed_error(tmp_path):
    from vidlab.errors import UserError
    from vidlab.io import OutputDirError, ensure_output_dir

    assert ensure_output_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b" and (tmp_path / "a" / "b").is_dir()
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputDirError, match="is a file, not a folder"):
        ensure_output_dir(tmp_path / "f")
    with pytest.raises(OutputDirError, match="cannot create output folder .*Not a directory"):
        ensure_output_dir(tmp_path / "f" / "sub")
    assert issubclass(OutputDirError, UserError)


def test_sweep_reads_the_writer_pid_next_to_the_marker_even_when_the_random_token_is_digits(tmp_path):
    """``.STEM.PID.HEX.tmp.EXT`` with an all-digit HEX: the live writer's temporary must stay."""
    import os

    from vidlab.io import sweep_stale

    live = tmp_path / f".video.{os.getppid()}.12345678.tmp.mp4"  # our parent: alive, not us
    dead = tmp_path / ".video.999999999.87654321.tmp.mp4"
    for p in (live, dead):
        p.write_bytes(b"x")
    removed = sweep_stale(tmp_path)
    assert removed == [dead] and live.exists() and not dead.exists()
