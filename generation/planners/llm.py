"""The "llm" planner: ask an OpenAI-compatible chat endpoint for a layout, validate it, cache it on disk.

The request goes through ``vidlab.http`` (the one OpenAI-compatible client: httpx with retries, typed
errors), so the endpoint and key are given the one way every vidlab client takes them: keyword arguments,
else ``VIDLAB_OPENAI_BASE_URL`` (e.g. ``http://127.0.0.1:8000/v1``) and ``VIDLAB_OPENAI_API_KEY``
(optional). The planner's model is ``model=`` or ``VIDLAB_LLM_MODEL``; ``VIDLAB_LLM_TIMEOUT`` (seconds,
default 60) sets the timeout. Plans are cached under ``vidlab.paths.cache_dir("plans")`` (the one cache
root, ``$VIDLAB_CACHE_DIR``), written atomically. The old ``VIDLAB_LLM_BASE_URL``, ``VIDLAB_LLM_API_KEY``
and ``VIDLAB_LLM_CACHE_DIR`` still work, with a ``DeprecationWarning``.

The reply must be JSON in the layout schema; one repair round sends the validation error back; boxes
outside [0, 1] are clamped. When the endpoint fails (connection, timeout, HTTP error after retries, unusable
reply) the rule planner's layout is returned with a ``warnings.warn``, unless ``fallback=False``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generation.errors import GenerationInputError
from generation.layout import RELATIONS, Layout, LayoutError, clamp_box
from generation.subjects import SubjectNotFoundError, find_phrase_spans
from vidlab.http import EndpointError

PLANNER_VERSION = "llm-1"

SYSTEM_PROMPT = """You plan the layout of a short video from its text prompt.
Find every subject (a thing that should be visible: people, animals, objects; not the place or time) and give
each one keyframed bounding boxes over the clip. Reply with ONE JSON object and nothing else:
{"subjects": [{"phrase": str, "count_index": int | null, "keyframes": [{"t": float, "box": [x0, y0, x1, y1]}]}],
 "relations": [{"subject": int, "relation": str, "object": int | null}]}
