"""The "llm" planner: ask an OpenAI-compatible chat endpoint for a layout, check it, cache it on disk.

The request goes through ``vidlab.http`` (the one OpenAI-compatible client: one deadline per request,
retries with backoff, typed errors), so the endpoint and key are given the one way every vidlab client
takes them: keyword arguments, else ``VIDLAB_OPENAI_BASE_URL`` (e.g. ``http://127.0.0.1:8000/v1``) and
``VIDLAB_OPENAI_API_KEY`` (optional). The planner's model is ``model=`` or ``VIDLAB_LLM_MODEL``.
``VIDLAB_LLM_TIMEOUT`` (seconds, default 60) is the deadline of each whole request (connect, send, the
complete reply); ``VIDLAB_LLM_BUDGET`` (seconds, default none) bounds each request with all its retries.
The old ``VIDLAB_LLM_BASE_URL``, ``VIDLAB_LLM_API_KEY`` and ``VIDLAB_LLM_CACHE_DIR`` still work, with a
``DeprecationWarning``.

**Checks.** A reply is a plan only if it is JSON in the layout schema, has at most :data:`MAX_SUBJECTS`
subjects (copies of a counted subject included; at most :data:`MAX_COPIES` of one phrase and
:data:`MAX_KEYFRAMES` keyframes each), every box and time lies in [0, 1], its subject counts match the
prompt's ("three cats": exactly 3 copies; "a cat": one), and every relation the prompt states (read by the
rule planner's parser: left of/right of/above/below/on/under/in front of/behind/near and the motions) and
every relation the plan itself declares holds in its boxes. A reply that fails gets one more round (the
reason and a bounded excerpt of the reply, at most :data:`REPAIR_EXCERPT_CHARS` characters, are sent
back); if that fails too, the rule planner's layout is used with a warning saying why (``fallback=False``:
an ``EndpointError`` instead), as when the endpoint itself fails.

**Repairs.** Boxes or times outside [0, 1] are clamped only to judge the plan: such a *repaired* plan is
used only with ``accept_repaired=True`` (``planner_accept_repaired=true`` in ``vidlab generate``), with a
warning, and never cached.

**Cache.** Only a plan that passed every check unmodified is cached, under
``vidlab.paths.cache_dir("plans")`` (``$VIDLAB_CACHE_DIR/plans``), written atomically. ``cache="on"``
(default) reads and writes it, ``"off"`` neither, ``"refresh"`` asks again and keeps the new plan;
``vidlab plan-cache list|clear`` shows and empties it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vidlab.generation.errors import GenerationInputError
from vidlab.generation.layout import (
    MIN_MOTION,
    MOTION_RELATIONS,
    RELATIONS,
    Layout,
    LayoutError,
    box_relation_holds,
    clamp_box,
)
from vidlab.generation.planners.cache import CACHE_MODES, PlanCache, default_cache_dir
from vidlab.generation.subjects import SubjectNotFoundError, find_phrase_spans
from vidlab.http import EndpointError

PLANNER_VERSION = "llm-2"  # llm-1 plans (cached before the checks existed) are never read again
MAX_SUBJECTS = 16  # subjects in one plan, copies of a counted subject included
MAX_COPIES = 12  # copies of one counted phrase (the rule planner's GeometryConfig.max_copies)
MAX_KEYFRAMES = 32  # keyframes of one subject
MAX_RELATIONS = 64  # relations one plan may declare
MAX_REPLY_BYTES = 2 * 1024 * 1024  # a planner reply larger than this is not read (a good one is a few KB)
REPAIR_EXCERPT_CHARS = 2000  # how much of a bad reply the repair round sends back
_CHECK_TIMES = (0.0, 0.5, 1.0)

SYSTEM_PROMPT = """You plan the layout of a short video from its text prompt.
Find every subject (a thing that should be visible: people, animals, objects; not the place or time) and give
each one keyframed bounding boxes over the clip. Reply with ONE JSON object and nothing else:
{"subjects": [{"phrase": str, "count_index": int | null, "keyframes": [{"t": float, "box": [x0, y0, x1, y1]}]}],
 "relations": [{"subject": int, "relation": str, "object": int | null}]}
