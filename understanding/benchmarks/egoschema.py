"""EgoSchema (the 500-question subset with public answers): ``questions.json`` + ``subset_answers.json``.

Official: ``questions.json`` records ``q_uid, question, option 0..option 4``; ``subset_answers.json`` maps
``q_uid -> 0..4``; videos ``videos/{q_uid}.mp4`` (3-minute clips). Only questions with an answer are loaded.
lmms-eval parquet: ``question_idx, question, video_idx, option`` (5 strings "A. ..."), ``answer`` ("0"-"4").
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
    strip_letter,
)

CLIP_SECONDS = 180.0


def load(path: str | Path, split: str | None = None, video_dir: str | Path | None = None) -> LoadResult:
    """Read a local EgoSchema copy (dir with questions.json + subset_answers.json, or a parquet)."""
    p = Path(path)
    root = p if p.is_dir() else p.parent
    vdirs = [Path(video_dir)] if video_dir else [root / "videos", root / "good_clips_git", root]
    if p.suffix == ".parquet" or (p.is_dir() and not (p / "questions.json").is_file()):
        files = [p] if p.is_file() else sorted(p.rglob("*.parquet"))
        if not files:
            raise BenchmarkError(p, "no questions.json and no parquet here")
        rows = [r for f in files for r in read_parquet(f)]
        return _parquet(rows, vdirs, str(files[0]))
    qfile = p / "questions.json" if p.is_dir() else p
    afile = root / "subset_answers.json"
    questions = read_json(qfile)
    answers = read_json(afile)
    if not isinstance(questions, list) or not isinstance(answers, dict):
        raise BenchmarkError(
            qfile, "expected questions.json = list of records, subset_answers.json = {q_uid: index}"
        )
    items: list[QAItem] = []
    problems: list[Problem] = []
    for rec in questions:
        qid = str(rec.get("q_uid"))
        if qid not in answers:
            continue  # not in the public subset: its answer is hidden
        options = [str(rec[f"option {i}"]) for i in range(5) if rec.get(f"option {i}") is not None]
        _add(items, problems, str(qfile), qid, rec.get("question", ""), options, answers[qid], vdirs)
    return LoadResult("egoschema", items, problems)


def _parquet(rows: list[dict[str, Any]], vdirs: list[Path], src: str) -> LoadResult:
    items: list[QAItem] = []
    problems: list[Problem] = []
    for rec in rows:
        qid = str(rec.get("video_idx") or rec.get("question_idx"))
        if rec.get("answer") in (None, ""):
            continue  # full set: answer hidden
        options = [strip_letter(o) for o in (rec.get("option") or [])]
        _add(items, problems, src, qid, rec.get("question", ""), options, rec["answer"], vdirs)
    return LoadResult("egoschema", items, problems)


def _add(items, problems, src, qid, question, options, answer, vdirs) -> None:
    try:
        letter = answer_letter(answer, options or None, qid, forms=("index",))
    except QAItemError as e:
        problems.append(Problem(qid, e.reason, src))
        return
    build(
        items,
        problems,
        src,
        qid,
        video_path=str(find_video(vdirs, qid)),
        question=question,
        options=options,
        answer=letter,
        category="egoschema",
        duration=CLIP_SECONDS,
    )
