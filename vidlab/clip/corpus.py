"""A corpus of indexed videos: the manifest ``vidlab index`` writes, and search across all of its caches.

``manifest.json`` (written atomically) records the model spec and tag, the sampling spec and, per
video, its path, cache key, cache file and frame count. ``Corpus.open`` memory-maps each cache
(integrity-checked; a corrupt one is skipped with a warning), stacks the embeddings and hands them to a
pluggable scorer (exact matmul by default, ``faiss`` for millions of frames).
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .frame_index import FrameIndex, temporal_nms
from .scorers import make_scorer
from .store import CacheCorruptError

if TYPE_CHECKING:
    from .models import ClipModel

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"


def write_manifest(
    index_dir: str | os.PathLike, videos: list[dict[str, Any]], model_spec: str, model_tag: str, sampling: str
) -> Path:
    """Atomically write ``index_dir/manifest.json`` for the given per-video records."""
    path = Path(index_dir) / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "format": "vidlab-corpus-v1",
        "model": model_spec,
        "model_tag": model_tag,
        "sampling": sampling,
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "num_videos": len(videos),
        "num_frames": int(sum(int(v.get("frames", 0)) for v in videos)),
        "videos": sorted(videos, key=lambda v: str(v.get("video", ""))),
    }
    tmp = path.with_name(f".{MANIFEST}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)
    return path


def read_manifest(index: str | os.PathLike) -> tuple[Path, dict[str, Any]]:
    """(index dir, manifest dict) for an index folder or a manifest file path."""
    p = Path(index)
    path = p / MANIFEST if p.is_dir() else p
    if not path.is_file():
        raise FileNotFoundError(
            f"no corpus manifest at {str(path)!r}; build one with `vidlab index ... --cache-dir DIR`"
        )
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"corpus manifest {str(path)!r} is not valid JSON: {e}") from e
    return path.parent, data


class Corpus:
    """All cached videos of one manifest, searchable together."""

    def __init__(
        self,
        index_dir: Path,
        manifest: dict[str, Any],
        indexes: list[FrameIndex],
        model: Any,
        scorer: str,
        **kw: Any,
    ):
        self.dir = index_dir
        self.manifest = manifest
        self.indexes = indexes
        self.model = model
        self.scorer_name = scorer
        emb = [np.asarray(ix.embeddings) for ix in indexes]
        d = int(indexes[0].dim) if indexes else 1
        self.embeddings = np.concatenate(emb) if emb else np.zeros((0, d), np.float16)
        self.video_rows = np.concatenate(
            [np.full(len(ix), i, np.int32) for i, ix in enumerate(indexes)] or [_i32()]
        )
        self.frames = np.concatenate(
            [np.asarray(ix.frame_indices) for ix in indexes] or [np.zeros(0, np.int64)]
        )
        self.times = np.concatenate([np.asarray(ix.timestamps) for ix in indexes] or [np.zeros(0)])
        self.scorer = make_scorer(scorer, self.embeddings, **kw) if len(self.embeddings) else None

    @classmethod
    def open(
        cls,
        index: str | os.PathLike,
        model: ClipModel | None = None,
        scorer: str = "exact",
        verify: bool = True,
        **scorer_kw: Any,
    ) -> Corpus:
        """Load a manifest's caches (``verify`` re-hashes each; skip it for huge trusted corpora)."""
        index_dir, manifest = read_manifest(index)
        if model is None:
            from .models import load_model

            model = load_model(manifest["model"])
        if model.tag != manifest.get("model_tag"):
            raise ValueError(
                f"corpus {str(index_dir)!r} was indexed with model {manifest.get('model_tag')!r} but the model "
                f"loaded is {model.tag!r}; reindex or pass the same model"
            )
        indexes = []
        for v in manifest.get("videos", []):
            try:
                path = index_dir / v["cache_file"]
                indexes.append(FrameIndex.open(path, model=model, video_path=v.get("video"), verify=verify))
            except (CacheCorruptError, FileNotFoundError) as e:
                log.warning("skipping %s: %s (rerun `vidlab index` to rebuild it)", v.get("video"), e)
        return cls(index_dir, manifest, indexes, model, scorer, **scorer_kw)

    def __len__(self) -> int:
        return int(self.embeddings.shape[0])

    def search(
        self, query: str | np.ndarray, k: int = 10, nms_window: int | None = None
    ) -> list[dict[str, Any]]:
        """Top-k frames across all videos: rows of video path, frame, time (s) and cosine score."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if self.scorer is None:
            return []
        q = self.model.embed_texts([query])[0] if isinstance(query, str) else np.asarray(query, np.float32)
        want = min(len(self), k * 8 if nms_window else k)
        scores, rows = self.scorer.search(q, want)
        scores, rows = scores[0], rows[0]
        keep = rows >= 0
        scores, rows = scores[keep], rows[keep]
        if nms_window:  # NMS within each video, then the best k overall
            picked = []
            for vid in np.unique(self.video_rows[rows]):
                m = np.flatnonzero(self.video_rows[rows] == vid)
                picked.extend(m[temporal_nms(self.frames[rows[m]], scores[m], k, int(nms_window))].tolist())
            sel = np.asarray(sorted(picked, key=lambda i: -scores[i])[:k], dtype=np.int64)
            scores, rows = scores[sel], rows[sel]
        return [
            {
                "video": str(self.indexes[int(self.video_rows[r])].video_path),
                "frame": int(self.frames[r]),
                "time": round(float(self.times[r]), 4),
                "score": round(float(s), 6),
            }
            for r, s in zip(rows[:k], scores[:k])
        ]


def _i32() -> np.ndarray:
    return np.zeros(0, np.int32)