Rules:
- "phrase" is copied exactly from the prompt (same words), without a leading article or number.
- A counted subject ("three cats") is several subjects with the same phrase ("cats") and count_index 0, 1, 2
  (a single subject with "count": 3 and one group box is also accepted and split into copies).
- Exactly as many copies as the prompt says; at most MAX_SUBJECTS subjects in all.
- Coordinates are fractions of the frame in [0, 1], origin top-left; x0 < x1, y0 < y1.
- "t" is the time in [0, 1] (0 = first frame, 1 = last), strictly increasing; one keyframe means static.
- Boxes must make the prompt's relations true; a moving subject's box moves along its direction.
- "relation" is one of: RELATIONS. "subject"/"object" are indices into "subjects"; motion relations
  ("moving left", ...) have "object": null.
Example 1. Prompt: "A red cat sitting on the left of a blue vase"
{"subjects": [{"phrase": "red cat", "count_index": null, "keyframes": [{"t": 0, "box": [0.05, 0.3, 0.45, 0.9]}]},
 {"phrase": "blue vase", "count_index": null, "keyframes": [{"t": 0, "box": [0.55, 0.35, 0.9, 0.9]}]}],
 "relations": [{"subject": 0, "relation": "left of", "object": 1}]}
Example 2. Prompt: "two dogs run from left to right"
{"subjects": [{"phrase": "dogs", "count_index": 0, "keyframes": [{"t": 0, "box": [0.02, 0.2, 0.2, 0.5]},
 {"t": 1, "box": [0.6, 0.2, 0.78, 0.5]}]}, {"phrase": "dogs", "count_index": 1, "keyframes": [{"t": 0, "box":
 [0.2, 0.5, 0.38, 0.8]}, {"t": 1, "box": [0.78, 0.5, 0.96, 0.8]}]}],
 "relations": [{"subject": 0, "relation": "moving right", "object": null}, {"subject": 1, "relation":
 "moving right", "object": null}]}
