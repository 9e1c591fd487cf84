"""vidlab.distributed: one executor API (``run_job``) over a local and a Ray backend; resumable job records.

    from vidlab.distributed import run_job, JobSummary
    summary = run_job(items, MyWorker, "out/", backend="ray", num_workers=2, worker_kwargs={"model": "vidlab-tiny"})

See vidlab/clip/README.md ("Scale-out").
"""

from .executor import JobConfigError, JobSummary, WorkerInitError, run_job
from .records import JobLockedError, iter_ok, read_records

__all__ = [
    "JobConfigError",
    "JobLockedError",
    "JobSummary",
    "WorkerInitError",
    "iter_ok",
    "read_records",
    "run_job",
]
