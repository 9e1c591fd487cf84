"""vidlab.distributed: one executor API (``run_job``) over a local and a Ray backend; resumable job records.

    from vidlab.distributed import run_job, JobSummary
    summary = run_job(items, MyWorker, "out/", backend="ray", num_workers=2, worker_kwargs={"model": "vidlab-tiny"})

Job identity and locking (``open_job``, ``make_identity``, ``fingerprint_inputs``): see
:mod:`vidlab.distributed.executor` (its docstring is the API) and :mod:`vidlab.distributed.job`.
See vidlab/clip/README.md ("Scale-out").
"""

from .executor import JobConfigError, JobSummary, WorkerInitError, item_hash, run_job
from .job import (
    JobHandle,
    JobIdentityError,
    JobLockedError,
    OutputDirError,
    fingerprint_file,
    fingerprint_folder,
    fingerprint_inputs,
    fingerprint_path,
    identity_diff,
    job_lock,
    make_identity,
    open_job,
    read_identity,
)
from .records import RecordProblem, iter_ok, read_records, require_fields, scan_records

__all__ = [
    "JobConfigError",
    "JobHandle",
    "JobIdentityError",
    "JobLockedError",
    "JobSummary",
    "OutputDirError",
    "RecordProblem",
    "WorkerInitError",
    "fingerprint_file",
    "fingerprint_folder",
    "fingerprint_inputs",
    "fingerprint_path",
    "identity_diff",
    "item_hash",
    "iter_ok",
    "job_lock",
    "make_identity",
    "open_job",
    "read_identity",
    "read_records",
    "require_fields",
    "run_job",
    "scan_records",
]
