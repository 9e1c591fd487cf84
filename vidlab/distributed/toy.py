"""Small workers for tests, demos and benchmarks of the executor (importable by Ray worker processes)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

# How long a worker that a test means to kill waits for its killer: a hang guard only, reached when the test
# failed anyway (the test kills it on a state, a marker file, however long the machine takes to get there)
KILL_GUARD_S = 600.0


def wait_while(path: str | None) -> None:
    """Block while the file ``path`` exists (a test holds a worker mid-item in a known state), up to the guard."""
    deadline = time.monotonic() + KILL_GUARD_S
    while path and Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.05)


class EchoWorker:
    """Returns the item's ``value`` squared; counts its constructions in ``init_dir`` (one file per build).
    With ``hold_file``, every item waits while that file exists (a test stops the job in a known state)."""

    def __init__(self, init_dir: str | None = None, sleep: float = 0.0, hold_file: str | None = None) -> None:
        self.sleep = sleep
        self.hold_file = hold_file
        self.pid = os.getpid()
        if init_dir:
            Path(init_dir).mkdir(parents=True, exist_ok=True)
            (Path(init_dir) / f"init-{self.pid}-{time.monotonic_ns()}").touch()

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        wait_while(self.hold_file)
        if self.sleep:
            time.sleep(self.sleep)
        return {"square": int(item["value"]) ** 2, "pid": self.pid}


class FlakyWorker(EchoWorker):
    """Raises for items whose ``fail`` flag is set unless the file ``fix_file`` exists (a fixable fault);
    for items with ``hang_once``, the first attempt writes ``marker`` (with the actor name) and sleeps, so
    a test can ``ray.kill`` the actor mid-item."""

    def __init__(self, init_dir: str | None = None, fix_file: str | None = None, sleep: float = 0.0) -> None:
        super().__init__(init_dir, sleep)
        self.fix_file = fix_file

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        if item.get("fail") and not (self.fix_file and Path(self.fix_file).exists()):
            raise ValueError(f"item {item['id']} failed on purpose")
        marker = item.get("hang_once")
        if marker and not Path(marker).exists():
            name = ""
            try:
                import ray

                name = ray.get_runtime_context().get_actor_name() or ""
            except Exception:  # noqa: BLE001 - not in Ray
                pass
            from vidlab.io import atomic_write_text

            atomic_write_text(marker, name)
            time.sleep(KILL_GUARD_S)  # killed before this returns (a hang guard)
        return super().process(item)


class CrashWorker(EchoWorker):
    """Kills its own process on items with ``crash`` set (a worker that dies, e.g. of OOM). It lives here,
    not in a test module, because Ray worker processes must be able to import it."""

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        if item.get("crash"):
            os._exit(3)
        return super().process(item)


class SlowStartWorker(EchoWorker):
    """A worker whose first builds hang: a build that creates one of ``hang_files`` (the first it can create,
    writing its PID there) sleeps in ``__init__`` so that a test can kill -9 the process while the Ray actor is
    being built; once every file exists, builds start at once. With ``crash`` every build kills its own process
    (an actor that can never start). ``inner`` (``"module:Class"``) with ``inner_kwargs`` makes it build and serve that worker instead of the
    echo (e.g. the real ``vidlab.clip.indexing:IndexWorker``). With ``fail`` the constructor raises a
    ``UserError`` instead: a genuine init error, like a wrong model name."""

    def __init__(
        self,
        init_dir: str | None = None,
        hang_files: list[str] | None = None,
        fail: bool = False,
        crash: bool = False,
        inner: str | None = None,
        inner_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if fail:
            from vidlab.errors import UserError

            raise UserError("unknown model 'no-such-model' (a constructor that fails on purpose)")
        if crash:
            os._exit(3)
        for hang_file in hang_files or []:
            try:
                fd = os.open(hang_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            time.sleep(KILL_GUARD_S)  # killed before this returns (a hang guard)
        super().__init__(init_dir)
        self.inner: Any = None
        if inner:
            from importlib import import_module

            module, _, cls = inner.partition(":")
            self.inner = getattr(import_module(module), cls)(**(inner_kwargs or {}))

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        return self.inner.process(item) if self.inner is not None else super().process(item)
