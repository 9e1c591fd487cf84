"""VideoBrain: an agentic VLM for long videos that calls CLIP / uniform sampling agents when that helps.

Public names are imported lazily so ``import understanding`` stays cheap.
"""

from __future__ import annotations

from importlib import import_module

_LAZY = {
    "compute_score": "understanding.reward",
    "run_episode": "understanding.env",
    "EpisodeConfig": "understanding.env",
    "extract_choice": "understanding.protocol",
    "load_policy": "understanding.policies",
    "load_benchmark": "understanding.benchmarks",
    "run_eval": "understanding.evaluate",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'understanding' has no attribute {name!r}")
