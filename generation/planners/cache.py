"""The LLM planner's plan cache: one JSON layout per (prompt, model, planner version, subjects) key.

Only a plan that passed every check unmodified is written (``vidlab.generation.planners.llm``); this module
reads, writes (atomically), lists and clears the folder: ``vidlab.paths.cache_dir("plans")``, i.e.
``$VIDLAB_CACHE_DIR/plans`` (the deprecated ``VIDLAB_LLM_CACHE_DIR`` still names it, with a warning).
``vidlab plan-cache list|clear`` is the command over it (``vidlab.generation.planners.cache_cli``).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from vidlab.generation.layout import Layout, LayoutError

CACHE_MODES = ("on", "off", "refresh")  # read+write | neither | write only (ask again, keep the new plan)


def default_cache_dir() -> Path:
    """Where plans are cached (see the module docstring); nothing is created."""
    from vidlab.paths import cache_dir

    old = os.environ.get("VIDLAB_LLM_CACHE_DIR")
    if old:
        warnings.warn(
            'VIDLAB_LLM_CACHE_DIR is deprecated; use VIDLAB_CACHE_DIR (plans are cached under its "plans" folder)',
            DeprecationWarning,
            stacklevel=3,
        )
        return Path(old).expanduser()
    return cache_dir("plans")


@dataclass
class CacheEntry:
    """One cached plan, as ``vidlab plan-cache list`` shows it."""

    key: str
    path: Path
    size: int  # bytes on disk
    modified: float  # mtime, seconds since the epoch
    prompt: str | None  # None: the file is not a readable layout
    model: str | None
    version: str | None
    subjects: int | None


class PlanCache:
    """The cache folder ``folder`` (created on the first write)."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def get(self, key: str) -> Layout | None:
        """The cached layout, or None (missing, or damaged: a damaged entry is asked for again and rewritten)."""
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            return Layout.from_json(path.read_text(encoding="utf-8"))
        except (LayoutError, OSError, UnicodeDecodeError):
            return None

    def put(self, key: str, layout: Layout) -> Path:
        from vidlab.io import atomic_write_text

        path = self.path(key)
        atomic_write_text(path, layout.to_json())
        return path

    def entries(self) -> list[CacheEntry]:
        """Every cached plan, newest first (unreadable files too, with ``prompt`` None)."""
        if not self.folder.is_dir():
            return []
        out = []
        for p in self.folder.glob("*.json"):
            try:
                st = p.stat()
            except OSError:
                continue
            prompt = model = version = None
            subjects = None
            try:
                lay = Layout.from_json(p.read_text(encoding="utf-8"))
                prompt, subjects = lay.prompt, len(lay.subjects)
                model = lay.meta.get("model")
                version = lay.meta.get("planner_version")
            except (LayoutError, OSError, UnicodeDecodeError):
                pass
            out.append(CacheEntry(p.stem, p, st.st_size, st.st_mtime, prompt, model, version, subjects))
        return sorted(out, key=lambda e: (-e.modified, e.key))

    def select(self, model: str | None = None, contains: str | None = None) -> list[CacheEntry]:
        """Entries of ``model`` whose prompt contains ``contains`` (case-insensitive); None matches all."""
        out = []
        for e in self.entries():
            if model is not None and e.model != model:
                continue
            if contains is not None and (e.prompt is None or contains.lower() not in e.prompt.lower()):
                continue
            out.append(e)
        return out

    def remove(self, entries: list[CacheEntry]) -> tuple[int, int]:
        """Delete ``entries``; (files removed, bytes freed)."""
        n = size = 0
        for e in entries:
            try:
                e.path.unlink()
            except FileNotFoundError:
                continue
            n += 1
            size += e.size
        return n, size
