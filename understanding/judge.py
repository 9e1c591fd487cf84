"""Judges for open-ended answers: a rule-based one that works offline, and an OpenAI-compatible endpoint one.

The reward's accuracy term for open-ended questions is a judge score in [0, 1]. The reference used an LLM
judge over an OpenAI-compatible API with a "score 0..1, return JSON {"score": x}" prompt; ``EndpointJudge`` does
the same against any such server (vLLM, a hosted API). ``RuleJudge`` needs nothing: normalised exact match
scores 1, numbers must match as numbers, otherwise SQuAD-style token F1.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import string
import time
from collections import Counter
from typing import Protocol, runtime_checkable

from vidlab.errors import UserError

log = logging.getLogger(__name__)


class JudgeError(UserError, RuntimeError):
    """The judge endpoint could not produce a score; names the endpoint and the reason."""

    def __init__(self, endpoint: str, reason: str):
        super().__init__(f"judge at {endpoint}: {reason}")
        self.endpoint = endpoint
        self.reason = reason

    def __reduce__(self):
        return (type(self), (self.endpoint, self.reason))


class JudgeSpecError(UserError, ValueError):
    """A ``--judge`` spec that is not rule, rule:exact or openai:URL@MODEL."""


@runtime_checkable
class Judge(Protocol):
    """Scores an open-ended answer against the reference answer, in [0, 1]."""

    name: str

    def score(self, question: str, reference: str, answer: str) -> float: ...


# ----------------------------------------------------------------------------------------------- rule-based
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
_WORD_NUMBERS = {
    w: str(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
}


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation and articles, spell-out numbers to digits, squash spaces (SQuAD-style)."""
    text = str(text).lower()
    text = "".join(" " if ch in string.punctuation else ch for ch in text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(_WORD_NUMBERS.get(tok, tok) for tok in text.split())


def token_f1(reference: str, answer: str) -> float:
    """Token-overlap F1 between two normalised strings."""
    ref, ans = normalize_answer(reference).split(), normalize_answer(answer).split()
    if not ref or not ans:
        return float(ref == ans)
    common = Counter(ref) & Counter(ans)
    same = sum(common.values())
    if same == 0:
        return 0.0
    p, r = same / len(ans), same / len(ref)
    return 2 * p * r / (p + r)


class RuleJudge:
    """Offline judge: exact (normalised) match -> 1; numeric references need the same number; else token F1."""

    name = "rule"

    def __init__(self, mode: str = "f1"):
        if mode not in ("f1", "exact"):
            raise ValueError(f"RuleJudge mode must be 'f1' or 'exact', got {mode!r}")
        self.mode = mode

    def score(self, question: str, reference: str, answer: str) -> float:
        ref, ans = normalize_answer(reference), normalize_answer(answer)
        if not ans:
            return 0.0
        if ref == ans:
            return 1.0
        if _NUMBER.match(ref):  # a count/number question: the number must be right
            nums = [t for t in ans.split() if _NUMBER.match(t)]
            return 1.0 if nums and all(math.isclose(float(n), float(ref)) for n in nums) else 0.0
        return 0.0 if self.mode == "exact" else round(token_f1(ref, ans), 6)


# ----------------------------------------------------------------------------------------------- endpoint
JUDGE_SYSTEM_PROMPT = (
    "You grade answers to questions about a video. Compare the model's answer with the standard answer, "
    "given the question, and give a score between 0 and 1: the closer the model's answer is to the standard "
    "answer, the higher the score; 1 means equivalent, 0 means wrong or unrelated.\n"
    'Return ONLY a JSON object: {"score": <number between 0 and 1>}'
)
JUDGE_USER_TEMPLATE = (
    "Question: {question}\nGround Truth: {reference}\nModel Response: {answer}\n\nOutput JSON:"
)


def parse_score(text: str) -> float | None:
    """Read ``{"score": x}`` from a reply (bare JSON, JSON inside prose/markdown, or a loose ``"score": x``)."""
    if not isinstance(text, str):
        return None
    candidates = [text.strip()]
    candidates += re.findall(r"\{[^{}]*\"score\"[^{}]*\}", text, flags=re.DOTALL)
    for c in candidates:
        try:
            data = json.loads(c)
        except (json.JSONDecodeError, ValueError, RecursionError):
            continue
        if isinstance(data, dict) and "score" in data:
            try:
                value = float(data["score"])
            except (TypeError, ValueError):
                continue
            if math.isfinite(value):
                return min(1.0, max(0.0, value))
    m = re.search(r"\"?score\"?\s*[:=]\s*(-?\d+(?:\.\d+)?)", text)
    if m:
        return min(1.0, max(0.0, float(m.group(1))))
    return None


class EndpointJudge:
    """LLM judge over an OpenAI-compatible ``/chat/completions`` endpoint (temperature 0, JSON score).

    Retries transport errors, 5xx and unparsable replies (``retries`` times, exponential backoff); a 4xx is
    not retried. When every try fails: ``on_failure="zero"`` logs and scores 0 (the reference's behaviour, so a
    training run survives a flaky judge), ``"raise"`` raises ``JudgeError`` (for evaluation).
    """

    name = "endpoint"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        on_failure: str = "zero",
    ):
        from vidlab.http import API_KEY_ENV, FALLBACK_API_KEY_ENV, Endpoint

        if on_failure not in ("zero", "raise"):
            raise ValueError(f"on_failure must be 'zero' or 'raise', got {on_failure!r}")
        if api_key is None and not (os.environ.get(API_KEY_ENV) or os.environ.get(FALLBACK_API_KEY_ENV)):
            old = os.environ.get("VIDLAB_JUDGE_API_KEY")
            if old:
                import warnings

                warnings.warn(
                    f"VIDLAB_JUDGE_API_KEY is deprecated: set {API_KEY_ENV} (one key for every endpoint client)",
                    DeprecationWarning,
                    stacklevel=2,
                )
                api_key = old
        # transport retries stay off: ``score`` retries itself, malformed replies included
        self.endpoint = Endpoint.from_env(base_url, api_key, timeout=float(timeout), max_retries=0)
        self.url = self.endpoint.chat_url
        self.model = model
        self.api_key = self.endpoint.api_key
        self.timeout = timeout
        self.retries = max(1, int(retries))
        self.backoff = backoff
        self.on_failure = on_failure

    def request(self, question: str, reference: str, answer: str) -> dict:
        """The JSON body sent to the endpoint."""
        return {
            "model": self.model,
            "messages": [
                {"role": "system", "content": JUDGE_SYSTEM_PROMPT},
                {
                    "role": "user",
                    "content": JUDGE_USER_TEMPLATE.format(
                        question=question, reference=reference, answer=answer
                    ),
                },
            ],
            "temperature": 0.0,
        }

    def _post(self, body: dict) -> str:
        """One request (no transport-level retry: ``score`` retries, malformed replies included)."""
        from vidlab.http import post_json

        ep = self.endpoint
        payload = post_json(ep.chat_url, body, api_key=ep.api_key, timeout=ep.timeout, max_retries=0)
        return payload["choices"][0]["message"]["content"]

    def score(self, question: str, reference: str, answer: str) -> float:
        from vidlab.http import BadResponseError, EndpointError

        body = self.request(question, reference, answer)
        reason = "no attempt"
        for attempt in range(self.retries):
            try:
                content = self._post(body)
            except BadResponseError as e:
                reason = f"malformed response ({e.reason})"
            except EndpointError as e:
                if e.status is None:  # no answer: refused, unreachable, timed out
                    reason = f"{type(e).__name__}: {e.reason}"
                else:
                    reason = f"HTTP {e.status}"
                    if 400 <= e.status < 500 and e.status != 429:
                        break
            except (KeyError, IndexError, TypeError, ValueError) as e:
                reason = f"malformed response ({type(e).__name__}: {e})"
            else:
                value = parse_score(content)
                if value is not None:
                    return value
                reason = f"no score in reply {str(content)[:80]!r}"
            if attempt + 1 < self.retries:
                time.sleep(self.backoff * (2**attempt))
        if self.on_failure == "raise":
            raise JudgeError(self.url, f"{reason} after {self.retries} tries")
        log.warning("judge at %s failed (%s); scoring 0", self.url, reason)
        return 0.0


def load_judge(spec: str | None = None, **kw) -> Judge:
    """``None``/``"rule"``/``"rule:exact"`` -> RuleJudge; ``"openai:URL@MODEL"`` -> EndpointJudge.

    With no spec, ``$VIDLAB_JUDGE`` is used if set.
    """
    spec = spec if spec is not None else os.environ.get("VIDLAB_JUDGE", "rule")
    if spec in ("", "rule", "rule:f1"):
        return RuleJudge()
    if spec == "rule:exact":
        return RuleJudge("exact")
    if spec.startswith("openai:"):
        rest = spec[len("openai:") :]
        if "@" not in rest:
            raise JudgeSpecError(f"judge spec {spec!r}: expected openai:URL@MODEL")
        url, model = rest.rsplit("@", 1)
        return EndpointJudge(url, model, **kw)
    raise JudgeSpecError(f"unknown judge spec {spec!r}; use 'rule', 'rule:exact' or 'openai:URL@MODEL'")
