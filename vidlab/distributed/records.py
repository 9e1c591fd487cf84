"""Job records: one JSON line per finished attempt-set in ``out_dir/results.jsonl``, appended atomically.

Each line is written with a single ``os.write`` of the whole line, then fsynced. A run that dies mid-line
leaves a torn last line; the next writer starts on a fresh line. The latest record per id wins, and an
``ok`` record is final: a rerun skips that id, so no output is ever produced twice.

Records are validated on read (:func:`scan_records`). A torn or non-JSON line, and a line that is JSON
but not a well-formed record (missing ``id``/``status``, an ``ok`` without a ``result`` mapping, a
result the caller's ``check_result`` rejects, e.g. a string where a number belongs), is *ignored*
and reported as a :class:`RecordProblem` naming ``file:line``; ``run_job`` prints one warning line
for them and redoes those items.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .job import RESULTS, JobLockedError, job_lock

ResultCheck = Callable[[dict[str, Any]], Any]

__all__ = [
    "RESULTS",
    "JobLockedError",
    "JobRecords",
    "RecordProblem",
    "RecordWriter",
    "error_text",
    "read_job",
    "read_records",
    "require_fields",
    "scan_records",
]


@dataclass(frozen=True)
class RecordProblem:
    """A results line that was ignored: ``kind`` is ``"unreadable"`` (torn / not JSON) or ``"damaged"``."""

    path: str
    line: int
    kind: str
    reason: str
    id: str | None = None

    def __str__(self) -> str:
        who = f" (id {self.id!r})" if self.id is not None else ""
        return f"{self.path}:{self.line}: {self.reason}{who}"


def require_fields(**fields: type | tuple[type, ...]) -> ResultCheck:
    """A ``check_result`` for :func:`run_job`/:func:`read_records`: each named key must be present with
    a value of that type (``float`` also accepts ints; ``bool`` is never taken for a number).

        check_result=require_fields(score=float, correct=bool, calls=int, prediction=(str, type(None)))
    """

    def _ok(value: Any, tp: type | tuple[type, ...]) -> bool:
        tps = tp if isinstance(tp, tuple) else (tp,)
        if isinstance(value, bool) and bool not in tps:
            return False
        if float in tps and isinstance(value, int):
            return True
        return isinstance(value, tps)

    def check(result: dict[str, Any]) -> None:
        for key, tp in fields.items():
            if key not in result:
                raise ValueError(f"result lacks {key!r}")
            if not _ok(result[key], tp):
                want = "/".join(t.__name__ for t in (tp if isinstance(tp, tuple) else (tp,)))
                raise ValueError(f"result field {key!r} should be {want}, got {result[key]!r:.40}")

    return check


def _record_problem(rec: Any, check_result: ResultCheck | None) -> str | None:
    """Why a parsed line is not a usable record (None when it is)."""
    if not isinstance(rec, dict):
        return f"a JSON {type(rec).__name__}, not a record"
    if "id" not in rec or not isinstance(rec["id"], (str, int)) or isinstance(rec["id"], bool):
        return "record without a string 'id'"
    status = rec.get("status")
    if status not in ("ok", "error"):
        return f"record status {status!r} is neither 'ok' nor 'error'"
    if status == "ok":
        if not isinstance(rec.get("result"), dict):
            return "ok record without a 'result' mapping"
        if "attempts" in rec and (not isinstance(rec["attempts"], int) or isinstance(rec["attempts"], bool)):
            return f"'attempts' should be an int, got {rec['attempts']!r:.40}"
        if check_result is not None:
            try:
                verdict = check_result(rec["result"])
            except Exception as e:  # noqa: BLE001 - any complaint about a result marks it damaged
                return str(e) or type(e).__name__
            if verdict is False:
                return "result rejected by the job's result check"
    elif not isinstance(rec.get("error"), dict):
        return "error record without an 'error' mapping"
    return None


def scan_records(
    out_dir: str | os.PathLike, check_result: ResultCheck | None = None
) -> tuple[dict[str, dict[str, Any]], list[RecordProblem]]:
    """Latest valid record per id, and the lines that were ignored (see module docstring).

    An ``ok`` record is only replaced by a later ``ok``: a later error (e.g. of a redo) never hides a
    finished result."""
    path = Path(out_dir) / RESULTS
    latest: dict[str, dict[str, Any]] = {}
    problems: list[RecordProblem] = []
    if not path.exists():
        return latest, problems
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                if not raw.endswith(b"\n"):
                    raise ValueError("torn last line")
                rec = json.loads(raw)
            except (UnicodeDecodeError, ValueError):
                problems.append(RecordProblem(str(path), lineno, "unreadable", "torn or not JSON"))
                continue
            why = _record_problem(rec, check_result)
            if why is not None:
                rid = str(rec["id"]) if isinstance(rec, dict) and "id" in rec else None
                problems.append(RecordProblem(str(path), lineno, "damaged", why, rid))
                continue
            rid = str(rec["id"])
            if latest.get(rid, {}).get("status") == "ok" and rec.get("status") != "ok":
                continue
            latest[rid] = rec
    return latest, problems


def read_records(
    out_dir: str | os.PathLike, check_result: ResultCheck | None = None
) -> dict[str, dict[str, Any]]:
    """Latest valid record per id, as stored; torn, garbage and damaged lines are ignored (see
    :func:`scan_records`). Jobs read their outcome with :func:`read_job`, which splits these into ok and failed."""
    return scan_records(out_dir, check_result)[0]


class RecordWriter:
    """Append-only writer of job records; holds the folder's job lock (:func:`.job.job_lock`) while open.

    The lock is re-entrant within a process (so a command can hold it from before it writes its config
    until the job ends) and exclusive across processes (:class:`JobLockedError`)."""

    def __init__(self, out_dir: str | os.PathLike) -> None:
        self.dir = Path(out_dir)
        self._lock_cm = job_lock(self.dir)
        self._lock_cm.__enter__()
        self.path = self.dir / RESULTS
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except BaseException:
            self._lock_cm.__exit__(None, None, None)
            raise
        size = os.fstat(self._fd).st_size
        if size:
            with open(self.path, "rb") as f:
                f.seek(size - 1)
                if f.read(1) != b"\n":  # finish a torn line so the next record starts clean
                    os.write(self._fd, b"\n")

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record as one line (single write + fsync)."""
        record = {**record, "time": round(time.time(), 3)}
        line = (json.dumps(record, default=str, ensure_ascii=False) + "\n").encode()
        os.write(self._fd, line)
        os.fsync(self._fd)

    def close(self) -> None:
        if getattr(self, "_fd", None) is None:
            return
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = None  # type: ignore[assignment]
        self._lock_cm.__exit__(None, None, None)

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@dataclass(frozen=True)
class JobRecords:
    """A job's outcome per item id, read from its records (:func:`read_job`).

    ``ok``: id -> the worker's result. ``failed``: id -> the error (``type``, ``message``, ``attempts`` and
    the ``item`` as it was given; no traceback). ``attempts``: id -> attempts of its latest record.
    An id in neither mapping has not run (or its record was damaged)."""

    ok: dict[str, dict[str, Any]] = field(default_factory=dict)
    failed: dict[str, dict[str, Any]] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)


