"""``run_job``: run a stateful worker over items on the ``local`` or ``ray`` backend, resumably.

API for commands (stable; see :mod:`.job` for the rules)::

    from vidlab.distributed import (RunConfig, run_job, open_job, make_identity, fingerprint_file,
                                    fingerprint_path, fingerprint_inputs, require_fields, read_job,
                                    JobIdentityError, JobLockedError, OutputDirError)

    ident = make_identity(cfg, fingerprint_inputs(data=args.data), command="eval-qa", policy=args.policy)
    # validate every input first; then take the folder (lock + identity check) before writing anything:
    with open_job(out, ident, overwrite=args.overwrite):        # JobLockedError / JobIdentityError / OutputDirError
        save_resolved(cfg, out)                                   # safe: the lock is held
        summary = run_job(items, Worker, out, run=cfg.run,        # re-enters the same lock, same check
                          identity=ident, check_result=require_fields(score=float, correct=bool))
        records = read_job(out, check_result=...)                 # records.ok / records.failed, valid ones only

* ``identity``: a JSON-able mapping (resolved config + input fingerprints). Same identity resumes; a
  different one raises ``JobIdentityError`` naming the differing keys (we refuse; ``overwrite=True``
  deletes the old records and starts over). ``identity=None`` keeps the old, unchecked behaviour.
* The lock (``filelock``, ``out/.job.lock``) is taken before anything is written; a concurrent run gets
  ``JobLockedError`` (a UserError: one line) and touches nothing. Re-entrant within one process.
* ``check_result(result)`` raising or returning False marks an ``ok`` record damaged: one log warning
  (``logging``, shown on stderr by the CLIs) naming ``file:line``, the item is redone, the job goes on. Torn/garbage lines likewise.
* An ``ok`` record also stores a hash of its item: if the item changed (other question text, answer,
  path), the record no longer counts and the item is redone.

Contract: ``items`` are dicts with a unique ``"id"``; ``worker_cls(**worker_kwargs)`` is built once per
worker (it loads its model once); ``worker.process(item)`` returns a JSON-serialisable dict. Every item
ends with one record in ``out_dir/results.jsonl`` (see :mod:`.records`): ``ok`` with the result, or
``error`` with type, message and attempts after ``max_retries`` retries. A rerun skips ids that have an
``ok`` record (if ``validate(item, result)`` is given, only when it also returns true: the output still
exists and is intact) and items where ``is_done(item)`` is true; it retries the failed ones.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import traceback
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vidlab.errors import UserError
from vidlab.holds import JOB, hold_at

from .config import RunConfig
from .job import open_job
from .records import RecordProblem, RecordWriter, ResultCheck, scan_records
from .worker import WorkerInitError, checked_result

log = logging.getLogger(__name__)
# "resuming into OUT: N of M items done": a note, not a warning (the commands show it as ``prog: note: ...``)
resume_log = logging.getLogger("vidlab.distributed.resume")


class _AsNote(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.levelname = "NOTE"
        return True


resume_log.addFilter(_AsNote())


class JobConfigError(ValueError):
    """Bad arguments to ``run_job`` (items without ids, duplicate ids, unknown backend...)."""


@dataclass
class JobSummary:
    """What one ``run_job`` call did: counts, wall time, throughput and the errors it recorded.

    ``seconds``/``items_per_s`` are end to end; ``startup_seconds`` is the part spent constructing
    workers (Ray start, actor start, model loading) before the first item was dispatched.
    """

    total: int
    done: int
    skipped: int
    failed: int
    seconds: float
    items_per_s: float
    errors: list[dict[str, Any]] = field(default_factory=list)
    done_ids: list[str] = field(default_factory=list)
    startup_seconds: float = 0.0
    backend: str = "local"
    num_workers: int = 1
    out_dir: str = ""
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"{self.total} items: {self.done} done, {self.skipped} skipped, {self.failed} failed "
            f"in {self.seconds:.2f}s ({self.items_per_s:.2f} items/s, backend={self.backend}, workers={self.num_workers})"
        )


def check_run(run: RunConfig | str) -> None:
    """Refuse, before anything is written, a run this machine cannot start: on the ``ray`` backend, a
    ``RAY_ADDRESS`` where no cluster answers (one line naming it, within seconds; see
    :func:`~vidlab.distributed.ray_backend.check_ray_address`). Commands call it before they create their
    output folders; ``run_job`` calls it before it opens the job."""
    backend = run if isinstance(run, str) else run.backend
    if backend == "ray":
        from .ray_backend import check_ray_address

        check_ray_address()


def _check_items(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "id" not in item:
            raise JobConfigError(f"item {i} must be a dict with an 'id' key, got {item!r:.80}")
        rid = str(item["id"])
        if rid in seen:
            raise JobConfigError(f"duplicate item id {rid!r}: ids must be unique so reruns can resume")
        seen.add(rid)
        out.append(item)
    return out


def item_hash(item: Mapping[str, Any]) -> str:
    """A short stable hash of an item's content (keys sorted, JSON with ``default=str``)."""
    blob = json.dumps(item, sort_keys=True, default=str, ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _warn_problems(problems: list[RecordProblem]) -> None:
    """One log warning for unreadable lines, one per damaged record (at most five, then a count)."""
    unreadable = [p for p in problems if p.kind == "unreadable"]
    damaged = [p for p in problems if p.kind == "damaged"]
    if unreadable:
        where = ", ".join(str(p.line) for p in unreadable[:8]) + (" ..." if len(unreadable) > 8 else "")
        log.warning(
            "%s: %d torn or non-JSON line(s) (line %s) ignored; their items are redone",
            unreadable[0].path,
            len(unreadable),
            where,
        )
    for p in damaged[:5]:
        log.warning("%s: damaged record ignored; the item is redone", p)
    if len(damaged) > 5:
        log.warning("... and %d more damaged record(s), redone too", len(damaged) - 5)


def _error_info(exc: BaseException, attempts: int) -> dict[str, Any]:
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:2000],
        "attempts": attempts,
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:],
    }


