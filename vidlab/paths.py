"""The one cache root: ``$VIDLAB_CACHE_DIR``, else the platform's user cache dir for vidlab.

It holds the frame index (``frame_index/``), the packet index (``video-index/``), the LLM plan
cache (``plans/``), Ray's logs (``ray/``) and benchmark files (``bench/``). The old variable
``VIDLAB_CACHE`` (frame index only) still works, with a deprecation warning.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

CACHE_ENV = "VIDLAB_CACHE_DIR"
LEGACY_FRAME_INDEX_ENV = "VIDLAB_CACHE"


def cache_root() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    try:
        import platformdirs

        return Path(platformdirs.user_cache_dir("vidlab", appauthor=False))
    except ImportError:  # platformdirs is a dependency; keep a sane fallback for odd installs
        return Path.home() / ".cache" / "vidlab"


def cache_dir(name: str) -> Path:
    """A named sub-folder of the cache root (not created)."""
    return cache_root() / name


def frame_index_dir() -> Path:
    """The frame-index cache: ``cache_dir("frame_index")``; the old ``$VIDLAB_CACHE`` still wins, with a
    DeprecationWarning (it named the frame-index folder itself)."""
    legacy = os.environ.get(LEGACY_FRAME_INDEX_ENV)
    if legacy:
        warnings.warn(
            f"{LEGACY_FRAME_INDEX_ENV} is deprecated: set {CACHE_ENV} (the frame index goes to its "
            f"'frame_index' folder); using {legacy}",
            DeprecationWarning,
            stacklevel=2,
        )
        return Path(legacy).expanduser()
    return cache_dir("frame_index")
