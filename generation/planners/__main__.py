"""``python -m vidlab.generation.planners "prompt"``: plan a layout, print it as JSON, optionally save it with PNG overlays."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EPILOG = """examples:
  python -m vidlab.generation.planners "three cats on the left of a red car"
  python -m vidlab.generation.planners "a ball rolls from left to right" --out layouts/ball --width 832 --height 480
  python -m vidlab.generation.planners "a dog near a cat" --subjects dog cat
  VIDLAB_OPENAI_BASE_URL=http://localhost:8000/v1 VIDLAB_LLM_MODEL=Qwen2.5-7B-Instruct \\
      python -m vidlab.generation.planners "a kite above a boy" --planner llm --cache refresh
  python -m vidlab.generation.planners "a kite above a boy" --planner file --path my_layout.yaml
"""


def main(argv: list[str] | None = None) -> int:
    """Plan, print, save; exit 2 on bad input."""
    ap = argparse.ArgumentParser(
        prog="python -m vidlab.generation.planners",
        description="Plan a keyframed box layout for a text-to-video prompt.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("prompt")
    ap.add_argument("--planner", choices=["rule", "llm", "file"], default="rule")
    ap.add_argument("--subjects", nargs="+", help="explicit subject phrases (each must occur in the prompt)")
    ap.add_argument("--path", type=Path, help="layout file for --planner file")
    ap.add_argument("--out", type=Path, help="folder for layout.json and one PNG overlay per keyframe")
    ap.add_argument("--width", type=int, default=832)
    ap.add_argument("--height", type=int, default=480)
    ap.add_argument("--num-keyframes", type=int, help="overlay this many evenly spaced times instead")
    ap.add_argument(
        "--cache",
        choices=["on", "off", "refresh"],
        default="on",
        help="--planner llm: use the plan cache (on), bypass it (off), or ask again and keep the new plan",
    )
    ap.add_argument(
        "--accept-repaired",
        action="store_true",
        help="--planner llm: use a plan whose boxes had to be clamped into the frame (warned, never cached)",
    )
    args = ap.parse_args(argv)

    from vidlab.generation.planners import plan_layout

    kw: dict = {}
    if args.subjects:
        kw["subjects"] = args.subjects
    if args.planner == "file":
        kw["path"] = args.path
    if args.planner == "llm":
        kw.update(cache=args.cache, accept_repaired=args.accept_repaired)
    try:
        layout = plan_layout(args.prompt, planner=args.planner, **kw)
    except ValueError as exc:  # LayoutError, SubjectNotFoundError, LLMPlannerError are ValueErrors
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(layout.to_json())
    if args.out:
        layout.save(args.out / "layout.json")
        paths = layout.render_overlays(args.out, args.width, args.height, num_keyframes=args.num_keyframes)
        print(f"wrote {args.out / 'layout.json'} and {len(paths)} overlay(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
