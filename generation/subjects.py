"""Subject phrases in a prompt and their token positions in a pipeline's tokenizer.

Character spans map to tokens through the tokenizer's offset mapping, so this works for any fast tokenizer:
UMT5/T5 SentencePiece tokenizers (whose "▁word" pieces carry offsets that include the leading space) and the
tiny offline tokenizer alike. Special tokens (eos, pad) and pieces that cover only whitespace never count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

from vidlab.generation.errors import GenerationInputError


class SubjectNotFoundError(GenerationInputError):
    """A subject phrase that does not occur in the prompt (or lies beyond the tokenizer's max_length)."""

    def __init__(self, phrase: str, prompt: str, reason: str | None = None):
        self.phrase, self.prompt, self.reason = phrase, prompt, reason
        detail = reason or "it does not occur in the prompt (case-insensitive, whole words)"
        super().__init__(f"subject {phrase!r} not found in prompt {prompt!r}: {detail}")


class _HasPhrase(Protocol):
    phrase: str


def _pattern(phrase: str) -> re.Pattern[str]:
    """Case-insensitive, whitespace-tolerant, word-boundary-aware pattern for ``phrase``."""
    words = phrase.split()
    if not words:
        raise ValueError(f"subject phrase must be non-empty, got {phrase!r}")
    body = r"\s+".join(re.escape(w) for w in words)
    return re.compile(rf"(?<![\w]){body}(?![\w])", re.IGNORECASE)


def find_phrase_span(prompt: str, phrase: str, start: int = 0) -> tuple[int, int]:
    """Return the (start, end) character span of the first whole-word occurrence of ``phrase`` at or after ``start``."""
    match = _pattern(phrase).search(prompt, start)
    if match is None:
        where = "" if start == 0 else f" after character {start}"
        raise SubjectNotFoundError(phrase, prompt, f"no whole-word occurrence{where} (case-insensitive)")
    return match.start(), match.end()


def find_phrase_spans(prompt: str, phrases: Sequence[str | _HasPhrase | Any]) -> list[tuple[int, int]]:
    """Character spans for several subjects: repeated phrases take successive occurrences.

    Items may be strings or subject objects with ``.phrase`` (e.g. ``SubjectLayout``); an object with a
    ``span`` uses it as given, and copies of a counted subject (``count_index`` > 0) share the span of the
    copy before them, since "three cats" is one phrase standing for three subjects.
    """
    cursor: dict[str, int] = {}
    spans: list[tuple[int, int]] = []
    last_by_phrase: dict[str, tuple[int, int]] = {}
    for item in phrases:
        phrase = item if isinstance(item, str) else item.phrase
        key = " ".join(phrase.lower().split())
        given = None if isinstance(item, str) else getattr(item, "span", None)
        count_index = None if isinstance(item, str) else getattr(item, "count_index", None)
        if given is not None:
            s, e = int(given[0]), int(given[1])
            found = _pattern(phrase).fullmatch(prompt, s, e) if 0 <= s <= e <= len(prompt) else None
            if found is None:
                raise SubjectNotFoundError(
                    phrase, prompt, f"its span {s}:{e} is {prompt[s:e]!r}, not the phrase"
                )
            span = (s, e)
        elif count_index and key in last_by_phrase:
            span = last_by_phrase[key]
        else:
            span = find_phrase_span(prompt, phrase, cursor.get(key, 0))
        cursor[key] = max(cursor.get(key, 0), span[1])
        last_by_phrase[key] = span
        spans.append(span)
    return spans


def subject_token_indices(
    tokenizer: Any,
    prompt: str,
    phrases: Sequence[str | _HasPhrase | Any],
    max_length: int | None = None,
) -> list[list[int]]:
    """Token positions of each subject phrase in ``tokenizer(prompt)`` (the pipeline's own encoding).

    ``max_length`` mirrors the pipeline's truncation (Wan: 512); a subject cut off by it is an error.
    """
    spans = find_phrase_spans(prompt, phrases)
    kwargs: dict[str, Any] = {"return_offsets_mapping": True, "add_special_tokens": True}
    if max_length is not None:
        kwargs.update(truncation=True, max_length=int(max_length))
    try:
        enc = tokenizer(prompt, **kwargs)
        offsets = enc["offset_mapping"]
    except (NotImplementedError, KeyError, TypeError) as exc:
        raise TypeError(
            f"subject_token_indices needs a fast tokenizer with offset mapping; {type(tokenizer).__name__} "
            f"gave {type(exc).__name__}: {exc}"
        ) from None
    ids = enc["input_ids"]
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    # Content span of each token: skip whitespace its offsets include (Metaspace "▁word" pieces).
    content: list[tuple[int, int] | None] = []
    for tid, (s, e) in zip(ids, offsets):
        while s < e and prompt[s].isspace():
            s += 1
        content.append(None if tid in special or s >= e else (s, e))
    result: list[list[int]] = []
    for item, (ps, pe) in zip(phrases, spans):
        hits = [i for i, c in enumerate(content) if c is not None and c[0] < pe and c[1] > ps]
        if not hits:
            phrase = item if isinstance(item, str) else item.phrase
            reason = (
                f"it lies beyond the tokenizer's max_length={max_length}"
                if max_length is not None
                else "no token covers its characters"
            )
            raise SubjectNotFoundError(phrase, prompt, reason)
        result.append(hits)
    return result


# WanPipeline's default max_sequence_length: the rows every Wan checkpoint was trained with
WAN_TEXT_LENGTH = 512


def model_text_length(tokenizer: Any, requested: int | None = None) -> int:
    """The prompt length (rows, zero-padded) to encode at: ``requested`` when given, else the length the
    pipeline's transformer was trained with: Wan's 512, or the tokenizer's ``model_max_length`` where that is
    smaller (the toy world's model is trained with 16)."""
    if requested:
        return int(requested)
    n = getattr(tokenizer, "model_max_length", None)
    return min(WAN_TEXT_LENGTH, int(n)) if n else WAN_TEXT_LENGTH


def truncated_text(tokenizer: Any, prompt: str, max_length: int) -> str:
    """The text a tokenizer drops when it cuts ``prompt`` at ``max_length`` tokens (special tokens included,
    as Wan's pipeline encodes), or ``""`` when it all fits. Found from the offset mapping of the full encoding."""
    try:
        enc = tokenizer(prompt, add_special_tokens=True, truncation=False, return_offsets_mapping=True)
        ids, offsets = enc["input_ids"], enc["offset_mapping"]
    except (NotImplementedError, KeyError, TypeError):
        ids, offsets = tokenizer(prompt, add_special_tokens=True, truncation=False)["input_ids"], None
    if len(ids) <= int(max_length):
        return ""
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    # The pipeline keeps the first max_length tokens (the last of them is the eos it appends when cutting).
    kept = [i for i in range(int(max_length) - 1) if ids[i] not in special]
    if offsets is None or not kept:
        return tokenizer.decode([t for t in ids[int(max_length) - 1 :] if t not in special]).strip()
    return prompt[int(offsets[kept[-1]][1]) :].strip()