def error_text(error: Mapping[str, Any]) -> str:
    """``"Type: message"`` of a failed item's error (as :attr:`JobRecords.failed` holds it)."""
    return f"{error.get('type', 'Error')}: {error.get('message', '')}"


def read_job(
    out_dir: str | os.PathLike,
    ids: Iterable[str] | None = None,
    check_result: ResultCheck | None = None,
) -> JobRecords:
    """The one way to read a job's records: latest valid record per id, split into ``ok`` and ``failed``.

    ``ids`` keeps only those items (a job folder may hold more, e.g. from a run with a larger ``--limit``),
    in that order; ``check_result`` as for :func:`run_job` (a damaged record counts as not run)."""
    records = read_records(out_dir, check_result)
    order = [str(i) for i in ids] if ids is not None else list(records)
    ok: dict[str, dict[str, Any]] = {}
    failed: dict[str, dict[str, Any]] = {}
    attempts: dict[str, int] = {}
    for rid in order:
        rec = records.get(rid)
        if rec is None:
            continue
        if rec["status"] == "ok":
            ok[rid] = rec["result"]
        else:
            err = {k: v for k, v in rec["error"].items() if k != "traceback"}
            failed[rid] = {**err, "item": rec.get("item")}
        n = rec.get("attempts", (rec.get("error") or {}).get("attempts"))
        if isinstance(n, int):
            attempts[rid] = n
    return JobRecords(ok=ok, failed=failed, attempts=attempts)
