"""The VideoBrain reward in the shapes verl expects: upstream's ``compute_score`` and the authors' fork's 4-tuple.

Upstream verl (``reward.custom_reward_function.path=<this file>``, ``name=compute_score``) calls
``compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)`` with ``solution_str`` the
decoded response *including* observation turns (verl decodes the whole response with special tokens removed) and
``extra_info`` the row's ``extra_info`` merged with the agent loop's ``extra_fields`` (``frames_used``...). The
score is ``vidlab.understanding.reward.compute_score``'s, which strips our observation text before its format check.
"""

from __future__ import annotations

from typing import Any

from vidlab.understanding import reward as _reward

DATA_SOURCE = "videobrain"
FORK_DATA_SOURCE = "vl_agent"


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's custom reward function: ``dict(score, format, acc, bonus, num_tool_calls, frames_used)``.

    Extra keyword arguments verl may pass (``reward_router_address``, ``reward_model_tokenizer``) are ignored:
    the rule reward needs no reward model. ``extra_info`` values that verl stores as numpy arrays are converted.
    """
    del kwargs
    return _reward.compute_score(data_source, solution_str, ground_truth, _plain(extra_info or {}))


def compute_score_vl_agent(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None, **kwargs: Any
) -> float | tuple[float, float, float, float]:
    """For the authors' verl fork: a 4-tuple ``(score, acc, format, bonus)`` when ``data_source == "vl_agent"``.

    The fork's reward manager unpacks four numbers for that data source (our reading of its reward-manager
    interface; the order here is ours and documented in docs/guides/training.md). Any other data source gets
    the plain score.
    """
    d = compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
    if data_source == FORK_DATA_SOURCE:
        return float(d["score"]), float(d["acc"]), float(d["format"]), float(d["bonus"])
    return float(d["score"])


def _plain(obj: Any) -> Any:
    """numpy scalars/arrays (verl's non-tensor batch) -> Python values, recursively."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a core dependency
        return obj
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_plain(v) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj
