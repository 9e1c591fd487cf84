"""LVBench: ``video_info.meta.jsonl`` (one line per video with its ``qa`` list) or lmms-eval's flat parquet.

Official line: ``key`` (YouTube id), ``type``, ``qa``: ``[{uid, question`` (options inline as
``\\n(A) ...``), ``answer`` (letter), ``question_type`` (list), ``time_reference``}]``; videos ``{key}.mp4``.
Rows with a separate ``options`` column (a list, as lmms-eval's copy gives them, or a string of ``(A) ...``
lines) are read from that column; otherwise the options are parsed out of the question.
Category = the first listed question type (all of them are kept in ``extra["question_types"]``).
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
    read_jsonl,
    read_parquet,
    split_inline_options,
    strip_letter,
)

META = "video_info.meta.jsonl"


def load(
    path: str | Path,
    split: str | None = None,
    video_dir: str | Path | None = None,
    skip_bad_lines: bool = False,
) -> LoadResult:
    """Read a local LVBench copy (dir with video_info.meta.jsonl, that file, or a parquet); a malformed
    ``video_info.meta.jsonl`` line is an error naming it, unless ``skip_bad_lines``."""
    p = Path(path)
    if p.is_dir() and (p / META).is_file():
        p = p / META
    elif p.is_dir():
        parquets = sorted(p.rglob("*.parquet"))
        if not parquets:
            raise BenchmarkError(p, f"no {META} and no parquet here")
        return _from_rows([r for f in parquets for r in read_parquet(f)], p, video_dir, [], str(parquets[0]))
    root = p.parent
    if p.suffix == ".parquet":
        return _from_rows(read_parquet(p), root, video_dir, [], str(p))
    lines, problems = read_jsonl(p, skip_bad_lines=skip_bad_lines)
    rows: list[dict[str, Any]] = []
    for v in lines:
        for qa in v.get("qa") or []:
            rows.append({**qa, "key": v.get("key"), "type": v.get("type")})
    return _from_rows(rows, root, video_dir, problems, str(p))


def _question_and_options(rec: dict[str, Any]) -> tuple[str, list[str]]:
    """The question stem and its options: a separate ``options`` (or ``candidates``) column when the row has
    one (a list, or one string of ``(A) ...`` lines), else the ``(A) ...`` lines inside the question."""
    stem, inline = split_inline_options(rec.get("question", ""))
    column = rec.get("options") if rec.get("options") is not None else rec.get("candidates")
    if isinstance(column, str):
        column = split_inline_options("?\n" + column)[1] or [column]
    if isinstance(column, (list, tuple)) and column:
        return stem, [strip_letter(o) for o in column if str(o).strip()]
    return stem, inline


def _from_rows(
    rows: list[dict[str, Any]], root: Path, video_dir: Any, problems: list[Problem], src: str
) -> LoadResult:
    vdirs = [Path(video_dir)] if video_dir else [root / "videos", root / "video", root]
    items: list[QAItem] = []
    for n, rec in enumerate(rows):
        qid = str(rec.get("uid") if rec.get("uid") is not None else f"{rec.get('key')}#{n}")
        stem, options = _question_and_options(rec)
        try:
            answer = answer_letter(rec.get("answer"), options or None, qid, forms=("letter", "text"))
        except QAItemError as e:
            problems.append(Problem(qid, e.reason, src))
            continue
        qtypes = rec.get("question_type") or []
        qtypes = [qtypes] if isinstance(qtypes, str) else list(qtypes)
        video = rec.get("video_path") or str(rec.get("key"))
        build(
            items,
            problems,
            src,
            qid,
            video_path=str(find_video(vdirs, str(video))),
            question=stem,
            options=options,
            answer=answer,
            category=str(qtypes[0]) if qtypes else "",
            extra={
                "key": rec.get("key"),
                "video_type": rec.get("type"),
                "question_types": qtypes,
                "time_reference": rec.get("time_reference"),
            },
        )
    return LoadResult("lvbench", items, problems)
