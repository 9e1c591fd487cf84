"""Type and range checks for the understanding config dataclasses, run in their ``__post_init__``.

The fields declare their type (``Literal[...]`` for choices) and an inclusive range in ``metadata["range"]``,
the convention ``vidlab.config`` documents; ``vidlab.config`` checks presets and ``key=value`` overrides
against them, and :func:`validate` applies the very same check when a config is built in Python, so
``EpisodeConfig(max_calls="abc")`` and ``episode.max_calls=abc`` are refused alike, with the key, what was
expected and the value, before any model loads or any file is written.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from vidlab.config import check_value


def rng(lo: float | None = None, hi: float | None = None) -> dict[str, Any]:
    """Field metadata for an inclusive range (``None`` = open end)."""
    return {"range": (lo, hi)}


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def validate(obj: Any, prefix: str = "") -> None:
    """Check (and normalise: list -> tuple, int -> float) every non-dataclass field of ``obj`` in place."""
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        tp = hints.get(f.name, Any)
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            continue
        setattr(obj, f.name, check_value(value, tp, prefix + f.name, f.metadata))