class _Recorder:
    """Writes records and accumulates the summary counters."""

    def __init__(self, writer: RecordWriter, bar: Any) -> None:
        self.writer = writer
        self.bar = bar
        self.done = 0
        self.failed = 0
        self.errors: list[dict[str, Any]] = []
        self.done_ids: list[str] = []
        self.t0 = time.perf_counter()
        self.startup_s = 0.0

    def workers_ready(self) -> None:
        """Mark the end of worker construction (model loading), so throughput can exclude it."""
        self.startup_s = time.perf_counter() - self.t0

    def ok(self, item: dict[str, Any], result: dict[str, Any], attempts: int) -> None:
        self.writer.write(
            {
                "id": str(item["id"]),
                "status": "ok",
                "result": result,
                "attempts": attempts,
                "item_hash": item_hash(item),
            }
        )
        self.done += 1
        self.done_ids.append(str(item["id"]))
        self.bar.update(1)

    def error(self, item: dict[str, Any], exc: BaseException, attempts: int) -> None:
        info = _error_info(exc, attempts)
        self.writer.write({"id": str(item["id"]), "status": "error", "error": info, "item": item})
        self.failed += 1
        self.errors.append({"id": str(item["id"]), **{k: v for k, v in info.items() if k != "traceback"}})
        self.bar.update(1)
        self.bar.set_postfix(failed=self.failed)


