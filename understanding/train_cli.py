"""``vidlab train-agent``: train a VideoBrain policy.

``--engine toy`` (this module) runs the toy world's whole pipeline on CPU (world -> CLIP -> SFT -> classify ->
GRPO; see understanding/toyworld/). ``--engine trl`` and ``--engine verl`` hand the remaining arguments to
``vidlab.understanding.rl.cli`` (the real-scale trainers).

    vidlab train-agent --engine toy --preset toyworld
    vidlab train-agent --engine toy --preset toyworld out=outputs/tw seed=1 grpo.steps=20 --ablation
    vidlab train-agent --engine toy --preset toyworld --export understanding/toyworld/weights
"""

from __future__ import annotations

import argparse
import importlib
import sys

from vidlab.errors import UserError

ENGINES = ("toy", "trl", "verl")


class EngineUnavailableError(UserError):
    """The chosen engine's module is not installed / not written yet."""


def _engine_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vidlab train-agent", add_help=False)
    p.add_argument("--engine", choices=ENGINES, default="toy")
    return p


def _toy_parser() -> argparse.ArgumentParser:
    from vidlab.config import add_config_args

    p = argparse.ArgumentParser(
        prog="vidlab train-agent --engine toy",
        description=(
            "Train the toy VideoBrain agent end to end on CPU: render the long-video toy world (train/val/test on "
            "disjoint seeds), train its CLIP, cold-start SFT on teacher trajectories, classify the RL rows "
            "(Direct/Adaptive/Active) with the SFT policy, then GRPO with the behaviour-aware reward. Every "
            "stage resumes: rerun the same command after a kill and it continues from the last checkpoint. "
            "Writes OUT/config.yaml, OUT/clip, OUT/sft, OUT/labels.jsonl, OUT/grpo/{ckpt.pt,log.jsonl,curves.png}."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  vidlab train-agent --engine toy --preset toyworld\n"
        "  vidlab train-agent --engine toy --preset toyworld out=outputs/tw-s1 seed=1 --ablation",
    )
    p.add_argument("--engine", choices=ENGINES, default="toy", help="toy (this), trl or verl")
    p.add_argument("--ablation", action="store_true", help="also train GRPO with the accuracy-only reward")
    p.add_argument(
        "--export", metavar="DIR", help="after training, copy the CLIP + GRPO policy weights to DIR"
    )
    p.add_argument("--no-progress", action="store_true", help="no tqdm bars")
    add_config_args(p)
    return p


def toy_main(argv: list[str]) -> int:
    from vidlab.config import config_from_args
    from vidlab.understanding.toyworld.train import ToyTrainConfig, export_weights, run

    args = _toy_parser().parse_args(argv)
    cfg = config_from_args(ToyTrainConfig, args, {"progress": False if args.no_progress else None})
    stages = ("grpo", "grpo-acc-only") if args.ablation else ("grpo",)
    result = run(cfg, stages=stages)
    print(
        f"trained: {cfg.out}/grpo (policy.safetensors, curves.png, log.jsonl); labels: {cfg.out}/labels.jsonl"
    )
    counts: dict[str, int] = {}
    for r in result["labels"]:
        counts[r["classification"]] = counts.get(r["classification"], 0) + 1
    print(f"classification of the RL rows: {counts}")
    if args.export:
        d = export_weights(cfg.out, args.export)
        print(f"exported weights to {d}")
    return 0


def _delegate(engine: str, argv: list[str]) -> int:
    try:
        mod = importlib.import_module("vidlab.understanding.rl.cli")
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith("vidlab.understanding.rl"):
            raise EngineUnavailableError(
                f"--engine {engine}: vidlab.understanding.rl.cli is not available in this installation"
            ) from e
        raise
    fn = getattr(mod, f"{engine}_main", None)
    if fn is None:
        raise EngineUnavailableError(f"--engine {engine}: vidlab.understanding.rl.cli has no {engine}_main")
    return int(fn(argv) or 0)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    known, rest = _engine_parser().parse_known_args(argv)
    if known.engine == "toy":
        return toy_main(argv)
    return _delegate(known.engine, rest)


if __name__ == "__main__":
    raise SystemExit(main())
