"""Video-MME: ``videomme/test-00000-of-00001.parquet`` + ``data/{videoID}.mp4`` (also ``.MP4``, ``.mkv``).

Record fields used: ``video_id, duration`` ("short" | "medium" | "long"), ``domain, sub_category,
videoID, question_id, task_type, question, options`` (already prefixed "A. "), ``answer`` (letter).
``split="long"`` (or short / medium) keeps one duration category: the long split is 30-60 min videos.
"""

from __future__ import annotations

from pathlib import Path

from vidlab.understanding.benchmarks.items import (
    BenchmarkError,
    LoadResult,
    Problem,
    QAItem,
    QAItemError,
    answer_letter,
    build,
    find_video,
    read_parquet,
    strip_letter,
)

SPLITS = ("short", "medium", "long")


def load(path: str | Path, split: str | None = None, video_dir: str | Path | None = None) -> LoadResult:
    """Read a local Video-MME copy; ``split`` filters by duration category."""
    p = Path(path)
    if split is not None and split not in SPLITS:
        raise BenchmarkError(p, f"unknown split {split!r}; Video-MME splits by duration: {SPLITS}")
    if p.is_file():
        root, files = (p.parent.parent if p.parent.name == "videomme" else p.parent), [p]
    else:
        root = p
        files = sorted(p.glob("videomme/*.parquet")) or sorted(p.rglob("*.parquet"))
    if not files:
        raise BenchmarkError(p, "no parquet file (expected videomme/test-00000-of-00001.parquet)")
    vdirs = [Path(video_dir)] if video_dir else [root / "data", root / "videos", root]
    items: list[QAItem] = []
    problems: list[Problem] = []
    for f in files:
        for n, rec in enumerate(read_parquet(f)):
            qid = str(rec.get("question_id") or f"{f.name}#{n}")
            if split and rec.get("duration") != split:
                continue
            options = [strip_letter(o) for o in (rec.get("options") or [])] or None
            try:
                answer = answer_letter(rec.get("answer"), options, qid, forms=("letter", "text"))
            except QAItemError as e:
                problems.append(Problem(qid, e.reason, str(f)))
                continue
            build(
                items,
                problems,
                str(f),
                qid,
                video_path=str(find_video(vdirs, str(rec.get("videoID") or rec.get("video_id")))),
                question=rec.get("question", ""),
                options=options,
                answer=answer,
                category=str(rec.get("task_type") or ""),
                duration=None,
                duration_group=str(rec.get("duration") or ""),
                extra={
                    k: rec[k] for k in ("video_id", "videoID", "domain", "sub_category", "url") if rec.get(k)
                },
            )
    return LoadResult("videomme", items, problems)
