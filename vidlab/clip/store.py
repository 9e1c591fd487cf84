"""Cache files for frame indices: safetensors layout, atomic writes, memory-mapped and verified reads.

A file is a standard safetensors file (readable by ``safetensors.numpy.load_file``) whose header metadata
holds ``vidlab`` (JSON) and ``vidlab_sha256``: the SHA-256 of every tensor's name, dtype, shape and bytes
in name order. Reading parses the header itself and maps the data with ``np.memmap`` (no copy); with
``verify=True`` it re-hashes the data, so a truncated file, a flipped byte or a foreign file raises
:class:`CacheCorruptError` and is never trusted. Writes go to a temp file in the same folder, are
fsynced, then ``os.replace``d over the target, so readers see the old file or the new one, never half.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "vidlab-frame-index"
_DTYPES = {
    "F16": np.float16,
    "F32": np.float32,
    "F64": np.float64,
    "I64": np.int64,
    "I32": np.int32,
    "U8": np.uint8,
}
MAX_HEADER = 100 << 20


class CacheCorruptError(Exception):
    """A cache file that is truncated, altered or not ours; ``.path`` and ``.reason`` say which and why."""

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"corrupt cache file {self.path!r}: {reason}")

    def __reduce__(self):
        return (type(self), (self.path, self.reason))


def _digest(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = arrays[name]
        h.update(f"{name}|{a.dtype.str}|{tuple(a.shape)}|".encode())
        h.update(memoryview(np.ascontiguousarray(a)).cast("B"))
    return h.hexdigest()


def write_arrays(path: str | os.PathLike, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Path:
    """Atomically write ``arrays`` + ``meta`` to ``path`` (temp file, fsync, os.replace)."""
    from safetensors.numpy import save

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    header = {"format": FORMAT, "vidlab": json.dumps(meta, sort_keys=True), "vidlab_sha256": _digest(arrays)}
    blob = save(arrays, metadata=header)
    from vidlab.io import atomic_write_bytes

    atomic_write_bytes(path, blob)  # temporary beside it, fsync, os.replace, fsync of the folder
    return path


def read_arrays(path: str | os.PathLike, verify: bool = True) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Memory-map a cache file's arrays (read-only) and return them with the metadata; checks integrity."""
    path = Path(path)
    from vidlab.io import file_problem

    problem = file_problem(
        path, allow_empty=True
    )  # never open a FIFO (it would block) or call it "truncated"
    if problem == "no such file":
        raise FileNotFoundError(str(path))
    if problem is not None:
        raise CacheCorruptError(path, problem)
    size = path.stat().st_size
    if size < 8:
        raise CacheCorruptError(path, f"only {size} bytes (truncated)")
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > min(size - 8, MAX_HEADER):
            raise CacheCorruptError(
                path, f"header length {n} exceeds the file ({size} bytes): truncated or not a cache"
            )
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CacheCorruptError(path, f"unreadable header ({e})") from e
    if not isinstance(header, dict):
        raise CacheCorruptError(path, "header is not a mapping")
    info = header.pop("__metadata__", None) or {}
    if info.get("format") != FORMAT or "vidlab_sha256" not in info:
        raise CacheCorruptError(path, "not a vidlab frame-index file (format tag missing)")
    try:
        meta = json.loads(info["vidlab"])
    except (KeyError, json.JSONDecodeError) as e:
        raise CacheCorruptError(path, f"metadata unreadable ({e})") from e
    data_start = 8 + n
    data_len = size - data_start
    mm = np.memmap(path, dtype=np.uint8, mode="r") if data_len > 0 else np.zeros(0, np.uint8)
    arrays: dict[str, np.ndarray] = {}
    for name, spec in header.items():
        try:
            dtype = np.dtype(_DTYPES[spec["dtype"]])
            shape = tuple(int(s) for s in spec["shape"])
            begin, end = (int(x) for x in spec["data_offsets"])
        except (KeyError, TypeError, ValueError) as e:
            raise CacheCorruptError(path, f"tensor {name!r} has a bad header entry ({e})") from e
        if end > data_len or begin > end or end - begin != int(np.prod(shape)) * dtype.itemsize:
            raise CacheCorruptError(path, f"tensor {name!r} runs past the end of the file (truncated)")
        if end == begin:
            arrays[name] = np.zeros(shape, dtype)
        else:
            arrays[name] = mm[data_start + begin : data_start + end].view(dtype).reshape(shape)
    if verify and _digest(arrays) != info["vidlab_sha256"]:
        raise CacheCorruptError(path, "checksum mismatch (bytes changed after writing)")
    return arrays, meta


@contextlib.contextmanager
def file_lock(path: str | os.PathLike) -> Iterator[None]:
    """Exclusive advisory lock (``.locks/<name>.lock`` beside ``path``) so concurrent writers take turns."""
    path = Path(path)
    lock = path.parent / ".locks" / f"{path.name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
