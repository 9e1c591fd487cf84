"""A job folder's identity and lock: results are never attributed to settings that did not produce them.

A job's *identity* is a JSON-able mapping: the resolved config plus fingerprints of its inputs
(:func:`make_identity` over :mod:`vidlab.identity`'s :func:`fingerprint_file`, :func:`fingerprint_inputs`). :func:`open_job` takes
the folder's lock first (before anything is written into it), then compares the identity with the one
stored in ``out_dir/job.json``:

* same identity -> the job resumes;
* no ``job.json`` and no results -> a new job: the identity is written (atomically);
* a different identity -> :class:`JobIdentityError`, naming the keys that differ. **We refuse rather
  than silently starting a second job in the same folder**: a folder then always holds one job's
  results, and the user picks explicitly: another ``--out``, or ``overwrite=True`` (``--overwrite``),
  which deletes the old records and ``job.json`` and starts over;
* results but no ``job.json`` (a folder written before identities existed) -> refused the same way,
  since nobody can say which settings made them.

The lock is a :mod:`filelock` lock on ``out_dir/.job.lock``. It is re-entrant within one process
(``open_job`` then ``run_job`` on the same folder share it) and exclusive across processes: a second
concurrent run gets :class:`JobLockedError` (one line) and writes nothing. Lock files stay behind as
empty files (that is how ``flock`` locks work); :func:`vidlab.io.sweep_stale` removes the unheld ones
and dead writers' temporaries when the next job opens the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vidlab.errors import UserError
from vidlab.identity import fingerprint_file, fingerprint_folder, fingerprint_inputs, fingerprint_path
from vidlab.io import OutputDirError, ensure_output_dir

__all__ = [  # the fingerprints live in vidlab.identity; job identities are made of them
    "JOB_FILE",
    "LOCK_FILE",
    "RESULTS",
    "JobHandle",
    "JobIdentityError",
    "JobLockedError",
    "OutputDirError",
    "fingerprint_file",
    "fingerprint_folder",
    "fingerprint_inputs",
    "fingerprint_path",
    "identity_diff",
    "job_lock",
    "make_identity",
    "open_job",
    "read_identity",
]

JOB_FILE = "job.json"
LOCK_FILE = ".job.lock"
RESULTS = "results.jsonl"  # the job's records (written by :mod:`.records`)


class JobLockedError(UserError, RuntimeError):
    """Another process is running a job on the same output folder."""


class JobIdentityError(UserError):
    """The folder holds results of a job with another identity (other settings or other inputs)."""

    def __init__(self, message: str, differences: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.differences = list(differences)


def _plain(obj: Any) -> Any:
    """JSON-normal form: dataclasses -> dicts, tuples -> lists, paths -> str, keys -> str."""
    import dataclasses

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    return json.loads(json.dumps(obj, default=str, sort_keys=True))


def make_identity(config: Any, inputs: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """The identity of a job: ``{"config": <resolved config>, "inputs": <fingerprints>, **extra}``, JSON-normal.

    ``config`` may be a dataclass or a mapping; put everything that changes the results into it or into
    ``extra`` (the command name, a policy spec, a strategy), and nothing that does not (worker counts,
    progress bars), so that a rerun with more workers still resumes."""
    ident: dict[str, Any] = {"config": _plain(config), "inputs": _plain(dict(inputs or {}))}
    ident.update(_plain(extra))
    return ident


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict) and obj:
        flat: dict[str, Any] = {}
        for k, v in obj.items():
            flat.update(_flatten(v, f"{prefix}{k}."))
        return flat
    return {prefix[:-1]: obj}


def identity_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Dotted keys whose values differ between two identities, as ``"key: old -> new"`` strings."""
    a, b = _flatten(_plain(dict(old))), _flatten(_plain(dict(new)))
    out = []
    for key in sorted(set(a) | set(b)):
        if a.get(key, "<absent>") != b.get(key, "<absent>"):
            va, vb = a.get(key, "<absent>"), b.get(key, "<absent>")
            out.append(f"{key}: {_short(va)} -> {_short(vb)}")
    return out


def _short(v: Any, n: int = 40) -> str:
    s = json.dumps(v, default=str) if not isinstance(v, str) else repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


# ------------------------------------------------------------------------------------------------ lock
_HELD: dict[str, Any] = {}
_HELD_GUARD = threading.Lock()


