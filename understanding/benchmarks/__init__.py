"""Long-video QA benchmarks read from a user's local copy in their released formats -> ``QAItem`` lists.

``load_benchmark(name, path, split=None, video_dir=None, limit=None)`` with ``name`` one of
``longvideobench, videomme, mlvu, lvbench, egoschema, jsonl``. Bad records are returned as ``problems``
(never a crash); a missing or unreadable annotation file raises ``BenchmarkError``.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

from understanding.benchmarks.items import (
    BenchmarkError,
    LoadResult,
    Problem,
    QAItem,
    QAItemError,
    duration_bucket,
    split_inline_options,
)

BENCHMARKS = {
    "longvideobench": "understanding.benchmarks.longvideobench",
    "videomme": "understanding.benchmarks.videomme",
    "mlvu": "understanding.benchmarks.mlvu",
    "lvbench": "understanding.benchmarks.lvbench",
    "egoschema": "understanding.benchmarks.egoschema",
    "jsonl": "understanding.benchmarks.jsonl",
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
) -> LoadResult:
    """Load benchmark ``name`` from ``path``; ``limit`` keeps the first N items (in file order)."""
    key = ALIASES.get(name.lower(), name.lower())
    if key not in BENCHMARKS:
        raise BenchmarkError(path, f"unknown benchmark {name!r}; known: {sorted(BENCHMARKS)}")
    if not Path(path).exists():
        raise BenchmarkError(path, "no such file or directory")
    result = import_module(BENCHMARKS[key]).load(Path(path), split=split, video_dir=video_dir)
    if limit is not None:
        result.items = result.items[: max(0, int(limit))]
    return result