def run_job(
    items: Sequence[dict[str, Any]],
    worker_cls: type,
    out_dir: str | os.PathLike,
    backend: str = "local",
    num_workers: int = 1,
    num_cpus_per_worker: float = 1,
    num_gpus_per_worker: float = 0,
    max_retries: int = 2,
    worker_kwargs: dict[str, Any] | None = None,
    is_done: Callable[[dict[str, Any]], bool] | None = None,
    validate: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
    desc: str = "job",
    progress: bool | None = None,
    name: str | None = None,
    identity: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    check_result: ResultCheck | None = None,
    run: RunConfig | None = None,
    announce_resume: bool = True,
) -> JobSummary:
    """Process ``items`` with ``worker_cls`` on ``backend``; resumable, retrying, one record per item.

    ``run`` (a :class:`~vidlab.distributed.RunConfig`, a job config's ``run:`` block) gives backend,
    workers, CPUs/GPUs per worker and retries at once, in place of the five keywords.
    See the module docstring for ``identity``/``overwrite`` (job identity and lock) and ``check_result``
    (damaged records are redone). A job that resumes (the folder already holds records of it) says so in one log
    line, ``resuming into OUT: N of M items done`` (``announce_resume=False``: silent, for caches that are
    reused by design)."""
    from tqdm.auto import tqdm

    if run is not None:
        backend, num_workers, max_retries = run.backend, run.workers, run.retries
        num_cpus_per_worker, num_gpus_per_worker = run.cpus_per_worker, run.gpus_per_worker

    if backend not in ("local", "ray"):
        raise JobConfigError(f"backend must be 'local' or 'ray', got {backend!r}")
    if num_workers < 1 or max_retries < 0:
        raise JobConfigError(f"need num_workers >= 1 and max_retries >= 0, got {num_workers}, {max_retries}")
    if backend == "local" and num_workers > 1:
        warnings.warn(
            f"the local backend runs one in-process worker; num_workers={num_workers} needs backend='ray'",
            RuntimeWarning,
            stacklevel=2,
        )
    items = _check_items(items)
    check_run(backend)  # an unreachable cluster: one line, before the job folder or its lock exists
    out = Path(out_dir)
    t0 = time.perf_counter()
    with open_job(out, identity, overwrite=overwrite), RecordWriter(out) as writer:
        previous, problems = scan_records(out, check_result)
        _warn_problems(problems)

        def finished(it: dict[str, Any]) -> bool:
            rec = previous.get(str(it["id"]), {})
            if (
                rec.get("status") == "ok"
                and rec.get("item_hash", item_hash(it)) == item_hash(it)
                and (validate is None or validate(it, rec.get("result") or {}))
            ):
                return True
            return bool(is_done and is_done(it))

        pending = [it for it in items if not finished(it)]
        skipped = len(items) - len(pending)
        if previous and announce_resume:
            retried = sum(1 for it in pending if previous.get(str(it["id"]), {}).get("status") == "error")
            resume_log.warning(
                "resuming into %s: %d of %d items done%s (--overwrite starts over)",
                out,
                skipped,
                len(items),
                f", {retried} that failed before are retried" if retried else "",
            )
        with tqdm(total=len(pending), desc=desc, unit="item", disable=progress is False) as bar:
            rec = _Recorder(writer, bar)
            rec.t0 = t0
            if pending and backend == "local":
                _run_local(pending, worker_cls, worker_kwargs or {}, max_retries, rec)
            elif pending:
                from .ray_backend import run_ray

                run_ray(
                    pending,
                    worker_cls,
                    worker_kwargs or {},
                    max_retries,
                    rec,
                    num_workers=num_workers,
                    num_cpus=num_cpus_per_worker,
                    num_gpus=num_gpus_per_worker,
                    name=name or f"vidlab-{out.name}-{os.getpid()}",
                )
    seconds = time.perf_counter() - t0
    return JobSummary(
        total=len(items),
        done=rec.done,
        skipped=skipped,
        failed=rec.failed,
        seconds=round(seconds, 4),
        items_per_s=round((rec.done) / seconds, 4) if seconds > 0 else 0.0,
        errors=rec.errors,
        done_ids=rec.done_ids,
        startup_seconds=round(rec.startup_s, 4),
        backend=backend,
        num_workers=num_workers if backend == "ray" else 1,
        out_dir=str(out),
        problems=[str(p) for p in problems],
    )


def _run_local(
    pending: list[dict[str, Any]], worker_cls: type, kwargs: dict[str, Any], max_retries: int, rec: _Recorder
) -> None:
    """In-process: one worker, items in order, each retried up to ``max_retries`` times."""
    try:
        worker = worker_cls(**kwargs)
    except UserError:
        raise  # the user's mistake (a wrong model name...): one line, not a WorkerInitError traceback
    except Exception as e:
        raise WorkerInitError(f"could not construct {worker_cls.__name__}(**{sorted(kwargs)}): {e}") from e
    rec.workers_ready()
    prefetch = getattr(
        worker, "prefetch", None
    )  # optional: a worker may prepare the next item in the background
    for n, item in enumerate(pending):
        hold_at(JOB, n)  # a test seam (vidlab.holds): unset, it returns at once
        if prefetch is not None and n + 1 < len(pending):
            prefetch(pending[n + 1])
        for attempt in range(1, max_retries + 2):
            try:
                result = checked_result(worker.process(item))
            except Exception as e:  # recorded, retried; KeyboardInterrupt still stops the job
                if attempt > max_retries:
                    rec.error(item, e, attempt)
                continue
            rec.ok(item, result, attempt)
            break
