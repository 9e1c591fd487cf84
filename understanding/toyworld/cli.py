"""``vidlab toyworld-data`` (also ``python -m vidlab.understanding.toyworld.cli``): write a split of the toy long-video world.

    vidlab toyworld-data outputs/toyworld 4                 # 4 test-split videos + questions.jsonl under OUT/test
    vidlab toyworld-data outputs/tw 24 --split test --base-seed 77 --max-frames 1200
    vidlab toyworld-data outputs/tw-where 4 --world where   # the where-to-look world (five question kinds)

Each video is a real h264 mp4 (1 fps, 32x32); ``questions.jsonl`` holds four multiple-choice questions per video
(static / needle / count / distractor; the where world adds twolook) with their answers, readable by
``vidlab eval-qa --benchmark jsonl``.
``--base-seed`` picks another disjoint block of seeds (1000 per base seed), e.g. a world no training run used.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from vidlab.errors import UserError


class ToyWorldUsageError(UserError):
    """A bad ``toyworld-data`` argument (one line, exit 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ToyWorldUsageError(f"{message} (see {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    from vidlab.understanding.toyworld.world import SPLIT_OFFSETS, WORLDS, WorldConfig

    p = _Parser(
        prog="vidlab toyworld-data",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog="example:\n  vidlab toyworld-data outputs/toyworld 4",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("out", help="folder; the split goes to OUT/<split>/ (videos/ + questions.jsonl)")
    p.add_argument("n", nargs="?", type=int, default=4, help="number of videos (default 4)")
    p.add_argument("--split", default="test", choices=sorted(SPLIT_OFFSETS))
    p.add_argument("--base-seed", type=int, default=0, help="block of seeds (default 0: the benchmarks' own)")
    p.add_argument(
        "--world",
        choices=sorted(WORLDS),
        default="default",
        help="default: the shipped policy's world; where: the where-to-look world (policy toy:where)",
    )
    p.add_argument("--max-frames", type=int, default=WorldConfig.max_frames, help="longest video, in frames")
    p.add_argument("--no-progress", action="store_true")
    return p


def _world(argv: list[str]) -> int:
    from vidlab.understanding.toyworld.world import build_split, world_config

    a = _parser().parse_args(argv)
    if a.n < 1:
        raise ToyWorldUsageError(f"n must be at least 1, got {a.n}")
    if a.base_seed < 0:
        raise ToyWorldUsageError(f"--base-seed must be >= 0, got {a.base_seed}")
    if a.max_frames < 16:
        raise ToyWorldUsageError(f"--max-frames must be at least 16 (the initial view), got {a.max_frames}")
    base = world_config(a.world)
    if a.world != "default" and a.max_frames < base.min_frames:
        raise ToyWorldUsageError(
            f"--max-frames must be at least {base.min_frames} in the {a.world} world, got {a.max_frames}"
        )
    cfg = world_config(a.world, max_frames=a.max_frames, min_frames=min(base.min_frames, a.max_frames))
    s = build_split(a.out, a.split, a.n, cfg, base_seed=a.base_seed, progress=not a.no_progress)
    print(s.jsonl)
    return 0


def world_main(argv: Sequence[str] | None = None) -> int:
    """``vidlab toyworld-data OUT [N]``."""
    from vidlab.errors import run_command

    return run_command("vidlab toyworld-data", _world, list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    raise SystemExit(world_main())
