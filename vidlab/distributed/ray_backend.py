"""The Ray backend of ``run_job``: a pool of stateful actors, one item in flight each, with retries.

Address resolution (``ensure_ray``): an already initialised Ray is used as is; ``RAY_ADDRESS`` (set by
``ray job submit`` or by hand) connects to that cluster; otherwise a local instance starts with
``num_cpus`` from the caller and no dashboard, bound to loopback (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``
is set before Ray is imported, and ``_node_ip_address=127.0.0.1`` is passed, because on Linux Ray
otherwise binds the external interface). Its session files and logs go under :func:`ray_temp_dir`
(``$VIDLAB_RAY_TMPDIR``, else ``<cache root>/ray`` when that path is short enough for Ray's unix
sockets, else ``<temp dir>/vidlab-ray-<uid>``), not only ``/tmp/ray``. A local instance this job
started is shut down when the job ends, on an exception, and on SIGTERM/SIGINT (the handler turns
the signal into ``SystemExit``/``KeyboardInterrupt`` so the ``finally`` runs; the previous handler is
restored afterwards), so Ray's agents do not outlive the driver holding loopback ports. A worker that raises is retried on any actor; an actor that
dies (crash, OOM, ``ray.kill``) is replaced and its item retried; after ``max_retries`` the item gets an
error record and the job goes on.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
import warnings
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .worker import WorkerInitError, checked_result

LOOPBACK = "127.0.0.1"
RAY_TMP_ENV = "VIDLAB_RAY_TMPDIR"
# Ray puts unix sockets at <temp>/session_<date>_<usec>_<pid>/sockets/plasma_store (~64 bytes after
# <temp> with a 7-digit pid); AF_UNIX paths stop at 107 bytes.
_MAX_TEMP_LEN = 40


def ray_temp_dir() -> Path:
    """Where a locally started Ray keeps its session files and logs (see module docstring)."""
    env = os.environ.get(RAY_TMP_ENV)
    if env:
        return Path(env).expanduser()
    from vidlab.paths import cache_dir

    cand = cache_dir("ray")
    if len(str(cand)) <= _MAX_TEMP_LEN:
        return cand
    return Path(tempfile.gettempdir()) / f"vidlab-ray-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


@contextlib.contextmanager
def _shutdown_on_signals(active: bool) -> Iterator[None]:
    """While active (this job started Ray) and on the main thread, SIGTERM raises SystemExit(143)."""
    if not active or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def ensure_ray(num_cpus: int | None = None) -> bool:
    """Initialise Ray if needed (see module docstring); True if this call started it."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    if ray.is_initialized():
        return False
    address = os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address)
        return True
    from ray._private import ray_constants

    if ray_constants.ENABLE_RAY_CLUSTER:
        warnings.warn(
            "ray was imported before RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 was set; forcing the node IP to loopback",
            RuntimeWarning,
            stacklevel=2,
        )
    temp = ray_temp_dir()
    temp.mkdir(parents=True, exist_ok=True)
    ray.init(
        num_cpus=num_cpus or os.cpu_count() or 1,
        include_dashboard=False,
        _node_ip_address=LOOPBACK,
        _temp_dir=str(temp),
        log_to_driver=True,
    )
    return True


class _Host:
    """Actor body: builds the user's worker once, then serves ``process`` calls."""

    def __init__(self, worker_cls: type, kwargs: dict[str, Any]) -> None:
        self.worker = worker_cls(**kwargs)

    def ready(self) -> bool:
        return True

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        return checked_result(self.worker.process(item))


def run_ray(
    pending: list[dict[str, Any]],
    worker_cls: type,
    kwargs: dict[str, Any],
    max_retries: int,
    rec: Any,
    num_workers: int,
    num_cpus: float,
    num_gpus: float,
    name: str,
) -> None:
    """Dispatch ``pending`` over ``num_workers`` actors; see the module docstring for failure handling."""
    started = ensure_ray(num_cpus=max(1, int(num_workers * max(num_cpus, 1))))
    import ray

    remote_host = ray.remote(_Host)
    generation = [0] * num_workers

    def spawn(i: int) -> Any:
        actor_name = f"{name}-w{i}-g{generation[i]}"
        generation[i] += 1
        return remote_host.options(
            num_cpus=num_cpus, num_gpus=num_gpus, name=actor_name, max_restarts=0, max_task_retries=0
        ).remote(worker_cls, kwargs)

    with _shutdown_on_signals(started):
        _dispatch(ray, pending, worker_cls, max_retries, rec, num_workers, spawn, started)


def _dispatch(
    ray: Any,
    pending: list[dict[str, Any]],
    worker_cls: type,
    max_retries: int,
    rec: Any,
    num_workers: int,
    spawn: Any,
    started: bool,
) -> None:
    from ray.exceptions import RayTaskError

    from vidlab.errors import UserError

    actors: list[Any] = []
    try:
        actors.extend(spawn(i) for i in range(num_workers))
        try:
            ray.get([a.ready.remote() for a in actors])
        except RayTaskError as e:
            if isinstance(e.cause, UserError):
                raise e.cause from None  # the user's mistake (a wrong model name): one line
            raise WorkerInitError(
                f"could not construct {worker_cls.__name__} in a Ray actor: {e.cause or e}"
            ) from e
        except ray.exceptions.RayActorError as e:
            raise WorkerInitError(f"could not construct {worker_cls.__name__} in a Ray actor: {e}") from e
        rec.workers_ready()
        queue: deque[tuple[dict[str, Any], int]] = deque((item, 0) for item in pending)
        idle = deque(range(num_workers))
        inflight: dict[Any, tuple[int, dict[str, Any], int]] = {}
        while queue or inflight:
            while queue and idle:
                i = idle.popleft()
                item, attempts = queue.popleft()
                inflight[actors[i].process.remote(item)] = (i, item, attempts + 1)
            ready, _ = ray.wait(list(inflight), num_returns=1)
            ref = ready[0]
            i, item, attempts = inflight.pop(ref)
            try:
                result = ray.get(ref)
            except RayTaskError as e:  # the worker raised: the actor is fine
                exc: BaseException = e.cause if isinstance(e.cause, BaseException) else e
                idle.append(i)
            except ray.exceptions.RayError as e:  # the actor died: replace it
                exc = e
                ray.kill(actors[i], no_restart=True)
                actors[i] = spawn(i)
                idle.append(i)
            else:
                rec.ok(item, result, attempts)
                idle.append(i)
                continue
            if attempts > max_retries:
                rec.error(item, exc, attempts)
            else:
                queue.appendleft((item, attempts))
    finally:
        for a in actors:
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 - already dead
                pass
        if started:
            ray.shutdown()
