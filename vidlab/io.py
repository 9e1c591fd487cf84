"""The one atomic-write helper: every output file goes through here.

A file is written to a unique temporary name beside its target, flushed and fsynced, then
``os.replace``d over the target, so a reader sees the old file or the new one, never half of one.
Temporaries are named ``.{name}.{pid}.{random}.tmp`` so that :func:`sweep_stale` can find the ones
a killed run left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from vidlab.errors import UserError

TMP_SUFFIX = ".tmp"


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}")


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8"
) -> Iterator[IO[Any]]:
    """Open a temporary file for writing; on a clean exit it replaces ``path`` atomically.

    ``mode`` is ``"w"`` (text) or ``"wb"`` (bytes). On an exception the temporary is removed and the
    target is left untouched. Parent folders are created.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open mode must be 'w' or 'wb', got {mode!r}")
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_name(target)
    f = open(tmp, mode, encoding=None if "b" in mode else encoding)  # noqa: SIM115
    try:
        yield f
        f.flush()
        os.fsync(f.fileno())
        f.close()
        os.replace(tmp, target)
        _fsync_dir(target.parent)
    except BaseException:
        f.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    with atomic_open(path, "wb") as f:
        f.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    with atomic_open(path, "w") as f:
        f.write(text)
    return Path(path)


def atomic_write_json(path: str | os.PathLike, obj: Any, indent: int | None = 2) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=indent, default=str) + "\n")


def atomic_tmp_path(path: str | os.PathLike) -> Path:
    """A unique temporary path beside ``path`` for writers that need a file name (video muxers,
    ``savefig``, ``np.save``); finish with :func:`commit_tmp`. The name keeps the target's suffix so
    that format-by-extension writers still work."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    return target.with_name(f".{target.stem}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}{target.suffix}")


def commit_tmp(tmp: str | os.PathLike, path: str | os.PathLike) -> Path:
    """fsync ``tmp`` and atomically move it over ``path``."""
    tmp, target = Path(tmp), Path(path)
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, target)
    _fsync_dir(target.parent)
    return target


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path (same suffix) to write by name; it replaces ``path`` on a clean exit."""
    tmp = atomic_tmp_path(path)
    try:
        yield tmp
        commit_tmp(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def is_temporary(name: str) -> bool:
    return name.startswith(".") and (name.endswith(TMP_SUFFIX) or f"{TMP_SUFFIX}." in name)


def sweep_stale(
    folder: str | os.PathLike, older_than_s: float = 0.0, locks: bool = False, keep: tuple[str, ...] = ()
) -> list[Path]:
    """Remove temporaries left by killed writers in ``folder`` (not recursive) whose pid is dead or
    that are older than ``older_than_s``; with ``locks``, also empty ``*.lock`` files that nobody holds
    (names in ``keep`` are left alone). Returns what was removed."""
    removed: list[Path] = []
    d = Path(folder)
    if not d.is_dir():
        return removed
    now = time.time()
    for p in d.iterdir():
        if p.name in keep:
            continue
        if locks and p.name.endswith(".lock") and _sweep_lock(p):
            removed.append(p)
            continue
        if not p.is_file() or not is_temporary(p.name):
            continue
        pid = _writer_pid(p.name)
        if pid == os.getpid():
            continue
        alive = pid is not None and _pid_alive(pid)
        try:
            old = older_than_s > 0 and now - p.stat().st_mtime > older_than_s
        except FileNotFoundError:
            continue
        if not alive or old:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
                removed.append(p)
    return removed


def _writer_pid(name: str) -> int | None:
    """The writer's pid in a temporary's name: ``.NAME.PID.HEX.tmp`` or ``.STEM.PID.HEX.tmp.EXT``, i.e. two
    tokens before the last ``tmp`` (counting from the marker, so an all-digit HEX is never taken for it)."""
    parts = name.split(".")
    marker = len(parts) - 1 - parts[::-1].index("tmp") if "tmp" in parts else -1
    token = parts[marker - 2] if marker >= 3 else ""
    return int(token) if token.isdigit() else None


def _sweep_lock(p: Path) -> bool:
    """Delete an empty lock file if it can be taken at once (so no process holds it)."""
    import filelock

    try:
        if not p.is_file() or p.is_symlink() or p.stat().st_size != 0:
            return False
    except OSError:
        return False
    lock = filelock.FileLock(str(p), timeout=0)
    try:
        lock.acquire(timeout=0)
    except (filelock.Timeout, OSError):
        return False
    try:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()  # while held: a process that opened the old inode cannot take it in between
    finally:
        lock.release()
    return not p.exists()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class OutputDirError(UserError):
    """An output folder that cannot be created or written (permissions, a file in the way, read-only disk)."""


def ensure_output_dir(folder: str | os.PathLike) -> Path:
    """Create ``folder`` (and parents) if needed and check it is writable, or raise :class:`OutputDirError`
    naming it and the reason. Call it after validating the inputs and before writing the first output."""
    out = Path(folder)
    if out.exists() and not out.is_dir():
        raise OutputDirError(
            f"output folder {str(out)!r} is a file, not a folder; choose another output folder"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputDirError(
            f"cannot create output folder {str(out)!r}: {e.strerror or e}; choose a writable output folder"
        ) from e
    if not os.access(out, os.W_OK | os.X_OK):
        raise OutputDirError(
            f"output folder {str(out)!r} is not writable (permission denied); choose another output folder"
        )
    return out


class InputFileError(UserError):
    """An input path that cannot be read as a regular file; ``.path`` and ``.reason`` say why."""

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.reason))


