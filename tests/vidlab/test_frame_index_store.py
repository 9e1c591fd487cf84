"""Cache file format: standard safetensors, atomic replace, memory-mapped reads, corruption detection."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vidlab.clip.store import CacheCorruptError, read_arrays, write_arrays


def _arrays(n=5, d=8, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "embeddings": rng.standard_normal((n, d)).astype(np.float16),
        "frame_indices": np.arange(n, dtype=np.int64) * 3,
        "timestamps": np.arange(n, dtype=np.float64) / 8,
    }


def test_round_trip_is_memmapped_and_standard_safetensors(tmp_path):
    from safetensors.numpy import load_file

    p = write_arrays(tmp_path / "x.safetensors", _arrays(), {"key": "k1", "dim": 8})
    arrays, meta = read_arrays(p)
    assert meta == {"key": "k1", "dim": 8}
    assert isinstance(arrays["embeddings"].base, np.memmap) or isinstance(arrays["embeddings"], np.memmap)
    for name, a in _arrays().items():
        np.testing.assert_array_equal(arrays[name], a)
        np.testing.assert_array_equal(load_file(str(p))[name], a)  # other tools can read it
    assert [q.name for q in tmp_path.iterdir()] == ["x.safetensors"]  # no temp files left


def test_rewrite_replaces_atomically(tmp_path):
    p = tmp_path / "x.safetensors"
    write_arrays(p, _arrays(seed=0), {"v": 1})
    old, _ = read_arrays(p)  # a reader holding the old mapping keeps valid data
    old_copy = np.array(old["embeddings"])
    write_arrays(p, _arrays(seed=1), {"v": 2})
    np.testing.assert_array_equal(old["embeddings"], old_copy)
    new, meta = read_arrays(p)
    assert meta["v"] == 2 and not np.array_equal(new["embeddings"], old_copy)


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(min_value=0, max_value=10_000))
def test_any_truncation_is_detected(tmp_path_factory, cut):
    p = tmp_path_factory.mktemp("t") / "x.safetensors"
    write_arrays(p, _arrays(), {"k": 1})
    blob = p.read_bytes()
    p.write_bytes(blob[: cut % len(blob)])
    with pytest.raises(CacheCorruptError):
        read_arrays(p)


@settings(max_examples=40, deadline=None)
@given(pos=st.integers(min_value=0, max_value=10_000), bit=st.integers(min_value=0, max_value=7))
def test_any_flipped_data_bit_is_detected(tmp_path_factory, pos, bit):
    p = tmp_path_factory.mktemp("f") / "x.safetensors"
    write_arrays(p, _arrays(), {"k": 1})
    blob = bytearray(p.read_bytes())
    header_end = 8 + int.from_bytes(blob[:8], "little")
    i = header_end + pos % (len(blob) - header_end)
    blob[i] ^= 1 << bit
    p.write_bytes(bytes(blob))
    with pytest.raises(CacheCorruptError, match="checksum"):
        read_arrays(p)


def test_foreign_safetensors_file_not_trusted(tmp_path):
    from safetensors.numpy import save_file

    p = tmp_path / "foreign.safetensors"
    save_file({"embeddings": np.zeros((2, 2), np.float16)}, str(p))
    with pytest.raises(CacheCorruptError, match="not a vidlab"):
        read_arrays(p)


def test_read_arrays_names_a_fifo_and_never_blocks_on_it(tmp_path):
    import os
    import threading

    from vidlab.clip.store import CacheCorruptError, read_arrays

    fifo = tmp_path / "cache.safetensors"
    os.mkfifo(fifo)
    result = {}

    def attempt():
        try:
            read_arrays(fifo)
        except CacheCorruptError as e:
            result["error"] = str(e)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(timeout=20)
    if t.is_alive():
        with open(fifo, "wb"):
            pass
        raise AssertionError("read_arrays blocked on a FIFO")
    assert "named pipe (FIFO)" in result["error"] and "truncated" not in result["error"]


def test_collect_videos_keeps_a_symlink_loop_for_open_video_to_report(tmp_path):
    from vidlab.clip.indexing import collect_videos

    loop = tmp_path / "loop.mp4"
    loop.symlink_to(loop)
    assert collect_videos([str(loop)]) == [loop]
