"""The pipelined indexer (vidlab/clip/pipeline.py): bit-identical to the serial path, bounded under a slow encoder
or a slow decoder, a decode error is one video's error record, Ctrl-C stops every worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from vidlab.clip import FrameIndex, load_model
from vidlab.clip.pipeline import PipelineConfig, PipelineStats, plan
from vidlab.video import VideoReadError, open_video

pytestmark = pytest.mark.needs("ffmpeg")  # the videos are made by Debian's ffmpeg CLI
HANG_GUARD_S = 300  # a join deadline that only a hang reaches: not a timing assertion


def ffmpeg_video(path: Path, frames: int, gop: int, size: str = "160x120", fps: int = 30, extra=()) -> Path:
    """A test pattern encoded by Debian's ffmpeg CLI (libx264, B-frames, fixed GOP)."""
    if not path.exists():
        subprocess.run(
            ["ffmpeg", "-nostdin", "-y", "-loglevel", "error", "-f", "lavfi",
             "-i", f"testsrc2=size={size}:rate={fps}", "-frames:v", str(frames), "-c:v", "libx264",
             "-preset", "veryfast", "-g", str(gop), "-keyint_min", str(gop), "-sc_threshold", "0",
             "-pix_fmt", "yuv420p", *extra, str(path)],
            check=True,
        )  # fmt: skip
    return path


@pytest.fixture(scope="module")
def model():
    return load_model("vidlab-tiny", device="cpu")


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipe")
    return {
        "gop30_odd": ffmpeg_video(root / "gop30.mp4", 277, 30),
        "gop250_odd": ffmpeg_video(root / "gop250.mp4", 301, 250, size="321x179"),
        "gop250_mkv": ffmpeg_video(root / "gop250.mkv", 151, 250),
        "gop12_open": ffmpeg_video(
            root / "open.mp4", 133, 12, extra=("-x264-params", "open-gop=1:bframes=4")
        ),
    }


def _arrays(idx: FrameIndex) -> dict[str, np.ndarray]:
    return {
        "embeddings": np.asarray(idx.embeddings).view(np.uint16),  # the bytes, not approximately
        "frame_indices": np.asarray(idx.frame_indices),
        "timestamps": np.asarray(idx.timestamps),
    }


