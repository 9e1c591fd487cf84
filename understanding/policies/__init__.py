"""Policies: what turns a conversation into the next assistant turn, chosen by a spec string ``SCHEME:REST``.

Schemes come from a registry (:mod:`vidlab.understanding.policies.registry`): the built-ins below, classes added with
``register_policy``, and other packages' classes under the ``vidlab.policies`` entry-point group, so a user's
model plugs in without editing vidlab (``vidlab qa --policy mymodel:...``).

Built in (``load_policy``):
  ``hf:PATH_OR_HUB_ID``           a Hugging Face VLM (Qwen2.5-VL, Qwen3-VL) via transformers
  ``hf-tiny:qwen2_5_vl|qwen3_vl`` a tiny random Qwen-VL built offline (smoke runs; answers are noise)
  ``openai:URL@MODEL``            an OpenAI-compatible server, e.g. ``openai:http://127.0.0.1:8000/v1@Qwen/Qwen3-VL-8B-Instruct``
  ``replay:FILE``                 replays assistant turns from a JSON list / JSONL file (tests, debugging)
  ``const:LETTER``                always answers LETTER directly (a floor for comparisons)
  ``pixel:COLOUR``                reads pixels: "is COLOUR visible?", calling uniform_sample while unsure
Registered by this distribution's own entry point:
  ``toy:where``                   the default (``DEFAULT_POLICY``): the toy policy that chooses where to look,
                                  + its toy CLIP; it serves both toy worlds (vidlab.understanding.toyworld)
  ``toy:shipped`` / ``toy:DIR``   the default toy world's own policy / a trained folder, + its toy CLIP
Heavy backends are imported only when their spec is used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vidlab.understanding.policies.errors import (
    BadResponseError,
    EndpointError,
    EndpointTimeout,
    PolicyError,
    PolicySpecError,
)
from vidlab.understanding.policies.registry import (
    ENTRY_POINT_GROUP,
    available_policies,
    check_policy_spec,
    get_policy_class,
    load_policy,
    register_policy,
    unregister_policy,
)

# The policy the quickstart, the demo and the examples use when none is named: the trained toy policy that
# serves both toy worlds (the default world's test splits and the where-to-look world; docs/results/
# videobrain-where-to-look.md). ``toy:shipped`` stays available by name.
DEFAULT_POLICY = "toy:where"

__all__ = [
    "DEFAULT_POLICY",
    "ENTRY_POINT_GROUP",
    "BadResponseError",
    "EndpointError",
    "EndpointTimeout",
    "PolicyError",
    "PolicySpecError",
    "available_policies",
    "check_policy_spec",
    "get_policy_class",
    "load_policy",
    "read_replay_turns",
    "register_policy",
    "unregister_policy",
]


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
