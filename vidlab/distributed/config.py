"""``RunConfig``: where a job runs, the one ``run:`` block of every job's config (index, eval-qa, classify,
compbench). Not part of a job's identity: a rerun with more workers or another backend resumes the same job.

    run:
      backend: ray          # local (in-process, default) | ray (RAY_ADDRESS connects to a cluster)
      workers: 4            # Ray actors, each loading its model once
      cpus_per_worker: 1
      gpus_per_worker: 0.5
      retries: 1            # per item and run; a rerun retries failures again

``run_job(items, Worker, out, run=cfg.run)`` takes it as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from vidlab.config import in_range, validate


@dataclass
class RunConfig:
    """Backend, workers, CPUs/GPUs per worker and retries of a job (see the module docstring)."""

    backend: Literal["local", "ray"] = "local"
    workers: int = field(default=1, metadata=in_range(1))
    cpus_per_worker: float = field(default=1.0, metadata=in_range(0.0))
    gpus_per_worker: float = field(default=0.0, metadata=in_range(0.0))
    retries: int = field(default=1, metadata=in_range(0))

    # the names each job used before there was one block (they work for one release, with a warning)
    LEGACY_KEYS: ClassVar[dict[str, str]] = {
        "num_workers": "workers",
        "num_cpus_per_worker": "cpus_per_worker",
        "num_gpus_per_worker": "gpus_per_worker",
        "max_retries": "retries",
    }

    def __post_init__(self) -> None:
        validate(self, "run.")


def legacy_run_keys(**renamed: str) -> dict[str, str]:
    """``LEGACY_KEYS`` entries for a job config whose run settings sat at its top level:
    ``legacy_run_keys(num_workers="workers")`` -> ``{"num_workers": "run.workers"}``."""
    return {old: f"run.{new}" for old, new in renamed.items()}


# The top-level keys jobs used before the `run:` block (eval-qa: backend, num_workers, num_cpus_per_worker,
# num_gpus_per_worker, max_retries; index: backend, workers, cpus_per_worker, gpus_per_worker, max_retries).
# A job config sets ``LEGACY_KEYS = TOP_LEVEL_RUN_KEYS``; they work for one release, with a warning.
TOP_LEVEL_RUN_KEYS = legacy_run_keys(
    backend="backend",
    workers="workers",
    num_workers="workers",
    cpus_per_worker="cpus_per_worker",
    num_cpus_per_worker="cpus_per_worker",
    gpus_per_worker="gpus_per_worker",
    num_gpus_per_worker="gpus_per_worker",
    max_retries="retries",
)
