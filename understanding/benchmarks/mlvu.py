"""MLVU: the official ``json/`` (or ``data/``) task files, or lmms-eval's dev parquet.

Official: ``{1_plotQA,2_needle,...,9_summary}.json`` with records ``video, duration (s), question,
candidates, answer`` (the option TEXT), ``question_type``; videos under ``video/{task_file_stem}/``.
Tasks without candidates (sub-scene captioning, summary) are open-ended. A record whose answer is not
among its candidates (two needle records in the release) is reported as a problem and skipped.
lmms-eval dev parquet: ``video_name, duration, question`` (options inline as ``(A) ...``), ``candidates,
answer`` (letter), ``task_type, question_id``.
"""

from __future__ import annotations

import re
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
    split_inline_options,
)

_TASK_FILE = re.compile(r"^(\d+)_(.+)\.json$")


def _task_files(root: Path) -> list[Path]:
    for sub in ("json", "data", "."):
        files = sorted(f for f in (root / sub).glob("*.json") if _TASK_FILE.match(f.name))
        if files:
            return files
    return []


def load(path: str | Path, split: str | None = None, video_dir: str | Path | None = None) -> LoadResult:
    """Read a local MLVU copy (official task JSONs or the lmms-eval dev parquet); ``split`` = a task name."""
    p = Path(path)
    if p.is_file() and p.suffix == ".parquet":
        return _load_parquet([p], p.parent, split, video_dir)
    if p.is_file():
        return _load_official(
            [p], p.parent.parent if p.parent.name in ("json", "data") else p.parent, split, video_dir
        )
    files = _task_files(p)
    if files:
        return _load_official(files, p, split, video_dir)
    parquets = sorted(p.rglob("*.parquet"))
    if parquets:
        return _load_parquet(parquets, p, split, video_dir)
    raise BenchmarkError(p, "no MLVU task files (json/N_task.json) and no parquet here")


def _load_official(files: list[Path], root: Path, split: str | None, video_dir: Any) -> LoadResult:
    items: list[QAItem] = []
    problems: list[Problem] = []
    for f in files:
        task_dir = f.stem
        task = _TASK_FILE.match(f.name).group(2) if _TASK_FILE.match(f.name) else f.stem
        if split and split not in (task, task_dir):
            continue
        records = read_json(f)
        if not isinstance(records, list):
            raise BenchmarkError(f, f"expected a list of records, got {type(records).__name__}")
        vdirs = (
            [Path(video_dir)] if video_dir else [root / "video" / task_dir, root / "video", root / "videos"]
        )
        for n, rec in enumerate(records):
            qid = f"{task}_{n}"
            cands = rec.get("candidates")
            mc = bool(cands)
            if mc:
                try:
                    answer = answer_letter(rec.get("answer"), [str(c) for c in cands], qid, forms=("text",))
                except QAItemError as e:
                    problems.append(Problem(qid, e.reason, str(f)))
                    continue
            else:
                answer = str(rec.get("answer") or "")
            build(
                items,
                problems,
                str(f),
                qid,
                video_path=str(find_video(vdirs, str(rec.get("video")))),
                question=rec.get("question", ""),
                options=[str(c) for c in cands] if mc else None,
                answer=answer,
                question_type="mc" if mc else "oe",
                category=str(rec.get("question_type") or task),
                duration=rec.get("duration"),
                extra={"task": task, "video": rec.get("video")},
            )
    return LoadResult("mlvu", items, problems)


def _load_parquet(files: list[Path], root: Path, split: str | None, video_dir: Any) -> LoadResult:
    items: list[QAItem] = []
    problems: list[Problem] = []
    vdirs = [Path(video_dir)] if video_dir else [root / "video", root / "videos", root]
    for f in files:
        for n, rec in enumerate(read_parquet(f)):
            qid = str(rec.get("question_id") or f"{f.name}#{n}")
            task = str(rec.get("task_type") or "")
            if split and split != task:
                continue
            stem, inline = split_inline_options(rec.get("question", ""))
            options = [str(c) for c in (rec.get("candidates") or [])] or inline or None
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
                video_path=str(find_video(vdirs, str(rec.get("video_name")))),
                question=stem,
                options=options,
                answer=answer,
                category=task,
                duration=rec.get("duration"),
                extra={"task": task},
            )
    return LoadResult("mlvu", items, problems)
