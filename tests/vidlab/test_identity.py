"""Content identity: survives renames and mtime changes, notices edits in the sampled chunks and any size
change; the documented blind spot (same-size edit outside the chunks) is caught only with full=True."""

import os
import shutil

import numpy as np

from vidlab.identity import CHUNK, file_fingerprint


def _file(tmp_path, name="a.bin", size=5 * CHUNK + 123):
    p = tmp_path / name
    p.write_bytes(np.random.default_rng(0).integers(0, 256, size, dtype=np.uint8).tobytes())
    return p


def _flip(p, offset):
    b = bytearray(p.read_bytes())
    b[offset] ^= 0xFF
    p.write_bytes(bytes(b))


def test_survives_rename_copy_and_touch(tmp_path):
    p = _file(tmp_path)
    fid = file_fingerprint(p)
    q = shutil.copy(p, tmp_path / "renamed.mp4")
    os.utime(q, (1, 1))
    assert file_fingerprint(q) == fid
    assert file_fingerprint(p, extra={"frames": 10}) != file_fingerprint(p, extra={"frames": 11})


def test_notices_edits_in_sampled_chunks_and_size_changes(tmp_path):
    p = _file(tmp_path)
    fid = file_fingerprint(p)
    size = p.stat().st_size
    for offset in (10, size // 2, size - 5):
        q = shutil.copy(p, tmp_path / f"e{offset}.bin")
        _flip(q, offset)
        assert file_fingerprint(q) != fid
    with open(shutil.copy(p, tmp_path / "longer.bin"), "ab") as f:
        f.write(b"\x00")
    assert file_fingerprint(tmp_path / "longer.bin") != fid


def test_same_size_edit_outside_chunks_needs_full_hash(tmp_path):
    p = _file(tmp_path)
    q = shutil.copy(p, tmp_path / "b.bin")
    _flip(q, int(1.5 * CHUNK))  # between the first and the middle MiB
    assert file_fingerprint(q) == file_fingerprint(p)  # the documented trade-off
    assert file_fingerprint(q, full=True) != file_fingerprint(p, full=True)
