"""A corpus of indexed videos: the manifest ``vidlab index`` writes, and search across all of its caches.

``manifest.json`` (written atomically, under a lock) holds one *entry* per (model tag, sampling): the
model spec and tag, the sampling spec and, per video, its path, cache key, cache file and frame count.
Indexing into an existing folder **merges**: the entry for the same model tag and sampling keeps its
earlier videos (those whose cache file is still there) and gains or updates this run's; another
sampling gets its own entry. The newest entry is mirrored at the top level (``model``, ``model_tag``,
``sampling``, ``videos``) so readers of the first format keep working.

``Corpus.open`` memory-maps each cache (integrity-checked; a corrupt or missing one is skipped: listed in
``Corpus.skipped``, and logged once unless ``warn=False``, for a caller that reports them itself),
stacks the embeddings and hands them to a pluggable scorer (exact matmul by default, ``faiss`` for
millions of frames). By default it searches every video indexed with the newest entry's model tag
(a video indexed with several samplings is taken from the newest entry); ``sampling=`` picks one entry.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vidlab.errors import UserError

from .frame_index import FrameIndex, temporal_nms
from .scorers import make_scorer
from .store import CacheCorruptError

if TYPE_CHECKING:
    from .models import ClipModel

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"
FORMAT = "vidlab-corpus-v2"


class ManifestError(UserError, ValueError):
    """A corpus manifest that is missing, unreadable, or has no entry for the requested settings."""


@dataclass(frozen=True)
class SkippedVideo:
    """A video of the manifest that ``Corpus.open`` left out: its cache file is missing or fails its check."""

    video: str
    cache_file: str
    reason: str

    def __str__(self) -> str:
        return f"skipping {self.video}: {self.reason} (rerun `vidlab index` to rebuild it)"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def entries(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The (model tag, sampling) entries of a manifest, oldest first (a v1 manifest is one entry)."""
    if isinstance(manifest.get("entries"), list):
        return list(manifest["entries"])
    if "videos" in manifest:
        keys = ("model", "model_tag", "sampling", "updated", "num_videos", "num_frames", "videos")
        return [{k: manifest.get(k) for k in keys}]
    return []


def _entry(videos: list[dict[str, Any]], model_spec: str, model_tag: str, sampling: str) -> dict[str, Any]:
    videos = sorted(videos, key=lambda v: str(v.get("video", "")))
    return {
        "model": model_spec,
        "model_tag": model_tag,
        "sampling": sampling,
        "updated": _now(),
        "num_videos": len(videos),
        "num_frames": int(sum(int(v.get("frames", 0)) for v in videos)),
        "videos": videos,
    }


def write_manifest(
    index_dir: str | os.PathLike, videos: list[dict[str, Any]], model_spec: str, model_tag: str, sampling: str
) -> Path:
    """Merge this run's per-video records into ``index_dir/manifest.json`` (see module docstring)."""
    import filelock

    from vidlab.io import atomic_write_text

    index_dir = Path(index_dir)
    path = index_dir / MANIFEST
    index_dir.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(str(index_dir / ".manifest.lock"), timeout=120):
        old: list[dict[str, Any]] = []
        if path.is_file():
            try:
                old = entries(json.loads(path.read_text()))
            except (OSError, json.JSONDecodeError) as exc:
                log.warning("replacing unreadable manifest %s: %s", path, exc)
        same = [e for e in old if e.get("model_tag") == model_tag and e.get("sampling") == sampling]
        others = [e for e in old if e not in same]
        merged: dict[str, dict[str, Any]] = {}
        for ent in same:
            for v in ent.get("videos") or []:
                if (index_dir / str(v.get("cache_file", ""))).is_file():  # still there: keep it
                    merged[str(v.get("video"))] = v
        for v in videos:
            merged[str(v.get("video"))] = v
        entry = _entry(list(merged.values()), model_spec, model_tag, sampling)
        all_entries = [*others, entry]
        data = {"format": FORMAT, "updated": entry["updated"], "entries": all_entries}
        data.update(
            {k: entry[k] for k in ("model", "model_tag", "sampling", "num_videos", "num_frames", "videos")}
        )
        atomic_write_text(path, json.dumps(data, indent=1))
    return path


def read_manifest(index: str | os.PathLike) -> tuple[Path, dict[str, Any]]:
    """(index dir, manifest dict) for an index folder or a manifest file path."""
    from vidlab.io import file_problem

    p = Path(index)
    path = p / MANIFEST if p.is_dir() else p
    if not path.is_file():
        why = file_problem(path) or "not a file"
        raise ManifestError(
            f"no corpus manifest at {str(path)!r} ({why}); build one with `vidlab index ... --cache-dir DIR`"
        )
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ManifestError(f"corpus manifest {str(path)!r} is not valid JSON: {e}") from e
    if not isinstance(data, dict) or not entries(data):
        raise ManifestError(f"corpus manifest {str(path)!r} lists no indexed videos")
    return path.parent, data


