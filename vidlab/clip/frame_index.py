"""A per-video, content-addressed cache of CLIP frame embeddings, with interval search and candidate lookup.

Cache key = SHA-256 of (content identity of the video, model tag, sampling spec, preprocessing id,
decode policy, format version); see :mod:`vidlab.identity` for the content identity. One
safetensors file per key (:mod:`vidlab.clip.store`) holds the sampled grid (fp16 embeddings, int64
frame indices, float64 timestamps) and the *extra* frames that :meth:`FrameIndex.candidates` decoded on
demand. ``search`` looks at the grid only, so its results depend on the key alone; ``candidates`` uses
grid and extras alike.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .pipeline import PipelineConfig, PipelineStats
from .sampling import Sampling
from .store import CacheCorruptError, file_lock, read_arrays, write_arrays

if TYPE_CHECKING:
    from .models import ClipModel

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
CACHE_ENV = "VIDLAB_CACHE"
# Frames are decoded scaled so their short side is DECODE_SCALE x the model's input size (never enlarged),
# then resized + centre-cropped by the model's preprocessing: cheaper than full-resolution decoding and
# within a pixel of it after the final resize. Part of the cache key.
DECODE_SCALE = 2
_EMPTY = np.zeros(0, dtype=np.int64)


class EmptyIntervalError(ValueError):
    """An interval [start, end) that holds no frame of the video."""


def default_cache_dir() -> Path:
    """``vidlab.paths.frame_index_dir()``: ``$VIDLAB_CACHE_DIR/frame_index`` (platform cache dir by default);
    the deprecated ``$VIDLAB_CACHE`` still works, with a DeprecationWarning."""
    from vidlab.paths import frame_index_dir

    return frame_index_dir()


def cache_key(content_id: str, model_tag: str, sampling: str, preprocess_id: str) -> str:
    """The cache key (32 hex chars) for one video x model x sampling x preprocessing."""
    parts = {
        "content": content_id,
        "model": model_tag,
        "sampling": sampling,
        "preprocess": preprocess_id,
        "decode": f"short-side-x{DECODE_SCALE}",
        "format": FORMAT_VERSION,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def video_content_id(path: str | os.PathLike, reader: Any) -> str:
    """Content identity of a video: sampled-chunk file hash mixed with its stream metadata."""
    from vidlab.identity import file_fingerprint

    extra = {
        "frames": reader.num_frames,
        "fps": round(float(reader.fps), 6),
        "w": reader.width,
        "h": reader.height,
    }
    op = getattr(getattr(reader, "index", None), "orient_op", "")
    if op and getattr(reader, "rotate", True):  # frames are shown rotated (a 180-degree turn keeps w and h)
        extra["orientation"] = op
    stream = getattr(reader, "stream", None)
    if stream is not None and len(getattr(reader.index, "video_streams", ())) > 1:
        extra["stream"] = int(stream)
    return file_fingerprint(path, extra=extra)


def decode_size(model: ClipModel, width: int, height: int) -> tuple[int, int] | None:
    """(w, h) box for decoding so the short side is DECODE_SCALE x the model's input; None = full size."""
    target = DECODE_SCALE * min(model.image_size)
    if min(width, height) <= target:
        return None
    if width >= height:
        return (int(np.ceil(width * target / height)) + 1, target)
    return (target, int(np.ceil(height * target / width)) + 1)


@dataclass
class SearchResult:
    """Top-k frames of one search: parallel arrays, sorted by score (descending) or by time."""

    frame_indices: np.ndarray
    timestamps: np.ndarray
    scores: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.frame_indices.size)

    def to_list(self) -> list[dict[str, float | int]]:
        """JSON-friendly rows."""
        return [
            {"frame": int(f), "time": float(t), "score": float(s)}
            for f, t, s in zip(self.frame_indices, self.timestamps, self.scores)
        ]