""".replace("RELATIONS", ", ".join(f'"{r}"' for r in RELATIONS)).replace("MAX_SUBJECTS", str(MAX_SUBJECTS))


class LLMPlannerError(GenerationInputError):
    """The LLM planner is not configured, or its reply could not be made into a valid layout."""


class PlannerWarning(RuntimeWarning, UserWarning):
    """The LLM planner fell back to the rule planner, or used a repaired plan (one line in a command)."""


__all__ = [
    "MAX_COPIES",
    "MAX_KEYFRAMES",
    "MAX_SUBJECTS",
    "EndpointError",
    "LLMPlannerConfig",
    "LLMPlannerError",
    "PlannerWarning",
    "Verdict",
    "cache_key",
    "judge_reply",
    "layout_from_reply",
    "plan_llm",
    "prompt_problems",
]

_DEPRECATED = {"VIDLAB_LLM_BASE_URL": "VIDLAB_OPENAI_BASE_URL", "VIDLAB_LLM_API_KEY": "VIDLAB_OPENAI_API_KEY"}


def _old_env(name: str) -> str | None:
    """A deprecated VIDLAB_LLM_* variable, with a DeprecationWarning naming its replacement."""
    value = os.environ.get(name)
    if value:
        warnings.warn(f"{name} is deprecated; use {_DEPRECATED[name]}", DeprecationWarning, stacklevel=3)
    return value or None


def _seconds(value: Any, name: str, allow_none: bool = False) -> float | None:
    """A positive number of seconds, or LLMPlannerError naming ``name``."""
    if value is None or (allow_none and str(value).strip().lower() in ("", "none", "off")):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise LLMPlannerError(f"llm planner: {name} must be a number of seconds, got {value!r}") from None
    if not math.isfinite(out) or out <= 0:
        raise LLMPlannerError(f"llm planner: {name} must be > 0 seconds, got {value!r}")
    return out


@dataclass
class LLMPlannerConfig:
    """Where and how to ask; unset fields fall back to the environment (see the module docstring)."""

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    timeout: float | None = None  # deadline of one whole request (VIDLAB_LLM_TIMEOUT, default 60 s)
    budget: float | None = None  # one request with all its retries (VIDLAB_LLM_BUDGET, default: no cap)
    cache_dir: str | Path | None = None
    temperature: float = 0.0
    max_tokens: int = 2048
    cache: str | bool = "on"  # on | off | refresh (see the module docstring); True/False = on/off
    use_cache: bool = True  # False is cache="off" (the older switch)
    accept_repaired: bool = False  # use a plan whose boxes had to be clamped (with a warning, never cached)
    fallback: bool = True  # on failure use the rule planner (with a warning) instead of raising
    max_retries: int = 2  # extra attempts on connection errors, deadlines, 429/5xx (vidlab.http)
    backoff: float = 0.5  # seconds, doubled per retry

    def resolved(self) -> LLMPlannerConfig:
        """Fill unset fields from the environment and defaults; LLMPlannerError names what is wrong."""
        from vidlab.http import API_KEY_ENV, BASE_URL_ENV, FALLBACK_API_KEY_ENV, FALLBACK_BASE_URL_ENV

        env = os.environ
        base_url = (
            self.base_url
            or env.get(BASE_URL_ENV)
            or env.get(FALLBACK_BASE_URL_ENV)
            or _old_env("VIDLAB_LLM_BASE_URL")
        )
        model = self.model or env.get("VIDLAB_LLM_MODEL")
        if not base_url:
            raise LLMPlannerError(f"llm planner: no endpoint; pass base_url= or set {BASE_URL_ENV}")
        if not model:
            raise LLMPlannerError("llm planner: no model; pass model= or set VIDLAB_LLM_MODEL")
        mode = ("on" if self.cache else "off") if isinstance(self.cache, bool) else self.cache
        if mode not in CACHE_MODES:
            raise LLMPlannerError(
                f"llm planner: cache={self.cache!r} must be one of {', '.join(CACHE_MODES)}"
            )
        api_key = self.api_key
        if api_key is None:
            api_key = env.get(API_KEY_ENV) or env.get(FALLBACK_API_KEY_ENV) or _old_env("VIDLAB_LLM_API_KEY")
        if self.timeout is not None:
            timeout = _seconds(self.timeout, "timeout")
        else:
            timeout = _seconds(env.get("VIDLAB_LLM_TIMEOUT", "60"), "VIDLAB_LLM_TIMEOUT")
        if self.budget is not None:
            budget = _seconds(self.budget, "budget")
        else:
            budget = _seconds(env.get("VIDLAB_LLM_BUDGET"), "VIDLAB_LLM_BUDGET", allow_none=True)
        cache = self.cache_dir or default_cache_dir()
        return LLMPlannerConfig(
            base_url=base_url.rstrip("/"),
            model=model,
            api_key=api_key,
            timeout=timeout,
            budget=budget,
            cache_dir=Path(cache),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            cache=mode if self.use_cache else "off",
            use_cache=self.use_cache,
            accept_repaired=bool(self.accept_repaired),
            fallback=self.fallback,
            max_retries=self.max_retries,
            backoff=self.backoff,
        )


def cache_key(prompt: str, model: str, subjects: list[str] | None = None) -> str:
    """sha256 of (prompt, model, planner version[, explicit subjects])."""
    payload = json.dumps([prompt, model, PLANNER_VERSION, subjects], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def chat(cfg: LLMPlannerConfig, messages: list[dict[str, str]]) -> str:
    """One chat-completions call through ``vidlab.http``; the assistant's text, or ``EndpointError``."""
    from vidlab.http import Endpoint, chat_text

    assert cfg.base_url is not None and cfg.model is not None
    endpoint = Endpoint(
        cfg.base_url,
        cfg.api_key,
        timeout=float(cfg.timeout or 60.0),
        max_retries=int(cfg.max_retries),
        backoff=float(cfg.backoff),
        budget=cfg.budget,
        max_reply_bytes=MAX_REPLY_BYTES,
    )
    return chat_text(
        endpoint, messages, model=cfg.model, temperature=cfg.temperature, max_tokens=cfg.max_tokens
    )


