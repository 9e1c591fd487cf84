"""The built-in policy schemes as registry entries: each checks its spec offline, then builds its policy.

``hf:PATH_OR_HUB_ID`` (a Hugging Face VLM), ``hf-tiny:KIND[@SEED]`` (a tiny random Qwen-VL),
``openai:URL@MODEL`` (an OpenAI-compatible server), ``replay:FILE``, ``const:LETTER``, ``pixel:COLOUR``.
The toy-world policy (``toy:``) registers itself from ``vidlab.understanding.toyworld`` (``vidlab.policies`` entry
point), so this package never imports the toy world.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vidlab.understanding.messages import Policy
from vidlab.understanding.policies.errors import PolicySpecError


def _looks_local(rest: str) -> bool:
    return rest.startswith(("/", "./", "../", "~")) or Path(rest).expanduser().exists()


class HFSpec:
    """``hf:PATH_OR_HUB_ID``: a local folder must exist; a hub id must be cached or the hub reachable."""

    @staticmethod
    def check_spec(rest: str) -> None:
        if _looks_local(rest) and not Path(rest).expanduser().is_dir():
            raise PolicySpecError(
                f"hf:{rest}", f"{rest!r} is not a folder (a local checkpoint must be a folder)"
            )
        from vidlab.understanding.policies.hf import require_hub_or_folder

        require_hub_or_folder(rest)  # offline / unreachable hub: one line before anything loads

    @staticmethod
    def from_spec(rest: str, **kw: Any) -> Policy:
        from vidlab.understanding.policies.hf import HFPolicy

        return HFPolicy.from_pretrained(rest, **kw)


class TinyQwenSpec:
    """``hf-tiny:qwen2_5_vl|qwen3_vl[@SEED]``: a tiny random Qwen-VL built offline (answers are noise)."""

    @staticmethod
    def check_spec(rest: str) -> tuple[str, int]:
        from vidlab.understanding.policies.tiny_qwen import KINDS

        kind, _, seed = rest.partition("@")
        if kind not in KINDS or (seed and not seed.isdigit()):
            raise PolicySpecError(f"hf-tiny:{rest}", f"expected hf-tiny:KIND[@SEED] with KIND one of {KINDS}")
        return kind, int(seed or 0)

    @classmethod
    def from_spec(cls, rest: str, **kw: Any) -> Policy:
        from vidlab.understanding.policies.hf import HFPolicy
        from vidlab.understanding.policies.tiny_qwen import build_tiny_qwen_vl

        kind, seed = cls.check_spec(rest)
        model, processor = build_tiny_qwen_vl(kind, seed)
        return HFPolicy(model, processor, name=f"hf-tiny:{rest}", **kw)


class OpenAISpec:
    """``openai:URL@MODEL`` with an http(s) URL; no connection is opened by the check."""

    @staticmethod
    def check_spec(rest: str) -> tuple[str, str]:
        url, at, model = rest.rpartition("@")
        if not at or not url or not model:
            raise PolicySpecError(
                f"openai:{rest}", "expected openai:URL@MODEL, e.g. openai:http://127.0.0.1:8000/v1@my-model"
            )
        if not url.startswith(("http://", "https://")):
            raise PolicySpecError(
                f"openai:{rest}", f"the URL must start with http:// or https://, got {url!r}"
            )
        return url, model

    @classmethod
    def from_spec(cls, rest: str, **kw: Any) -> Policy:
        from vidlab.understanding.policies.openai_server import OpenAIPolicy

        url, model = cls.check_spec(rest)
        try:
            return OpenAIPolicy(url, model, **kw)
        except ValueError as e:
            raise PolicySpecError(f"openai:{rest}", str(e)) from e


class ReplaySpec:
    """``replay:FILE``: assistant turns from a JSON list / JSONL file."""

    @staticmethod
    def check_spec(rest: str) -> None:
        from vidlab.understanding.policies import read_replay_turns

        read_replay_turns(rest)

    @staticmethod
    def from_spec(rest: str, **kw: Any) -> Policy:
        from vidlab.understanding.policies import read_replay_turns
        from vidlab.understanding.policies.replay import ReplayPolicy

        return ReplayPolicy(read_replay_turns(rest), **kw)


class ConstSpec:
    """``const:LETTER``: always answers LETTER directly (a floor for comparisons)."""

    @staticmethod
    def from_spec(rest: str, **kw: Any) -> Policy:
        from vidlab.understanding.policies.scripted import ConstantPolicy

        return ConstantPolicy(rest, **kw)


class PixelSpec:
    """``pixel:COLOUR``: reads pixels for "is COLOUR visible?", calling uniform_sample while unsure."""

    @staticmethod
    def check_spec(rest: str) -> None:
        from vidlab.video.synth import COLORS

        if rest not in COLORS:
            raise PolicySpecError(f"pixel:{rest}", f"colour must be one of {sorted(COLORS)}, got {rest!r}")

    @staticmethod
    def from_spec(rest: str, **kw: Any) -> Policy:
        from vidlab.understanding.policies.scripted import PixelColourPolicy

        try:
            return PixelColourPolicy(rest, **kw)
        except ValueError as e:
            raise PolicySpecError(f"pixel:{rest}", str(e)) from e
