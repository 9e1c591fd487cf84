"""The common question record every benchmark loader produces, and the helpers loaders share.

A ``QAItem`` is validated on construction: a multiple-choice item must have options and a letter answer
among them; an open-ended item has no options and a text answer. Loaders turn each released record into a
``QAItem`` and collect the records that cannot be turned into one as ``Problem`` entries instead of crashing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from vidlab.errors import UserError

QuestionType = Literal["mc", "oe"]
VIDEO_EXTS = (".mp4", ".MP4", ".mkv", ".webm", ".avi", ".mov")


class BenchmarkError(UserError, ValueError):
    """A benchmark copy that cannot be read at all (missing annotation file, unreadable format)."""

    def __init__(self, path: str | Path, reason: str):
        self.path, self.reason = str(path), reason
        super().__init__(f"{path}: {reason}")

    def __reduce__(self):  # picklable across Ray workers
        return (type(self), (self.path, self.reason))


class QAItemError(UserError, ValueError):
    """One record that is not a usable question; the message names the record and the reason."""

    def __init__(self, item_id: str, reason: str):
        self.item_id, self.reason = str(item_id), reason
        super().__init__(f"question {item_id!r}: {reason}")

    def __reduce__(self):  # picklable across Ray workers
        return (type(self), (self.item_id, self.reason))


def letters(n: int) -> list[str]:
    """Option letters A, B, ... for ``n`` options."""
    return [chr(65 + i) for i in range(n)]


@dataclass
class QAItem:
    """One benchmark question about one local video; ``answer`` is a letter (mc) or reference text (oe)."""

    id: str
    video_path: str
    question: str
    options: list[str] | None
    answer: str
    question_type: QuestionType = "mc"
    category: str = ""
    duration: float | None = None
    duration_group: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.id = str(self.id)
        if not self.id:
            raise QAItemError("?", "empty id")
        if not str(self.question or "").strip():
            raise QAItemError(self.id, "empty question")
        if self.question_type not in ("mc", "oe"):
            raise QAItemError(self.id, f"question_type must be 'mc' or 'oe', got {self.question_type!r}")
        if self.question_type == "mc":
            if not self.options:
                raise QAItemError(self.id, "multiple-choice question without options")
            self.options = [str(o) for o in self.options]
            valid = letters(len(self.options))
            if self.answer not in valid:
                raise QAItemError(self.id, f"answer {self.answer!r} is not one of the option letters {valid}")
        else:
            self.options = None
            self.answer = "" if self.answer is None else str(self.answer)
        if self.duration is not None:
            self.duration = float(self.duration)
        if not self.duration_group and self.duration is not None:
            self.duration_group = duration_bucket(self.duration)

    @property
    def option_letters(self) -> list[str]:
        return letters(len(self.options or []))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> QAItem:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass
class Problem:
    """A record a loader skipped, and why (written to ``problems.jsonl`` by evaluation)."""

    record: str
    reason: str
    source: str = ""


@dataclass
class LoadResult:
    """What a loader read: usable items plus the records it had to skip."""

    benchmark: str
    items: list[QAItem]
    problems: list[Problem] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.items)


# Buckets for videos whose benchmark gives seconds but no group (documented in docs/guides/videobrain-qa.md).
DURATION_BUCKETS = ((120, "0-2min"), (900, "2-15min"), (1800, "15-30min"), (3600, "30-60min"))


def duration_bucket(seconds: float) -> str:
    """A coarse duration group for ``seconds``: 0-2min, 2-15min, 15-30min, 30-60min, 60min+."""
    for limit, name in DURATION_BUCKETS:
        if seconds <= limit:
            return name
    return "60min+"


_PREFIX = re.compile(r"^\s*(?:\(([A-Z])\)|([A-Z])[.:)])\s+")
_INLINE = re.compile(r"(?m)^\s*(?:\(([A-Z])\)|([A-Z])[.)])\s+(.*\S)\s*$")


def strip_letter(text: str) -> str:
    """``"A. cat"`` / ``"(A) cat"`` / ``"A) cat"`` -> ``"cat"``; other text unchanged."""
    return _PREFIX.sub("", str(text), count=1).strip()


def split_inline_options(question: str) -> tuple[str, list[str]]:
    """Split ``"Q?\\n(A) x\\n(B) y"`` into ``("Q?", ["x", "y"])``; options must run A, B, C, ... in order."""
    lines = str(question).splitlines()
    opts: list[str] = []
    start = None
    for i, line in enumerate(lines):
        m = _INLINE.match(line)
        if m and (m.group(1) or m.group(2)) == chr(65 + len(opts)):
            if start is None:
                start = i
            opts.append(m.group(3).strip())
        elif opts and line.strip():
            break
    if start is None or len(opts) < 2:
        return str(question).strip(), []
    return "\n".join(lines[:start]).strip(), opts


AnswerForm = Literal["text", "letter", "index"]
# The order a benchmark's answers are read in when it does not say: an option's text first (MLVU's own
# evaluation compares option text, so "3" among "3", "6", "5", "4" is A), then a letter. Indices are
# never guessed: only loaders whose format gives an index (LongVideoBench, EgoSchema) ask for one.
TEXT_FIRST: tuple[AnswerForm, ...] = ("text", "letter")


def _norm_option(text: Any) -> str:
    return " ".join(strip_letter(str(text)).lower().split())


def answer_letter(
    answer: Any,
    options: list[str] | None,
    item_id: str,
    forms: Sequence[AnswerForm] = TEXT_FIRST,
) -> str:
    """The option letter an annotation's ``answer`` names, reading it in the benchmark's own ``forms``.

    ``forms`` are tried in order: ``"text"`` (the answer equals an option's text, after any ``A.``/``(A)``
    prefix and case/whitespace), ``"letter"`` (``B``, ``(B)``, ``B. text``), ``"index"`` (an int or a digit
    string, 0-based). A numeric answer is an index only where the benchmark's format says so.
    """
    if not options:
        raise QAItemError(item_id, "multiple-choice question without options")
    valid = letters(len(options))
    if isinstance(answer, bool) or answer is None:
        raise QAItemError(item_id, f"no usable answer ({answer!r})")
    if isinstance(answer, float) and answer.is_integer():
        answer = int(answer)
    text = str(answer).strip()
    norm = [_norm_option(o) for o in options]
    for form in forms:
        if form == "text":
            key = " ".join(text.lower().split())
            if key in norm:
                return valid[norm.index(key)]
        elif form == "letter":
            if isinstance(answer, int):
                continue
            m = re.fullmatch(r"\(?([A-Z])\)?[.:)]?(?:\s+.*)?", text, flags=re.DOTALL)
            if m and m.group(1) in valid and (len(text) <= 4 or _PREFIX.match(text)):
                return m.group(1)
        elif form == "index":
            if isinstance(answer, int) or text.isdigit():
                i = int(text)
                if 0 <= i < len(options):
                    return valid[i]
                raise QAItemError(item_id, f"answer index {i} is outside the {len(options)} options")
        else:
            raise ValueError(f"unknown answer form {form!r} (text, letter, index)")
    how = " or ".join(
        {"text": "an option's text", "letter": "an option letter", "index": "an index"}[f] for f in forms
    )
    raise QAItemError(item_id, f"answer {text[:80]!r} is not among the candidates {options} (read as {how})")


def find_video(dirs: Iterable[Path], name: str, exts: Iterable[str] = VIDEO_EXTS) -> Path:
    """The first existing file for ``name`` (with its extension, or stem + any of ``exts``) under ``dirs``.

    Falls back to the first candidate path, so a missing video is reported when evaluation opens it.
    """
    dirs = [Path(d) for d in dirs]
    has_ext = Path(name).suffix.lower() in {e.lower() for e in exts}
    cands: list[Path] = []
    for d in dirs:
        cands.append(d / name)
        if not has_ext:
            cands.extend(d / f"{name}{e}" for e in exts)
    for c in cands:
        if c.is_file():
            return c
    return cands[0] if cands else Path(name)


def read_json(path: Path) -> Any:
    """JSON from ``path`` or a ``BenchmarkError`` saying why not."""
    text = read_text_file(path, "a JSON file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise BenchmarkError(path, f"not valid JSON ({e})") from e


class BadLineError(BenchmarkError):
    """A JSONL line that is not a JSON object (a truncated download, a stray text line), named by its number."""


def read_text_file(path: Path, what: str = "an annotation file") -> str:
    """The text of a benchmark file, or a ``BenchmarkError`` saying why not (missing, not UTF-8 text: a video
    or an archive given where the annotations were expected)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError as e:
        raise BenchmarkError(path, "file not found") from e
    except IsADirectoryError as e:
        raise BenchmarkError(path, f"is a folder, not {what}") from e
    except OSError as e:
        raise BenchmarkError(path, f"cannot read it ({e.strerror or e})") from e
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        kind = "a video" if Path(path).suffix in VIDEO_EXTS else "binary data"
        raise BenchmarkError(
            path,
            f"not a UTF-8 text file (byte {e.start} is not text: {kind}?); --data takes the benchmark's "
            "annotation file (e.g. questions.jsonl) or its folder",
        ) from e


