"""PyAV backend: plans its decoding by keyframe interval; frame-exact through the pts index (VFR included).

For sorted targets it seeks only when a keyframe lies between the current decode position and the
next target (so each keyframe interval is decoded at most once, never one seek per frame), matches
decoded frames to targets by pts, and converts to RGB only the frames that were asked for.
The open container and its decode position persist between calls, so consecutive reads of
increasing frames (streaming, chunked sampling) continue without seeking.

On H.264 in mp4/mov/mkv (length-prefixed NAL units) packets of non-reference pictures
(``nal_ref_idc == 0``: no other picture depends on them) shown *before* the frame being fetched are
dropped undecoded: on B-frame-heavy files that skips a large share of the work when decoding forward
from a keyframe to a target, and frames after the target stay decodable for the next call.
Set ``VIDLAB_PYAV_SKIP_NONREF=0`` to disable. Damaged files are read without skipping and with
slice threading only, exactly as their index was built.

A request whose targets lie in several keyframe intervals is split, interval by interval, into independent
groups that a few worker threads decode in parallel, each on its own lazily opened container (FFmpeg
releases the GIL while decoding); ``VIDLAB_DECODE_WORKERS`` sets how many (1 disables).

RGB conversion is FFmpeg's: 8-bit sources go through one kept ``VideoReformatter`` (identical to
``ffmpeg -pix_fmt rgb24`` on the tested files); sources of more than 8 bits go through a filter graph
``scale=flags=bicubic,format=rgb24``, exactly the conversion ``ffmpeg`` inserts, because PyAV's
reformatter differs from it by about 3.5 levels there (and lies twice as far from the source picture).
"""

from __future__ import annotations

import os
import threading
from bisect import bisect_left
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..base import VideoReader
from ..errors import VideoReadError
from ..probe import StreamIndex, drain, incomplete, open_container

# FFmpeg decoder threading: "AUTO" (frame+slice), "SLICE" or "FRAME"; unset = chosen per file and per use
# (see thread_types). Frame threads decode up to `threads - 1` frames past each target before a seek throws
# them away, so for random access they pay only when the decoder runs long stretches (long GOPs).
THREAD_TYPE = os.environ.get("VIDLAB_PYAV_THREADS", "")
FRAME_THREADS_MIN_PIXELS = 320 * 240  # below this, frame-thread hand-over costs more than decoding
FRAME_THREADS_MIN_GOP = 60  # mean keyframe interval from which random access uses frame threads


def thread_types(index: StreamIndex) -> tuple[str, str]:
    """(random-access, streaming) decoder thread types for a file; ``VIDLAB_PYAV_THREADS`` overrides both."""
    if THREAD_TYPE:
        return THREAD_TYPE, THREAD_TYPE
    if index.extra.get("damaged") or index.width * index.height < FRAME_THREADS_MIN_PIXELS:
        return "SLICE", "SLICE"
    mean_gop = index.num_frames / max(1, index.keyframes.size)
    return ("AUTO" if mean_gop >= FRAME_THREADS_MIN_GOP else "SLICE"), "AUTO"


SKIP_NONREF = os.environ.get("VIDLAB_PYAV_SKIP_NONREF", "1") != "0"
# Parallel decoding of independent keyframe-interval groups (see decode_workers / keyframe_groups).
MAX_DEFAULT_WORKERS = 4
PARALLEL_THREADS = "SLICE"  # codec threading inside parallel workers (the workers already fill the cores) ...
PARALLEL_THREAD_COUNT = 1  # ... so one codec thread each: slice threads there cost 10-60% more CPU
# Decode work (frames from keyframe to target x pixels) below which threads gain nothing (measured ~1.0x at 0.4M)
PARALLEL_MIN_WORK = 1_000_000


def decode_workers() -> int:
    """Decoder threads per reader: ``VIDLAB_DECODE_WORKERS`` if set, else ``min(os.cpu_count(), 4)``."""
    raw = os.environ.get("VIDLAB_DECODE_WORKERS", "").strip()
    if not raw:
        return max(1, min(os.cpu_count() or 1, MAX_DEFAULT_WORKERS))
    try:
        return max(1, int(raw))
    except ValueError:
        raise ValueError(f"VIDLAB_DECODE_WORKERS must be an integer >= 1, got {raw!r}") from None