def _ensure_dir(out: Path) -> None:
    ensure_output_dir(out)


@contextlib.contextmanager
def job_lock(out_dir: str | os.PathLike) -> Iterator[Path]:
    """Hold the exclusive lock of ``out_dir`` (created if needed); re-entrant within this process.

    Raises :class:`JobLockedError` at once (no waiting) when another process holds it, and
    :class:`OutputDirError` when the folder cannot be created or written."""
    import filelock

    out = Path(out_dir)
    _ensure_dir(out)
    key = str((out / LOCK_FILE).resolve())
    with _HELD_GUARD:
        lock = _HELD.get(key)
        if lock is None:
            lock = _HELD[key] = filelock.FileLock(key, timeout=0, thread_local=False)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout as e:
        raise JobLockedError(
            f"{str(out)!r} is in use by another running job (lock {LOCK_FILE}); "
            "wait for it to finish, or use another output folder"
        ) from e
    except PermissionError as e:
        raise OutputDirError(f"cannot lock output folder {str(out)!r}: permission denied") from e
    try:
        yield out
    finally:
        lock.release()


def is_locked_here(out_dir: str | os.PathLike) -> bool:
    """True while this process holds ``out_dir``'s job lock."""
    lock = _HELD.get(str((Path(out_dir) / LOCK_FILE).resolve()))
    return bool(lock is not None and lock.is_locked)


# --------------------------------------------------------------------------------------------- open_job
@dataclass
class JobHandle:
    """An open job folder: ``resumed`` is true when an earlier run with the same identity left results."""

    out_dir: Path
    identity: dict[str, Any] | None
    resumed: bool


def read_identity(out_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The identity stored in ``out_dir/job.json`` (None when there is none)."""
    path = Path(out_dir) / JOB_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise JobIdentityError(
            f"{path}: unreadable job identity ({e}); pass --overwrite to start this job over, or another --out"
        ) from e
    if not isinstance(data, dict) or not isinstance(data.get("identity"), dict):
        raise JobIdentityError(
            f"{path}: not a job identity file (no 'identity' mapping); pass --overwrite or another --out"
        )
    return data["identity"]


def _has_results(out: Path) -> bool:
    p = out / RESULTS
    return p.exists() and p.stat().st_size > 0


def _clear(out: Path) -> None:
    for name in (RESULTS, JOB_FILE):
        with contextlib.suppress(FileNotFoundError):
            (out / name).unlink()


@contextlib.contextmanager
def open_job(
    out_dir: str | os.PathLike,
    identity: Mapping[str, Any] | None = None,
    *,
    overwrite: bool = False,
) -> Iterator[JobHandle]:
    """Lock ``out_dir``, sweep stale temporaries, check ``identity`` against ``job.json`` (see module
    docstring), and keep the lock until the ``with`` block ends. Validate the user's inputs before
    calling this: it creates the folder. ``identity=None`` skips the check (and writes no job.json)."""
    from vidlab.io import atomic_write_json, sweep_stale

    out = Path(out_dir)
    reentered = is_locked_here(out)
    with job_lock(out):
        sweep_stale(out, locks=True, keep=(LOCK_FILE,))
        ident = _plain(dict(identity)) if identity is not None else None
        if overwrite and reentered and ident is not None and read_identity(out) == ident:
            overwrite = False  # the outer open_job of this process already started this job over
        resumed = _has_results(out)
        if ident is not None:
            old = read_identity(out) if not overwrite else None
            if overwrite:
                _clear(out)
                resumed = False
            elif old is None and resumed:
                raise JobIdentityError(
                    f"{str(out)!r} holds results but no {JOB_FILE}, so the settings that made them are "
                    "unknown; pass --overwrite to start over there, or another --out"
                )
            elif old is not None and old != ident:
                diffs = identity_diff(old, ident)
                shown = "; ".join(diffs[:4]) + (f"; and {len(diffs) - 4} more" if len(diffs) > 4 else "")
                raise JobIdentityError(
                    f"{str(out)!r} holds a job with other settings ({shown}); pass another --out, "
                    "or --overwrite to replace it",
                    diffs,
                )
            if old != ident:
                from vidlab import __version__

                atomic_write_json(
                    out / JOB_FILE,
                    {"identity": ident, "created": round(time.time(), 3), "vidlab": __version__},
                )
        yield JobHandle(out_dir=out, identity=ident, resumed=resumed)
