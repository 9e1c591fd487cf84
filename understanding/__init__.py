"""VideoBrain: an agentic VLM for long videos that calls CLIP / uniform sampling agents when that helps.

Public names are imported lazily so ``import understanding`` stays cheap.
"""

from __future__ import annotations

if (
    __name__ == "understanding"
):  # the old top-level name, imported from a checkout: the alias (one warning) takes over
    from vidlab._areas import alias_old_name

    alias_old_name(__name__)

from importlib import import_module

_LAZY = {
    "compute_score": "vidlab.understanding.reward",
    "run_episode": "vidlab.understanding.env",
    "EpisodeConfig": "vidlab.understanding.env",
    "extract_choice": "vidlab.understanding.protocol",
    "load_policy": "vidlab.understanding.policies",
    "load_benchmark": "vidlab.understanding.benchmarks",
    "run_eval": "vidlab.understanding.evaluate",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'understanding' has no attribute {name!r}")
