"""``vidlab qa``, ``vidlab eval-qa`` and ``vidlab classify``: VideoBrain's command-line entry points.

Each is ``main(argv) -> int`` over argparse. Settings resolve as dataclass defaults <- ``--config`` preset
(YAML, e.g. ``configs/videobrain-qwen-vl.yaml``) <- ``--set key=value`` overrides <- explicit flags, and the
resolved config is written next to every output. Bad input (unknown policy spec, unreadable benchmark copy,
undecodable video, a multiple-choice question without options) exits with status 2 and a one-line reason.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from understanding.evaluate import EvalConfig

EXIT_BAD_INPUT = 2


def _typed_errors() -> tuple[type[BaseException], ...]:
    """The errors that mean "bad input" (reported in one line) rather than a bug (traceback)."""
    from understanding.benchmarks import BenchmarkError, QAItemError
    from understanding.policies import PolicyError
    from vidlab.config import ConfigError
    from vidlab.video import VideoReadError

    return (
        PolicyError,
        BenchmarkError,
        QAItemError,
        VideoReadError,
        ConfigError,
        FileNotFoundError,
        ValueError,
    )


def _fail(cmd: str, e: BaseException) -> int:
    print(f"vidlab {cmd}: error: {e}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _config_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("configuration")
    g.add_argument(
        "--config",
        metavar="PRESET",
        help="YAML preset: a path or a name in configs/ (e.g. videobrain-qwen-vl)",
    )
    g.add_argument(
        "--set",
        dest="overrides",
        metavar="KEY=VALUE",
        nargs="+",
        default=[],
        help="override config keys, dotted for nested ones: episode.max_calls=3 episode.temperature=0.7",
    )


def _resolve(cls: type, args: argparse.Namespace, flags: dict[str, Any]) -> Any:
    """defaults <- preset <- --set <- explicit flags (those not None)."""
    from vidlab.config import resolve

    cfg = resolve(cls, args.config, args.overrides)
    return dataclasses.replace(cfg, **{k: v for k, v in flags.items() if v is not None})


# ------------------------------------------------------------------------------------------------------ qa
QA_EPILOG = """\
examples:
  # a tiny random Qwen2.5-VL, offline (its answers are noise; it shows the loop and the output)
  vidlab qa --video clip.mp4 --question "What colour is the ball?" --options red blue green --policy hf-tiny:qwen2_5_vl
  # a real checkpoint through transformers, with CLIP retrieval as a second tool
  vidlab qa --video talk.mp4 --question "What is written on the board?" \\
      --policy hf:Qwen/Qwen3-VL-8B-Instruct --clip-model ViT-B-16:openai
  # a vLLM server (vllm serve Qwen/Qwen2.5-VL-7B-Instruct --port 8000)
  vidlab qa --video v.mp4 --question "Q?" --options yes no --policy openai:http://127.0.0.1:8000/v1@Qwen/Qwen2.5-VL-7B-Instruct
  # the uniform-32 baseline: 32 evenly spaced frames, one answer, no tools
  vidlab qa --video v.mp4 --question "Q?" --options yes no --policy hf:DIR --strategy uniform:32

