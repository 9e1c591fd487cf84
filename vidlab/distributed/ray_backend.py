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

Start-up: an actor lost while it builds its worker (its process killed, its node gone) is replaced, up to
:data:`START_ATTEMPTS` times per worker slot, and the job goes on with the actors that did start (one log warning
per loss); only when no actor at all could be started is it a :class:`WorkerInitError`. A constructor that
*raises* is a genuine init error and fails the job at once: a ``UserError`` (a wrong model name) as itself (one
line), anything else as a one-line ``WorkerInitError``. The two are told apart because ``_Host`` catches the
constructor's exception and raises it from ``ready()``, so it arrives with its type, not as a dead actor.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import tempfile
import threading
import warnings
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vidlab.errors import UserError

from .worker import WorkerInitError, checked_result

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
START_ATTEMPTS = 3  # actors started per worker slot before it is given up (each loss during start-up is one)
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


class RayAddressError(UserError, ConnectionError):
    """``RAY_ADDRESS`` names a cluster that does not answer (nothing listens there, the host is unknown)."""


PROBE_SECONDS = 5.0  # one TCP connect per address; a refused port answers at once, a dead host after this
_REACHED: set[str] = set()  # addresses already found answering in this process


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``host:port``, ``[v6]:port`` or ``ray://host:port`` address; None for the words Ray
    resolves itself (``auto``, ``local``) and for anything without a port."""
    from urllib.parse import urlsplit

    text = address.strip()
    if text.lower() in ("auto", "local", ""):
        return None
    parts = urlsplit(text if "://" in text else f"//{text}")
    try:
        port = parts.port
    except ValueError:
        return None
    if parts.hostname is None or port is None:
        return None
    return parts.hostname, port


def check_ray_address(address: str | None = None, timeout: float = PROBE_SECONDS) -> None:
    """Refuse, in one line naming it, a Ray address (``address``, else ``$RAY_ADDRESS``) where nothing answers.

    Without this, ``ray.init`` on such an address retries for minutes, printing only its own connection warnings.
    One TCP connection to the address's host and port decides (a refused port fails at once, an unreachable host
    after ``timeout`` seconds); an address found answering once is not probed again. No address, ``auto``,
    ``local`` and an already initialised Ray are left to Ray. Nothing is written."""
    import socket

    address = os.environ.get("RAY_ADDRESS") if address is None else address
    if not address or address in _REACHED:
        return
    target = _host_port(address)
    if target is None:
        return
    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        return
    host, port = target
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except socket.gaierror as e:
        why = f"unknown host {host!r} ({e.strerror or e})"
    except TimeoutError:
        why = f"no answer from {host}:{port} within {timeout:g} s"
    except OSError as e:
        why = f"{e.strerror or e} at {host}:{port}"
    else:
        _REACHED.add(address)
        return
    raise RayAddressError(
        f"RAY_ADDRESS={address!r}: no Ray cluster answers there ({why}); start its head (`ray start --head`), "
        "fix the address, or unset RAY_ADDRESS to run on a Ray started on this machine"
    )


def ensure_ray(num_cpus: int | None = None) -> bool:
    """Initialise Ray if needed (see module docstring); True if this call started it."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    if ray.is_initialized():
        return False
    address = os.environ.get("RAY_ADDRESS")
    if address:
        check_ray_address(address)
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
    """Actor body: builds the user's worker once, then serves ``process`` calls. A constructor that raises
    leaves the actor alive and ``ready()`` raises the same exception (so it reaches the driver with its type)."""

    def __init__(self, worker_cls: type, kwargs: dict[str, Any]) -> None:
        self.init_error: BaseException | None = None
        try:
            self.worker = worker_cls(**kwargs)
        except Exception as e:  # noqa: BLE001 - handed to the driver by ready()
            self.init_error = e

    def ready(self) -> bool:
        if self.init_error is not None:
            raise self.init_error
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


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: first line of the message`` (Ray's errors carry a remote traceback after their first line)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    return f"{type(exc).__name__}: {text}"[:limit]


def _dispatch(
    ray: Any,
    pending: list[dict[str, Any]],
    worker_cls: type,
    max_retries: int,
    rec: Any,
    num_workers: int,
    spawn: Any,
    started: bool,
    start_attempts: int = START_ATTEMPTS,
) -> None:
    from ray.exceptions import RayTaskError

    name = worker_cls.__name__
    actors: list[Any] = [None] * num_workers
    starts = [0] * num_workers  # actors started in each slot since its last one was ready
    booting: dict[Any, int] = {}  # ready() ref -> slot, for actors still building their worker
    lost: list[str] = []
    warming = True  # until every first actor is built (or its slot given up): items wait, as before any loss

    def boot(i: int) -> None:
        actors[i] = spawn(i)
        starts[i] += 1
        booting[actors[i].ready.remote()] = i

    def kill(actor: Any) -> None:
        try:
            ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already dead
            pass

    try:
        for i in range(num_workers):
            boot(i)
        queue: deque[tuple[dict[str, Any], int]] = deque((item, 0) for item in pending)
        idle: deque[int] = deque()
        inflight: dict[Any, tuple[int, dict[str, Any], int]] = {}
        while queue or inflight:
            if warming and not booting:
                warming = False
                rec.workers_ready()
            while queue and idle and not warming:
                i = idle.popleft()
                item, attempts = queue.popleft()
                inflight[actors[i].process.remote(item)] = (i, item, attempts + 1)
            if not inflight and not booting:
                raise WorkerInitError(
                    f"could not start any {name} Ray actor: {len(lost)} lost while starting "
                    f"({start_attempts} per worker; last: {lost[-1] if lost else '?'})"
                )
            ready, _ = ray.wait([*inflight, *booting], num_returns=1)
            ref = ready[0]
            if ref in booting:
                i = booting.pop(ref)
                try:
                    ray.get(ref)
                except RayTaskError as e:  # the constructor raised: a genuine init error, on any actor
                    cause = e.cause if isinstance(e.cause, BaseException) else e
                    if isinstance(cause, UserError):
                        raise cause from None  # the user's mistake (a wrong model name): one line
                    raise WorkerInitError(
                        f"could not construct {name} in a Ray actor: {_one_line(cause)}"
                    ) from None
                except ray.exceptions.RayError as e:  # the actor (or its node) was lost while starting
                    kill(actors[i])
                    lost.append(_one_line(e))
                    if starts[i] < start_attempts:
                        log.warning(
                            "a %s Ray actor was lost while starting (%s); starting another (%d of %d)",
                            name, lost[-1], starts[i] + 1, start_attempts,
                        )  # fmt: skip
                        boot(i)
                    else:
                        actors[i] = None
                        log.warning(
                            "a %s Ray actor was lost while starting (%s), %d times in one slot: "
                            "the job goes on with one worker fewer",
                            name, lost[-1], start_attempts,
                        )  # fmt: skip
                else:
                    starts[i] = 0
                    idle.append(i)
                continue
            i, item, attempts = inflight.pop(ref)
            try:
                result = ray.get(ref)
            except RayTaskError as e:  # the worker raised: the actor is fine
                exc: BaseException = e.cause if isinstance(e.cause, BaseException) else e
                idle.append(i)
            except ray.exceptions.RayError as e:  # the actor died: replace it (idle again once it is built)
                exc = e
                kill(actors[i])
                starts[i] = 0
                boot(i)
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
            if a is not None:
                kill(a)
        if started:
            ray.shutdown()