def _short(text: str, n: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _extract_json(text: str) -> Any:
    """The JSON object in a reply (tolerating ``` fences and text around it)."""
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise LLMPlannerError(f"the reply has no JSON object: {text[:200]!r}")
    try:
        return json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise LLMPlannerError(f"the reply is not valid JSON: {exc}") from None
    except RecursionError:
        raise LLMPlannerError("the reply's JSON is nested too deeply") from None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _parse_reply(prompt: str, text: str, subjects: list[str] | None) -> tuple[Layout, list[str], int]:
    """The layout a reply describes, with boxes and times clamped into [0, 1]; (layout, what was repaired,
    keyframes repaired). LLMPlannerError when it cannot be a layout of this prompt at all."""
    data = _extract_json(text)
    if not isinstance(data, dict) or not isinstance(data.get("subjects"), list) or not data["subjects"]:
        raise LLMPlannerError("the JSON must be an object with a non-empty 'subjects' list")
    if len(data["subjects"]) > MAX_SUBJECTS:
        raise LLMPlannerError(
            f"the plan has {len(data['subjects'])} subjects; at most {MAX_SUBJECTS} are allowed"
        )
    repairs: list[str] = []
    fixed_kfs = 0
    subs: list[dict[str, Any]] = []
    first_of: list[int] = []  # the LLM's subject i -> index of its first copy in ``subs``
    for i, s in enumerate(data["subjects"]):
        first_of.append(len(subs))
        if not isinstance(s, dict) or not isinstance(s.get("keyframes"), list):
            raise LLMPlannerError(f"subject {i} must be an object with 'phrase' and a 'keyframes' list")
        if not s["keyframes"]:
            raise LLMPlannerError(f"subject {i} needs at least one keyframe")
        if len(s["keyframes"]) > MAX_KEYFRAMES:
            raise LLMPlannerError(
                f"subject {i} has {len(s['keyframes'])} keyframes; at most {MAX_KEYFRAMES} are allowed"
            )
        kfs = []
        for k, kf in enumerate(s["keyframes"]):
            if not isinstance(kf, dict) or "t" not in kf or "box" not in kf:
                raise LLMPlannerError(
                    f"subject {i} keyframe {k} must be {{'t': float, 'box': [x0, y0, x1, y1]}}"
                )
            box = kf["box"]
            if (
                not isinstance(box, list)
                or len(box) != 4
                or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in box)
                or not all(math.isfinite(v) for v in box)
            ):
                raise LLMPlannerError(f"subject {i} keyframe {k}: box must be 4 numbers, got {box!r}"[:300])
            t = kf["t"]
            if not isinstance(t, int | float) or isinstance(t, bool) or not math.isfinite(t):
                raise LLMPlannerError(f"subject {i} keyframe {k}: t must be a number, got {t!r}"[:300])
            fixed = clamp_box(box)
            t_fixed = min(max(float(t), 0.0), 1.0)
            if fixed != tuple(float(v) for v in box):
                repairs.append(f"subject {i} keyframe {k}: box {box} is not inside the frame")
            if t_fixed != t:
                repairs.append(f"subject {i} keyframe {k}: t={t} is outside [0, 1]")
            fixed_kfs += fixed != tuple(float(v) for v in box) or t_fixed != t
            kfs.append({"t": t_fixed, "box": list(fixed)})
        times = [kf["t"] for kf in kfs]
        if any(b <= a for a, b in zip(times, times[1:])):
            repairs.append(f"subject {i}: keyframe times {times} are not strictly increasing")
        kfs.sort(key=lambda kf: kf["t"])
        dedup = [kf for j, kf in enumerate(kfs) if j == 0 or kf["t"] > kfs[j - 1]["t"]]
        phrase = s.get("phrase")
        if isinstance(phrase, str) and len(phrase) > len(prompt):
            raise LLMPlannerError(f"subject {i}: the phrase {_short(phrase, 80)!r} is longer than the prompt")
        if isinstance(phrase, str):
            phrase = re.sub(r"^(?:(?:a|an|the)\s+)", "", phrase.strip(), flags=re.IGNORECASE)
        count = s.get("count")
        if _is_int(count) and count > 1 and s.get("count_index") is None:
            # A group box with a count instead of one subject per copy: split it into side-by-side copies.
            if count > MAX_COPIES:
                raise LLMPlannerError(
                    f"subject {i} has count {count}; at most {MAX_COPIES} copies are allowed"
                )
            from vidlab.generation.planners.geometry import split_copies

            per_kf = [split_copies(tuple(kf["box"]), count, 0.08) for kf in dedup]
            for c in range(count):
                kfs_c = [{"t": kf["t"], "box": list(boxes[c])} for kf, boxes in zip(dedup, per_kf)]
                subs.append({"phrase": phrase, "keyframes": kfs_c, "count_index": c})
            continue
        subs.append({"phrase": phrase, "keyframes": dedup, "count_index": s.get("count_index")})
    if len(subs) > MAX_SUBJECTS:
        raise LLMPlannerError(f"the plan has {len(subs)} subjects with its copies; at most {MAX_SUBJECTS}")
    copies: dict[str, int] = {}
    for s in subs:
        if s["count_index"] is not None and isinstance(s["phrase"], str):
            key = " ".join(s["phrase"].lower().split())
            copies[key] = copies.get(key, 0) + 1
    over = {p: n for p, n in copies.items() if n > MAX_COPIES}
    if over:
        raise LLMPlannerError(f"too many copies {over}; at most {MAX_COPIES} of one phrase are allowed")
    relations = data.get("relations") or []
    if not isinstance(relations, list):
        raise LLMPlannerError("'relations' must be a list")
    if len(relations) > MAX_RELATIONS:
        raise LLMPlannerError(f"the plan declares {len(relations)} relations; at most {MAX_RELATIONS}")
    for k, r in enumerate(relations):
        if not isinstance(r, dict):
            raise LLMPlannerError(
                f"relation {k} must be an object {{'subject', 'relation', 'object'}}, got {_short(repr(r), 80)}"
            )
    if len(first_of) != len(subs):  # copies were added: re-index relations
        relations = [
            {
                **r,
                **{
                    k: first_of[r[k]]
                    for k in ("subject", "object")
                    if _is_int(r.get(k)) and 0 <= r[k] < len(first_of)
                },
            }
            if isinstance(r, dict)
            else r
            for r in relations
        ]
    try:
        layout = Layout.from_dict(
            {"prompt": prompt, "subjects": subs, "relations": relations, "planner": "llm"}
        )
        spans = find_phrase_spans(prompt, layout.subjects)
    except (LayoutError, SubjectNotFoundError) as exc:
        raise LLMPlannerError(_short(str(exc), 400)) from None
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:  # odd field types
        raise LLMPlannerError(f"the plan does not fit the layout schema: {_short(str(exc), 300)}") from None
    for s, span in zip(layout.subjects, spans):
        s.span = span
    if subjects is not None:
        have = {" ".join(p.lower().split()) for p in layout.phrases}
        missing = [p for p in subjects if " ".join(p.lower().split()) not in have]
        if missing:
            raise LLMPlannerError(
                f"the layout must include the subjects {missing} with exactly these phrases"
            )
    return layout, repairs, fixed_kfs