def temporal_nms(frames: np.ndarray, scores: np.ndarray, k: int, window: int) -> np.ndarray:
    """Greedy temporal NMS: positions of up to k best frames, none within ``window`` frames of a better one."""
    order = np.argsort(-scores, kind="stable")
    kept: list[int] = []
    kept_frames: list[int] = []
    for pos in order:
        f = int(frames[pos])
        if all(abs(f - g) > window for g in kept_frames):
            kept.append(int(pos))
            kept_frames.append(f)
            if len(kept) == k:
                break
    return np.asarray(kept, dtype=np.int64)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k highest scores, best first (ties by position)."""
    if k >= scores.size:
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part], kind="stable")]


class FrameIndex:
    """Cached CLIP embeddings of one video's sampled frames; build with :meth:`build`, reopen with :meth:`open`."""

    def __init__(
        self,
        path: Path,
        arrays: dict[str, np.ndarray],
        meta: dict[str, Any],
        model: ClipModel | None = None,
        video_path: str | os.PathLike | None = None,
    ) -> None:
        self.path = Path(path)
        self.meta = meta
        self.model = model
        self.video_path = Path(video_path) if video_path is not None else Path(meta.get("video_path", ""))
        self._reader: Any = None
        self._set_arrays(arrays)

    def _set_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.embeddings: np.ndarray = arrays["embeddings"]
        self.frame_indices: np.ndarray = arrays["frame_indices"]
        self.timestamps: np.ndarray = arrays["timestamps"]
        self.extra_embeddings: np.ndarray = arrays.get(
            "extra_embeddings", np.zeros((0, self.dim), np.float16)
        )
        self.extra_frame_indices: np.ndarray = arrays.get("extra_frame_indices", _EMPTY)
        self.extra_timestamps: np.ndarray = arrays.get("extra_timestamps", np.zeros(0, np.float64))

    def __repr__(self) -> str:
        return (
            f"FrameIndex({self.video_path.name!r}, frames={len(self)}, extra={self.extra_frame_indices.size}, "
            f"dim={self.dim}, model={self.meta.get('model_tag')!r}, sampling={self.meta.get('sampling')!r})"
        )

    def __len__(self) -> int:
        return int(self.frame_indices.size)

    # ----- properties -----------------------------------------------------------------------
    @property
    def key(self) -> str:
        return str(self.meta["key"])

    @property
    def dim(self) -> int:
        return int(self.meta["dim"])

    @property
    def num_frames(self) -> int:
        """Frames in the video (not in the index)."""
        return int(self.meta["video"]["num_frames"])

    @property
    def fps(self) -> float:
        return float(self.meta["video"]["fps"])

    # ----- construction ---------------------------------------------------------------------
    @classmethod
    def build(
        cls,
        video_path: str | os.PathLike,
        model: ClipModel,
        sampling: Sampling | str,
        cache_dir: str | os.PathLike | None = None,
        batch_size: int | None = None,
        progress: bool | None = None,
        rebuild: bool = False,
        pipeline: PipelineConfig | None = None,
        stats: PipelineStats | None = None,
    ) -> FrameIndex:
        """Open the cached index for (video, model, sampling) or build it: decode, embed, write atomically.

        Decoding runs ahead of the encoder on ``pipeline.decode_workers`` threads (``PipelineConfig()`` by
        default; ``decode_workers=0`` for the serial loop); the cache is byte-identical either way.
        ``stats`` (a :class:`~vidlab.clip.pipeline.PipelineStats`) is filled in when the index is built."""
        from vidlab.video import open_video

        sampling = Sampling.parse(sampling)
        cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        reader = open_video(video_path)
        content_id = video_content_id(video_path, reader)
        key = cache_key(content_id, model.tag, sampling.spec, model.preprocess_id)
        path = cache_dir / f"{key}.safetensors"
        if not rebuild:
            idx = cls._try_open(path, key, model, video_path)
            if idx is not None:
                idx._reader = reader
                return idx
        with file_lock(path):
            if not rebuild:  # another process may have finished it while we waited
                idx = cls._try_open(path, key, model, video_path)
                if idx is not None:
                    idx._reader = reader
                    return idx
            t0 = time.perf_counter()
            frames = sampling.frame_indices(reader.num_frames, reader.fps)
            emb = embed_frames(
                reader,
                model,
                frames,
                batch_size=batch_size,
                progress=progress,
                pipeline=pipeline if pipeline is not None else PipelineConfig(),
                stats=stats,
            )
            meta = {
                "key": key,
                "content_id": content_id,
                "video_path": str(Path(video_path).resolve()),
                "video": {
                    "num_frames": int(reader.num_frames),
                    "fps": float(reader.fps),
                    "width": int(reader.width),
                    "height": int(reader.height),
                    "duration": float(reader.duration),
                },
                "model_tag": model.tag,
                "sampling": sampling.spec,
                "preprocess_id": model.preprocess_id,
                "dim": int(model.dim),
                "format_version": FORMAT_VERSION,
                "build_seconds": round(time.perf_counter() - t0, 4),
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            arrays = {"embeddings": emb, "frame_indices": frames, "timestamps": reader.timestamps(frames)}
            write_arrays(path, arrays, meta)
        idx = cls.open(path, model=model, video_path=video_path)
        idx._reader = reader
        idx.meta["built"] = True
        return idx

    @classmethod
    def _try_open(cls, path: Path, key: str, model: ClipModel, video_path: Any) -> FrameIndex | None:
        """The cached index if present and intact; a corrupt one is reported, removed and rebuilt by the caller."""
        if not path.exists():
            return None
        try:
            idx = cls.open(path, model=model, video_path=video_path)
            if idx.meta.get("key") != key:
                raise CacheCorruptError(path, f"holds key {idx.meta.get('key')!r}, expected {key!r}")
            idx.meta["built"] = False
            return idx
        except CacheCorruptError as e:
            log.warning("%s; rebuilding it", e)
            path.unlink(missing_ok=True)
            return None

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        model: ClipModel | None = None,
        video_path: str | os.PathLike | None = None,
        verify: bool = True,
    ) -> FrameIndex:
        """Memory-map an existing cache file (CacheCorruptError if it fails its integrity check)."""
        arrays, meta = read_arrays(path, verify=verify)
        for name in ("embeddings", "frame_indices", "timestamps"):
            if name not in arrays:
                raise CacheCorruptError(path, f"array {name!r} missing")
        if model is not None and meta.get("model_tag") != model.tag:
            raise ValueError(
                f"cache {str(path)!r} was built with model {meta.get('model_tag')!r}, not {model.tag!r}; "
                "load that model to query it"
            )
        return cls(Path(path), arrays, meta, model=model, video_path=video_path)

    # ----- queries --------------------------------------------------------------------------
    def _query_vector(self, query: str | np.ndarray) -> np.ndarray:
        if isinstance(query, str):
            if self.model is None:
                raise ValueError("a text query needs the model: FrameIndex.open(path, model=load_model(tag))")
            return self.model.embed_texts([query])[0]
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.size != self.dim:
            raise ValueError(f"query embedding has {q.size} dims; this index has {self.dim}")
        return q

    def _interval(self, start: int | None, end: int | None) -> tuple[int, int]:
        n = self.num_frames
        s = 0 if start is None else int(start)
        e = n if end is None else min(int(end), n)
        if s < 0 or s >= n or e <= s:
            raise EmptyIntervalError(
                f"interval [{start}, {end}) holds no frame of {self.video_path.name or self.key} "
                f"(frames 0..{n - 1}; start must be < end)"
            )
        return s, e

    def search(
        self,
        query: str | np.ndarray,
        k: int = 10,
        start_frame: int | None = None,
        end_frame: int | None = None,
        nms_window: int | None = None,
        order: str = "score",
    ) -> SearchResult:
        """Exact top-k by cosine among indexed frames in [start_frame, end_frame); optional temporal NMS (frames)."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if order not in ("score", "time"):
            raise ValueError(f"order must be 'score' or 'time', got {order!r}")
        s, e = self._interval(start_frame, end_frame)
        q = self._query_vector(query)
        lo, hi = np.searchsorted(self.frame_indices, [s, e])
        frames = np.asarray(self.frame_indices[lo:hi])
        scores = np.asarray(self.embeddings[lo:hi], dtype=np.float32) @ q
        if nms_window:
            pos = temporal_nms(frames, scores, k, int(nms_window))
        else:
            pos = top_k(scores, k)
        if order == "time":
            pos = pos[np.argsort(frames[pos], kind="stable")]
        ts = np.asarray(self.timestamps[lo:hi])
        return SearchResult(
            frames[pos].astype(np.int64), ts[pos].astype(np.float64), scores[pos].astype(np.float32)
        )

    def candidate_frames(self, start: int, end: int, k: int) -> np.ndarray:
        """``uniform_indices(start, end - 1, k)`` (linspace truncated to int, de-duplicated), end clipped to
        the video: exactly VideoBrain's clip_sample candidate grid."""
        from vidlab.video import uniform_indices

        if k < 1:
            raise ValueError(f"the number of candidates must be >= 1, got {k}")
        s, e = self._interval(start, end)
        return uniform_indices(s, e - 1, k, unique=True)

    def candidates(self, start: int, end: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Frames ``linspace(start, end-1, k)`` (see ``candidate_frames``) and their float32 embeddings;
        missing ones are decoded, embedded and added to the cache."""
        frames = self.candidate_frames(start, end, k)
        return frames, self.frame_embeddings(frames)

    def frame_embeddings(self, frames: np.ndarray | list[int]) -> np.ndarray:
        """float32 [N, D] embeddings of any frames: from the grid or extras, else decoded, embedded and cached."""
        frames = np.asarray(frames, dtype=np.int64).reshape(-1)
        if frames.size and (frames.min() < 0 or frames.max() >= self.num_frames):
            raise IndexError(
                f"frames must lie in 0..{self.num_frames - 1}, got {frames.min()}..{frames.max()}"
            )
        emb, found = self._lookup(frames)
        if not found.all():
            self._add_extra(np.unique(frames[~found]))
            emb, found = self._lookup(frames)
            assert found.all()
        return emb

    def _lookup(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = np.zeros((frames.size, self.dim), dtype=np.float32)
        found = np.zeros(frames.size, dtype=bool)
        for src_frames, src_emb in (
            (self.frame_indices, self.embeddings),
            (self.extra_frame_indices, self.extra_embeddings),
        ):
            if src_frames.size == 0:
                continue
            pos = np.searchsorted(src_frames, frames)
            pos_c = np.minimum(pos, src_frames.size - 1)
            hit = (~found) & (np.asarray(src_frames)[pos_c] == frames)
            if hit.any():
                out[hit] = src_emb[pos_c[hit]]
                found |= hit
        return out, found

    def reader(self) -> Any:
        """The video reader (opened lazily; used for on-demand candidates)."""
        if self._reader is None:
            from vidlab.video import open_video

            if not self.video_path or not self.video_path.is_file():
                raise FileNotFoundError(f"video {str(self.video_path)!r} of cache {self.key} is not there")
            self._reader = open_video(self.video_path)
        return self._reader

    def _add_extra(self, frames: np.ndarray) -> None:
        """Decode + embed ``frames``, merge them into the cache file's extras under a lock, remap."""
        if self.model is None:
            raise ValueError("adding candidates needs the model: FrameIndex.open(path, model=...)")
        reader = self.reader()
        new_emb = embed_frames(reader, self.model, frames)
        new_ts = reader.timestamps(frames)
        with file_lock(self.path):
            try:  # merge with what other processes may have added meanwhile
                arrays, meta = read_arrays(self.path)
                arrays = {k: np.array(v) for k, v in arrays.items()}
            except (FileNotFoundError, CacheCorruptError) as e:
                log.warning("cache %s unusable while adding candidates (%s); rewriting it", self.path, e)
                arrays = {
                    "embeddings": np.array(self.embeddings),
                    "frame_indices": np.array(self.frame_indices),
                    "timestamps": np.array(self.timestamps),
                }
                meta = {k: v for k, v in self.meta.items() if k != "built"}
            ef = np.concatenate([arrays.get("extra_frame_indices", _EMPTY), frames])
            ee = np.concatenate(
                [arrays.get("extra_embeddings", np.zeros((0, self.dim), np.float16)), new_emb]
            )
            et = np.concatenate([arrays.get("extra_timestamps", np.zeros(0)), new_ts])
            ef, first = np.unique(ef, return_index=True)
            arrays.update(extra_frame_indices=ef, extra_embeddings=ee[first], extra_timestamps=et[first])
            write_arrays(self.path, arrays, meta)
            arrays, _ = read_arrays(self.path, verify=False)
        self._set_arrays(arrays)


def embed_frames(
    reader: Any,
    model: ClipModel,
    frames: np.ndarray,
    batch_size: int | None = None,
    progress: bool | None = None,
    pipeline: PipelineConfig | None = None,
    stats: PipelineStats | None = None,
) -> np.ndarray:
    """fp16 [N, D] embeddings of ``frames`` decoded chunk by chunk (bounded memory) through ``reader``.

    With ``pipeline`` (and ``pipeline.decode_workers >= 1``) sorted frames are decoded by parallel workers
    ahead of the encoder (:mod:`vidlab.clip.pipeline`), with the same batches and so the same bytes; without it,
    or with ``decode_workers=0``, serially: decode a batch, embed it, decode the next."""
    from tqdm.auto import tqdm

    bs = batch_size or model.batch_size
    size = decode_size(model, reader.width, reader.height)
    out = np.empty((frames.size, model.dim), dtype=np.float16)
    show = progress if progress is not None else frames.size >= 8 * bs
    name = Path(str(getattr(reader, "path", "video"))).name
    parallel = (
        pipeline is not None
        and pipeline.decode_workers >= 1
        and frames.size > 0
        and bool(np.all(np.diff(frames) > 0))
    )
    with tqdm(total=frames.size, desc=f"index {name}", unit="frame", disable=not show) as bar:
        if parallel and pipeline is not None:
            from .pipeline import embed_pipelined

            return embed_pipelined(reader, model, frames, size, bs, pipeline, bar=bar, stats=stats)
        for s in range(0, frames.size, bs):
            chunk = frames[s : s + bs]
            out[s : s + chunk.size] = model.embed_images(reader.get_frames(chunk, size=size), progress=False)
            bar.update(chunk.size)
    return out