def plan_groups(indices: np.ndarray, keys: np.ndarray) -> list[tuple[int, int]]:
    """Split sorted targets into ``[a, b)`` runs that need one seek each: a run breaks where a keyframe lies
    after the previous target's successor (the serial planner would seek there), so runs decode independently."""
    breaks = np.flatnonzero(keys[1:] > indices[:-1] + 1) + 1
    bounds = [0, *breaks.tolist(), int(indices.size)]
    return list(zip(bounds[:-1], bounds[1:]))


def keyframe_groups(keys: np.ndarray) -> list[tuple[int, int]]:
    """Split sorted targets into ``[a, b)`` runs that share one keyframe (``keys``: each target's keyframe), for
    the parallel lanes. Each run decodes from its keyframe to its last target: the frames the serial plan
    decodes for those targets too (where it runs on through a keyframe instead of seeking, it decodes that
    stretch anyway), so the split costs a seek per run and no extra decoding. Finer than ``plan_groups``:
    uniform indices that land just before each keyframe (..., 249, 299, ... at GOP 250) form one serial
    run, yet three independent ones here."""
    breaks = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    bounds = [0, *breaks.tolist(), int(keys.size)]
    return list(zip(bounds[:-1], bounds[1:]))


# swscale filter for size=(w, h): area averaging (anti-aliased, and the fastest good filter for shrinking)
RESIZE = "AREA"


def avcc_length_size(extradata: bytes | None) -> int:
    """NAL length-prefix size of an avcC H.264 stream (1, 2 or 4), or 0 for Annex-B / unknown layouts."""
    if not extradata or len(extradata) < 7 or extradata[0] != 1:
        return 0
    return (extradata[4] & 3) + 1


def h264_slices(data: memoryview, length_size: int) -> int:
    """Number of coded slice NAL units (types 1 and 5) in one length-prefixed H.264 packet."""
    i, n, count = 0, len(data), 0
    while i + length_size < n:
        size = int.from_bytes(data[i : i + length_size], "big")
        if data[i + length_size] & 0x1F in (1, 5):
            count += 1
        i += length_size + size
    return count


def single_slice(container, stream, length_size: int) -> bool:
    """True when the stream's first packet (a keyframe) holds one coded slice: FFmpeg's slice threads then have
    nothing to share out and only add hand-over work (measured +10-60% CPU per sparse read at 640x360-320x180).

    Reads one packet; the reader seeks before its first decode, so the position it leaves does not matter.
    """
    if length_size <= 0:
        return False
    try:
        packet = next((p for p in container.demux(stream) if p.size), None)
    except Exception:  # noqa: BLE001 - unreadable start: keep FFmpeg's default threading
        return False
    return packet is not None and h264_slices(memoryview(packet), length_size) == 1


def h264_nonref(data: memoryview, length_size: int) -> bool:
    """True when the packet's coded slices all have ``nal_ref_idc == 0`` (no picture references them)."""
    i, n, seen = 0, len(data), False
    while i + length_size < n:
        size = int.from_bytes(data[i : i + length_size], "big")
        header = data[i + length_size]
        if header & 0x1F in (1, 5):  # coded slice (non-IDR / IDR)
            if header & 0x60:
                return False
            seen = True
        i += length_size + size
    return seen