def layout_from_reply(prompt: str, text: str, subjects: list[str] | None = None) -> tuple[Layout, int]:
    """Validate a reply against the schema, clamping boxes and times into [0, 1]; (layout, keyframes clamped).
    The prompt checks (:func:`prompt_problems`) are separate; :func:`judge_reply` runs both."""
    layout, _, fixed = _parse_reply(prompt, text, subjects)
    return layout, fixed


# ------------------------------------------------------------------------------------------ prompt checks
def _overlaps(a: tuple[int, int] | None, b: tuple[int, int]) -> bool:
    return a is not None and a[0] < b[1] and b[0] < a[1]


def _union(layout: Layout, members: list[int], t: float) -> tuple[float, float, float, float]:
    boxes = [layout.subjects[i].box_at(t) for i in members]
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def _moves(layout: Layout, members: list[int], relation: str) -> bool:
    a0, a1 = _union(layout, members, 0.0), _union(layout, members, 1.0)
    dx = (a1[0] + a1[2] - a0[0] - a0[2]) / 2
    dy = (a1[1] + a1[3] - a0[1] - a0[3]) / 2
    return {"moving left": -dx, "moving right": dx, "moving up": -dy, "moving down": dy}[
        relation
    ] > MIN_MOTION


def _holds(layout: Layout, a: list[int], relation: str, b: list[int] | None) -> bool:
    if relation in MOTION_RELATIONS:
        return _moves(layout, a, relation)
    assert b is not None
    return all(box_relation_holds(relation, _union(layout, a, t), _union(layout, b, t)) for t in _CHECK_TIMES)


