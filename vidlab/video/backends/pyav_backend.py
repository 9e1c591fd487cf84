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
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Iterator

import numpy as np

from ..errors import VideoReadError
from ..probe import StreamIndex, drain, incomplete, open_container
from ..reader import VideoReader

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
# swscale filter for size=(w, h): area averaging (anti-aliased, and the fastest good filter for shrinking)
RESIZE = "AREA"


def avcc_length_size(extradata: bytes | None) -> int:
    """NAL length-prefix size of an avcC H.264 stream (1, 2 or 4), or 0 for Annex-B / unknown layouts."""
    if not extradata or len(extradata) < 7 or extradata[0] != 1:
        return 0
    return (extradata[4] & 3) + 1


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
    ):
        super().__init__(path, index)
        self._container, self._stream = open_container(self.path)
        damaged = self._damaged = bool(self._index.extra.get("damaged"))
        # pts -> index lookups bisect a plain list: per call ~10x cheaper than numpy's searchsorted
        self._pts_list: list[int] = self._index.pts.tolist()
        sparse, streaming = thread_types(self._index)
        self._stream.thread_type = "SLICE" if damaged else (thread_type or sparse)
        if damaged:  # decode exactly as the index was built (probe._decodable_pts): one thread, same stops
            self._stream.codec_context.thread_count = 1
            self._file_size = self.path.stat().st_size
        self._streaming_threads = "SLICE" if damaged else streaming
        self._streamer: PyAVReader | None = None  # second decoder for iter_frames when threading differs
        cc = self._stream.codec_context
        self._nal_len = avcc_length_size(cc.extradata) if cc.name == "h264" else 0
        want_skip = SKIP_NONREF if skip_nonref is None else skip_nonref
        self.skip_nonref = bool(want_skip and self._nal_len > 0 and not damaged)
        self._target_pts = -(2**62)  # pts of the frame being fetched; earlier non-ref packets may be dropped
        from av.video.reformatter import VideoReformatter

        self._reformatter = VideoReformatter()  # keeps its swscale context between frames
        self._frames: Iterator | None = None  # live decode generator
        self._pos = -1  # index of the last frame the generator produced
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
        keys = self._index.keyframe_of(indices)
        for k, (t, key) in enumerate(zip(indices.tolist(), keys.tolist())):
            # Seek when not decoding, when the target is behind us, or when a keyframe at or before the
            # target lies beyond the next frame (skipping a whole stretch beats decoding it).
            if self._frames is None or t <= self._pos or key > self._pos + 1:
                self._seek_to(t)
            frame = self._advance_to(t)
            out[k] = self._rgb(frame, width, height)
        return out

    def _rgb(self, frame, width: int, height: int) -> np.ndarray:
        """RGB array of ``frame`` at ``width x height`` through the reader's one reformatter.

        ``frame.to_ndarray(format=...)`` builds a new swscale context for every frame (2.5 ms at
        640x360); a shared VideoReformatter keeps it (0.12 ms), with identical output.
        """
        if (width, height) == (frame.width, frame.height):
            rgb = self._reformatter.reformat(frame, format="rgb24")
        else:
            rgb = self._reformatter.reformat(
                frame, format="rgb24", width=width, height=height, interpolation=RESIZE
            )
        return rgb.to_ndarray()

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
                    self.path, self._index, thread_type=self._streaming_threads, skip_nonref=self.skip_nonref
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
        """Seeks, decoded and skipped packets so far, over both decoders (for tests and benchmarks)."""
        out = {"seeks": self.seeks, "decoded": self.decoded, "skipped": self.skipped}
        if self._streamer is not None:
            for k, v in self._streamer.stats().items():
                out[k] += v
        return out

    def close(self) -> None:
        if not getattr(self, "_closed", True):
            self._frames = None
            if self._streamer is not None:
                self._streamer.close()
            try:
                self._container.close()
            except Exception:  # noqa: BLE001
                pass
        super().close()