Rules:
- "phrase" is copied exactly from the prompt (same words), without a leading article or number.
- A counted subject ("three cats") is several subjects with the same phrase ("cats") and count_index 0, 1, 2
  (a single subject with "count": 3 and one group box is also accepted and split into copies).
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
""".replace("RELATIONS", ", ".join(f'"{r}"' for r in RELATIONS))


class LLMPlannerError(GenerationInputError):
    """The LLM planner is not configured, or its reply could not be made into a valid layout."""


__all__ = [
    "EndpointError",
    "LLMPlannerConfig",
    "LLMPlannerError",
    "cache_key",
    "layout_from_reply",
    "plan_llm",
]

_DEPRECATED = {"VIDLAB_LLM_BASE_URL": "VIDLAB_OPENAI_BASE_URL", "VIDLAB_LLM_API_KEY": "VIDLAB_OPENAI_API_KEY"}


def _old_env(name: str) -> str | None:
    """A deprecated VIDLAB_LLM_* variable, with a DeprecationWarning naming its replacement."""
    value = os.environ.get(name)
    if value:
        new = _DEPRECATED.get(name, 'VIDLAB_CACHE_DIR (plans are cached under its "plans" folder)')
        warnings.warn(f"{name} is deprecated; use {new}", DeprecationWarning, stacklevel=3)
    return value or None


@dataclass
class LLMPlannerConfig:
    """Where and how to ask; unset fields fall back to the environment (see the module docstring)."""

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    timeout: float | None = None
    cache_dir: str | Path | None = None
    temperature: float = 0.0
    max_tokens: int = 2048
    use_cache: bool = True
    fallback: bool = True  # on endpoint failure use the rule planner (with a warning) instead of raising
    max_retries: int = 2  # extra attempts on connection errors, timeouts, 429/5xx (vidlab.http)
    backoff: float = 0.5  # seconds, doubled per retry

    def resolved(self) -> LLMPlannerConfig:
        """Fill unset fields from the environment and defaults; LLMPlannerError names what is missing."""
        from vidlab.http import API_KEY_ENV, BASE_URL_ENV, FALLBACK_API_KEY_ENV, FALLBACK_BASE_URL_ENV
        from vidlab.paths import cache_dir

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
        api_key = self.api_key
        if api_key is None:
            api_key = env.get(API_KEY_ENV) or env.get(FALLBACK_API_KEY_ENV) or _old_env("VIDLAB_LLM_API_KEY")
        timeout = self.timeout if self.timeout is not None else float(env.get("VIDLAB_LLM_TIMEOUT", "60"))
        cache = self.cache_dir or _old_env("VIDLAB_LLM_CACHE_DIR") or cache_dir("plans")
        return LLMPlannerConfig(
            base_url=base_url.rstrip("/"),
            model=model,
            api_key=api_key,
            timeout=float(timeout),
            cache_dir=Path(cache),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            use_cache=self.use_cache,
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
    )
    return chat_text(
        endpoint, messages, model=cfg.model, temperature=cfg.temperature, max_tokens=cfg.max_tokens
    )


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


def layout_from_reply(prompt: str, text: str, subjects: list[str] | None = None) -> tuple[Layout, int]:
    """Validate a reply against the schema, clamping boxes and times into [0, 1]; returns (layout, keyframes fixed)."""
    data = _extract_json(text)
    if not isinstance(data, dict) or not isinstance(data.get("subjects"), list) or not data["subjects"]:
        raise LLMPlannerError("the JSON must be an object with a non-empty 'subjects' list")
    clamped = 0
    subs: list[dict[str, Any]] = []
    first_of: list[int] = []  # the LLM's subject i -> index of its first copy in ``subs``
    for i, s in enumerate(data["subjects"]):
        first_of.append(len(subs))
        if not isinstance(s, dict) or not isinstance(s.get("keyframes"), list):
            raise LLMPlannerError(f"subject {i} must be an object with 'phrase' and a 'keyframes' list")
        kfs = []
        for k, kf in enumerate(s["keyframes"]):
            if not isinstance(kf, dict) or "t" not in kf or "box" not in kf:
                raise LLMPlannerError(
                    f"subject {i} keyframe {k} must be {{'t': float, 'box': [x0, y0, x1, y1]}}"
                )
            box = kf["box"]
            if not isinstance(box, list) or len(box) != 4 or not all(isinstance(v, int | float) for v in box):
                raise LLMPlannerError(f"subject {i} keyframe {k}: box must be 4 numbers, got {box!r}")
            fixed = clamp_box(box)
            t = kf["t"]
            if not isinstance(t, int | float) or isinstance(t, bool):
                raise LLMPlannerError(f"subject {i} keyframe {k}: t must be a number, got {t!r}")
            t_fixed = min(max(float(t), 0.0), 1.0)
            clamped += fixed != tuple(float(v) for v in box) or t_fixed != t
            kfs.append({"t": t_fixed, "box": list(fixed)})
        kfs.sort(key=lambda kf: kf["t"])
        dedup = [kf for j, kf in enumerate(kfs) if j == 0 or kf["t"] > kfs[j - 1]["t"]]
        phrase = s.get("phrase")
        if isinstance(phrase, str):
            phrase = re.sub(r"^(?:(?:a|an|the)\s+)", "", phrase.strip(), flags=re.IGNORECASE)
        count = s.get("count")
        if (
            isinstance(count, int)
            and not isinstance(count, bool)
            and count > 1
            and s.get("count_index") is None
        ):
            # A group box with a count instead of one subject per copy: split it into side-by-side copies.
            from generation.planners.geometry import split_copies

            per_kf = [split_copies(tuple(kf["box"]), min(count, 12), 0.08) for kf in dedup]
            for c in range(len(per_kf[0])):
                kfs_c = [{"t": kf["t"], "box": list(boxes[c])} for kf, boxes in zip(dedup, per_kf)]
                subs.append({"phrase": phrase, "keyframes": kfs_c, "count_index": c})
            continue
        subs.append({"phrase": phrase, "keyframes": dedup, "count_index": s.get("count_index")})
    relations = data.get("relations") or []
    if len(first_of) != len(subs) and isinstance(relations, list):  # copies were added: re-index relations
        relations = [
            {
                **r,
                **{
                    k: first_of[r[k]]
                    for k in ("subject", "object")
                    if isinstance(r.get(k), int) and 0 <= r[k] < len(first_of)
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
        find_phrase_spans(prompt, layout.subjects)
    except (LayoutError, SubjectNotFoundError) as exc:
        raise LLMPlannerError(str(exc)) from None
    if subjects is not None:
        have = {" ".join(p.lower().split()) for p in layout.phrases}
        missing = [p for p in subjects if " ".join(p.lower().split()) not in have]
        if missing:
            raise LLMPlannerError(
                f"the layout must include the subjects {missing} with exactly these phrases"
            )
    return layout, clamped


def _messages(prompt: str, subjects: list[str] | None) -> list[dict[str, str]]:
    user = f"Prompt: {json.dumps(prompt)}"
    if subjects:
        user += f"\nUse exactly these subject phrases: {json.dumps(subjects)}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def plan_llm(prompt: str, subjects: list[str] | None = None, **kw: Any) -> Layout:
    """Plan with the LLM endpoint (cached); falls back to the rule planner with a warning when it fails."""
    cfg = LLMPlannerConfig(**kw).resolved()
    assert cfg.model is not None and cfg.cache_dir is not None
    key = cache_key(prompt, cfg.model, subjects)
    cache_file = Path(cfg.cache_dir) / f"{key}.json"
    if cfg.use_cache and cache_file.is_file():
        try:
            layout = Layout.from_json(cache_file.read_text(encoding="utf-8"))
            layout.meta["cache"] = "hit"
            return layout
        except LayoutError:
            pass  # a damaged cache entry is ignored and rewritten
    messages = _messages(prompt, subjects)
    try:
        reply = chat(cfg, messages)
        try:
            layout, clamped = layout_from_reply(prompt, reply, subjects)
            attempts = 1
        except LLMPlannerError as first_error:
            messages += [
                {"role": "assistant", "content": reply},
                {
                    "role": "user",
                    "content": f"That reply is invalid: {first_error}. Reply with the corrected JSON object only.",
                },
            ]
            reply = chat(cfg, messages)
            try:
                layout, clamped = layout_from_reply(prompt, reply, subjects)
            except LLMPlannerError as second_error:
                raise EndpointError(
                    str(cfg.base_url), f"invalid layout after one repair: {second_error}", 200
                ) from None
            attempts = 2
    except EndpointError as exc:
        if not cfg.fallback:
            raise
        from generation.planners.rule import plan_rule

        warnings.warn(
            f"llm planner failed ({exc}); using the rule planner instead", RuntimeWarning, stacklevel=2
        )
        layout = plan_rule(prompt, subjects=subjects)
        layout.meta.update(fallback_from="llm", fallback_reason=str(exc))
        return layout
    layout.meta.update(
        planner_version=PLANNER_VERSION,
        model=cfg.model,
        attempts=attempts,
        keyframes_clamped=clamped,
        cache="miss",
    )
    if cfg.use_cache:
        from vidlab.io import atomic_write_text

        atomic_write_text(cache_file, layout.to_json())
    return layout
