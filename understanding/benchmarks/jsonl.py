"""An lmms-eval-style JSONL: one question per line, for any benchmark not covered by a dedicated loader.

Fields (aliases in brackets): ``id`` [question_id, uid], ``video`` [video_path, video_name], ``question``,
``options`` [candidates, choices] (list; absent for open-ended), ``answer`` (letter, index or option text),
``question_type`` ("mc" | "oe"; default: "mc" when options are given), ``category`` [task_type,
question_category], ``duration`` (s), ``duration_group``. Video paths follow the one path rule
(:mod:`vidlab.datafiles`): absolute and ``~`` paths as they are, a relative one under ``video_dir`` when given, else
under the file's own folder (a name without extension may omit ``.mp4`` and the like).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from vidlab.datafiles import base_folder
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
    strip_letter,
)


def _first(rec: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if rec.get(k) is not None:
            return rec[k]
    return None


def load(
    path: str | Path,
    split: str | None = None,
    video_dir: str | Path | None = None,
    skip_bad_lines: bool = False,
) -> LoadResult:
    """Read a JSONL question file (or every ``*.jsonl`` in a dir); ``split`` keeps one category. A line that is
    not a JSON object is an error naming it, unless ``skip_bad_lines`` (then it is a ``Problem``)."""
    p = Path(path)
    files = sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
    if not files:
        raise BenchmarkError(p, "no .jsonl files here")
    items: list[QAItem] = []
    problems: list[Problem] = []
    for f in files:
        rows, bad = read_jsonl(f, skip_bad_lines=skip_bad_lines)
        problems.extend(bad)
        vdirs = [Path(os.path.abspath(base_folder(f, video_dir)))]  # absolute: messages name the file plainly
        for n, rec in enumerate(rows):
            qid = str(_first(rec, "id", "question_id", "uid") or f"{f.name}#{n + 1}")
            options = _first(rec, "options", "candidates", "choices")
            options = [strip_letter(o) for o in options] if options else None
            qtype = rec.get("question_type") or ("mc" if options else "oe")
            category = str(_first(rec, "category", "task_type", "question_category") or "")
            if split and split != category:
                continue
            answer = rec.get("answer")
            if qtype == "mc":
                try:
                    answer = answer_letter(answer, options, qid, forms=("text", "letter", "index"))
                except QAItemError as e:
                    problems.append(Problem(qid, e.reason, str(f)))
                    continue
            video = _first(rec, "video", "video_path", "video_name")
            if not video:
                problems.append(Problem(qid, "no video / video_path field", str(f)))
                continue
            vp = Path(str(video)).expanduser()
            build(
                items,
                problems,
                str(f),
                qid,
                video_path=str(vp if vp.is_absolute() else find_video(vdirs, str(video))),
                question=rec.get("question", ""),
                options=options,
                answer=answer,
                question_type=qtype,
                category=category,
                duration=rec.get("duration"),
                duration_group=str(rec.get("duration_group") or ""),
                extra=rec.get("extra") or {},
            )
    return LoadResult("jsonl", items, problems)
