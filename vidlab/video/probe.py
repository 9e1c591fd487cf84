"""Cheap frame index of a video: every frame's pts and the keyframes, from demuxing packets (no decoding).

This index is the ground truth for frame numbering in vidlab: frame ``i`` is the ``i``-th frame in
presentation order (sorted pts). On a truncated or damaged file it holds only the frames that decode and
that no lost frame is shown before (:func:`complete_prefix`: a B-frame stored past the cut would otherwise
shift the numbers of the frames around it); ``lost_frames`` counts the rest of those the file declares or
holds packets of. A Matroska/WebM file cut short is told by its element sizes (:func:`matroska_cut`).

The index is built once per reader and, for long videos, cached on disk keyed by the file's path, size,
mtime and the stream read (``$VIDLAB_CACHE_DIR/video-index``; set ``VIDLAB_VIDEO_INDEX_CACHE=0`` to disable).

Which stream: the one FFmpeg calls best (``av_find_best_stream``, as ffprobe, ffmpeg, torchcodec do:
default disposition first, then frames seen, bitrate, ...) unless ``stream=`` names another. The index
also records the stream's display rotation (:mod:`vidlab.video.orientation`), bit depth and colour range,
which decide what each backend can read exactly.
"""

from __future__ import annotations

import hashlib
import json
import os
from bisect import bisect_right, insort
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from .errors import VideoReadError

INDEX_VERSION = 4  # 4: cut Matroska files are told apart (a cached index of one numbered past the cut)
# Videos with at least this many frames get their index cached on disk (demuxing costs ~5 us/frame).
CACHE_MIN_FRAMES = 5000


@dataclass(frozen=True)
class StreamIndex:
    """Frame table of one video stream: frame i has presentation timestamp ``pts[i]`` (time_base units)."""

    path: str
    stream_index: int
    pts: np.ndarray  # int64 [N], sorted: frame i -> pts
    keyframes: np.ndarray  # int64 [K], sorted frame indices of keyframes (always includes 0)
    time_base: Fraction
    avg_rate: float  # container's average frame rate (0 if unknown)
    width: int
    height: int
    codec: str
    pix_fmt: str
    has_b_frames: bool  # decode order differs from presentation order
    declared_frames: int  # frames the header claims (0 if unknown); > num_frames for truncated files
    last_duration: int  # duration of the last frame in time_base units
    open_gop: bool = False  # frames decoded after a keyframe are shown before it (need the previous GOP)
    rotation: float = 0.0  # display rotation, degrees clockwise, as FFmpeg computes it (0, 90, 180, 270, ...)
    orient_op: str = ""  # FFmpeg's autorotate filter for it (vidlab.video.orientation.OPS); "" = none
    bit_depth: int = 8  # bits per luma sample (10 for yuv420p10le)
    color_range: str = ""  # "tv" (limited), "pc" (full) or "" (unspecified)
    video_streams: tuple = ()  # indices of every video stream of the file (stream_index is one of them)
    extra: dict = field(default_factory=dict)

    @property
    def display_size(self) -> tuple[int, int]:
        """``(width, height)`` as shown, after the display rotation."""
        from .orientation import swaps_axes

        return (self.height, self.width) if swaps_axes(self.orient_op) else (self.width, self.height)

    @property
    def num_frames(self) -> int:
        return int(self.pts.shape[0])

    @property
    def lost_frames(self) -> int:
        """Frames the header declares but the file does not hold (a truncated file)."""
        return max(0, self.declared_frames - self.num_frames)

    @property
    def duration(self) -> float:
        """Seconds from the first frame's start to the last frame's end."""
        if self.num_frames == 0:
            return 0.0
        return float((int(self.pts[-1]) - int(self.pts[0]) + self.last_duration) * self.time_base)

    @property
    def vfr(self) -> bool:
        """True when frame intervals differ by more than one time-base tick (variable frame rate)."""
        if self.num_frames < 3:
            return False
        d = np.diff(self.pts)
        return bool(d.max() - d.min() > 1)

    @property
    def fps(self) -> float:
        """Average rate for constant-rate video; frames / duration for variable-rate video."""
        if self.avg_rate > 0 and not self.vfr:
            return float(self.avg_rate)
        dur = self.duration
        return float(self.num_frames / dur) if dur > 0 else float(self.avg_rate or 0.0)

    def seconds(self, indices: np.ndarray) -> np.ndarray:
        """Presentation time in seconds of the given frames, relative to the first frame."""
        tb = float(self.time_base)
        return (self.pts[np.asarray(indices, dtype=np.int64)] - self.pts[0]).astype(np.float64) * tb

    def keyframe_of(self, indices: np.ndarray) -> np.ndarray:
        """For each frame index, the index of the last keyframe at or before it (where decoding starts)."""
        pos = np.searchsorted(self.keyframes, np.asarray(indices, dtype=np.int64), side="right") - 1
        return self.keyframes[np.maximum(pos, 0)]