policy specs: hf:PATH_OR_ID | hf-tiny:qwen2_5_vl|qwen3_vl | openai:URL@MODEL | replay:FILE | const:LETTER
The trajectory is printed turn by turn: thoughts, tool calls, the frames seen (index and timestamp), the answer.
"""


def _qa_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vidlab qa",
        description="Answer one question about a (long) video with a VideoBrain policy, printing its trajectory.",
        epilog=QA_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--video", required=True, help="path to the video file")
    p.add_argument("--question", required=True, help="the question text")
    p.add_argument(
        "--options", nargs="+", metavar="OPTION", help="answer options (multiple choice); omit for open-ended"
    )
    p.add_argument("--policy", help="policy spec (see below); default const:A")
    p.add_argument("--strategy", help="agent (default), uniform:K or clip:K")
    p.add_argument(
        "--clip-model", help="CLIP model for clip_sample, e.g. ViT-B-16:openai (default: uniform tool only)"
    )
    p.add_argument("--cache-dir", help="frame-index cache folder (default $VIDLAB_CACHE)")
    p.add_argument("--max-calls", type=int, help="tool-call budget (reference: 5)")
    p.add_argument("--temperature", type=float, help="sampling temperature (0 = greedy)")
    p.add_argument("--seed", type=int, help="sampling seed")
    p.add_argument("--json", metavar="PATH", help="also write the trajectory as JSON here")
    _config_args(p)
    return p


def _frames_line(frames: list[Any]) -> str:
    return ", ".join(f"{f.index} ({f.timestamp:.2f}s)" for f in frames)


def print_trajectory(traj: Any, file: Any = None) -> None:
    """Human-readable trajectory: initial view, then per turn thoughts, call, frames returned; then the answer."""
    from understanding import protocol as P

    out = file or sys.stdout
    turn = 0
    for m in traj.messages:
        if m.role == "system":
            continue
        if m.role == "user":
            if not m.frames:
                continue
            head = "[initial view]" if turn == 0 else "         ->"
            print(f"{head} {len(m.frames)} frames: {_frames_line(m.frames)}", file=out)
            continue
        turn += 1
        parsed = P.parse_assistant_turn(m.text)
        print(f"[turn {turn}] thinking: {(parsed.thinking or '').strip()[:500]}", file=out)
        if parsed.tool_call is not None:
            print(
                f"         tool call: {parsed.tool_call.name} {json.dumps(parsed.tool_call.args)}", file=out
            )
        if parsed.answer is not None:
            print(f"         answer: {parsed.answer}", file=out)
        if parsed.error:
            print(f"         (protocol error: {parsed.error}; raw: {m.text[:200]!r})", file=out)
    pred = (
        f"predicted {traj.predicted} ({traj.predicted_reason})" if traj.options else f"answer {traj.answer!r}"
    )
    status = "valid" if traj.valid else f"INVALID: {traj.invalid_reason}"
    print(
        f"result: {pred}; {status}; {len(traj.frames_used)} distinct frames shown, "
        f"{traj.num_tool_calls} tool call(s); end: {traj.end_reason}",
        file=out,
    )


def qa_main(argv: list[str] | None = None) -> int:
    """``vidlab qa``: one question, one trajectory, printed."""
    args = _qa_parser().parse_args(argv)
    try:
        cfg = _resolve(
            EvalConfig,
            args,
            {
                "policy": args.policy,
                "strategy": args.strategy,
                "clip_model": args.clip_model,
                "cache_dir": args.cache_dir,
            },
        )
        ep = {"max_calls": args.max_calls, "temperature": args.temperature, "seed": args.seed}
        cfg = dataclasses.replace(
            cfg, episode=dataclasses.replace(cfg.episode, **{k: v for k, v in ep.items() if v is not None})
        )
        traj = run_qa(cfg, args.video, args.question, args.options)
    except _typed_errors() as e:
        return _fail("qa", e)
    print(f"video: {args.video} ({traj.total_frames} frames at {traj.fps:g} fps)")
    print(f"question: {args.question}")
    if traj.options:
        from understanding import protocol as P

        print(
            "options: "
            + "  ".join(f"{ch}. {o}" for ch, o in zip(P.option_letters(len(traj.options)), traj.options))
        )
    print(f"policy: {cfg.policy}   strategy: {cfg.strategy}")
    print_trajectory(traj)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(traj.to_dict(), indent=2, default=str))
        print(f"trajectory written to {args.json}")
    return 0


def run_qa(cfg: EvalConfig, video: str, question: str, options: list[str] | None = None) -> Any:
    """Run one question with ``cfg`` (policy, strategy, agents) and return the ``Trajectory``."""
    from understanding.benchmarks import QAItem
    from understanding.evaluate import QAWorker

    QAItem("cli", video, question, options, "A" if options else "", "mc" if options else "oe")  # validates
    worker = QAWorker(
        cfg.policy,
        cfg.strategy,
        cfg.episode,
        clip_model=cfg.clip_model,
        clip_sampling=cfg.clip_sampling,
        clip_parity=cfg.clip_parity,
        cache_dir=cfg.cache_dir,
        policy_kwargs=cfg.policy_kwargs,
    )
    return worker.trajectory(video, question, options)


# -------------------------------------------------------------------------------------------------- eval-qa
EVAL_EPILOG = """\
examples:
  # Video-MME long split, a local Qwen3-VL, agent vs uniform baselines, on 2 Ray GPU workers
  vidlab eval-qa --benchmark videomme --data ~/data/Video-MME --split long --policy hf:Qwen/Qwen3-VL-8B-Instruct \\
      --strategies agent uniform:16 uniform:32 uniform:56 --clip-model ViT-B-16:openai \\
      --backend ray --num-workers 2 --set num_gpus_per_worker=1 --out runs/videomme-long
  # any lmms-eval-style JSONL, quick look at 20 questions through a vLLM server
  vidlab eval-qa --benchmark jsonl --data questions.jsonl --policy openai:http://127.0.0.1:8000/v1@my-vlm --limit 20 --out runs/q
  # re-plot several finished runs (e.g. two policies) on one accuracy-vs-frames chart
  vidlab eval-qa --compare runs/qwen25 runs/qwen3 --out runs/compare

