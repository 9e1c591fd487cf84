"""Index many videos as one resumable job (local or Ray): the engine behind ``vidlab index``."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from vidlab.config import in_range, validate
from vidlab.distributed import RunConfig
from vidlab.distributed.config import TOP_LEVEL_RUN_KEYS

VIDEO_EXTS = (".mp4", ".mkv", ".webm", ".mov", ".avi", ".m4v", ".mpg", ".mpeg", ".ts")


def collect_videos(inputs: list[str], exts: tuple[str, ...] = VIDEO_EXTS) -> list[Path]:
    """Videos named by ``inputs``: folders (searched recursively), list files (one path per line, read by the
    one path rule of :mod:`vidlab.datafiles`: a relative line resolves against the list file's folder), or files."""
    from vidlab.datafiles import resolve_path

    out: list[Path] = []
    for raw in inputs:
        p = Path(raw).expanduser()
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() in exts))
        elif p.is_file() and p.suffix.lower() in (".txt", ".lst", ".list"):
            for line in p.read_text().splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    out.append(resolve_path(line, p))
        elif p.exists() or p.suffix.lower() in exts:
            out.append(p)  # a missing video file becomes a recorded failure, not a crash
        else:
            raise FileNotFoundError(f"input {raw!r} is not a folder, a list file or a video")
    seen: set[str] = set()
    unique = []
    for q in out:
        try:
            key = str(q.resolve())
        except (OSError, RuntimeError):  # a symlink loop: keep it, open_video reports it as one
            key = str(q.absolute())
        if key not in seen:
            seen.add(key)
            unique.append(q)
    return unique


class IndexWorker:
    """Stateful job worker: loads the CLIP model once, then builds (or finds) one frame index per item."""

    def __init__(
        self,
        model: str,
        sampling: str,
        cache_dir: str,
        device: str = "auto",
        batch_size: int = 64,
        torch_threads: int | None = None,
        decode_workers: int = 2,
        queue_depth: int = 2,
    ) -> None:
        import vidlab.video  # noqa: F401 - import everything an item needs now, not on the first item

        from . import frame_index  # noqa: F401
        from .models import load_model
        from .pipeline import PipelineConfig
        from .sampling import Sampling

        if torch_threads:
            import torch

            torch.set_num_threads(int(torch_threads))
        self.model = load_model(model, device=device, batch_size=batch_size)
        self.sampling = Sampling.parse(sampling)
        self.cache_dir = cache_dir
        self.pipeline = PipelineConfig(decode_workers=decode_workers, queue_depth=queue_depth)

    def prefetch(self, item: dict[str, Any]) -> None:
        """Probe the next video (its packet index, cached on disk, and the file's first bytes) on a thread while
        this one is encoded, so a video's set-up overlaps the previous video's encoding (the local backend calls
        it; errors are left for ``process`` to report)."""
        import threading

        def warm(path: str) -> None:
            try:
                from vidlab.video import open_video

                open_video(path).close()
            except Exception:  # noqa: BLE001 - process() opens it again and records what is wrong
                pass

        thread = threading.Thread(
            target=warm, args=(str(item["path"]),), name="vidlab-index-prefetch", daemon=True
        )
        thread.start()
        self._prefetched = (str(item["path"]), thread)

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        from .frame_index import FrameIndex

        ahead = getattr(self, "_prefetched", None)
        if ahead is not None and ahead[0] == str(item["path"]):
            ahead[1].join()  # one probe of the file at a time
        t0 = time.perf_counter()
        idx = FrameIndex.build(
            item["path"],
            self.model,
            self.sampling,
            cache_dir=self.cache_dir,
            progress=False,
            pipeline=self.pipeline,
        )
        return {
            "video": str(Path(item["path"]).resolve()),
            "cache_file": idx.path.name,
            "key": idx.key,
            "content_id": idx.meta["content_id"],
            "frames": len(idx),
            "video_frames": idx.num_frames,
            "built": bool(idx.meta.get("built")),
            "seconds": round(time.perf_counter() - t0, 4),
        }


@dataclass
class IndexReport:
    """Outcome of indexing a set of videos (what the CLI prints and saves as summary.json)."""

    videos: int
    indexed: int
    cached: int
    failures: int
    frames: int
    frames_embedded: int
    seconds: float
    frames_per_s: float
    steady_frames_per_s: float
    manifest: str
    job_dir: str
    errors: list[dict[str, Any]] = field(default_factory=list)
    failures_file: str | None = None  # every failed video (path, reason), one JSON line each


def job_dir_for(cache_dir: str | os.PathLike, model_spec: str, sampling: str) -> Path:
    """Job-record folder for one (model, sampling) pair under the cache folder."""
    slug = re.sub(r"[^A-Za-z0-9._=-]+", "_", f"{model_spec}__{sampling}")[-100:]
    return Path(cache_dir) / "jobs" / slug


