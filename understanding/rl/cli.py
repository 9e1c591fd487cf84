"""``vidlab train-agent --engine trl|verl``: the two real-scale engines' command lines.

``vidlab train-agent`` (the toy-world command) delegates here with the remaining argv:
``trl_main(argv)`` trains with TRL's GRPOTrainer in this process; ``verl_main(argv)`` converts the data to verl
parquet and writes the tool config, agent-loop config and the exact ``main_ppo`` launch (verl needs GPUs + vLLM).
Both use the shared grammar: ``--preset NAME|PATH`` then ``key=value`` overrides (``--set`` alias).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from vidlab.config import add_config_args, config_dir, config_from_args
from vidlab.errors import UserError, run_command
from vidlab.io import atomic_write_json

TRL_PROG = "vidlab train-agent --engine trl"
VERL_PROG = "vidlab train-agent --engine verl"


class RLCommandError(UserError, ValueError):
    """A train-agent request that cannot run as given."""


def _check_rl_extra(*modules: str) -> None:
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise RLCommandError(f"{', '.join(missing)} not installed: pip install 'vidlab[rl]'")


def _trl_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=TRL_PROG,
        description=(
            "GRPO for the VideoBrain agent with TRL's GRPOTrainer: each rollout is an vidlab.understanding.env.Episode "
            "(16 initial frames, up to 5 tool calls, 6 turns); observation tokens carry no loss; the reward is "
            "vidlab.understanding.reward.compute_score. Writes OUT/final (load with --policy hf:OUT/final), "
            "OUT/rollouts.jsonl, OUT/summary.json and OUT/config.yaml."
        ),
        epilog=(
            "examples:\n"
            "  vidlab train-agent --engine trl --preset rl/trl-tiny            # tiny random Qwen2.5-VL, CPU, ~1 min\n"
            "  vidlab train-agent --engine trl --preset rl/trl-qwen3-vl-8b data=jsonl:train.jsonl out=runs/x\n"
            "keys: model, data, out, num_generations, per_device_train_batch_size, gradient_accumulation_steps,\n"
            "  max_steps, learning_rate, temperature, epsilon, beta, entropy_coef, clip_model, behaviour,\n"
            "  behaviour_mix, episode.max_calls, episode.max_turns, episode.max_new_tokens, ..."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", help="hf-tiny:qwen2_5_vl | a checkpoint dir | a hub id (same as model=...)")
    p.add_argument("--data", help="jsonl:PATH | benchmark:NAME:PATH | PATH.jsonl (same as data=...)")
    p.add_argument("--video-root", help=VIDEO_ROOT_HELP)
    p.add_argument("--out", help="output folder (same as out=...)")
    add_config_args(p)
    return p


VIDEO_ROOT_HELP = "folder that relative video paths in --data are under (same as video_root=...; default: the data file's folder)"


def _data_outcome(prog: str, total: int, bad: list[dict[str, str]], where: str | None) -> int:
    """The data-reading summary every batch command ends with: each row left out (path, reason), exit 0/3/4."""
    from vidlab.outcome import BatchOutcome, Failure, finish

    fails = [Failure(b.get("id", ""), b.get("reason", ""), b.get("path", "")) for b in bad]
    return finish(prog, BatchOutcome(total, fails, where), what="data row", retry=False)


def _resolve_behaviour(spec: str | None) -> str | None:
    """``replay:REL`` is looked up relative to the working directory, then to ``configs/``."""
    if not spec or not spec.startswith("replay:"):
        return spec
    rel = spec[len("replay:") :]
    if Path(rel).is_file():
        return spec
    cand = config_dir() / rel
    return f"replay:{cand}" if cand.is_file() else spec


def _trl(argv: list[str]) -> int:
    args = _trl_parser().parse_args(argv)
    _check_rl_extra("trl", "datasets")
    from vidlab.understanding.rl.trl_adapter import TrlConfig, train

    flags = {"model": args.model, "data": args.data, "out": args.out, "video_root": args.video_root}
    cfg = config_from_args(TrlConfig, args, flags)
    cfg.behaviour = _resolve_behaviour(cfg.behaviour)
    cfg.validate()
    if cfg.behaviour:
        from vidlab.understanding.policies import load_policy

        load_policy(cfg.behaviour)  # a bad spec costs one line, before any model loads
    from vidlab.understanding.rl.dataset import NoUsableRowsError

    try:
        summary = train(cfg)
    except NoUsableRowsError as e:
        print(f"{TRL_PROG}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return _data_outcome(TRL_PROG, len(e.bad), e.bad, e.problems_path)
    logs = [h for h in summary["log_history"] if "loss" in h]
    for h in logs:
        print(
            f"step {h.get('step')}: loss {h['loss']:.4f} reward {h.get('reward', float('nan')):.3f} "
            f"(std {h.get('reward_std', float('nan')):.3f}) tool calls {h.get('videobrain/tool_calls', 0):.2f} "
            f"frames {h.get('videobrain/frames_used', 0):.1f}"
        )
    print(f"trained {summary['global_step']} steps; model -> {summary.get('model_dir', '(not saved)')}")
    print(f"rollouts -> {summary['rollouts']}")
    bad = summary.get("data_failures") or []
    return _data_outcome(TRL_PROG, summary.get("data_rows", 0), bad, summary.get("data_failures_file"))


def _verl_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=VERL_PROG,
        description=(
            "Prepare a VideoBrain GRPO run on upstream verl: converts the questions to verl parquet (the prompt "
            "with 16 initial frames, data_source, ground truth, extra_info with class, question type, options and "
            "tools_kwargs; bad rows reported in OUT/train.parquet.problems.jsonl), writes OUT/tools.yaml, "
            "OUT/agent_loop.yaml, OUT/launch.sh (python -m verl.trainer.main_ppo ...) and OUT/ray_job.sh "
            "(ray job submit ...). Run launch.sh on the GPU node; nothing is trained here."
        ),
        epilog=(
            "example (8 GPUs, Qwen3-VL-8B-Instruct):\n"
            "  vidlab train-agent --engine verl --preset rl/verl-qwen3-vl-8b data=jsonl:labelled.jsonl out=runs/vb\n"
            "  bash runs/vb/launch.sh            # or: RAY_ADDRESS=http://HEAD:8265 bash runs/vb/ray_job.sh"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", help="hub id or checkpoint dir (same as model=...)")
    p.add_argument("--data", help="jsonl:PATH | benchmark:NAME:PATH | PATH.jsonl (same as data=...)")
    p.add_argument("--out", help="output folder (same as out=...)")
    p.add_argument("--video-root", help=VIDEO_ROOT_HELP)
    p.add_argument("--limit", type=int, help="convert at most N rows (same as limit=N)")
    add_config_args(p)
    return p


def _verl(argv: list[str]) -> int:
    args = _verl_parser().parse_args(argv)
    _check_rl_extra("verl", "pyarrow")
    from vidlab.understanding.rl import dataset as D
    from vidlab.understanding.rl.verl_launch import VerlConfig, hold_out_validation, write_launch

    flags: dict[str, Any] = {
        "model": args.model,
        "data": args.data,
        "out": args.out,
        "limit": args.limit,
        "video_root": args.video_root,
    }
    cfg = config_from_args(VerlConfig, args, flags)
    if not cfg.data:
        raise RLCommandError("no training data: pass --data jsonl:PATH (or benchmark:NAME:PATH)")
    out = Path(cfg.out)
    try:
        train = D.convert(
            cfg.data, out / "train.parquet", tools=cfg.tools, limit=cfg.limit, video_root=cfg.video_root
        )
    except D.NoUsableRowsError as e:
        print(f"{VERL_PROG}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return _data_outcome(VERL_PROG, len(e.bad), e.bad, e.problems_path)
    val = None
    if cfg.val_data:
        try:
            val = D.convert(cfg.val_data, out / "val.parquet", tools=cfg.tools, video_root=cfg.video_root)
        except D.NoUsableRowsError as e:  # verl cannot run without a validation set: nothing is launched
            print(f"{VERL_PROG}: error: val_data: {' '.join(str(e).split())}", file=sys.stderr)
            return _data_outcome(VERL_PROG, len(e.bad), _as_val(e.bad), e.problems_path)
        train_rows, val_rows, val_path, held = train.rows, val.rows, str(val.path), ""
    else:  # verl always builds a validation set: hold some training rows out (never validate on train)
        val_path = str(out / "val.parquet")
        train_rows, val_rows = hold_out_validation(train.path, val_path, cfg.val_fraction)
        held = f" (held out of the {train.rows} converted rows; val_fraction={cfg.val_fraction:g})"
    paths = write_launch(cfg, out, str(train.path), val_path)
    print(
        f"train rows: {train_rows} -> {train.path}"
        + (f"; {len(train.bad)} bad rows -> {train.problems_path}" if train.bad else "")
        + (
            f"; {train.filtered} row(s) labelled filtered left out (no learning signal)"
            if train.filtered
            else ""
        )
    )
    print(
        f"val rows: {val_rows} -> {val_path}{held}"
        + (f"; {len(val.bad)} bad rows -> {val.problems_path}" if val is not None and val.bad else "")
    )
    for key in ("tools", "agent_loop", "config"):
        print(f"{key}: {paths[key]}")
    print(f"launch (one node, {cfg.n_gpus_per_node} GPUs): bash {paths['launch']}")
    print(f"launch (Ray cluster): RAY_ADDRESS=http://HEAD:8265 bash {paths['ray_job']}")
    atomic_write_json(out / "train_report.json", {"train": train.to_dict(), "paths": paths})
    # every row read counts, the validation file's too: a bad validation row is a failed item like a training one
    bad = list(train.bad)
    total = train.rows + len(train.bad)
    files = [train.problems_path] if train.bad else []
    if val is not None:
        bad += _as_val(val.bad)
        total += val.rows + len(val.bad)
        files += [val.problems_path] if val.bad else []
    return _data_outcome(VERL_PROG, total, bad, " and ".join(str(f) for f in files) or None)


def _as_val(bad: list[dict[str, str]]) -> list[dict[str, str]]:
    """Rows of the validation file, named as such in the failure summary (``val:ID``)."""
    return [{**b, "id": f"val:{b.get('id', '')}"} for b in bad]


def trl_main(argv: list[str] | None = None) -> int:
    """``vidlab train-agent --engine trl ARGS``; returns the exit status (2 with one line on a user error)."""
    return run_command(TRL_PROG, _trl, list(sys.argv[1:] if argv is None else argv))


def verl_main(argv: list[str] | None = None) -> int:
    """``vidlab train-agent --engine verl ARGS``; returns the exit status (2 with one line on a user error)."""
    return run_command(VERL_PROG, _verl, list(sys.argv[1:] if argv is None else argv))