def select_videos(
    manifest: dict[str, Any], model_tag: str | None = None, sampling: str | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(newest matching entry, the videos to search): every entry with that model tag (or the one with
    ``sampling``), one record per video, newest entry first."""
    ents = entries(manifest)
    if sampling is not None:
        ents = [e for e in ents if e.get("sampling") == sampling]
        if not ents:
            have = sorted({str(e.get("sampling")) for e in entries(manifest)})
            raise ManifestError(f"no index with sampling {sampling!r} in this corpus; it has {have}")
    if model_tag is None:
        model_tag = ents[-1].get("model_tag")
    ents = [e for e in ents if e.get("model_tag") == model_tag]
    if not ents:
        have = sorted({str(e.get("model_tag")) for e in entries(manifest)})
        raise ManifestError(f"no index made with model {model_tag!r} in this corpus; it has {have}")
    seen: dict[str, dict[str, Any]] = {}
    for e in reversed(ents):  # newest first
        for v in e.get("videos") or []:
            seen.setdefault(str(v.get("video")), v)
    return ents[-1], sorted(seen.values(), key=lambda v: str(v.get("video", "")))


class Corpus:
    """All cached videos of one manifest, searchable together."""

    def __init__(
        self,
        index_dir: Path,
        manifest: dict[str, Any],
        indexes: list[FrameIndex],
        model: Any,
        scorer: str,
        skipped: list[SkippedVideo] | None = None,
        **kw: Any,
    ):
        self.dir = index_dir
        self.skipped = list(skipped or [])
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
        sampling: str | None = None,
        warn: bool = True,
        **scorer_kw: Any,
    ) -> Corpus:
        """Load a manifest's caches (``verify`` re-hashes each; skip it for huge trusted corpora). A cache that is
        missing or fails its check is left out and listed in ``skipped`` (one log warning each when ``warn``)."""
        index_dir, manifest = read_manifest(index)
        newest, _ = select_videos(manifest, sampling=sampling)
        if model is None:
            from .models import load_model

            model = load_model(newest["model"])
        if not any(e.get("model_tag") == model.tag for e in entries(manifest)):
            raise ManifestError(
                f"corpus {str(index_dir)!r} was indexed with model {newest.get('model_tag')!r} but the model "
                f"loaded is {model.tag!r}; reindex or pass the same model"
            )
        _, videos = select_videos(manifest, model_tag=model.tag, sampling=sampling)
        indexes = []
        skipped: list[SkippedVideo] = []
        for v in videos:
            try:
                path = index_dir / v["cache_file"]
                indexes.append(FrameIndex.open(path, model=model, video_path=v.get("video"), verify=verify))
            except (CacheCorruptError, FileNotFoundError) as e:
                why = f"cache file {str(path)!r} is missing" if isinstance(e, FileNotFoundError) else str(e)
                skipped.append(SkippedVideo(str(v.get("video")), str(v.get("cache_file")), why))
                if warn:
                    log.warning("%s", skipped[-1])
        return cls(index_dir, manifest, indexes, model, scorer, skipped=skipped, **scorer_kw)

    def __len__(self) -> int:
        return int(self.embeddings.shape[0])

    def search(
        self, query: str | np.ndarray, k: int = 10, nms_window: int | None = None
    ) -> list[dict[str, Any]]:
        """Top-k frames across all videos: rows of video path, frame, time (s) and cosine score.

        With ``nms_window`` (frames of one video at least that far apart), candidates are widened (8k, then x4
        each round, up to every frame) until k survive the suppression: fewer than k come back only when the
        indexed frames cannot give k that far apart. Greedy NMS over the best candidates picks the same frames
        as over all of them, so widening changes how many come back, never which."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if isinstance(query, str) and not query.strip():
            raise ValueError("the query is empty: give a few words describing what to find")
        if self.scorer is None:
            return []
        q = self.model.embed_texts([query])[0] if isinstance(query, str) else np.asarray(query, np.float32)
        want = min(len(self), k * 8 if nms_window else k)
        while True:
            scores, rows = self.scorer.search(q, want)
            scores, rows = scores[0], rows[0]
            keep = rows >= 0
            scores, rows = scores[keep], rows[keep]
            if not nms_window:
                break
            picked = []  # NMS within each video, then the best k overall
            for vid in np.unique(self.video_rows[rows]):
                m = np.flatnonzero(self.video_rows[rows] == vid)
                picked.extend(m[temporal_nms(self.frames[rows[m]], scores[m], k, int(nms_window))].tolist())
            if len(picked) >= k or want >= len(self):
                sel = np.asarray(sorted(picked, key=lambda i: -scores[i])[:k], dtype=np.int64)
                scores, rows = scores[sel], rows[sel]
                break
            want = min(len(self), want * 4)
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
