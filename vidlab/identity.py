"""Content identity of files (videos, weights, data): cheap to compute, survives renames, notices edits.

The ground floor under jobs (``vidlab.distributed``), caches (``vidlab.clip``) and classification::

    from vidlab.identity import file_fingerprint, fingerprint_file, fingerprint_inputs, fingerprint_or_none

``file_fingerprint`` hashes the file size plus three 1 MiB chunks (first, middle, last) with SHA-256,
optionally mixed with caller-supplied metadata (the video's stream metadata). It costs at most 3 MiB
of reads however large the file is, and it does not look at the name or the mtime, so a renamed or
copied file keeps its identity. Trade-off: an edit that keeps the size and touches none of the three
chunks goes unnoticed; stream metadata (frame count, fps, size) catches re-encodes. Set
``VIDLAB_FULL_HASH=1`` (or pass ``full=True``) to hash every byte when that matters more than speed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CHUNK = 1 << 20
SCHEME = "sha256-size-3x1MiB-v1"


def file_fingerprint(
    path: str | os.PathLike, extra: dict[str, Any] | None = None, full: bool | None = None
) -> str:
    """Hex SHA-256 of size + first/middle/last MiB (or every byte when ``full``) + ``extra`` metadata."""
    full = os.environ.get("VIDLAB_FULL_HASH", "0") == "1" if full is None else full
    p = Path(path)
    size = p.stat().st_size
    h = hashlib.sha256()
    h.update(f"{SCHEME if not full else 'sha256-full-v1'}|{size}|".encode())
    with open(p, "rb") as f:
        if full or size <= 3 * CHUNK:
            for block in iter(lambda: f.read(8 * CHUNK), b""):
                h.update(block)
        else:
            for offset in (0, size // 2 - CHUNK // 2, size - CHUNK):
                f.seek(offset)
                h.update(f.read(CHUNK))
    if extra:
        h.update(json.dumps(extra, sort_keys=True, default=str).encode())
    return h.hexdigest()


def fingerprint_or_none(path: str | os.PathLike) -> str | None:
    """:func:`file_fingerprint` of ``path``, or None when it cannot be read (a job's worker then records why)."""
    try:
        return file_fingerprint(path)
    except Exception:  # noqa: BLE001 - a missing/unreadable input becomes that item's error record
        return None


def fingerprint_file(path: str | os.PathLike, full: bool | None = None) -> dict[str, Any]:
    """Content fingerprint of one input file: ``{"sha256": ..., "size": ...}`` (:func:`file_fingerprint`:
    size + three 1 MiB chunks, or every byte with ``full``/VIDLAB_FULL_HASH=1).
    It ignores the name and mtime, so a copy or a rename keeps its identity and an edit changes it.
    Raises :class:`vidlab.io.InputFileError` (a UserError) when the path is not a readable file."""
    from vidlab.io import require_regular_file

    p = require_regular_file(path, what="input", allow_empty=True)
    return {"sha256": file_fingerprint(p, full=full), "size": p.stat().st_size}


def fingerprint_folder(path: str | os.PathLike) -> dict[str, Any]:
    """Fingerprint of a folder input (a benchmark's data folder): SHA-256 over the sorted relative
    names and sizes of every file under it. Cheap on datasets of thousands of videos; it notices added,
    removed, renamed and resized files, not an edit that keeps a file's size (fingerprint those files
    with :func:`fingerprint_file` when that matters)."""
    root = Path(path)
    h = hashlib.sha256(b"vidlab-folder-listing-v1|")
    n = 0
    for p in sorted(q for q in root.rglob("*") if q.is_file()):
        h.update(f"{p.relative_to(root).as_posix()}|{p.stat().st_size}\n".encode())
        n += 1
    return {"listing_sha256": h.hexdigest(), "files": n}


def fingerprint_path(path: str | os.PathLike) -> dict[str, Any]:
    """:func:`fingerprint_folder` for a folder, else :func:`fingerprint_file`."""
    return fingerprint_folder(path) if Path(path).is_dir() else fingerprint_file(path)


def fingerprint_inputs(**inputs: str | os.PathLike | Sequence[str | os.PathLike] | None) -> dict[str, Any]:
    """``fingerprint_inputs(data="q.jsonl", videos=[a, b])`` -> ``{"data": {...}, "videos": [{...}, {...}]}``;
    folders get :func:`fingerprint_folder`; ``None`` values are kept as ``None`` (an absent optional input
    is part of the identity too)."""
    out: dict[str, Any] = {}
    for name, value in inputs.items():
        if value is None:
            out[name] = None
        elif isinstance(value, (str, os.PathLike)):
            out[name] = fingerprint_path(value)
        else:
            out[name] = [fingerprint_path(v) for v in value]
    return out