def file_problem(path: str | os.PathLike, allow_empty: bool = False) -> str | None:
    """Why ``path`` cannot be read as a regular file (without opening it, so a FIFO never blocks),
    or ``None`` when it can. The reasons are true ones: a FIFO is not "empty", a symlink loop is not
    "missing"."""
    import errno
    import stat

    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink loop (the link points back to itself)"
        if exc.errno == errno.ENOENT:
            if p.is_symlink():
                return f"broken symlink (points to {os.readlink(p)!r}, which does not exist)"
            return "no such file"
        if exc.errno == errno.EACCES:
            return "permission denied"
        if exc.errno == errno.ENOTDIR:
            return "a parent of this path is not a folder"
        return exc.strerror or str(exc)
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    if stat.S_ISFIFO(mode):
        return "is a named pipe (FIFO), not a regular file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a regular file"
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    if not os.access(p, os.R_OK):
        return "permission denied"
    if st.st_size == 0 and not allow_empty:
        return "is an empty file (0 bytes)"
    return None


def require_regular_file(path: str | os.PathLike, what: str = "file", allow_empty: bool = False) -> Path:
    """Return ``Path(path)`` if it is a readable regular file, else raise :class:`InputFileError`
    naming ``what`` and the true reason. Call this before ``open()`` on any user-given path."""
    reason = file_problem(path, allow_empty=allow_empty)
    if reason is not None:
        raise InputFileError(path, f"cannot read {what}: {reason}")
    return Path(path)


# ------------------------------------------------------------------------------------------- checkpoints
CHECKPOINT_FORMAT = "vidlab-checkpoint-v1"


class CheckpointError(UserError):
    """A checkpoint that is not a vidlab safetensors checkpoint (e.g. a pickle), or a state it cannot hold."""


def _split_state(obj: Any, path: str, tensors: dict[str, Any], seen: dict[int, str]) -> Any:
    """The JSON skeleton of ``obj``; its tensors go into ``tensors`` under numbered keys."""
    import torch

    if isinstance(obj, torch.Tensor):
        key = f"{len(tensors)}:{path}"
        t = obj.detach().to("cpu").contiguous()
        ptr = t.untyped_storage().data_ptr() if t.numel() else None
        if ptr is not None and ptr in seen:  # safetensors refuses tensors sharing memory (tied weights)
            t = t.clone()
        elif ptr is not None:
            seen[ptr] = key
        tensors[key] = t
        return {"__tensor__": key}
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: _split_state(v, f"{path}.{k}", tensors, seen) for k, v in obj.items()}
        # an optimizer's state is keyed by int parameter ids: keep the key types
        return {"__items__": [[k, _split_state(v, f"{path}.{k}", tensors, seen)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [_split_state(v, f"{path}.{i}", tensors, seen) for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_split_state(v, f"{path}.{i}", tensors, seen) for i, v in enumerate(obj)]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise CheckpointError(
        f"checkpoint value at {path.lstrip('.') or '<root>'} is a {type(obj).__name__}; a checkpoint holds "
        "tensors, dicts, lists, tuples and JSON scalars only"
    )


def _join_state(obj: Any, tensors: dict[str, Any]) -> Any:
    if isinstance(obj, list):
        return [_join_state(v, tensors) for v in obj]
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__items__" in obj:
            return {k: _join_state(v, tensors) for k, v in obj["__items__"]}
        if "__tuple__" in obj:
            return tuple(_join_state(v, tensors) for v in obj["__tuple__"])
        return {k: _join_state(v, tensors) for k, v in obj.items()}
    return obj


def save_checkpoint(state: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write a training checkpoint atomically as one safetensors file.

    ``state`` is a dict of tensors, nested dicts (``model.state_dict()``, ``optimizer.state_dict()``),
    lists, tuples and JSON scalars (step, losses, captions, an identity mapping). The tensors are stored
    as safetensors tensors, the rest as JSON in the file's metadata, so loading never unpickles
    (:func:`load_checkpoint`). A killed writer leaves the previous checkpoint whole."""
    from safetensors.torch import save_file

    tensors: dict[str, Any] = {}
    skeleton = _split_state(state, "", tensors, {})
    meta = {"format": "pt", "vidlab": CHECKPOINT_FORMAT, "state": json.dumps(skeleton)}
    target = Path(path)
    tmp = atomic_tmp_path(target)
    try:
        save_file(tensors, str(tmp), metadata=meta)
        return commit_tmp(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def load_checkpoint(path: str | os.PathLike, device: str = "cpu") -> dict[str, Any]:
    """The state :func:`save_checkpoint` wrote (tensors on ``device``). A file that is not such a
    checkpoint (a pickled ``torch.save`` file, a truncated write) is a :class:`CheckpointError`."""
    from safetensors import safe_open

    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"{p}: no checkpoint there")
    try:
        with safe_open(str(p), framework="pt", device=device) as f:
            meta = f.metadata() or {}
            if meta.get("vidlab") != CHECKPOINT_FORMAT:
                raise CheckpointError(f"{p}: a safetensors file, but not a vidlab checkpoint")
            tensors = {k: f.get_tensor(k) for k in list(f.keys())}
    except CheckpointError:
        raise
    except Exception as e:  # noqa: BLE001 - safetensors raises its own error types for foreign files
        raise CheckpointError(
            f"{p}: not a safetensors checkpoint ({type(e).__name__}: {e}); vidlab never unpickles "
            "checkpoints: delete it (training then starts that stage over) or point elsewhere"
        ) from e
    return _join_state(json.loads(meta["state"]), tensors)