@pytest.mark.parametrize("name", ["gop30_odd", "gop250_odd", "gop250_mkv", "gop12_open"])
@pytest.mark.parametrize(
    "sampling,batch,cfg",
    [
        ("every=1", 16, PipelineConfig(decode_workers=2, queue_depth=2)),
        ("every=7", 5, PipelineConfig(decode_workers=3, queue_depth=1)),
        ("fps=2", 64, PipelineConfig(decode_workers=2, queue_depth=4)),
    ],
)
def test_pipeline_is_bit_identical_to_the_serial_path(videos, model, tmp_path, name, sampling, batch, cfg):
    serial = FrameIndex.build(
        videos[name], model, sampling, tmp_path / "serial", batch_size=batch, progress=False,
        pipeline=PipelineConfig(decode_workers=0),
    )  # fmt: skip
    st = PipelineStats()
    piped = FrameIndex.build(
        videos[name], model, sampling, tmp_path / "piped", batch_size=batch, pipeline=cfg, stats=st,
        progress=False,
    )  # fmt: skip
    assert piped.key == serial.key and piped.path.name == serial.path.name
    a, b = _arrays(serial), _arrays(piped)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    # every asked-for frame decoded once and encoded once, in the serial path's batches
    n = len(serial)
    assert st.frames_decoded == st.frames_encoded == n and st.encode_calls == -(-n // batch)


def test_segments_are_whole_keyframe_intervals_and_pieces_stay_inside_one_batch():
    frames = np.arange(0, 1000, 3)
    keys = (frames // 250) * 250
    segs = plan(frames, keys, 16)
    flat = [p for s in segs for p in s]
    assert [p[0] for p in flat] == list(range(len(flat)))  # numbered in file order
    assert flat[0][1] == 0 and flat[-1][2] == frames.size
    assert all(flat[i][2] == flat[i + 1][1] for i in range(len(flat) - 1))  # contiguous, disjoint
    for _, a, b in flat:
        assert (a // 16) == ((b - 1) // 16)  # one batch
    for seg in segs:  # no keyframe interval is split between two segments
        first, last = seg[0][1], seg[-1][2]
        assert first == 0 or keys[first] != keys[first - 1]
        assert last == frames.size or keys[last] != keys[last - 1]


class SlowEncoder:
    """The real model, slowed down; it records how far decoding ran ahead at every batch."""

    def __init__(self, model, stats: PipelineStats, delay: float, interrupt_at: int | None = None):
        self._model, self._stats, self._delay = model, stats, delay
        self.ahead: list[int] = []
        self.interrupt_at = interrupt_at
        self.calls = 0

    def embed_images(self, frames, progress=None):
        self.calls += 1
        if self.interrupt_at is not None and self.calls == self.interrupt_at:
            raise KeyboardInterrupt
        time.sleep(self._delay)
        self.ahead.append(self._stats.frames_decoded - self._stats.frames_encoded)
        return self._model.embed_images(frames, progress=progress)

    def __getattr__(self, name):
        return getattr(self._model, name)


def test_queue_stays_bounded_under_a_slow_encoder(videos, model):
    from vidlab.clip.frame_index import decode_size, embed_frames

    cfg, bs = PipelineConfig(decode_workers=2, queue_depth=2), 8
    st = PipelineStats()
    slow = SlowEncoder(model, st, delay=0.05)
    with open_video(videos["gop30_odd"]) as r:
        frames = np.arange(r.num_frames)
        out = embed_frames(r, slow, frames, batch_size=bs, pipeline=cfg, stats=st, progress=False)
        ref = embed_frames(r, model, frames, batch_size=bs, progress=False)
        frame_bytes = r.get_frames([0], size=decode_size(model, r.width, r.height)).nbytes
    np.testing.assert_array_equal(out.view(np.uint16), ref.view(np.uint16))
    window = 2 * st.workers
    assert st.max_queued_batches <= cfg.queue_depth
    assert st.max_pending_pieces <= window
    # decoded-but-not-encoded frames never exceed the pool + the window: memory is bounded by the knobs
    assert max(slow.ahead) <= (cfg.queue_depth + 2 + window) * bs
    assert st.buffer_bytes == (cfg.queue_depth + 2) * bs * frame_bytes  # a fixed pool
    assert max(slow.ahead) >= cfg.queue_depth * bs  # it did run ahead (the queue filled)


def test_a_slow_decoder_holds_the_others_to_the_window(videos, model, monkeypatch):
    """One of three decoders is slow: the fast ones may not pile up pieces beyond the window."""
    import vidlab.video.segments as segments
    from vidlab.clip.frame_index import embed_frames

    real = segments.independent_reader
    made: list[int] = []

    class Slow:
        def __init__(self, reader):
            self._r = reader

        def get_frames(self, idx, size=None):
            time.sleep(0.1)
            return self._r.get_frames(idx, size=size)

        def __getattr__(self, name):
            return getattr(self._r, name)

    def slow_first(reader):
        made.append(1)
        dec = real(reader)
        return Slow(dec) if len(made) == 1 else dec

    monkeypatch.setattr(segments, "independent_reader", slow_first)
    cfg, bs = PipelineConfig(decode_workers=3, queue_depth=1), 4
    st = PipelineStats()
    with open_video(videos["gop30_odd"]) as r:
        frames = np.arange(0, r.num_frames, 2)
        out = embed_frames(r, model, frames, batch_size=bs, pipeline=cfg, stats=st, progress=False)
        ref = embed_frames(r, model, frames, batch_size=bs, progress=False)
    np.testing.assert_array_equal(out.view(np.uint16), ref.view(np.uint16))
    assert len(made) == 3 and st.max_pending_pieces <= 2 * 3 and st.max_queued_batches <= 1


def test_a_decode_error_in_one_segment_is_that_videos_error_record(videos, tmp_path, monkeypatch):
    """A decoder failing in the middle of one video's segment: that video gets an error record, the others are
    indexed, and nothing hangs (the join deadline is a hang guard only)."""
    import vidlab.video.segments as segments
    from vidlab.clip.indexing import IndexConfig, index_videos
    from vidlab.distributed import RunConfig

    bad = videos["gop250_odd"]
    real = segments.independent_reader

    class Failing:
        def __init__(self, reader):
            self._r = reader

        def get_frames(self, idx, size=None):
            if int(np.max(idx)) >= 250:  # the second keyframe interval
                raise VideoReadError(self._r.path, "decoding failed after frame 249: corrupt slice (test)")
            return self._r.get_frames(idx, size=size)

        def __getattr__(self, name):
            return getattr(self._r, name)

    def reader_for(reader):
        dec = real(reader)
        return Failing(dec) if Path(reader.path) == bad else dec

    monkeypatch.setattr(segments, "independent_reader", reader_for)
    cfg = IndexConfig(
        cache_dir=str(tmp_path / "idx"), model="vidlab-tiny", sampling="every=5", device="cpu",
        batch_size=8, run=RunConfig(retries=1),
    )  # fmt: skip
    vids = [videos["gop30_odd"], bad, videos["gop250_mkv"]]
    box: dict = {}
    t = threading.Thread(target=lambda: box.update(r=index_videos(vids, cfg, progress=False)), daemon=True)
    t.start()
    t.join(HANG_GUARD_S)
    assert not t.is_alive(), "index_videos hung on a decode error"
    report = box["r"]
    assert (report.videos, report.indexed, report.failures) == (3, 2, 1)
    err = report.errors[0]
    assert err["id"] == str(bad.resolve()) and err["type"] == "VideoReadError" and err["attempts"] == 2
    assert "frame 249" in err["message"]
    assert not [th for th in threading.enumerate() if th.name.startswith("vidlab-index-")]


def test_keyboard_interrupt_in_the_encoder_stops_every_thread(videos, model):
    from vidlab.clip.frame_index import embed_frames

    st = PipelineStats()
    slow = SlowEncoder(model, st, delay=0.0, interrupt_at=2)
    with open_video(videos["gop30_odd"]) as r, pytest.raises(KeyboardInterrupt):
        embed_frames(
            r,
            slow,
            np.arange(r.num_frames),
            batch_size=8,
            pipeline=PipelineConfig(3, 2),
            stats=st,
            progress=False,
        )
    assert not [th for th in threading.enumerate() if th.name.startswith("vidlab-index-")]


def _descendants(pid: int) -> list[int]:
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _ctrl_c_reaches_it() -> None:
    """In the child: SIGINT as a terminal's Ctrl-C finds it. A test run started in the background (``make test &``,
    a CI step) inherits SIGINT ignored from the shell, and Python then keeps ignoring it: the signal would be lost."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_vidlab_index_and_all_its_workers(tmp_path):
    """SIGINT to a running `vidlab index`: exit status 130, no process of it left, no cache file written; a
    rerun then indexes the video."""
    import psutil

    video = ffmpeg_video(tmp_path / "long.mp4", 300, 250, size="320x180")
    marker, hold = tmp_path / "started", tmp_path / "hold"
    hold.touch()  # the encoder waits while it exists: the signal lands on a running index, however busy the machine
    env = {**os.environ, "VIDLAB_PIPELINE_STARTED_FILE": str(marker), "VIDLAB_PIPELINE_HOLD_FILE": str(hold),
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    cmd = [sys.executable, "-m", "vidlab.cli", "index", str(video), "--cache-dir", str(tmp_path / "idx"),
           "--sampling", "every=1", "--device", "cpu", "--batch-size", "8", "--decode-workers", "2", "--quiet"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_ctrl_c_reaches_it
    )
    try:
        deadline = time.monotonic() + HANG_GUARD_S
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), proc.communicate()[1][-2000:]
        assert proc.poll() is None, "the held index exited before the signal"
        threads = psutil.Process(proc.pid).num_threads()
        kids = _descendants(proc.pid)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err and "Traceback" not in err
    assert threads >= 4  # the decode workers and the assembler were running when it was stopped
    assert not [k for k in kids if psutil.pid_exists(k)]
    assert not list((tmp_path / "idx").glob("*.safetensors"))


def test_kill_9_during_vidlab_index_then_a_rerun_is_bit_identical_to_a_clean_run(videos, tmp_path):
    """SIGKILL while the pipeline runs leaves no half cache; the rerun gives the clean run's bytes."""
    video = videos["gop250_odd"]
    marker, hold = tmp_path / "started", tmp_path / "hold"
    hold.touch()  # the encoder waits while it exists: the kill lands mid-run, never after a finished one
    env = {**os.environ, "VIDLAB_PIPELINE_STARTED_FILE": str(marker), "VIDLAB_PIPELINE_HOLD_FILE": str(hold),
           "OMP_NUM_THREADS": "1"}  # fmt: skip

    def cmd(cache):
        return [sys.executable, "-m", "vidlab.cli", "index", str(video), "--cache-dir", str(cache),
                "--sampling", "every=1", "--device", "cpu", "--batch-size", "4", "--quiet"]  # fmt: skip

    proc = subprocess.Popen(cmd(tmp_path / "killed"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + HANG_GUARD_S
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "the held index exited before the kill"
        proc.kill()
        proc.communicate(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert marker.exists() and proc.returncode == -signal.SIGKILL
    assert not list((tmp_path / "killed").glob("*.safetensors"))  # killed before any cache was written
    for cache in ("killed", "clean"):  # the rerun into the killed folder, and a clean run
        run = subprocess.run(cmd(tmp_path / cache), capture_output=True, text=True, timeout=HANG_GUARD_S)
        assert run.returncode == 0, run.stderr[-2000:]
    killed = FrameIndex.open(next((tmp_path / "killed").glob("*.safetensors")))
    clean = FrameIndex.open(next((tmp_path / "clean").glob("*.safetensors")))
    assert killed.key == clean.key
    a, b = _arrays(killed), _arrays(clean)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.slow
@pytest.mark.ray
def test_ray_index_runs_the_pipeline_in_its_actors_bit_identical_to_local(videos, tmp_path, ray_local):
    """`vidlab index --backend ray` on a local 127.0.0.1 Ray: each actor decodes with its own workers ahead of its
    encoder; the caches are the local run's bytes."""
    from vidlab.clip.indexing import IndexConfig, index_videos
    from vidlab.distributed import RunConfig

    vids = [videos["gop30_odd"], videos["gop250_odd"], videos["gop12_open"]]

    def run(backend, cache, workers):
        cfg = IndexConfig(
            cache_dir=str(tmp_path / cache), model="vidlab-tiny", sampling="every=3", device="cpu",
            batch_size=8, torch_threads=1, decode_workers=2, queue_depth=2,
            run=RunConfig(backend=backend, workers=workers, retries=0),
        )  # fmt: skip
        return index_videos(vids, cfg, progress=False)

    ray_report = run("ray", "ray", 2)
    local_report = run("local", "local", 1)
    assert (
        (ray_report.indexed, ray_report.failures) == (3, 0) == (local_report.indexed, local_report.failures)
    )
    for f in sorted((tmp_path / "local").glob("*.safetensors")):
        a = _arrays(FrameIndex.open(f))
        b = _arrays(FrameIndex.open(tmp_path / "ray" / f.name))
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=f"{f.name} {k}")


class _Prefetching:
    """A job worker that records which items it was told to prepare, and when."""

    log: list[tuple[str, str]] = []

    def prefetch(self, item):
        self.log.append(("prefetch", item["id"]))

    def process(self, item):
        self.log.append(("process", item["id"]))
        return {"ok": True}


def test_the_local_executor_hands_each_worker_the_next_item_to_prepare(tmp_path):
    """How the next video's probe overlaps this video's encoding: prefetch(next) before process(this)."""
    from vidlab.distributed import run_job

    _Prefetching.log = []
    run_job([{"id": f"v{i}"} for i in range(3)], _Prefetching, tmp_path / "job", progress=False)
    assert _Prefetching.log == [
        ("prefetch", "v1"), ("process", "v0"), ("prefetch", "v2"), ("process", "v1"), ("process", "v2"),
    ]  # fmt: skip