def check_path(path: str | os.PathLike) -> Path:
    """Reject anything that is not a readable, non-empty regular file with its true reason (missing,
    broken link, symlink loop, folder, FIFO, socket, device, permission, 0 bytes) before any decoder sees
    it. Nothing is opened, so a FIFO never blocks (:func:`vidlab.io.file_problem`)."""
    from vidlab.io import file_problem

    p = Path(path)
    reason = file_problem(p)
    if reason is not None:
        raise VideoReadError(p, reason)
    return p


def _cache_file(p: Path, stream: int | None) -> Path | None:
    if os.environ.get("VIDLAB_VIDEO_INDEX_CACHE", "1") == "0":
        return None
    st = p.stat()
    ident = f"{p.resolve()}|{st.st_size}|{st.st_mtime_ns}|{INDEX_VERSION}|{stream}"
    key = hashlib.sha1(ident.encode()).hexdigest()
    from vidlab.paths import cache_dir  # the one cache root (platform user cache dir by default)

    return cache_dir("video-index") / f"{key}.npz"


def _load_cached(cf: Path, path: str) -> StreamIndex | None:
    try:
        with np.load(cf, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            return StreamIndex(
                path=path,
                pts=z["pts"].astype(np.int64),
                keyframes=z["keyframes"].astype(np.int64),
                time_base=Fraction(meta.pop("time_base")),
                video_streams=tuple(meta.pop("video_streams")),
                **meta,
            )
    except Exception:  # noqa: BLE001 - a bad cache entry is rebuilt
        return None


def _save_cached(cf: Path, idx: StreamIndex) -> None:
    meta = {
        "stream_index": idx.stream_index,
        "time_base": str(idx.time_base),
        "avg_rate": idx.avg_rate,
        "width": idx.width,
        "height": idx.height,
        "codec": idx.codec,
        "pix_fmt": idx.pix_fmt,
        "has_b_frames": idx.has_b_frames,
        "declared_frames": idx.declared_frames,
        "last_duration": idx.last_duration,
        "open_gop": idx.open_gop,
        "rotation": idx.rotation,
        "orient_op": idx.orient_op,
        "bit_depth": idx.bit_depth,
        "color_range": idx.color_range,
        "video_streams": list(idx.video_streams),
    }
    from vidlab.io import atomic_path

    try:
        with atomic_path(cf) as tmp:
            np.savez(tmp, pts=idx.pts, keyframes=idx.keyframes, meta=np.array(json.dumps(meta)))
    except OSError:
        pass  # caching is an optimisation only


def open_container(p: Path, stream: int | None = None):
    """Open ``p`` with PyAV and return ``(container, video stream)``, or raise VideoReadError.

    ``stream=None`` takes the stream FFmpeg's ``av_find_best_stream`` picks (PyAV's ``streams.best``);
    an integer is the stream's index in the file (as ffprobe numbers streams) and must be a video stream.
    """
    import av

    try:
        container = av.open(str(p), mode="r")
    except Exception as e:  # noqa: BLE001 - every FFmpeg failure becomes a typed error
        raise VideoReadError(p, f"not a readable video container (truncated or not a video?): {e}") from e
    videos = list(container.streams.video)
    if not videos:
        kinds = sorted({s.type for s in container.streams}) or ["none"]
        container.close()
        raise VideoReadError(p, f"no video stream (streams present: {', '.join(kinds)})")
    if stream is None:
        chosen = container.streams.best("video") or videos[0]
    else:
        chosen = next((s for s in videos if s.index == int(stream)), None)
        if chosen is None:
            have = [int(s.index) for s in videos]
            container.close()
            raise VideoReadError(p, f"stream {stream} is not a video stream; video streams: {have}")
    return container, chosen


def video_stream_indices(container) -> tuple[int, ...]:
    return tuple(int(s.index) for s in container.streams.video)


def _display_matrix(p: Path, stream_index: int) -> np.ndarray | None:
    """The display matrix FFmpeg attaches to decoded frames (from the first frame), or None.

    PyAV exposes stream side data only on decoded frames, so this decodes the first frame (one keyframe).
    """
    try:
        container, stream = open_container(p, stream_index)
    except VideoReadError:
        return None
    try:
        stream.thread_type = "SLICE"
        for frame in container.decode(stream):
            for sd in frame.side_data:
                if "DISPLAYMATRIX" in str(sd.type).upper():
                    return np.frombuffer(bytes(sd), dtype=np.int32)[:9].copy()
            return None
    except Exception:  # noqa: BLE001 - undecodable first frame: the reader reports it later
        return None
    finally:
        container.close()
    return None


def _bit_depth(pix_fmt: str) -> int:
    import av

    try:
        return int(av.VideoFormat(pix_fmt).components[0].bits) if pix_fmt else 8
    except Exception:  # noqa: BLE001
        return 8


def drain(stream) -> list:
    """Frames still held by ``stream``'s decoder (after the last packet or a decoding error)."""
    try:
        return list(stream.codec_context.decode(None))
    except Exception:  # noqa: BLE001
        return []


def incomplete(packet, file_size: int) -> bool:
    """True for a packet that runs past the end of a truncated file (its data is partial)."""
    return packet.pos is not None and packet.pos >= 0 and packet.pos + packet.size > file_size


def _decodable_pts(
    p: Path, packet_pts: np.ndarray, stream_index: int | None = None
) -> tuple[np.ndarray, int]:
    """Pts of the frames of a damaged file that really decode: the longest run from the first frame; with
    the decoder's reorder depth after the pass (FFmpeg's ``has_b_frames``, which it may raise while decoding).

    Decodes single-threaded (deterministic), stops before the first partial or undecodable packet,
    drains the decoder, drops frames flagged corrupt, and keeps only the frames up to the first one
    missing (in presentation order), so frame numbering never skips over a hole. The PyAV reader reads
    damaged files with the same settings and the same stopping rule.
    """
    container, stream = open_container(p, stream_index)
    stream.thread_type = "SLICE"
    stream.codec_context.thread_count = 1
    size = p.stat().st_size
    out: set[int] = set()
    depth = 0

    def keep(frames):
        out.update(int(f.pts) for f in frames if f.pts is not None and not getattr(f, "is_corrupt", False))

    try:
        for packet in container.demux(stream):
            if packet.size and incomplete(packet, size):
                break
            try:
                frames = packet.decode()
            except Exception:  # noqa: BLE001 - the damage itself: keep what decoded before it
                break
            keep(frames)
    except Exception:  # noqa: BLE001 - demuxing failed: keep what came out
        pass
    finally:
        depth = int(stream.codec_context.reorder_depth or 0)
        keep(drain(stream))
        container.close()
    present = np.isin(packet_pts, np.fromiter(out, dtype=np.int64, count=len(out)))
    run = int(np.argmin(present)) if not present.all() else present.size
    return packet_pts[:run], depth


def observed_reorder(decode_pts: list[int]) -> int:
    """Largest number of packets decoded before a frame yet shown after it, over ``decode_pts`` (pts in
    decode order): the reorder depth the packets themselves show (0 without B-frames)."""
    seen: list[int] = []
    depth = 0
    for ts in decode_pts:  # nearly sorted: each insertion lands near the end
        depth = max(depth, len(seen) - bisect_right(seen, ts))
        insort(seen, ts)
    return depth


def complete_prefix(sorted_pts: np.ndarray, decode_pts: list[int], decode_dts: list[int], depth: int) -> int:
    """How many of the first frames (presentation order) of a cut stream are certainly all there, so that the
    ``i``-th of them is the ``i``-th frame of the whole video.

    A frame whose packet lies past the cut can be shown before frames whose packets were read (a B-frame
    stored after the P-frame it precedes), and numbering by the pts that were read would then give frame
    ``i + 1`` the number ``i``. Two bounds exclude that; the prefix ends at the tighter:

    * reorder depth ``depth`` (at most ``depth`` frames are decoded before a frame and shown after it):
      every one of the ``M`` packets read is decoded before a missing frame, so at most ``depth`` of them
      are shown after it, and the first ``M - depth`` frames in presentation order were all read;
    * decode timestamps (``decode_dts``: those the container gives): a missing packet's dts exceeds every
      dts read (packets of a stream are stored in decode order) and no frame is shown before it is decoded
      (pts >= dts), so every frame with ``pts <= max(dts read)`` was read.

    Either bound alone suffices when its premise holds (the decoder's or the packets' reorder depth; the
    container's dts); the tighter of the two costs at most a frame or two more at the cut.
    """
    n = max(0, len(decode_pts) - max(0, depth))
    if decode_dts:
        n = min(n, int(np.searchsorted(sorted_pts, max(decode_dts), side="right")))
    return min(n, int(sorted_pts.size))


MATROSKA_SEGMENT = 0x18538067
MATROSKA_NAMES = {  # top-level elements, for messages
    MATROSKA_SEGMENT: "Segment",
    0x114D9B74: "SeekHead",
    0x1549A966: "Info",
    0x1654AE6B: "Tracks",
    0x1F43B675: "Cluster",
    0x1C53BB6B: "Cues",
    0x1941A469: "Attachments",
    0x1043A770: "Chapters",
    0x1254C367: "Tags",
}


def _ebml_head(f, at: int) -> tuple[int, int | None, int] | None:
    """(element id, data size or None when "unknown", header length) of the EBML element at byte ``at``,
    or None when the file ends inside the header or it is not a valid element header."""
    f.seek(at)
    head = f.read(12)
    if not head or head[0] == 0:
        return None
    id_len = 8 - head[0].bit_length() + 1
    if id_len > 4 or len(head) < id_len + 1 or head[id_len] == 0:
        return None
    eid = int.from_bytes(head[:id_len], "big")
    size_len = 8 - head[id_len].bit_length() + 1
    if len(head) < id_len + size_len:
        return None
    raw = int.from_bytes(head[id_len : id_len + size_len], "big") & ((1 << (7 * size_len)) - 1)
    unknown = raw == (1 << (7 * size_len)) - 1
    return eid, (None if unknown else raw), id_len + size_len


def matroska_cut(p: Path) -> str:
    """Why a Matroska/WebM file is cut short ("" when its elements end within the file, or when that cannot
    be told). FFmpeg's demuxer ends such a file quietly ("File ended prematurely" on its log) and a
    Matroska header counts no frames, so the element sizes are what show the cut: the Segment's (written
    by a seekable muxer), else each top-level child's (SeekHead, Info, Tracks, Cluster, Cues, ...)."""
    size = p.stat().st_size
    with open(p, "rb") as f:
        at = 0
        while at < size:
            el = _ebml_head(f, at)
            if el is None:  # an element header cut by the end of the file, or bytes that are no element
                return (
                    f"an element header at byte {at} runs past the end at byte {size}"
                    if size - at < 12
                    else ""
                )
            eid, length, head = el
            if length is not None:
                if at + head + length > size:
                    what = MATROSKA_NAMES.get(eid, f"element 0x{eid:X}")
                    return (
                        f"its {what} at byte {at} ends at byte {at + head + length}, the file at byte {size}"
                    )
                at += head + length
            elif eid == MATROSKA_SEGMENT:
                at += head  # unknown size (written as a stream): walk its children instead
            else:
                return ""  # an element of unknown size (a live-written Cluster): its end cannot be told
    return ""


def build_index(path: str | os.PathLike, use_cache: bool = True, stream: int | None = None) -> StreamIndex:
    """Demux the best video stream of ``path`` (or ``stream``) into a StreamIndex, using the disk cache.

    Only packets are read, plus the first frame (its display matrix)."""
    p = check_path(path)
    cf = _cache_file(p, stream) if use_cache else None
    if cf is not None and cf.is_file():
        cached = _load_cached(cf, str(p))
        if cached is not None:
            return cached
    container, stream = open_container(p, stream)
    try:
        cc = stream.codec_context
        pts_list: list[int] = []
        key_pts: list[int] = []
        dts_list: list[int] = []
        last_duration = 0
        open_gop = False
        cur_key = None
        last_end = 0
        errors = ""
        try:
            for packet in container.demux(stream):
                if packet.size == 0:
                    continue  # flush packet
                ts = packet.pts if packet.pts is not None else packet.dts
                if ts is None:
                    ts = (pts_list[-1] + max(last_duration, 1)) if pts_list else 0
                pts_list.append(ts)
                if packet.dts is not None:  # unset where lavf cannot tell (the first Matroska packets)
                    dts_list.append(packet.dts)
                if packet.is_keyframe:
                    key_pts.append(ts)
                    cur_key = ts
                elif cur_key is not None and ts < cur_key:
                    open_gop = True  # a leading picture: shown before the keyframe it follows
                last_duration = packet.duration or last_duration
                if packet.pos is not None and packet.pos >= 0:
                    last_end = max(last_end, packet.pos + packet.size)
        except Exception as e:  # noqa: BLE001 - a damaged tail: keep what demuxed cleanly
            errors = f"{type(e).__name__}: {e}"
        if not pts_list:
            raise VideoReadError(p, "video stream holds no frames" + (f" ({errors})" if errors else ""))
        pts = np.unique(np.asarray(pts_list, dtype=np.int64))
        declared = int(stream.frames or 0)
        cut = matroska_cut(p) if "matroska" in str(container.format.name) else ""
        damaged = bool(errors or cut) or declared > pts.size or (last_end > p.stat().st_size)
        if damaged:
            # a truncated/damaged file: keep only the frames that really decode (one full decode pass) and
            # that no frame past the cut is shown before (complete_prefix), so frame i is the i-th frame
            run, depth = _decodable_pts(p, pts, stream.index)
            depth = max(depth, int(cc.reorder_depth or 0), observed_reorder(pts_list))
            pts = run[: complete_prefix(run, pts_list, dts_list, depth)]
            if pts.size == 0:
                why = (
                    "no frame of the video stream decodes"
                    if run.size == 0
                    else f"too few packets are left to number its frames ({len(pts_list)} read, frames "
                    f"reordered up to {depth} deep)"
                )
                raise VideoReadError(p, f"{why} (damaged or truncated file)")
            declared = max(declared, len(pts_list))
        keys = np.searchsorted(pts, np.asarray(sorted(set(key_pts)), dtype=np.int64))
        keys = np.unique(np.concatenate([[0], keys[keys < len(pts)]])).astype(np.int64)
        has_b = bool(np.any(np.diff(np.asarray(pts_list, dtype=np.int64)) < 0)) or bool(cc.has_b_frames)
        tb = stream.time_base or Fraction(1, 1000)
        if last_duration <= 0:
            last_duration = int(np.median(np.diff(pts))) if len(pts) > 1 else 1
            if len(pts) == 1 and stream.average_rate:
                last_duration = max(1, int(round(1 / (float(stream.average_rate) * float(tb)))))
        from .orientation import ffmpeg_autorotate

        rotation, orient_op = ffmpeg_autorotate(_display_matrix(p, stream.index))
        pix_fmt = str(cc.pix_fmt or "")
        crange = {1: "tv", 2: "pc"}.get(int(getattr(cc, "color_range", 0) or 0), "")
        if pix_fmt.startswith("yuvj"):
            crange = "pc"
        idx = StreamIndex(
            path=str(p),
            stream_index=stream.index,
            pts=pts,
            keyframes=keys,
            time_base=Fraction(tb),
            avg_rate=float(stream.average_rate or 0.0),
            width=int(cc.width),
            height=int(cc.height),
            codec=str(cc.name),
            pix_fmt=pix_fmt,
            has_b_frames=has_b,
            declared_frames=declared,
            last_duration=int(last_duration),
            open_gop=open_gop,
            rotation=rotation,
            orient_op=orient_op,
            bit_depth=_bit_depth(pix_fmt),
            color_range=crange,
            video_streams=video_stream_indices(container),
            extra={"damaged": True, "demux_error": errors, "cut": cut} if damaged else {},
        )
    finally:
        container.close()
    if cf is not None and idx.num_frames >= CACHE_MIN_FRAMES and not damaged:
        _save_cached(cf, idx)
    return idx
