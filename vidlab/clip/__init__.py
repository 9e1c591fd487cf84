"""vidlab.clip: open_clip models, a content-addressed frame-embedding index, interval search, corpus search.

Public API (imports are lazy, so ``import vidlab.clip`` does not pull in torch)::

    from vidlab.clip import load_model, ClipModel, TINY_MODEL, FrameIndex, Sampling, SearchResult
    model = load_model(TINY_MODEL)
    idx = FrameIndex.build("video.mp4", model, Sampling.fps(1.0))
    idx.search("a red ball", k=5, start_frame=0, end_frame=600, nms_window=30)
    frames, emb = idx.candidates(0, 600, 128)

See vidlab/clip/README.md.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "load_model": "models",
    "ClipModel": "models",
    "TINY_MODEL": "models",
    "SMALL_MODEL": "models",
    "ModelLoadError": "models",
    "UnknownModelError": "models",
    "MissingWeightsError": "models",
    "QueryTruncatedWarning": "models",
    "builtin_models": "models",
    "Sampling": "sampling",
    "SamplingError": "sampling",
    "FrameIndex": "frame_index",
    "SearchResult": "frame_index",
    "EmptyIntervalError": "frame_index",
    "default_cache_dir": "frame_index",
    "CacheCorruptError": "store",
    "Corpus": "corpus",
    "make_scorer": "scorers",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
