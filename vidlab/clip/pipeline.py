"""Pipelined frame embedding: decode workers run ahead of the encoder through a bounded queue.

Shape of the pipeline for one video (``embed_pipelined``)::

    decode workers (threads, one decoder each)      assembler thread          encoder (calling thread)
    GOP-aligned segments, taken in file order  ->   pieces in order, copied -> bounded queue of batches
    each segment cut into pieces at batch           into batch buffers         -> model.embed_images(batch)
    boundaries; a worker decodes its pieces         (pinned memory on CUDA)
    in order on one decoder (no re-seek)

* **Bit-identical to the serial path**: the encoder sees exactly the batches ``frames[k*bs:(k+1)*bs]`` that
  :func:`vidlab.clip.frame_index.embed_frames` gives it serially, with the same pixels (readers are
  frame-exact whatever the access pattern), so the cache holds the same bytes under the same key.
* **Disjoint work**: segments are whole keyframe intervals (:func:`vidlab.video.segments.gop_segments`), about
  ``batch_size / decode_workers`` frames each, so no two workers decode the same stretch of the file, every
  worker has a share of each batch, and each frame asked for is decoded once.
* **Bounded memory, whatever the video's length**: a worker may not run more than ``window`` pieces ahead of
  the assembler (``window = 2 * decode_workers`` pieces of about ``batch_size / decode_workers`` frames: two
  batches); at most ``queue_depth`` batches wait for the encoder; batch buffers are a fixed pool of
  ``queue_depth + 2``. Peak memory is about ``(queue_depth + 4) * batch_size`` decoded frames.
* **Failures**: the first exception of any worker (a decode error in one segment) stops every thread and is
  raised in the caller; KeyboardInterrupt in the caller stops and joins every thread before it propagates.

Decode workers are threads: PyAV/FFmpeg decoding and its RGB conversion run without the GIL, and threads
share the packet index and write straight into the batch buffers (processes would copy every frame once more
between address spaces); ``benchmarks/longvideo.py`` measures the speed-up.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vidlab.config import in_range, validate
from vidlab.holds import PIPELINE, hold_at

if TYPE_CHECKING:
    from .models import ClipModel

STARTED_ENV = (
    "VIDLAB_PIPELINE_STARTED_FILE"  # touched once the threads run (tests interrupt `vidlab index` then)
)
JOIN_SECONDS = 60.0  # how long stopping waits for a worker that is inside one piece's decode


@dataclass
class PipelineConfig:
    """Knobs of the indexing pipeline (the ``decode_workers`` and ``queue_depth`` keys of ``vidlab index``).

    ``decode_workers``: decoding threads, each one core's worth of FFmpeg (one codec thread); 0 runs the old
    serial loop (decode a batch, embed it, decode the next). ``queue_depth``: decoded batches that may wait for
    the encoder. Defaults suit 2 cores: 2 decoders beside the encoder's threads, 2 batches ahead.
    """

    decode_workers: int = field(default=2, metadata=in_range(0))
    queue_depth: int = field(default=2, metadata=in_range(1))
    pin_memory: bool = True  # batch buffers in page-locked memory when the encoder is on CUDA

    def __post_init__(self) -> None:
        validate(self)


@dataclass
class PipelineStats:
    """What one pipelined run did (for tests and benchmarks)."""

    frames: int = 0
    batches: int = 0
    decode_calls: int = 0  # get_frames calls on the workers' readers
    frames_decoded: int = 0  # frames returned by them (each asked-for frame once)
    encode_calls: int = 0  # model.embed_images calls
    frames_encoded: int = 0
    max_queued_batches: int = 0  # the bounded queue's deepest fill
    max_pending_pieces: int = 0  # decoded pieces waiting for the assembler, at most
    buffer_bytes: int = 0  # the batch-buffer pool
    pinned: bool = False
    encoder_wait_s: float = 0.0  # time the encoder waited for a batch (decode-bound when large)
    seconds: float = 0.0
    workers: int = 0


class _Stop(Exception):
    """Internal: another thread failed or the caller stopped the pipeline."""


class _Shared:
    """State shared by the decode workers and the assembler, under one condition variable."""

    def __init__(self, window: int) -> None:
        self.cond = threading.Condition()
        self.window = window
        self.done: dict[int, np.ndarray] = {}
        self.next_piece = 0  # the piece the assembler needs next
        self.next_segment = 0
        self.error: BaseException | None = None
        self.stop = False

    def fail(self, exc: BaseException) -> None:
        with self.cond:
            if self.error is None and not self.stop:
                self.error = exc
            self.stop = True
            self.cond.notify_all()


def plan(
    frames: np.ndarray, keys: np.ndarray, batch_size: int, workers: int = 1
) -> list[list[tuple[int, int, int]]]:
    """Segments of ``frames`` (sorted, with their keyframes ``keys``) as lists of pieces ``(seq, a, b)``: a piece
    is a segment's part inside one batch ``[k*bs, (k+1)*bs)``; ``seq`` numbers pieces in file order.

    A segment holds about ``batch_size / workers`` frames (whole keyframe intervals), so that every worker has
    a part of each batch to decode: batch-sized segments would leave all but a few of many workers idle (a GPU
    batch of 256 frames over 600 sampled frames is 3 segments)."""
    from vidlab.video.segments import gop_segments

    out: list[list[tuple[int, int, int]]] = []
    seq = 0
    for a, b in gop_segments(frames, keys, max(1, -(-batch_size // max(1, workers)))):
        pieces = []
        s = a
        while s < b:
            e = min(b, (s // batch_size + 1) * batch_size)
            pieces.append((seq, s, e))
            seq += 1
            s = e
        out.append(pieces)
    return out


def embed_pipelined(
    reader: Any,
    model: ClipModel,
    frames: np.ndarray,
    size: tuple[int, int] | None,
    batch_size: int,
    config: PipelineConfig,
    bar: Any = None,
    stats: PipelineStats | None = None,
) -> np.ndarray:
    """fp16 [N, D] embeddings of sorted ``frames`` of ``reader``'s video, decoded by ``config.decode_workers``
    threads while the calling thread embeds; see the module docstring."""
    from vidlab.video import fit_within
    from vidlab.video.segments import independent_reader

    t0 = time.perf_counter()
    st = stats if stats is not None else PipelineStats()
    n = int(frames.size)
    out = np.empty((n, model.dim), dtype=np.float16)
    st.frames = n
    if n == 0:
        return out
    if np.any(np.diff(frames) <= 0):
        raise ValueError("the pipeline embeds sorted, distinct frame indices")
    bs = int(batch_size)
    segments = plan(frames, reader.index.keyframe_of(frames), bs, config.decode_workers)
    n_pieces = sum(len(s) for s in segments)
    n_batches = (n + bs - 1) // bs
    workers = max(1, min(config.decode_workers, len(segments)))
    st.workers = workers
    w, h = fit_within(reader.width, reader.height, size)
    pool_size = config.queue_depth + 2
    shared = _Shared(window=max(2, 2 * workers))
    pinned = bool(config.pin_memory and str(getattr(model, "device", "cpu")).startswith("cuda"))
    buffers, keep = _buffers(pool_size, min(bs, n), h, w, pinned)
    st.pinned, st.buffer_bytes = pinned, sum(b.nbytes for b in buffers)
    free: queue.Queue[np.ndarray] = queue.Queue()
    for buf in buffers:
        free.put(buf)
    ready: queue.Queue[tuple[int, np.ndarray, int] | None] = queue.Queue(maxsize=config.queue_depth)
    counters_lock = threading.Lock()

    def decode_worker() -> None:
        dec = None
        try:
            dec = independent_reader(reader)
            while True:
                with shared.cond:
                    if shared.stop or shared.next_segment >= len(segments):
                        return
                    seg = segments[shared.next_segment]
                    shared.next_segment += 1
                for seq, a, b in seg:
                    with shared.cond:
                        while not shared.stop and seq >= shared.next_piece + shared.window:
                            shared.cond.wait()
                        if shared.stop:
                            return
                    arr = dec.get_frames(frames[a:b], size=size)
                    with counters_lock:
                        st.decode_calls += 1
                        st.frames_decoded += int(arr.shape[0])
                    with shared.cond:
                        shared.done[seq] = arr
                        st.max_pending_pieces = max(st.max_pending_pieces, len(shared.done))
                        shared.cond.notify_all()
        except BaseException as e:  # noqa: BLE001 - handed to the caller, which raises it
            shared.fail(e)
        finally:
            if dec is not None:
                dec.close()

    def take(seq: int) -> np.ndarray:
        with shared.cond:
            while seq not in shared.done:
                if shared.stop:
                    raise _Stop
                shared.cond.wait()
            arr = shared.done.pop(seq)
            shared.next_piece = seq + 1
            shared.cond.notify_all()
            return arr

    def blocking(fn, *args) -> Any:
        while True:  # short timeouts: a stopped pipeline never leaves a thread blocked
            if shared.stop:
                raise _Stop
            try:
                return fn(*args, timeout=0.1)
            except (queue.Empty, queue.Full):
                continue

    def assembler() -> None:
        try:
            pieces = iter([p for seg in segments for p in seg])
            for k in range(n_batches):
                lo, hi = k * bs, min(n, (k + 1) * bs)
                buf = blocking(free.get)
                row = lo
                while row < hi:
                    seq, a, b = next(pieces)
                    arr = take(seq)
                    buf[a - lo : b - lo] = arr
                    row = b
                blocking(ready.put, (k, buf, hi - lo))
                st.max_queued_batches = max(st.max_queued_batches, ready.qsize())
            blocking(ready.put, None)
        except _Stop:
            pass
        except BaseException as e:  # noqa: BLE001
            shared.fail(e)

    threads = [
        threading.Thread(target=decode_worker, name=f"vidlab-index-decode-{i}", daemon=True)
        for i in range(workers)
    ]
    threads.append(threading.Thread(target=assembler, name="vidlab-index-assemble", daemon=True))
    for t in threads:
        t.start()
    started = os.environ.get(STARTED_ENV)
    if started:  # a test seam: tells a test driving `vidlab index` from outside that the workers run
        Path(started).touch()
    try:
        # a test seam (vidlab.holds): while VIDLAB_PIPELINE_HOLD_FILE exists the encoder waits before its first
        # batch, so a test that interrupts or kills `vidlab index` from outside does so in that known state
        hold_at(PIPELINE, 0)
        while True:
            t_wait = time.perf_counter()
            try:
                item = blocking(ready.get)
            except _Stop:
                break
            st.encoder_wait_s += time.perf_counter() - t_wait
            if item is None:
                break
            k, buf, m = item
            out[k * bs : k * bs + m] = model.embed_images(buf[:m], progress=False)
            st.encode_calls += 1
            st.frames_encoded += m
            st.batches += 1
            free.put(buf)
            if bar is not None:
                bar.update(m)
    except BaseException as e:
        shared.fail(e)
        raise
    finally:
        with shared.cond:
            shared.stop = True
            shared.cond.notify_all()
        deadline = time.monotonic() + JOIN_SECONDS
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        del keep
        st.seconds = time.perf_counter() - t0
    if shared.error is not None:
        raise shared.error
    assert st.frames_encoded == n and n_pieces == st.decode_calls, (st, n_pieces)
    return out


def _buffers(count: int, rows: int, h: int, w: int, pinned: bool) -> tuple[list[np.ndarray], list[Any]]:
    """``count`` uint8 [rows, h, w, 3] batch buffers (page-locked when ``pinned``) and what keeps them alive."""
    if pinned:
        import torch

        tensors = [torch.empty((rows, h, w, 3), dtype=torch.uint8).pin_memory() for _ in range(count)]
        return [t.numpy() for t in tensors], tensors
    return [np.empty((rows, h, w, 3), dtype=np.uint8) for _ in range(count)], []