def read_jsonl(path: Path, skip_bad_lines: bool = False) -> tuple[list[dict[str, Any]], list[Problem]]:
    """Rows of a JSONL file. A line that is not a JSON object is a ``BadLineError`` naming its line number;
    with ``skip_bad_lines`` it becomes a ``Problem`` (``problems.jsonl``) and the rest is read."""
    rows: list[dict[str, Any]] = []
    problems: list[Problem] = []
    text = read_text_file(path, "a JSONL file")
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            reason = f"not valid JSON ({e.msg} at column {e.colno})"
        else:
            if isinstance(row, dict):
                rows.append(row)
                continue
            reason = f"expected a JSON object, got {type(row).__name__}"
        if not skip_bad_lines:
            raise BadLineError(
                path, f"line {n}: {reason}; fix the line, or skip such lines (--skip-bad-lines)"
            )
        problems.append(Problem(f"line {n}", reason, str(path)))
    return rows, problems


def read_parquet(path: Path) -> list[dict[str, Any]]:
    """Rows of a parquet file as plain dicts (array cells become lists); needs pandas + pyarrow."""
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - pandas is a dependency of the understand extra
        raise BenchmarkError(
            path, "reading parquet needs pandas and pyarrow (pip install pandas pyarrow)"
        ) from e
    try:
        df = pd.read_parquet(path)
    except ImportError as e:
        raise BenchmarkError(path, f"reading parquet needs pyarrow (pip install pyarrow): {e}") from e
    except Exception as e:  # noqa: BLE001 - pyarrow raises many types for a corrupt file
        raise BenchmarkError(path, f"not a readable parquet file ({type(e).__name__}: {e})") from e
    return [{k: _plain(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def _plain(v: Any) -> Any:
    if hasattr(v, "tolist"):
        return v.tolist()
    try:
        import math

        if isinstance(v, float) and math.isnan(v):
            return None
    except TypeError:
        pass
    return v


def build(items: list[QAItem], problems: list[Problem], source: str, item_id: str, **fields: Any) -> None:
    """Append ``QAItem(**fields)`` to ``items`` or, if the record is bad, a ``Problem`` to ``problems``."""
    try:
        items.append(QAItem(id=item_id, **fields))
    except QAItemError as e:
        problems.append(Problem(e.item_id, e.reason, source))