def _stat(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None  # a missing video becomes a recorded failure
    return [st.st_size, st.st_mtime_ns]


@dataclass
class IndexConfig:
    """Options of ``vidlab index`` (saved as config.yaml in the job folder); ``run`` says where it runs."""

    # before the one `run:` block (they work for one release, with a warning)
    LEGACY_KEYS: ClassVar[dict[str, str]] = TOP_LEVEL_RUN_KEYS

    inputs: tuple[str, ...] = ()
    cache_dir: str = ""
    model: str = "vidlab-tiny"
    sampling: str = "fps=1"
    device: str = "auto"
    batch_size: int = field(default=64, metadata=in_range(1))
    torch_threads: int | None = field(default=None, metadata=in_range(1))
    # the indexing pipeline (vidlab/clip/pipeline.py): decoding threads per worker (0 = serial decode-then-embed)
    # and decoded batches that may wait for the encoder; defaults suit 2 cores (docs/guides/clip-index.md)
    decode_workers: int = field(default=2, metadata=in_range(0))
    queue_depth: int = field(default=2, metadata=in_range(1))
    run: RunConfig = field(default_factory=lambda: RunConfig(retries=2))

    def __post_init__(self) -> None:
        validate(self)


def index_videos(
    videos: list[Path],
    cfg: IndexConfig,
    *,
    job_dir: str | os.PathLike | None = None,
    progress: bool | None = None,
) -> IndexReport:
    """Index ``videos`` into ``cfg.cache_dir`` as a resumable job where ``cfg.run`` says, then (re)write the
    corpus manifest."""
    from vidlab.distributed import read_job, require_fields, run_job

    from .corpus import write_manifest
    from .models import load_model
    from .sampling import Sampling

    cache_dir = Path(cfg.cache_dir)
    sampling = Sampling.parse(cfg.sampling).spec
    device, model = cfg.device, cfg.model
    tag = load_model(model, device="cpu" if device == "auto" else device).tag  # validates the spec up front
    job = Path(job_dir) if job_dir else job_dir_for(cache_dir, tag, sampling)
    # size + mtime in the item: a video rewritten in place changes its item, so its old record no longer
    # counts (run_job compares item hashes) and it is re-indexed instead of keeping the old content's cache
    items = [{"id": str(v.resolve()), "path": str(v), "stat": _stat(v)} for v in videos]
    kwargs = {
        "model": model,
        "sampling": sampling,
        "cache_dir": str(cache_dir.resolve()),
        "device": device,
        "batch_size": cfg.batch_size,
        "torch_threads": cfg.torch_threads,
        "decode_workers": cfg.decode_workers,
        "queue_depth": cfg.queue_depth,
    }

    def cache_intact(item: dict[str, Any], result: dict[str, Any]) -> bool:
        """A finished video counts only while its cache file is there and passes the integrity check."""
        from .store import CacheCorruptError, read_arrays

        try:
            read_arrays(cache_dir / str(result.get("cache_file", "")))
        except (OSError, CacheCorruptError):
            return False
        return True

    # a results line with these missing or of another type is damaged: reported as file:line and redone
    fields = require_fields(video=str, cache_file=str, frames=int, built=bool)
    summary = run_job(
        items,
        IndexWorker,
        job,
        run=cfg.run,
        worker_kwargs=kwargs,
        validate=cache_intact,
        desc="index videos",
        progress=progress,
        check_result=fields,
        announce_resume=False,  # the cache is reused by design; the summary line counts what was cached
    )
    records = read_job(job, ids=[str(it["id"]) for it in items], check_result=fields)
    ok = list(records.ok.values())
    failed = [
        {"id": rid, **{k: v for k, v in err.items() if k != "item"}} for rid, err in records.failed.items()
    ]
    ok = [r for r in ok if (cache_dir / r["cache_file"]).is_file()]
    manifest = write_manifest(cache_dir, ok, model, tag, sampling)
    from vidlab.outcome import Failure, write_failures

    listed = write_failures(  # a video's id is its resolved path
        job / "failures.jsonl",
        [Failure(e["id"], f"{e.get('type', 'Error')}: {e.get('message', '')}", e["id"]) for e in failed],
    )
    fresh = [records.ok[rid] for rid in summary.done_ids if rid in records.ok]
    embedded = sum(r["frames"] for r in fresh if r.get("built"))
    return IndexReport(
        videos=len(items),
        indexed=sum(1 for r in fresh if r.get("built")),
        cached=len(ok) - sum(1 for r in fresh if r.get("built")),
        failures=len(failed),
        frames=int(sum(r["frames"] for r in ok)),
        frames_embedded=int(embedded),
        seconds=summary.seconds,
        frames_per_s=round(embedded / summary.seconds, 2) if summary.seconds > 0 else 0.0,
        steady_frames_per_s=round(embedded / max(1e-9, summary.seconds - summary.startup_seconds), 2),
        manifest=str(manifest),
        job_dir=str(job),
        errors=failed,
        failures_file=str(listed) if listed else None,
    )
