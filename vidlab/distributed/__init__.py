"""vidlab.distributed: one executor API (``run_job``) over a local and a Ray backend; resumable job records.

    from vidlab.distributed import RunConfig, read_job, run_job
    summary = run_job(items, MyWorker, "out/", run=RunConfig(backend="ray", workers=2),
                      worker_kwargs={"model": "vidlab-tiny"})
    records = read_job("out/")   # the one way to read a job's records: records.ok, records.failed

Job identity and locking (``open_job``, ``make_identity``, ``fingerprint_inputs``): see
:mod:`vidlab.distributed.executor` (its docstring is the API) and :mod:`vidlab.distributed.job`.
Guide: docs/guides/jobs.md.
"""

from vidlab.identity import fingerprint_file, fingerprint_folder, fingerprint_inputs, fingerprint_path

from .config import RunConfig
from .executor import JobConfigError, JobSummary, check_run, item_hash, run_job
from .job import (
    JobHandle,
    JobIdentityError,
    JobLockedError,
    OutputDirError,
    identity_diff,
    job_lock,
    make_identity,
    open_job,
    read_identity,
)
from .records import (
    JobRecords,
    RecordProblem,
    error_text,
    read_job,
    read_records,
    require_fields,
    scan_records,
)
from .worker import WorkerInitError

__all__ = [
    "JobConfigError",
    "JobHandle",
    "JobIdentityError",
    "JobLockedError",
    "JobRecords",
    "JobSummary",
    "OutputDirError",
    "RecordProblem",
    "RunConfig",
    "WorkerInitError",
    "check_run",
    "error_text",
    "fingerprint_file",
    "fingerprint_folder",
    "fingerprint_inputs",
    "fingerprint_path",
    "identity_diff",
    "item_hash",
    "job_lock",
    "make_identity",
    "open_job",
    "read_identity",
    "read_job",
    "read_records",
    "require_fields",
    "run_job",
    "scan_records",
]