def prompt_problems(prompt: str, layout: Layout, subjects: list[str] | None = None) -> list[str]:
    """Where ``layout`` contradicts ``prompt`` (empty: it fits): subject counts, the relations and motions
    the prompt states (as the rule planner's parser reads them), and the relations the layout declares."""
    from vidlab.generation.planners.parse import parse

    explicit = None
    if subjects is not None:
        explicit = list(zip(subjects, find_phrase_spans(prompt, list(subjects))))
    p = parse(prompt, explicit)
    problems: list[str] = []
    members = [[i for i, s in enumerate(layout.subjects) if _overlaps(s.span, g.span)] for g in p.groups]
    for g, m in zip(p.groups, members):
        if g.count is not None and g.count > 1:
            if g.count <= MAX_COPIES and len(m) != g.count:
                problems.append(f"the prompt has {g.count} {g.phrase!r}, the plan has {len(m)}")
            elif g.count > MAX_COPIES and not 1 <= len(m) <= MAX_COPIES:
                problems.append(f"the prompt has {g.count} {g.phrase!r}, the plan has {len(m)}")
        elif (g.count == 1 or (g.count is None and not g.plural)) and len(m) > 1:
            problems.append(f"the prompt has one {g.phrase!r}, the plan has {len(m)}")
    stated = [(a, rel, b) for a, rel, b in p.relations] + [
        (i, f"moving {g.motion}", None) for i, g in enumerate(p.groups) if g.motion
    ]
    for a, rel, b in stated:
        what = f"{p.groups[a].phrase!r} {rel}" + (f" {p.groups[b].phrase!r}" if b is not None else "")
        absent = [p.groups[g].phrase for g in (a, b) if g is not None and not members[g]]
        if absent:
            problems.append(f"the prompt says {what}, but the plan has no {absent[0]!r}")
        elif not _holds(layout, members[a], rel, None if b is None else members[b]):
            problems.append(f"the prompt says {what}, but the boxes do not show it")
    for r in layout.relations:
        subj = layout.group_of(r.subject)
        obj_group = None if r.object is None else layout.group_of(r.object)
        if not _holds(layout, subj, r.relation, obj_group):
            obj = "" if r.object is None else f" {layout.subjects[r.object].phrase!r}"
            problems.append(
                f"the plan says {layout.subjects[r.subject].phrase!r} {r.relation}{obj}, but its boxes do not show it"
            )
    return list(dict.fromkeys(problems))


@dataclass
class Verdict:
    """What one reply is worth: ``layout`` (None if it is no layout at all), what had to be ``repaired``
    (clamped), where it contradicts the prompt (``problems``), and the schema ``error`` if any."""

    layout: Layout | None = None
    repaired: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    error: str | None = None
    keyframes_clamped: int = 0

    @property
    def clean(self) -> bool:
        """Passes every check unmodified: the only kind of plan that is cached."""
        return self.layout is not None and not self.repaired and not self.problems and self.error is None

    @property
    def usable_repaired(self) -> bool:
        """Fits the prompt, but only after its boxes or times were clamped."""
        return self.layout is not None and bool(self.repaired) and not self.problems and self.error is None

    def why(self, limit: int = 3) -> str:
        """The reasons, in one short line."""
        if self.error is not None:
            return _short(self.error)
        items = self.problems + [f"{r} (it would need clamping)" for r in self.repaired]
        more = f" (and {len(items) - limit} more)" if len(items) > limit else ""
        return _short("; ".join(items[:limit]) + more, 500)


def judge_reply(prompt: str, text: str, subjects: list[str] | None = None) -> Verdict:
    """Every check of the module docstring on one reply."""
    try:
        layout, repaired, fixed = _parse_reply(prompt, text, subjects)
    except LLMPlannerError as exc:
        return Verdict(error=str(exc))
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError) as exc:
        return Verdict(error=f"the plan does not fit the layout schema: {_short(str(exc), 300)}")
    return Verdict(layout, repaired, prompt_problems(prompt, layout, subjects), None, fixed)