class PyAVReader(VideoReader):
    """Frame-exact reader on PyAV with keyframe-interval planning."""

    backend = "pyav"

    def __init__(
        self,
        path,
        index: StreamIndex | None = None,
        thread_type: str | None = None,
        skip_nonref: bool | None = None,
        workers: int | None = None,
        thread_count: int | None = None,
        _pts_list: list[int] | None = None,
        rotate: bool = True,
    ):
        super().__init__(path, index, rotate=rotate)
        self._lanes: list[PyAVReader] = []  # extra decoders of the parallel path (opened lazily)
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()  # one get_frames at a time may drive the lanes
        self._graphs: dict[tuple[int, int], object] = {}  # >8-bit sources: FFmpeg's conversion graphs
        self._high_depth = self._index.bit_depth > 8
        self._container, self._stream = open_container(self.path, self._index.stream_index)
        damaged = self._damaged = bool(self._index.extra.get("damaged"))
        # pts -> index lookups bisect a plain list: per call ~10x cheaper than numpy's searchsorted
        self._pts_list: list[int] = self._index.pts.tolist() if _pts_list is None else _pts_list
        sparse, streaming = thread_types(self._index)
        self._stream.thread_type = "SLICE" if damaged else (thread_type or sparse)
        if damaged:  # decode exactly as the index was built (probe._decodable_pts): one thread, same stops
            self._stream.codec_context.thread_count = 1
            self._file_size = self.path.stat().st_size
        self._streaming_threads = "SLICE" if damaged else streaming
        self._streamer: PyAVReader | None = None  # second decoder for iter_frames when threading differs
        cc = self._stream.codec_context
        self._nal_len = avcc_length_size(cc.extradata) if cc.name == "h264" else 0
        if self._stream.thread_type.name == "SLICE" and not damaged and not THREAD_TYPE:
            # slice threads split a frame's slices: with one slice per frame they only cost hand-over work
            if thread_count is not None:
                cc.thread_count = int(thread_count)
            elif single_slice(self._container, self._stream, self._nal_len):
                cc.thread_count = 1
        want_skip = SKIP_NONREF if skip_nonref is None else skip_nonref
        self.skip_nonref = bool(want_skip and self._nal_len > 0 and not damaged)
        self._target_pts = -(2**62)  # pts of the frame being fetched; earlier non-ref packets may be dropped
        from av.video.reformatter import VideoReformatter

        self._reformatter = VideoReformatter()  # keeps its swscale context between frames
        self._frames: Iterator | None = None  # live decode generator
        self._pos = -1  # index of the last frame the generator produced
        self.workers = decode_workers() if workers is None else max(1, int(workers))
        if damaged:
            self.workers = 1  # the damaged-file stopping rule is kept on one decoder
        self.parallel_calls = 0
        self.seeks = 0  # counters, for tests and benchmarks
        self.decoded = 0
        self.skipped = 0

    def _decode_packets(self) -> Iterator:
        """Demux and decode from the current position, dropping non-reference packets before the target."""
        stream, nal_len = self._stream, self._nal_len
        if not self.skip_nonref and not self._damaged:
            yield from self._container.decode(stream)  # nothing to filter: let PyAV run its own loop
            return
        for packet in self._container.demux(stream):
            if self._damaged and packet.size and incomplete(packet, self._file_size):
                yield from drain(stream)
                return
            if (
                self.skip_nonref
                and packet.size
                and packet.pts is not None
                and packet.pts < self._target_pts
                and not packet.is_keyframe
                and h264_nonref(memoryview(packet), nal_len)
            ):
                self.skipped += 1
                continue
            try:
                frames = packet.decode()
            except Exception:  # noqa: BLE001 - damaged data: drain what the decoder holds, then stop
                yield from drain(stream)
                return
            yield from frames

    # decoding core ------------------------------------------------------------------------------
    def _seek_to(self, frame_index: int) -> None:
        """Position the decoder so that the next frames start at the keyframe of ``frame_index``."""
        key = int(self._index.keyframe_of([frame_index])[0])
        self._seek_keyframe(key)

    def _seek_keyframe(self, key: int) -> None:
        target_pts = int(self._index.pts[key])
        try:
            self._container.seek(target_pts, stream=self._stream, backward=True, any_frame=False)
        except Exception as e:  # noqa: BLE001
            raise VideoReadError(self.path, f"seek to frame {key} failed: {e}") from e
        self._stream.codec_context.flush_buffers()
        self._frames = self._decode_packets()
        self._pos = key - 1  # provisional; corrected from the first decoded frame's pts
        self.seeks += 1

    def _next_frame(self):
        """Next decoded frame and its index (by pts), or (None, -1) at the end of the stream."""
        assert self._frames is not None
        pts_table = self._pts_list
        n = len(pts_table)
        while True:
            try:
                frame = next(self._frames)
            except StopIteration:
                return None, -1
            except Exception as e:  # noqa: BLE001 - corrupt data mid-stream
                raise VideoReadError(self.path, f"decoding failed after frame {self._pos}: {e}") from e
            self.decoded += 1
            ts = frame.pts
            if ts is None:
                i = self._pos + 1
            else:
                i = bisect_left(pts_table, ts)
                if i >= n or pts_table[i] != ts:
                    continue  # a frame not in the packet index (should not happen); never mislabel it
            self._pos = i
            return frame, i

    def _decode_sorted(self, indices: np.ndarray, width: int, height: int) -> np.ndarray:
        out = np.empty((indices.size, height, width, 3), dtype=np.uint8)
        self._decode_sorted_into(indices, out, np.arange(indices.size))
        return out

    def _decode_sorted_into(self, indices: np.ndarray, out: np.ndarray, rows: np.ndarray) -> None:
        """Decode sorted ``indices`` into ``out[rows[k]]``: each frame goes straight to its row (no copy)."""
        height, width = out.shape[1:3]
        keys = self._index.keyframe_of(indices)
        if self.workers > 1 and indices.size > 1:
            groups = keyframe_groups(keys)
            if len(groups) > 1:
                work = sum(int(indices[b - 1] - keys[a]) + 1 for a, b in groups)  # frames to decode, at most
                if work * width * height >= PARALLEL_MIN_WORK:
                    self._decode_parallel(indices, keys, groups, out, rows)
                    return
        self._decode_into(indices, keys, out, rows)

    def _decode_into(self, indices: np.ndarray, keys: np.ndarray, out: np.ndarray, rows: np.ndarray) -> None:
        """Serial plan: decode sorted ``indices`` (with their keyframes) into ``out[rows]`` on this decoder."""
        height, width = out.shape[1:3]
        for r, t, key in zip(rows.tolist(), indices.tolist(), keys.tolist()):
            # Seek when not decoding, when the target is behind us, or when a keyframe at or before the
            # target lies beyond the next frame (skipping a whole stretch beats decoding it).
            if self._frames is None or t <= self._pos or key > self._pos + 1:
                self._seek_to(t)
            frame = self._advance_to(t)
            out[r] = self._rgb(frame, width, height)

    def _decode_parallel(
        self,
        indices: np.ndarray,
        keys: np.ndarray,
        groups: list[tuple[int, int]],
        out: np.ndarray,
        rows: np.ndarray,
    ) -> None:
        """Decode independent groups on up to ``workers`` lanes at once, each writing its own rows of ``out``.

        Lanes take the next undone group in file order (so each lane only moves forward and a lane
        that drew short groups takes more); the calling thread drives one lane itself.
        """
        with self._lock:
            lanes = self._open_lanes(min(self.workers, len(groups)))
            todo = iter(groups)  # next() on a shared iterator is atomic under the GIL
            failed = threading.Event()

            def work(lane: PyAVReader) -> None:
                for a, b in todo:
                    if failed.is_set():
                        return
                    try:
                        lane._decode_into(indices[a:b], keys[a:b], out, rows[a:b])
                    except BaseException:
                        failed.set()
                        raise

            futures = [self._pool.submit(work, lane) for lane in lanes[1:]]
            error = None
            try:
                work(lanes[0])
            except BaseException as e:  # noqa: BLE001 - wait for the other lanes before raising
                error = e
            for f in futures:  # always wait for every lane, so none is still writing when we return
                error = error or f.exception()
            self.parallel_calls += 1
            if error is not None:
                raise error

    def _open_lanes(self, n: int) -> list[PyAVReader]:
        """The first ``n`` parallel decoders (own containers, codec threading ``PARALLEL_THREADS``), opened lazily."""
        while len(self._lanes) < n:
            lane = PyAVReader(
                self.path,
                self._index,
                thread_type=THREAD_TYPE or PARALLEL_THREADS,
                skip_nonref=self.skip_nonref,
                workers=1,
                thread_count=None if THREAD_TYPE else PARALLEL_THREAD_COUNT,
                rotate=self.rotate,  # lanes return coded frames (the top reader orients them); same checks
                _pts_list=self._pts_list,  # read-only; shared, not copied per lane (6 MB at 174000 frames)
            )
            self._lanes.append(lane)
        if self._pool is None and n > 1:
            self._pool = ThreadPoolExecutor(max_workers=self.workers - 1, thread_name_prefix="vidlab-decode")
        return self._lanes[:n]

    def _rgb(self, frame, width: int, height: int) -> np.ndarray:
        """RGB array of ``frame`` at ``width x height`` through the reader's one reformatter.

        ``frame.to_ndarray(format=...)`` builds a new swscale context for every frame (2.5 ms at
        640x360); a shared VideoReformatter keeps it (0.12 ms), with identical output.
        """
        if self._high_depth:
            return self._rgb_graph(frame, width, height)
        if (width, height) == (frame.width, frame.height):
            rgb = self._reformatter.reformat(frame, format="rgb24")
        else:
            rgb = self._reformatter.reformat(
                frame, format="rgb24", width=width, height=height, interpolation=RESIZE
            )
        return rgb.to_ndarray()

    def _rgb_graph(self, frame, width: int, height: int) -> np.ndarray:
        """RGB through the conversion FFmpeg's CLI inserts (``scale`` with bicubic flags), for >8-bit sources."""
        import av

        key = (width, height)
        graph = self._graphs.get(key)
        if graph is None:
            graph = av.filter.Graph()
            src = graph.add_buffer(template=self._stream)
            same = (width, height) == (frame.width, frame.height)
            args = "flags=bicubic" if same else f"w={width}:h={height}:flags={RESIZE.lower()}"
            scale = graph.add("scale", args)
            fmt = graph.add("format", "rgb24")
            sink = graph.add("buffersink")
            src.link_to(scale)
            scale.link_to(fmt)
            fmt.link_to(sink)
            graph.configure()
            self._graphs[key] = graph
        graph.push(frame)
        return graph.pull().to_ndarray()

    def _advance_to(self, t: int):
        """Decode forward to frame ``t``; re-seek further back if a seek overshot it."""
        self._target_pts = self._pts_list[t]
        retries = 0
        while True:
            frame, i = self._next_frame()
            if frame is None:
                self._frames = None
                raise VideoReadError(
                    self.path, f"frame {t} could not be decoded (stream ended at {self._pos})"
                )
            if i == t:
                return frame
            if i > t:  # seek landed after the target (imprecise container index): go back further
                retries += 1
                keys = self._index.keyframes
                pos = int(np.searchsorted(keys, t, side="right")) - 1 - retries
                if pos < -1:
                    raise VideoReadError(self.path, f"frame {t} could not be reached by seeking")
                self._seek_keyframe(int(keys[max(pos, 0)]) if pos >= 0 else 0)

    def _iter(self, start: int, end: int, step: int, w: int, h: int) -> Iterator[tuple[int, np.ndarray]]:
        """Stream on a decoder threaded for throughput (a second one if random access uses other threading)."""
        dec = self
        if self._stream.thread_type.name != self._streaming_threads and step < FRAME_THREADS_MIN_GOP:
            if self._streamer is None:
                self._streamer = PyAVReader(
                    self.path,
                    self._index,
                    thread_type=self._streaming_threads,
                    skip_nonref=self.skip_nonref,
                    rotate=self.rotate,
                )
            dec = self._streamer
        for t in range(start, end, step):
            dec._check_open()
            key = int(dec._index.keyframe_of([t])[0])
            if dec._frames is None or t <= dec._pos or key > dec._pos + 1:
                dec._seek_to(t)
            frame = dec._advance_to(t)
            yield t, dec._rgb(frame, w, h)

    def stats(self) -> dict[str, int]:
        """Seeks, decoded and skipped packets so far, over all decoders: own, streaming, lanes (for tests and benchmarks)."""
        out = {"seeks": self.seeks, "decoded": self.decoded, "skipped": self.skipped}
        for sub in [self._streamer, *self._lanes]:
            if sub is not None:
                for k, v in sub.stats().items():
                    out[k] += v
        return out

    def close(self) -> None:
        if not getattr(self, "_closed", True):
            self._frames = None
            if self._streamer is not None:
                self._streamer.close()
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
            for lane in self._lanes:
                lane.close()
            self._lanes = []
            try:
                self._container.close()
            except Exception:  # noqa: BLE001
                pass
        super().close()
