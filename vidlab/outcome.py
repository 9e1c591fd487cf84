"""How a batch command ends: a stderr summary naming each failed item, and an exit status that means something.

Every batch command (``vidlab index``, ``classify``, ``eval-qa``, ``compbench``, ``train-agent``'s data reading)
runs every item it can, then ends the same way:

=====  ===================================================================================
exit   meaning
=====  ===================================================================================
0      every item succeeded
2      a usage error: one line on stderr, nothing was run (see :mod:`vidlab.errors`)
3      finished with some failures: the items that succeeded are written, the failed ones named
4      nothing succeeded: every item failed (a wrong ``--video-root``, a folder of broken files)
=====  ===================================================================================

(1 is left to what it means for any Python program, a bug with its traceback; 130 is Ctrl-C.)

With failures, stderr ends with one line per failed item (its path and the reason) for the first
:data:`SHOWN` of them, and the file that holds all of them::

    vidlab eval-qa: 2 of 16 item(s) failed:
      q3: videos/3.mp4: no such file
      q9: videos/9.mp4: not a video (moov atom not found)
    vidlab eval-qa: all failures in out/failures.jsonl; rerun the same command to retry them

:func:`failure_lines` builds those lines; :func:`finish` (for a command's ``main``, never library code) prints
them and returns the exit status.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ALL_OK",
    "NONE_OK",
    "SHOWN",
    "SOME_FAILED",
    "BatchOutcome",
    "Failure",
    "exit_code",
    "failure_from",
    "failure_lines",
    "finish",
    "write_failures",
]

ALL_OK = 0
SOME_FAILED = 3
NONE_OK = 4
SHOWN = 10  # failed items named on stderr; the rest are in the failures file


@dataclass(frozen=True)
class Failure:
    """One item that did not succeed: its id, the path it was about (a video, a row's file) and why."""

    item: str
    reason: str
    path: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"id": self.item, "path": self.path, "reason": self.reason}

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path and self.path not in self.reason else ""
        who = f"{self.item}: " if self.item and self.item != self.path else ""
        return f"{who}{where}{self.reason}"


@dataclass
class BatchOutcome:
    """What a batch did: how many items it had, which failed (path and reason), and where they are all listed."""

    total: int
    failures: list[Failure] = field(default_factory=list)
    failures_file: str | None = None

    @property
    def failed(self) -> int:
        return len(self.failures)

    @property
    def succeeded(self) -> int:
        return max(0, self.total - self.failed)

    @property
    def exit_code(self) -> int:
        return exit_code(self.total, self.failed)


def exit_code(total: int, failed: int) -> int:
    """0 when nothing failed; 4 when nothing succeeded (``failed >= total``); else 3."""
    if failed <= 0:
        return ALL_OK
    return NONE_OK if failed >= total else SOME_FAILED


def failure_from(
    record: Mapping[str, Any], path_keys: Iterable[str] = ("path", "video", "video_path")
) -> Failure:
    """A :class:`Failure` from a record such as a job's error record or a loader's problem
    (``id``/``record``, a path key, ``reason``/``error``, or ``type`` + ``message``)."""
    item = str(record.get("id", record.get("record", "")) or "")
    path = next((str(record[k]) for k in path_keys if record.get(k)), "")
    reason = record.get("reason") or record.get("error")
    if not reason and record.get("message") is not None:  # a job's flattened error: type + message
        reason = f"{record.get('type', 'Error')}: {record['message']}"
    if isinstance(reason, Mapping):  # a job's error mapping
        reason = f"{reason.get('type', 'Error')}: {reason.get('message', '')}"
    return Failure(item, " ".join(str(reason or "failed").split()), path)


def write_failures(path: str | os.PathLike, failures: Iterable[Failure]) -> Path | None:
    """All failures as JSONL at ``path`` (atomically); with none, a stale file there is removed. Returns the path
    written, or None."""
    from vidlab.io import atomic_write_text

    out = Path(path)
    rows = [f.to_dict() for f in failures]
    if not rows:
        if out.is_file():
            out.unlink()
        return None
    atomic_write_text(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return out


def failure_lines(prog: str, outcome: BatchOutcome, what: str = "item", retry: bool = True) -> list[str]:
    """The stderr summary of ``outcome`` (empty when nothing failed): a count, the first :data:`SHOWN` failures
    (path and reason), the file holding all of them."""
    if not outcome.failures:
        return []
    n, total = outcome.failed, outcome.total
    head = (
        f"{prog}: all {total} {what}(s) failed:"
        if n >= total
        else f"{prog}: {n} of {total} {what}(s) failed:"
    )
    lines = [head]
    lines += [f"  {' '.join(str(f).split())}" for f in outcome.failures[:SHOWN]]
    if n > SHOWN:
        lines.append(f"  ... and {n - SHOWN} more")
    tail = f"{prog}: all failures in {outcome.failures_file}" if outcome.failures_file else ""
    if retry:
        tail = (tail + "; " if tail else f"{prog}: ") + "rerun the same command to retry them"
    if tail:
        lines.append(tail)
    return lines


def finish(prog: str, outcome: BatchOutcome, what: str = "item", retry: bool = True, file: Any = None) -> int:
    """For a command's ``main``: print the failure summary of ``outcome`` on stderr (nothing when all succeeded)
    and return its exit status (0, 3 or 4)."""
    import sys

    for line in failure_lines(prog, outcome, what, retry):
        print(line, file=file or sys.stderr)
    return outcome.exit_code