benchmarks and the local layout they expect (see understanding/README.md):
  longvideobench  DIR/lvb_val.json + DIR/videos/         videomme  DIR/videomme/*.parquet + DIR/data/{videoID}.mp4
  mlvu            DIR/json/N_task.json + DIR/video/N_task/  lvbench   DIR/video_info.meta.jsonl + DIR/videos/{key}.mp4
  egoschema       DIR/questions.json + DIR/subset_answers.json + DIR/videos/{q_uid}.mp4
  jsonl           one question per line: id, video, question, options, answer, category, duration

Reruns resume: questions already in OUT/<strategy>/results.jsonl are skipped; failed ones are retried.
Outputs: OUT/<strategy>/results.jsonl (one record per question), OUT/summary.json, OUT/summary.md,
OUT/accuracy_vs_frames.png, OUT/problems.jsonl (records the loader skipped), OUT/config.yaml.
"""


def _eval_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vidlab eval-qa",
        description="Evaluate a policy (and frame-selection baselines) on a long-video QA benchmark.",
        epilog=EVAL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--benchmark", help="longvideobench | videomme | mlvu | lvbench | egoschema | jsonl")
    p.add_argument("--data", help="local copy of the benchmark: its folder or annotation file")
    p.add_argument(
        "--split", help="videomme: short|medium|long; longvideobench: val|test; mlvu/jsonl: a task/category"
    )
    p.add_argument("--video-dir", help="where the videos are, if not in the release layout under --data")
    p.add_argument(
        "--policy", help="policy spec: hf:..., hf-tiny:..., openai:URL@MODEL, replay:FILE, const:X"
    )
    p.add_argument("--strategies", nargs="+", help="agent, uniform:K, clip:K (several = one comparison plot)")
    p.add_argument("--out", help="output folder (default outputs/eval-qa)")
    p.add_argument("--backend", choices=["local", "ray"], help="local (in-process, default) or ray")
    p.add_argument("--num-workers", type=int, help="Ray workers (each loads the policy once)")
    p.add_argument("--limit", type=int, help="evaluate only the first N questions")
    p.add_argument("--clip-model", help="CLIP model for clip_sample and clip:K, e.g. ViT-B-16:openai")
    p.add_argument("--judge", help="open-ended scoring: rule (default), rule:exact, openai:URL@MODEL")
    p.add_argument(
        "--compare", nargs="+", metavar="RUN_DIR", help="only re-plot finished runs together into --out"
    )
    _config_args(p)
    return p


def _print_summaries(summaries: dict[str, dict[str, Any]]) -> None:
    from understanding.evaluate import summary_table

    print(summary_table(summaries))


def eval_qa_main(argv: list[str] | None = None) -> int:
    """``vidlab eval-qa``: load a benchmark copy, evaluate every strategy, write results + summary + plot."""
    from understanding.evaluate import load_summaries, run_eval, write_report

    args = _eval_parser().parse_args(argv)
    try:
        if args.compare:
            summaries = load_summaries(args.compare)
            paths = write_report(summaries, args.out or "outputs/eval-qa-compare", "comparison")
            _print_summaries(summaries)
            print(f"wrote {paths['table']} and {paths['plot']}")
            return 0
        flags = {
            "benchmark": args.benchmark,
            "data": args.data,
            "split": args.split,
            "video_dir": args.video_dir,
            "policy": args.policy,
            "strategies": tuple(args.strategies) if args.strategies else None,
            "out": args.out,
            "backend": args.backend,
            "num_workers": args.num_workers,
            "limit": args.limit,
            "clip_model": args.clip_model,
            "judge": args.judge,
        }
        cfg = _resolve(EvalConfig, args, flags)
        if not cfg.data:
            raise ValueError("--data is required: the folder or annotation file of your local benchmark copy")
        summaries = run_eval(cfg)
    except _typed_errors() as e:
        return _fail("eval-qa", e)
    _print_summaries(summaries)
    out = Path(cfg.out)
    n_prob = next(iter(summaries.values()), {}).get("n_load_problems", 0)
    if n_prob:
        print(f"{n_prob} record(s) skipped by the loader: see {out / 'problems.jsonl'}")
    print(
        f"results in {out}/<strategy>/results.jsonl; summary {out / 'summary.md'}; plot {out / 'accuracy_vs_frames.png'}"
    )
    return 0


# ------------------------------------------------------------------------------------------------- classify
CLASSIFY_EPILOG = """\
examples:
  vidlab classify --data train.jsonl --policy hf:Qwen/Qwen3-VL-8B-Instruct --clip-model ViT-B-16:openai --out labelled.jsonl
  vidlab classify --data train.jsonl --policy openai:http://127.0.0.1:8000/v1@qwen --out labelled.jsonl --set classify.k=8

Rows are JSONL with id, video (or video_path), question, options (absent for open-ended) and answer. Each row is
answered k times from the 16 initial frames and k times from a richer view (more uniform frames + CLIP frames for
the question), then labelled direct / adaptive / active / filtered (rule: understanding/README.md). The label goes
into "classification"; reruns skip rows already in --out; failures go to <out>.errors.jsonl.
"""


def _classify_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vidlab classify",
        description="Label VideoBrain training rows Direct / Adaptive / Active (or filtered) with a policy.",
        epilog=CLASSIFY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", required=True, help="input rows (JSONL)")
    p.add_argument("--policy", help="policy spec (as for vidlab qa)")
    p.add_argument("--out", required=True, help="output JSONL with the labels written in")
    p.add_argument("--clip-model", help="CLIP model for the richer view's retrieved frames")
    p.add_argument("--video-root", help="folder that relative video paths in the rows are under")
    p.add_argument("--k", type=int, help="samples per view (default 4)")
    p.add_argument("--judge", help="open-ended scoring: rule (default), rule:exact, openai:URL@MODEL")
    _config_args(p)
    return p


def _classify_config(args: argparse.Namespace) -> EvalConfig:
    cfg = _resolve(
        EvalConfig,
        args,
        {
            "policy": args.policy,
            "clip_model": args.clip_model,
            "video_root": args.video_root,
            "judge": args.judge,
        },
    )
    if args.k is not None:
        cfg = dataclasses.replace(cfg, classify=dataclasses.replace(cfg.classify, k=args.k))
    return cfg


def classify_main(argv: list[str] | None = None) -> int:
    """``vidlab classify``: label rows with the documented rule in ``understanding.classify.classify_rows``."""
    from understanding.classify import classify_rows, summarize
    from understanding.judge import load_judge
    from understanding.policies import load_policy
    from vidlab.config import save_resolved

    args = _classify_parser().parse_args(argv)
    try:
        cfg = _classify_config(args)
        rows = _read_rows(Path(args.data))
        policy = load_policy(cfg.policy, **cfg.policy_kwargs)
        clip = None
        if cfg.clip_model:
            from vidlab.clip import load_model

            clip = load_model(cfg.clip_model)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        save_resolved(cfg, out.parent, name=f"{out.stem}.config.yaml")
        errors: list[dict] = []
        labelled = classify_rows(
            rows,
            policy,
            config=cfg.classify,
            clip_model=clip,
            index_cache_dir=cfg.cache_dir,
            judge=load_judge(cfg.judge),
            out_path=out,
            video_root=cfg.video_root,
            errors=errors,
        )
    except _typed_errors() as e:
        return _fail("classify", e)
    s = summarize(labelled)
    print(f"labelled {s['rows']} row(s): " + ", ".join(f"{k} {v}" for k, v in sorted(s["labels"].items())))
    if errors:
        print(f"{len(errors)} row(s) failed (see {out}.errors.jsonl); rerun to retry them")
    print(f"written to {out}")
    return 0


def _read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file; a malformed line is a ``ValueError`` naming the line."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: line {n} is not valid JSON ({e.msg})") from e
        if not isinstance(row, dict):
            raise ValueError(f"{path}: line {n} is not a JSON object")
        rows.append(row)
    return rows