# ---------------------------------------------------------------------------------------------- planning
def _messages(prompt: str, subjects: list[str] | None) -> list[dict[str, str]]:
    user = f"Prompt: {json.dumps(prompt)}"
    if subjects:
        user += f"\nUse exactly these subject phrases: {json.dumps(subjects)}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def excerpt(text: str, limit: int = REPAIR_EXCERPT_CHARS) -> str:
    """``text`` itself if short, else its start and end with the number of characters left out between."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 3 // 4], text[-(limit // 4) :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters left out ...]\n{tail}"


def _fallback(prompt: str, subjects: list[str] | None, reason: str, cfg: LLMPlannerConfig) -> Layout:
    if not cfg.fallback:
        raise EndpointError(str(cfg.base_url), reason, 200)
    from vidlab.generation.planners.rule import plan_rule

    warnings.warn(
        f"llm planner failed ({reason}); using the rule planner instead", PlannerWarning, stacklevel=3
    )
    layout = plan_rule(prompt, subjects=subjects)
    layout.meta.update(fallback_from="llm", fallback_reason=reason)
    return layout


def plan_llm(prompt: str, subjects: list[str] | None = None, **kw: Any) -> Layout:
    """Plan with the LLM endpoint (checked, cached); see the module docstring for what is checked, what is
    cached and when the rule planner is used instead."""
    cfg = LLMPlannerConfig(**kw).resolved()
    assert cfg.model is not None and cfg.cache_dir is not None
    cache = PlanCache(cfg.cache_dir)
    key = cache_key(prompt, cfg.model, subjects)
    if cfg.cache == "on":
        hit = cache.get(key)
        if hit is not None and hit.subjects and len(hit.subjects) <= MAX_SUBJECTS:
            try:
                bad = prompt_problems(prompt, hit, subjects)
            except (LayoutError, SubjectNotFoundError):
                bad = ["unreadable"]
            if not bad:  # a plan that no longer passes (or a damaged entry) is asked for again
                hit.meta["cache"] = "hit"
                return hit
    messages = _messages(prompt, subjects)
    repaired: tuple[Verdict, int] | None = None
    verdict = Verdict(error="no reply")
    attempts = 0
    try:
        for _ in range(2):  # the first try and one repair round
            reply = chat(cfg, messages)
            attempts += 1
            verdict = judge_reply(prompt, reply, subjects)
            if verdict.clean:
                break
            if verdict.usable_repaired:
                repaired = (verdict, attempts)
            messages = messages[:2] + [
                {"role": "assistant", "content": excerpt(reply)},
                {
                    "role": "user",
                    "content": f"That reply is invalid: {verdict.why()}. "
                    "Reply with the corrected JSON object only.",
                },
            ]
    except EndpointError as exc:
        if repaired is None or not cfg.accept_repaired:
            return _fallback(prompt, subjects, str(exc), cfg)
        verdict = Verdict(error=str(exc))
    if verdict.clean:
        layout = verdict.layout
        assert layout is not None
        layout.meta.update(
            planner_version=PLANNER_VERSION, model=cfg.model, attempts=attempts, checks="passed", cache="miss"
        )
        if cfg.cache != "off":
            cache.put(key, layout)
        if cfg.cache == "refresh":
            layout.meta["cache"] = "refreshed"
        return layout
    if repaired is not None and cfg.accept_repaired:
        got, at = repaired
        assert got.layout is not None
        warnings.warn(
            f"llm planner: using a repaired plan, not cached ({_short('; '.join(got.repaired), 300)})",
            PlannerWarning,
            stacklevel=2,
        )
        got.layout.meta.update(
            planner_version=PLANNER_VERSION,
            model=cfg.model,
            attempts=at,
            checks="passed after repair",
            repaired=got.repaired[:20],
            keyframes_clamped=got.keyframes_clamped,
            cache="not cached (repaired)",
        )
        return got.layout
    reason = f"invalid layout after one repair: {verdict.why()}"
    if repaired is not None:
        reason += " (a clamped plan would fit the prompt: planner_accept_repaired=true uses it)"
    return _fallback(prompt, subjects, reason, cfg)
