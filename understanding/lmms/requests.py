"""From one lmms-eval request to a VideoBrain question: the video path, the question and its options.

lmms-eval hands a model the task's rendered prompt (``context``), the document and ``doc_to_visual``.
VideoBrain needs the question and the options apart (its protocol writes its own prompt around them), so
they are read from the document when it has them (``question`` + ``options``/``candidates``/``choices``),
else parsed out of the context: the ``A. text`` / ``(A) text`` lines are the options, the text before them
is the question, and instruction lines after them are dropped (the protocol adds its own).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vidlab.errors import UserError

VIDEO_SUFFIXES = (".mp4", ".mkv", ".webm", ".avi", ".mov", ".m4v", ".mpg", ".mpeg", ".ts", ".flv")
_OPTION_LINE = re.compile(r"^\s*\(?([A-Z])[.)]\s+(\S.*?)\s*$")
_OPTION_PREFIX = re.compile(r"^\s*\(?[A-Z][.)]\s+")
_OPTION_KEYS = ("options", "candidates", "choices")


class LmmsRequestError(UserError, ValueError):
    """A request VideoBrain cannot answer: no video among the visuals, or no question in the document."""


def video_path(visuals: Any, doc_id: Any = None) -> str:
    """The one video among ``doc_to_visual``'s output (a path, or a list with one video path)."""
    items = visuals if isinstance(visuals, (list, tuple)) else [visuals]
    paths = [str(v) for v in items if isinstance(v, (str, Path))]
    videos = [p for p in paths if p.lower().endswith(VIDEO_SUFFIXES)] or paths
    if len(videos) != 1:
        raise LmmsRequestError(
            f"doc {doc_id}: VideoBrain answers about one video; doc_to_visual gave {len(videos)} video path(s) "
            f"among {len(items)} visual(s) ({[type(v).__name__ for v in items]})"
        )
    return videos[0]


def _as_options(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        lines = [ln for ln in value.splitlines() if ln.strip()]
        value = lines if len(lines) > 1 else None
    if not isinstance(value, Sequence) or not value:
        return None
    return [_OPTION_PREFIX.sub("", str(v)).strip() for v in value]


def parse_context(context: str) -> tuple[str, list[str] | None]:
    """``(question, options)`` from a rendered multiple-choice prompt; options None when there are none.

    Options are the longest run of consecutive lines lettered A, B, C, ...; the question is the text
    before that run; lines after it (e.g. "Answer with the option's letter ...") are instructions.
    """
    lines = context.splitlines()
    best: tuple[int, int] | None = None
    i = 0
    while i < len(lines):
        m = _OPTION_LINE.match(lines[i])
        if m and m.group(1) == "A":
            j = i + 1
            while j < len(lines):
                n = _OPTION_LINE.match(lines[j])
                if not n or ord(n.group(1)) != ord("A") + (j - i):
                    break
                j += 1
            if j - i >= 2 and (best is None or j - i > best[1] - best[0]):
                best = (i, j)
            i = j
        else:
            i += 1
    if best is None:
        return context.strip(), None
    question = "\n".join(lines[: best[0]]).strip()
    options = [_OPTION_LINE.match(lines[k]).group(2) for k in range(*best)]  # type: ignore[union-attr]
    return question, options


def question_and_options(doc: Mapping[str, Any] | None, context: str) -> tuple[str, list[str] | None]:
    """The document's own ``question`` + options when it has them, else what the context holds."""
    if isinstance(doc, Mapping) and isinstance(doc.get("question"), str) and doc["question"].strip():
        for key in _OPTION_KEYS:
            opts = _as_options(doc.get(key))
            if opts:
                return doc["question"].strip(), opts
        q, opts = parse_context(doc["question"])
        if opts:
            return q, opts
        _, ctx_opts = parse_context(context)
        return doc["question"].strip(), ctx_opts
    question, options = parse_context(context)
    if not question:
        raise LmmsRequestError("the request holds no question text (empty context and no doc['question'])")
    return question, options
