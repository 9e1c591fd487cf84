"""LongVideoBench: ``lvb_val.json`` / ``lvb_test_wo_gt.json`` (or the parquet release) + ``videos/``.

Record fields used: ``id, video_id, video_path, question, candidates`` (or ``option0..4`` padded with
"N/A" in parquet), ``correct_choice`` (int; absent in test), ``question_category, duration_group, duration``.
Answer letter = ``chr(65 + correct_choice)`` as in lmms-eval.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vidlab.understanding.benchmarks.items import (
    BenchmarkError,
    LoadResult,
    Problem,
    QAItem,
    QAItemError,
    answer_letter,
    build,
    find_video,
    read_json,
    read_parquet,
)

SPLIT_FILES = {"val": "lvb_val.json", "test": "lvb_test_wo_gt.json"}


def _files(path: Path, split: str | None) -> tuple[Path, list[Path]]:
    if path.is_file():
        return path.parent, [path]
    name = SPLIT_FILES.get(split or "val")
    if name is None:
        raise BenchmarkError(path, f"unknown split {split!r}; known: {sorted(SPLIT_FILES)}")
    if (path / name).is_file():
        return path, [path / name]
    parquets = sorted(path.rglob(f"*{split or 'val'}*.parquet")) or sorted(path.rglob("*.parquet"))
    if parquets:
        return path, parquets
    raise BenchmarkError(
        path, f"no {name} (or parquet files) here; expected the LongVideoBench release layout"
    )


def _options(rec: dict[str, Any]) -> list[str] | None:
    cands = rec.get("candidates")
    if cands:
        return [str(c) for c in cands]
    opts = [rec.get(f"option{i}") for i in range(5)]
    opts = [o for o in opts if o is not None]
    while opts and str(opts[-1]).strip() == "N/A":
        opts.pop()
    return [str(o) for o in opts] or None


def load(path: str | Path, split: str | None = None, video_dir: str | Path | None = None) -> LoadResult:
    """Read a local LongVideoBench copy (dir or annotation file)."""
    root, files = _files(Path(path), split)
    vdirs = [Path(video_dir)] if video_dir else [root / "videos", root]
    items: list[QAItem] = []
    problems: list[Problem] = []
    for f in files:
        records = read_parquet(f) if f.suffix == ".parquet" else read_json(f)
        if not isinstance(records, list):
            raise BenchmarkError(f, f"expected a list of records, got {type(records).__name__}")
        for n, rec in enumerate(records):
            qid = str(rec.get("id", f"{f.name}#{n}"))
            options = _options(rec)
            if rec.get("correct_choice") is None:
                problems.append(Problem(qid, "no correct_choice (test split answers are hidden)", str(f)))
                continue
            try:
                answer = answer_letter(rec["correct_choice"], options, qid, forms=("index",))
            except QAItemError as e:
                problems.append(Problem(qid, e.reason, str(f)))
                continue
            video = rec.get("video_path") or f"{rec.get('video_id')}.mp4"
            build(
                items,
                problems,
                str(f),
                qid,
                video_path=str(find_video(vdirs, str(video))),
                question=rec.get("question", ""),
                options=options,
                answer=answer,
                category=str(rec.get("question_category") or ""),
                duration=rec.get("duration"),
                duration_group=str(rec.get("duration_group") or ""),
                extra={
                    k: rec[k]
                    for k in (
                        "video_id",
                        "topic_category",
                        "level",
                        "position",
                        "subtitle_path",
                        "starting_timestamp_for_subtitles",
                    )
                    if rec.get(k) is not None
                },
            )
    return LoadResult("longvideobench", items, problems)
