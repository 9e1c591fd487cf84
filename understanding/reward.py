"""VideoBrain's behaviour-aware reward: ``R = 0`` if the format check fails, else ``0.05 + Acc + B``.

Acc: multiple choice -> exact option-letter match (0/1) of the one letter the answer commits to
(``protocol.strict_choice``: a hedge such as "D and A" earns 0); open-ended -> a judge score in [0, 1].
B (u = 1 when at least one tool call was made):
  Acc = 1: Direct -> 0.5 if u = 0 else 0; Adaptive -> 0.5; Active -> 0.5 if u = 1 else 0.
  Acc < 1: 0.2 if Active and u = 1, else 0.
No per-call or per-frame penalty. ``compute_score`` has verl's signature and returns a dict.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from vidlab.understanding import protocol as P
from vidlab.understanding.judge import Judge, load_judge

FORMAT_SCORE = 0.05
BONUS = 0.5
ACTIVE_TRY_BONUS = 0.2
CLASSES = ("direct", "adaptive", "active")
# The authors' release labels classes a/b (direct), e (adaptive), f/g/h (active); accept both spellings.
_CLASS_ALIASES = {"a": "direct", "b": "direct", "e": "adaptive", "f": "active", "g": "active", "h": "active"}
_DEFAULT_LETTERS = "ABCDEF"


def normalize_class(value: Any) -> str | None:
    """``direct``/``adaptive``/``active`` (any case, or the release's letters), else None."""
    if not isinstance(value, str):
        return None
    v = value.strip().lower()
    v = _CLASS_ALIASES.get(v, v)
    return v if v in CLASSES else None


def behaviour_bonus(classification: Any, acc: float, used_tools: bool) -> float:
    """The table's bonus B; an unknown or missing class gets 0 (as the reference)."""
    cls = normalize_class(classification)
    if acc >= 1.0:
        if cls == "direct":
            return 0.0 if used_tools else BONUS
        if cls == "adaptive":
            return BONUS
        if cls == "active":
            return BONUS if used_tools else 0.0
        return 0.0
    return ACTIVE_TRY_BONUS if cls == "active" and used_tools else 0.0


@dataclass
class ScoreDetails:
    """The reward and how it was reached (``compute_score`` returns its first six fields)."""

    score: float
    format: float
    acc: float
    bonus: float
    num_tool_calls: int
    frames_used: int
    valid: bool
    reason: str | None
    answer: str | None
    predicted: str | None
    predicted_reason: str
    question_type: str
    classification: str | None

    def reward_dict(self) -> dict[str, Any]:
        return {
            k: getattr(self, k) for k in ("score", "format", "acc", "bonus", "num_tool_calls", "frames_used")
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def option_letters_for(extra_info: dict, ground_truth: Any = None) -> list[str]:
    """The question's option letters: from ``options``/``num_options``, else from ``(A)``/``A.`` lines in the question."""
    options = extra_info.get("options")
    if isinstance(options, Sequence) and not isinstance(options, str) and len(options) > 0:
        return P.option_letters(len(options))
    n = extra_info.get("num_options")
    if isinstance(n, int) and n > 0:
        return P.option_letters(n)
    q = extra_info.get("question")
    if isinstance(q, str):
        found = sorted(set(re.findall(r"(?m)^\s*\(?([A-Z])[.)]\s", q)))
        if len(found) >= 2 and found == P.option_letters(len(found)):
            return found
    return list(_DEFAULT_LETTERS)


def ground_truth_letter(
    ground_truth: Any,
    letters: Sequence[str],
    options: Sequence[str] | None,
    answer_format: str | None = None,
) -> str | None:
    """The ground truth's option letter, read as its data says: an option's text first (``"3"`` among the
    options ``"3", "6", "5", "4"`` is A, as MLVU scores it), then a letter (``"B"``, ``"(B)"``), then a 0-based
    index (``1``/``"1"`` -> B). An index is used only when ``answer_format == "index"`` or when no option's
    text is a number (with numeric options a number that is not among them is ambiguous: None).
    ``answer_format`` (``text`` / ``letter`` / ``index``) restricts the reading to that one form.
    """
    if isinstance(ground_truth, bool) or ground_truth is None:
        return None
    if isinstance(ground_truth, float) and ground_truth.is_integer():
        ground_truth = int(ground_truth)
    s = str(ground_truth).strip()
    fmt = (answer_format or "").strip().lower() or None
    if options and fmt in (None, "text"):
        norm = " ".join(s.lower().split())
        texts = [" ".join(P._OPTION_PREFIX.sub("", str(o)).strip().lower().split()) for o in options]
        if norm in texts and texts.index(norm) < len(letters):
            return letters[texts.index(norm)]
    if fmt in (None, "letter") and not isinstance(ground_truth, int):
        m = re.fullmatch(r"\(?([A-Za-z])\)?\.?", s)
        if m:
            return m.group(1).upper()
    numeric_options = any(re.fullmatch(r"[-+]?\d+(?:\.\d+)?", str(o).strip()) for o in options or [])
    if (fmt == "index" or (fmt is None and not numeric_options)) and (
        isinstance(ground_truth, int) or s.isdigit()
    ):
        i = int(s)
        return chr(65 + i) if 0 <= i < 26 else None
    if options and fmt in (None, "text"):
        letter, _ = P.strict_choice(s, letters, options)
        if letter and not numeric_options:
            return letter
    return None


def _frames_used(text: str, extra_info: dict, calls: int, initial_default: int) -> int:
    given = extra_info.get("frames_used")
    if isinstance(given, int) and not isinstance(given, bool):
        return given
    if isinstance(given, Sequence) and not isinstance(given, str):
        return len(set(int(i) for i in given))
    initial = extra_info.get("initial_frame_indices") or []
    observed = P.observed_frame_indices(text)
    if observed:
        return (
            len(set(int(i) for i in initial) | set(observed))
            if initial
            else initial_default + len(set(observed))
        )
    # Nothing shows which frames came back: the nominal count (16 initial + 8 per uniform / 4 per clip call).
    nominal = sum(8 if c.name == P.UNIFORM else 4 for c in P.check_format(text).tool_calls) if calls else 0
    return (len(initial) or initial_default) + nominal


def score_trajectory(
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    judge: Judge | None = None,
) -> ScoreDetails:
    """Score one trajectory's text with every intermediate value and the reason for a zero."""
    extra = dict(extra_info or {})
    text = solution_str if isinstance(solution_str, str) else ""
    check = P.check_format(text)
    stripped = P.strip_observations(text)
    n_calls = len(check.tool_calls) if check.valid else stripped.count("<tool_call>")
    frames = _frames_used(text, extra, n_calls, int(extra.get("num_initial_frames", 16)))
    cls = normalize_class(extra.get("classification"))
    options = extra.get("options") if isinstance(extra.get("options"), Sequence) else None
    qtype = str(extra.get("question_type") or "").lower()
    if qtype not in ("mc", "oe"):
        qtype = "mc" if options or re.fullmatch(r"\(?[A-Za-z]\)?\.?", str(ground_truth).strip()) else "oe"
    if not check.valid:
        return ScoreDetails(
            0.0, 0.0, 0.0, 0.0, n_calls, frames, False, check.reason, check.answer, None, "", qtype, cls
        )
    used = check.num_tool_calls > 0
    predicted, why = None, ""
    if qtype == "mc":
        letters = option_letters_for(extra, ground_truth)
        gt = ground_truth_letter(ground_truth, letters, options, extra.get("answer_format"))
        predicted, why = P.strict_choice(check.answer or "", letters, options)
        acc = 1.0 if predicted is not None and gt is not None and predicted == gt else 0.0
        if gt is None:
            why = f"ground truth {str(ground_truth)[:40]!r} is not an option letter"
    else:
        judge = judge or load_judge()
        acc = float(judge.score(str(extra.get("question", "")), str(ground_truth), check.answer or ""))
        acc = min(1.0, max(0.0, acc))
        why = f"judge {judge.name}: {acc:.3f}"
    bonus = behaviour_bonus(cls, acc, used)
    score = FORMAT_SCORE + acc + bonus
    return ScoreDetails(
        score=round(score, 6),
        format=FORMAT_SCORE,
        acc=acc,
        bonus=bonus,
        num_tool_calls=check.num_tool_calls,
        frames_used=frames,
        valid=True,
        reason=None,
        answer=check.answer,
        predicted=predicted,
        predicted_reason=why,
        question_type=qtype,
        classification=cls,
    )


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    judge: Judge | None = None,
) -> dict[str, Any]:
    """verl-style reward: ``dict(score, format, acc, bonus, num_tool_calls, frames_used)``.

    ``extra_info``: ``classification`` (direct/adaptive/active), ``question_type`` (mc/oe), and optionally
    ``options``/``num_options``/``question`` (which letters are valid), ``frames_used`` (from the episode).
    Observation turns in our own format inside ``solution_str`` are stripped before the format check.
    Open-ended answers go through ``judge`` (default: ``$VIDLAB_JUDGE`` or the offline rule judge).
    """
    del data_source  # one rule for every source; kept for verl's signature
    return score_trajectory(solution_str, ground_truth, extra_info, judge).reward_dict()


def _completion_text(completion: Any) -> str:
    """TRL completions are strings, or (conversational) lists of ``{"role", "content"}``: keep assistant text."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence):
        parts = []
        for m in completion:
            if isinstance(m, dict) and m.get("role", "assistant") == "assistant":
                c = m.get("content")
                parts.append(
                    c
                    if isinstance(c, str)
                    else "".join(x.get("text", "") for x in c or [] if isinstance(x, dict))
                )
        return "\n".join(parts)
    return ""


def trl_reward(prompts: Sequence[Any], completions: Sequence[Any], **columns: Any) -> list[float]:
    """TRL ``GRPOTrainer`` reward function over dataset columns ``answer`` (or ``ground_truth``),
    ``classification``, ``question_type``, ``options``, ``question``, ``answer_format``: the same score as
    ``compute_score``."""
    del prompts
    n = len(completions)

    def col(name: str, i: int) -> Any:
        values = columns.get(name)
        return (
            values[i]
            if isinstance(values, Sequence) and not isinstance(values, str) and len(values) == n
            else None
        )

    scores = []
    for i, completion in enumerate(completions):
        gt = col("answer", i) if col("answer", i) is not None else col("ground_truth", i)
        extra = {
            k: col(k, i) for k in ("classification", "question_type", "options", "question", "answer_format")
        }
        scores.append(
            compute_score(
                "trl", _completion_text(completion), gt, {k: v for k, v in extra.items() if v is not None}
            )["score"]
        )
    return scores
