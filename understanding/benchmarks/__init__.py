"""Long-video QA benchmarks read from a user's local copy in their released formats -> ``QAItem`` lists.

``load_benchmark(name, path, split=None, video_dir=None, limit=None, skip_bad_lines=False)`` with ``name`` one
of ``longvideobench, videomme, mlvu, lvbench, egoschema, jsonl``. Records that parse but are not usable
questions (no options, an answer outside them, no video field) are returned as ``problems``; a missing or
unreadable annotation file, a JSONL line that is not a JSON object (unless ``skip_bad_lines``) and a copy with
no usable question at all raise ``BenchmarkError``.
"""

from __future__ import annotations

import inspect
from importlib import import_module
from pathlib import Path

from vidlab.understanding.benchmarks.items import (
    BenchmarkError,
    LoadResult,
    Problem,
    QAItem,
    QAItemError,
    duration_bucket,
    split_inline_options,
)

BENCHMARKS = {
    "longvideobench": "vidlab.understanding.benchmarks.longvideobench",
    "videomme": "vidlab.understanding.benchmarks.videomme",
    "mlvu": "vidlab.understanding.benchmarks.mlvu",
    "lvbench": "vidlab.understanding.benchmarks.lvbench",
    "egoschema": "vidlab.understanding.benchmarks.egoschema",
    "jsonl": "vidlab.understanding.benchmarks.jsonl",
}
ALIASES = {"lvb": "longvideobench", "video-mme": "videomme", "video_mme": "videomme", "lmms-eval": "jsonl"}

__all__ = [
    "BENCHMARKS",
    "BenchmarkError",
    "LoadResult",
    "Problem",
    "QAItem",
    "QAItemError",
    "duration_bucket",
    "load_benchmark",
    "split_inline_options",
]


def load_benchmark(
    name: str,
    path: str | Path,
    *,
    split: str | None = None,
    video_dir: str | Path | None = None,
    limit: int | None = None,
    skip_bad_lines: bool = False,
) -> LoadResult:
    """Load benchmark ``name`` from ``path``; ``limit`` keeps the first N items (in file order).

    Zero usable questions is a ``BenchmarkError`` saying why (what was skipped, or which categories there are
    when ``split`` matched none). ``skip_bad_lines``: JSONL lines that are not JSON objects become problems
    instead of an error naming the first one."""
    key = ALIASES.get(name.lower(), name.lower())
    if key not in BENCHMARKS:
        raise BenchmarkError(path, f"unknown benchmark {name!r}; known: {sorted(BENCHMARKS)}")
    if not Path(path).exists():
        raise BenchmarkError(path, "no such file or directory")
    loader = import_module(BENCHMARKS[key]).load
    kw = (
        {"skip_bad_lines": skip_bad_lines} if "skip_bad_lines" in inspect.signature(loader).parameters else {}
    )
    result = loader(Path(path), split=split, video_dir=video_dir, **kw)
    if not result.items:
        raise BenchmarkError(path, _nothing_usable(key, result, split))
    if limit is not None:
        result.items = result.items[: max(0, int(limit))]
    return result


def _nothing_usable(name: str, result: LoadResult, split: str | None) -> str:
    """Why a benchmark copy gave no question: what was skipped (the first reasons), or an empty split."""
    if result.problems:
        first = "; ".join(f"{p.record}: {p.reason}" for p in result.problems[:2])
        return (
            f"no usable {name} question: all {len(result.problems)} record(s) were skipped (first: {first}); "
            "is this the benchmark's annotation file?"
        )
    if split:
        return f"no {name} question in split {split!r}"
    return f"no {name} question found (an empty file?)"
