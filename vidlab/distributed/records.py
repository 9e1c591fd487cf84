"""Job records: one JSON line per finished attempt-set in ``out_dir/results.jsonl``, appended atomically.

Each line is written with a single ``os.write`` of the whole line, then fsynced. A run that dies mid-line
leaves a torn last line; readers skip any line that is not valid JSON, and the next writer starts on a
fresh line. The latest record per id wins, and an ``ok`` record is final: a rerun skips that id, so no
output is ever produced twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RESULTS = "results.jsonl"


class JobLockedError(RuntimeError):
    """Another process is running a job on the same output folder."""


def read_records(out_dir: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Latest record per id (an ``ok`` record is only replaced by a later ``ok``); torn lines are ignored."""
    path = Path(out_dir) / RESULTS
    latest: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return latest
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                continue  # a torn last line from a crash
            try:
                rec = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError):
                continue
            if not isinstance(rec, dict) or "id" not in rec:
                continue
            rid = str(rec["id"])
            if latest.get(rid, {}).get("status") == "ok" and rec.get("status") != "ok":
                continue  # a later error (e.g. of a redo) never hides a finished result
            latest[rid] = rec
    return latest


class RecordWriter:
    """Append-only writer of job records; holds an exclusive lock on the folder while open."""

    def __init__(self, out_dir: str | os.PathLike) -> None:
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / RESULTS
        self._lock = open(self.dir / ".job.lock", "a+")
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            self._lock.close()
            raise JobLockedError(
                f"another job is writing to {str(self.dir)!r}; wait for it or use another folder"
            ) from e
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        size = os.fstat(self._fd).st_size
        if size:
            with open(self.path, "rb") as f:
                f.seek(size - 1)
                if f.read(1) != b"\n":  # finish a torn line so the next record starts clean
                    os.write(self._fd, b"\n")

    def write(self, record: dict[str, Any]) -> None:
        """Append one record as one line (single write + fsync)."""
        record = {**record, "time": round(time.time(), 3)}
        line = (json.dumps(record, default=str, ensure_ascii=False) + "\n").encode()
        os.write(self._fd, line)
        os.fsync(self._fd)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)
        with contextlib.suppress(OSError):
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
            self._lock.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def iter_ok(out_dir: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """The ``ok`` records of a job folder (one per id)."""
    for rec in read_records(out_dir).values():
        if rec.get("status") == "ok":
            yield rec
