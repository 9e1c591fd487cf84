"""``vidlab plan-cache list|clear``: show and empty the LLM layout planner's plan cache.

The cache holds only plans that passed every check unmodified (``vidlab.generation.planners.llm``), one JSON
layout per (prompt, model, planner version, subjects), in ``$VIDLAB_CACHE_DIR/plans`` (``--cache-dir``
elsewhere). ``list`` prints one line per plan: when it was written, its size, the model, the planner
version, the subject count and the prompt. ``clear`` removes them all, or those of ``--model`` and/or with
``--prompt`` in their prompt. To plan without the cache for one run instead: ``planner_cache=off`` (or
``refresh``) in ``vidlab generate`` and ``vidlab compbench`` (``generate.planner_cache=...``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

EPILOG = """examples:
  vidlab plan-cache list
  vidlab plan-cache list --model Qwen2.5-7B-Instruct
  vidlab plan-cache clear --prompt "green ball"      # the plans of prompts containing "green ball"
  vidlab plan-cache clear                            # every cached plan
  vidlab generate "a kite above a boy" --planner llm planner_cache=refresh --out outputs/kite
"""


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MB"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vidlab plan-cache",
        description="List or clear the LLM layout planner's plan cache (only plans that passed every check).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", choices=("list", "clear"))
    p.add_argument("--cache-dir", type=Path, help="the cache folder (default: $VIDLAB_CACHE_DIR/plans)")
    p.add_argument("--model", help="only the plans of this planner model")
    p.add_argument("--prompt", help="only plans whose prompt contains this text (case-insensitive)")
    return p


def plan_cache_main(argv: list[str] | None = None) -> int:
    """Entry point of ``vidlab plan-cache``; returns the exit status."""
    from vidlab.errors import UserError
    from vidlab.generation.planners.cache import PlanCache, default_cache_dir

    args = _parser().parse_args(argv)
    folder = args.cache_dir or default_cache_dir()
    if folder.exists() and not folder.is_dir():
        raise UserError(f"--cache-dir {folder}: exists and is not a folder")
    cache = PlanCache(folder)
    entries = cache.select(args.model, args.prompt)
    which = "".join(
        f" {k} {v!r}" for k, v in (("of model", args.model), ("with prompt containing", args.prompt)) if v
    )
    if args.action == "clear":
        n, size = cache.remove(entries)
        print(f"removed {n} cached plan(s){which}, {_size(size)}, from {folder}")
        return 0
    if not entries:
        print(f"no cached plans{which} in {folder}")
        return 0
    print(f"{'written':16}  {'size':>8}  {'model':24}  {'version':7}  {'subj':>4}  prompt")
    for e in entries:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(e.modified))
        if e.prompt is None:
            print(
                f"{when:16}  {_size(e.size):>8}  {'?':24}  {'?':7}  {'?':>4}  (not a readable plan: {e.path.name})"
            )
            continue
        prompt = " ".join(e.prompt.split())
        prompt = prompt if len(prompt) <= 80 else prompt[:77] + "..."
        model = str(e.model or "?")
        model = model if len(model) <= 24 else "..." + model[-21:]
        print(
            f"{when:16}  {_size(e.size):>8}  {model:24}  {str(e.version or '?'):7}  {e.subjects:>4}  {prompt!r}"
        )
    total = sum(e.size for e in entries)
    print(f"{len(entries)} cached plan(s), {_size(total)}, in {folder}")
    return 0
