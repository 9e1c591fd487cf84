"""Policies: what turns a conversation into the next assistant turn, chosen by a spec string.

Specs (``load_policy``):
  ``hf:PATH_OR_HUB_ID``           a Hugging Face VLM (Qwen2.5-VL, Qwen3-VL) via transformers
  ``hf-tiny:qwen2_5_vl|qwen3_vl`` a tiny random Qwen-VL built offline (smoke runs; answers are noise)
  ``openai:URL@MODEL``            an OpenAI-compatible server, e.g. ``openai:http://127.0.0.1:8000/v1@Qwen/Qwen3-VL-8B-Instruct``
  ``replay:FILE``                 replays assistant turns from a JSON list / JSONL file (tests, debugging)
  ``const:LETTER``                always answers LETTER directly (a floor for comparisons)
  ``pixel:COLOUR``                reads pixels: "is COLOUR visible?", calling uniform_sample while unsure
  ``toy:shipped`` / ``toy:DIR``   the trained toy-world policy + its toy CLIP (understanding.toyworld)
Heavy backends are imported only when their spec is used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from understanding.messages import Policy
from understanding.policies.errors import (
    BadResponseError,
    EndpointError,
    EndpointTimeout,
    PolicyError,
    PolicySpecError,
)

SCHEMES = ("hf", "hf-tiny", "openai", "replay", "const", "pixel", "toy")

__all__ = [
    "SCHEMES",
    "BadResponseError",
    "EndpointError",
    "EndpointTimeout",
    "PolicyError",
    "PolicySpecError",
    "check_policy_spec",
    "load_policy",
    "read_replay_turns",
]


def check_policy_spec(spec: str, **kw: Any) -> None:
    """Validate a ``--policy`` spec without loading a model or opening a connection (``PolicySpecError``).

    Checks the scheme, the part after it (a known tiny kind, ``URL@MODEL`` with an http(s) URL, a readable
    replay file, a colour the pixel policy knows, a local ``hf:`` folder that exists when the name is a path).
    """
    if not isinstance(spec, str) or ":" not in spec:
        raise PolicySpecError(str(spec), f"expected 'scheme:...' with scheme one of {SCHEMES}")
    scheme, rest = spec.split(":", 1)
    if scheme not in SCHEMES:
        raise PolicySpecError(spec, f"unknown scheme {scheme!r}; known: {SCHEMES}")
    if not rest:
        raise PolicySpecError(spec, "nothing after the scheme")
    if scheme == "hf":
        looks_local = rest.startswith(("/", "./", "../", "~")) or Path(rest).expanduser().exists()
        if looks_local and not Path(rest).expanduser().is_dir():
            raise PolicySpecError(spec, f"{rest!r} is not a folder (a local checkpoint must be a folder)")
    elif scheme == "hf-tiny":
        from understanding.policies.tiny_qwen import KINDS

        kind, _, seed = rest.partition("@")
        if kind not in KINDS or (seed and not seed.isdigit()):
            raise PolicySpecError(spec, f"expected hf-tiny:KIND[@SEED] with KIND one of {KINDS}")
    elif scheme == "openai":
        url, at, model = rest.rpartition("@")
        if not at or not url or not model:
            raise PolicySpecError(
                spec, "expected openai:URL@MODEL, e.g. openai:http://127.0.0.1:8000/v1@my-model"
            )
        if not url.startswith(("http://", "https://")):
            raise PolicySpecError(spec, f"the URL must start with http:// or https://, got {url!r}")
    elif scheme == "replay":
        read_replay_turns(rest)
    elif scheme == "pixel":
        from vidlab.video.synth import COLORS

        if rest not in COLORS:
            raise PolicySpecError(spec, f"colour must be one of {sorted(COLORS)}, got {rest!r}")
    elif scheme == "toy":
        from understanding.toyworld import resolve_toy_dir

        resolve_toy_dir(rest)


def read_replay_turns(path: str | Path) -> list[Any]:
    """Assistant turns from a JSON list of strings, or JSONL of strings / ``{"text": ...}`` objects."""
    p = Path(path)
    if not p.is_file():
        raise PolicySpecError(f"replay:{path}", "file not found")
    raw = p.read_text()
    try:
        data = json.loads(raw)
        rows = data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        try:
            rows = [json.loads(line) for line in raw.splitlines() if line.strip()]
        except json.JSONDecodeError as e:
            raise PolicySpecError(f"replay:{path}", f"neither JSON nor JSONL: {e}") from e
    turns: list[Any] = []
    for r in rows:
        if isinstance(r, dict):
            r = r.get("text")
        if isinstance(r, list) and r and all(isinstance(x, str) for x in r):
            turns.append(r)  # alternatives for one turn (sample j gets alternative j)
        elif isinstance(r, str):
            turns.append(r)
        else:
            raise PolicySpecError(
                f"replay:{path}", 'expected strings, lists of strings or {"text": ...} objects'
            )
    if not turns:
        raise PolicySpecError(f"replay:{path}", "the file holds no turns")
    return turns


def load_policy(spec: str, **kw: Any) -> Policy:
    """Build a policy from ``scheme:rest``; ``kw`` go to the backend's constructor / ``from_pretrained``."""
    if not isinstance(spec, str) or ":" not in spec:
        raise PolicySpecError(str(spec), f"expected 'scheme:...' with scheme one of {SCHEMES}")
    scheme, rest = spec.split(":", 1)
    if not rest:
        raise PolicySpecError(spec, "nothing after the scheme")
    check_policy_spec(spec)
    if scheme == "hf":
        from understanding.policies.hf import HFPolicy

        return HFPolicy.from_pretrained(rest, **kw)
    if scheme == "hf-tiny":
        from understanding.policies.hf import HFPolicy
        from understanding.policies.tiny_qwen import KINDS, build_tiny_qwen_vl

        kind, _, seed = rest.partition("@")
        if kind not in KINDS:
            raise PolicySpecError(spec, f"tiny model kind must be one of {KINDS}")
        model, processor = build_tiny_qwen_vl(kind, int(seed or 0))
        return HFPolicy(model, processor, name=spec, **kw)
    if scheme == "openai":
        from understanding.policies.openai_server import OpenAIPolicy

        url, at, model = rest.rpartition("@")
        if not at or not url or not model:
            raise PolicySpecError(
                spec, "expected openai:URL@MODEL, e.g. openai:http://127.0.0.1:8000/v1@my-model"
            )
        try:
            return OpenAIPolicy(url, model, **kw)
        except ValueError as e:
            raise PolicySpecError(spec, str(e)) from e
    if scheme == "replay":
        from understanding.policies.replay import ReplayPolicy

        return ReplayPolicy(read_replay_turns(rest), **kw)
    if scheme == "const":
        from understanding.policies.scripted import ConstantPolicy

        return ConstantPolicy(rest, **kw)
    if scheme == "pixel":
        from understanding.policies.scripted import PixelColourPolicy

        try:
            return PixelColourPolicy(rest, **kw)
        except ValueError as e:
            raise PolicySpecError(spec, str(e)) from e
    if scheme == "toy":
        from understanding.toyworld import resolve_toy_dir
        from understanding.toyworld.policy import load_toy_policy

        return load_toy_policy(resolve_toy_dir(rest), **kw)
    raise PolicySpecError(spec, f"unknown scheme {scheme!r}; known: {SCHEMES}")
