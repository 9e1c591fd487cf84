"""``vidlab qa``, ``vidlab eval-qa`` and ``vidlab classify``: VideoBrain's command-line entry points.

One grammar for all three (``vidlab.config``): settings resolve as ``EvalConfig`` defaults <- ``--preset
NAME|PATH`` (YAML, e.g. ``configs/qa/videobrain-qwen-vl.yaml``) <- ``key=value`` overrides (trailing words, or
``--set key=value``) <- explicit flags; every value is type- and range-checked at once. ``--config`` still works
as a deprecated alias of ``--preset``. Every user mistake (unknown policy spec, missing data file, bad option,
locked or foreign output folder, a config value of the wrong type) is one line on stderr and exit status 2,
reported before anything is written to ``--out``; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from vidlab.errors import UserError
from vidlab.understanding.config import AGENT, EvalConfig

EXIT_BAD_INPUT = 2


class UsageError(UserError):
    """A command line that cannot run: a required flag missing, an unknown option, a bad flag value."""


class _Parser(argparse.ArgumentParser):
    """argparse whose mistakes are a ``UsageError`` (one line, exit 2) rather than usage text + exit."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise UsageError(f"{message} (see {self.prog} --help)")


def _run(prog: str, fn: Any, argv: list[str] | None) -> int:
    """Run a command body; a ``UserError`` is one line and exit 2 (``--debug``/VIDLAB_DEBUG=1: traceback)."""
    from vidlab.errors import debug_enabled, run_command

    args = list(sys.argv[1:] if argv is None else argv)
    if debug_enabled(args) or "--debug" in sys.argv[1:]:
        return int(fn([a for a in args if a != "--debug"]) or 0)
    return run_command(prog, fn, args)


def _config_args(p: argparse.ArgumentParser) -> None:
    from vidlab.config import add_config_args

    g = p.add_argument_group("configuration (one grammar for qa, eval-qa and classify)")
    add_config_args(g, example="episode.max_calls=3 episode.frame_resize=fit")
    g.add_argument("--config", dest="legacy_config", metavar="PRESET", help="deprecated alias of --preset")


def _flag_keys() -> set[str]:
    """Every dotted key of ``EvalConfig`` (to tell a ``key=value`` override from an option's text)."""
    import dataclasses

    keys: set[str] = set()

    def walk(cls: Any, prefix: str) -> None:
        for f in dataclasses.fields(cls):
            keys.add(prefix + f.name)
            default = getattr(cls(), f.name)
            if dataclasses.is_dataclass(default):
                walk(type(default), f"{prefix}{f.name}.")

    walk(EvalConfig, "")
    return keys | set(EvalConfig.LEGACY_KEYS)  # the old run keys still name a setting (with a warning)


_OVERRIDE_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*=\S*$")  # key=value, no spaces


def _parse(p: argparse.ArgumentParser, argv: list[str], greedy: tuple[str, ...] = ()) -> argparse.Namespace:
    """Parse ``argv``; ``key=value`` words anywhere (even after a multi-value option) are overrides."""
    args, extra = p.parse_known_args(argv)
    overrides = list(getattr(args, "overrides", []) or [])
    keys = _flag_keys()
    for dest in greedy:  # `--options red blue episode.max_calls=3`: the last word is an override
        values = getattr(args, dest, None)
        if values:
            kept = [v for v in values if not ("=" in v and v.split("=", 1)[0].split(".")[0] in keys)]
            overrides += [v for v in values if v not in kept]
            for v in kept:  # `--options a b steps=8`: never silently an option "C. steps=8"
                if _OVERRIDE_WORD.match(v):
                    import difflib

                    key = v.split("=", 1)[0]
                    close = difflib.get_close_matches(key, sorted(keys), n=2)
                    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
                    p.error(
                        f"--{dest.replace('_', '-')} word {v!r} looks like a key=value setting, but {key!r} is "
                        f"not one{hint}; if it is an option's text, write it with spaces ({key} = ...)"
                    )
            setattr(args, dest, kept or None)
    for word in extra:
        if "=" in word and not word.startswith("-"):
            overrides.append(word)
        else:
            p.error(f"unrecognized argument {word!r}")
    args.overrides = overrides
    if getattr(args, "legacy_config", None):
        if args.preset:
            p.error("give the preset once: --preset (--config is its deprecated alias)")
        print(f"{p.prog}: note: --config is deprecated; use --preset {args.legacy_config}", file=sys.stderr)
        args.preset = args.legacy_config
    return args


def _resolve(args: argparse.Namespace, flags: dict[str, Any]) -> EvalConfig:
    """defaults <- preset <- key=value overrides <- explicit flags (dotted keys, None = not given)."""
    from vidlab.config import config_from_args

    return config_from_args(EvalConfig, args, flags)


def _check_devices(cfg: EvalConfig) -> None:
    """The policy's device settings (``policy_kwargs.device`` / ``device_map``) and GPU workers on a Ray started
    here, checked by the one device check of every command: a GPU this machine lacks is one line, before any
    model loads or anything is written."""
    from vidlab.devices import check_devices

    kw = cfg.policy_kwargs or {}
    check_devices(
        {f"policy_kwargs.{k}": kw[k] for k in ("device", "device_map") if k in kw},
        backend=cfg.run.backend,
        gpus_per_worker=cfg.run.gpus_per_worker,
    )


def _require_file(path: str | None, what: str, flag: str) -> Path:
    from vidlab.io import require_regular_file

    if not path:
        raise UsageError(f"{flag} is required: {what}")
    return require_regular_file(path, what=what)


def _clip_given(args: argparse.Namespace) -> bool:
    """The user named a CLIP model (flag, ``clip_model=`` override or a preset that sets it)."""
    from vidlab.config import load_preset

    if getattr(args, "clip_model", None) is not None:
        return True
    words = list(args.overrides or []) + list(getattr(args, "set_overrides", None) or [])
    if any(o.split("=", 1)[0].strip() == "clip_model" for o in words):
        return True
    return bool(args.preset) and "clip_model" in load_preset(args.preset, EvalConfig.PRESET_DIR)


def _apply_clip_rule(args: argparse.Namespace, cfg: EvalConfig) -> tuple[EvalConfig, str]:
    """``cfg`` with its CLIP model decided by the one rule (``vidlab.understanding.evaluate.resolve_clip_model``): not
    named by the user = ``auto`` (the policy's own CLIP when it ships one); ``none`` = no CLIP. Returns the config
    and where its CLIP came from (for the one line saying so). The spec is checked here, before any load."""
    import dataclasses

    from vidlab.understanding.evaluate import AUTO_CLIP, NO_CLIP, resolve_clip_model

    asked = cfg.clip_model if _clip_given(args) else AUTO_CLIP
    clip = resolve_clip_model(asked, cfg.policy)
    word = str(asked).strip().lower() if asked is not None else "none"
    if clip is None:
        how = (
            "you turned it off (clip_model none)"
            if word in NO_CLIP
            else f"the policy {cfg.policy} ships no CLIP model; pass --clip-model SPEC (e.g. ViT-B-16:openai) to add it"
        )
    else:
        how = f"the policy's own: {clip}" if word == AUTO_CLIP else clip
        from vidlab.clip.models import check_model_spec

        check_model_spec(clip)
    return dataclasses.replace(cfg, clip_model=clip), how


def _tools_line(cfg: EvalConfig, how: str) -> str:
    """One line saying which tools the agent has and why (clip_sample needs a CLIP model)."""
    from vidlab.understanding.evaluate import agent_tools

    tools = " + ".join(agent_tools(cfg.clip_model))
    if cfg.clip_model:
        return f"tools: {tools} (CLIP model: {how})"
    return f"tools: {tools} only: clip_sample is off because {how}"


# ------------------------------------------------------------------------------------------------------ qa
QA_EPILOG = """\
examples:
  # the trained toy policy (the default one: toy:where) on the toy world (vidlab toyworld-data outputs/toyworld 4)
  vidlab qa --video outputs/toyworld/test/videos/200000.mp4 --question "What colour was the triangle?" \
      --options magenta white blue yellow --policy toy:where episode.frame_resize=fit
  # a tiny random Qwen2.5-VL, offline (its answers are noise; it shows the loop and the output)
  vidlab qa --video clip.mp4 --question "What colour is the ball?" --options red blue green --policy hf-tiny:qwen2_5_vl
  # a real checkpoint through transformers, with CLIP retrieval as a second tool
  vidlab qa --video talk.mp4 --question "What is written on the board?" \\
      --policy hf:Qwen/Qwen3-VL-8B-Instruct --clip-model ViT-B-16:openai
  # a vLLM server (vllm serve Qwen/Qwen2.5-VL-7B-Instruct --port 8000); key: VIDLAB_OPENAI_API_KEY
  vidlab qa --video v.mp4 --question "Q?" --options yes no --policy openai:http://127.0.0.1:8000/v1@Qwen/Qwen2.5-VL-7B-Instruct
  # the uniform-32 baseline: 32 evenly spaced frames, one answer, no tools
  vidlab qa --video v.mp4 --question "Q?" --options yes no --policy hf:DIR --strategy uniform:32
  # settings: a preset plus key=value overrides (checked: episode.max_calls=abc is refused at once)
  vidlab qa --video v.mp4 --question "Q?" --preset videobrain-qwen-vl episode.max_calls=3 episode.frame_resize=fit

policy specs: toy:where (the default toy policy) | toy:shipped | toy:DIR | hf:PATH_OR_ID | hf-tiny:qwen2_5_vl|qwen3_vl
  | openai:URL@MODEL | replay:FILE | const:LETTER | pixel:COLOUR
Frames are shown at exactly 640x360 (episode.frame_resize=reference, the authors' setting); fit keeps aspect.
The trajectory is printed turn by turn: thoughts, tool calls, the frames seen (index and timestamp), the answer.
"""


def _qa_parser() -> argparse.ArgumentParser:
    p = _Parser(
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
    p.add_argument(
        "--policy",
        help="policy spec (see below); required unless a preset or policy=... sets it "
        "(const:A, the answer-A baseline, is never picked silently)",
    )
    p.add_argument(
        "--strategy", help="agent (default), uniform:K, clip:K, or a selector topk:K, aks:K, bolt:K"
    )
    p.add_argument(
        "--clip-model",
        help="CLIP model for clip_sample, e.g. ViT-B-16:openai; auto (default): the policy's own CLIP if it ships "
        "one (toy:where and toy:shipped do), else none; none: the uniform tool only",
    )
    p.add_argument("--cache-dir", help="frame-index cache folder (default: $VIDLAB_CACHE_DIR)")
    p.add_argument("--max-calls", type=int, help="tool-call budget (= episode.max_calls; reference: 5)")
    p.add_argument(
        "--temperature", type=float, help="sampling temperature (= episode.temperature; 0 = greedy)"
    )
    p.add_argument("--seed", type=int, help="sampling seed (= episode.seed)")
    p.add_argument("--json", metavar="PATH", help="also write the trajectory as JSON here")
    p.add_argument(
        "--truth",
        metavar="ANSWER",
        help="the right answer when you know it (an option letter or the option's text): shown beside the reply",
    )
    _config_args(p)
    return p


def truth_letter(truth: str | None, options: list[str] | None) -> str | None:
    """``--truth`` as an option letter (a letter, or an option's text, case-insensitive); a mismatch is a
    ``UsageError`` naming the options."""
    from vidlab.understanding import protocol as P

    if truth is None:
        return None
    if not options:
        raise UsageError("--truth needs --options (it names one of them)")
    letters = P.option_letters(len(options))
    t = truth.strip()
    if t.upper() in letters and len(t) == 1:
        return t.upper()
    for ch, o in zip(letters, options):
        if o.strip().lower() == t.lower():
            return ch
    raise UsageError(
        f"--truth {truth!r} is neither an option letter ({', '.join(letters)}) nor one of {options}"
    )


def qa_record(traj: Any, truth: str | None = None) -> dict[str, Any]:
    """The trajectory as JSON for ``--json``: the policy's raw reply is ``reply`` (never ``answer``), its parsed
    choice ``predicted`` with ``predicted_option``; with a known truth, ``truth``/``truth_option``/``correct``."""
    d = traj.to_dict()
    d["reply"] = d.pop("answer", None)
    opts = list(traj.options or [])

    def text(letter: Any) -> str | None:
        k = ord(letter) - 65 if isinstance(letter, str) and len(letter) == 1 else -1
        return opts[k] if 0 <= k < len(opts) else None

    d["predicted_option"] = text(traj.predicted)
    if truth is not None:
        d["truth"] = truth
        d["truth_option"] = text(truth)
        d["correct"] = bool(traj.valid and traj.predicted == truth)
    return d


def _frames_line(frames: list[Any]) -> str:
    return ", ".join(f"{f.index} ({f.timestamp:.2f}s)" for f in frames)


def print_trajectory(traj: Any, file: Any = None) -> None:
    """Human-readable trajectory: initial view, then per turn thoughts, call, frames returned; then the answer."""
    from vidlab.understanding import protocol as P

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
    return _run("vidlab qa", _qa, argv)


def _qa(argv: list[str]) -> int:
    from vidlab.io import atomic_write_text
    from vidlab.understanding.config import check_strategy
    from vidlab.understanding.policies import check_policy_spec

    args = _parse(_qa_parser(), argv, greedy=("options",))
    if args.options is not None and len(args.options) < 2:
        raise UsageError(
            f"--options needs at least two answers to choose from, got {len(args.options)} ({args.options}); "
            "omit --options for an open-ended question"
        )
    cfg = _resolve(
        args,
        {
            "policy": args.policy,
            "strategy": args.strategy,
            "clip_model": args.clip_model,
            "cache_dir": args.cache_dir,
            "episode.max_calls": args.max_calls,
            "episode.temperature": args.temperature,
            "episode.seed": args.seed,
        },
    )
    _require_policy(args)
    check_policy_spec(cfg.policy)
    cfg, clip_how = _apply_clip_rule(args, cfg)
    check_strategy(cfg.strategy, cfg.clip_model)
    _check_devices(cfg)
    _require_file(args.video, "the video to ask about", "--video")
    truth = truth_letter(args.truth, args.options)
    if cfg.strategy == AGENT:
        print(_tools_line(cfg, clip_how), flush=True)
    traj = run_qa(cfg, args.video, args.question, args.options)
    print(f"video: {args.video} ({traj.total_frames} frames at {traj.fps:g} fps)")
    print(f"question: {args.question}")
    if traj.options:
        from vidlab.understanding import protocol as P

        print(
            "options: "
            + "  ".join(f"{ch}. {o}" for ch, o in zip(P.option_letters(len(traj.options)), traj.options))
        )
    print(f"policy: {cfg.policy}   strategy: {cfg.strategy}")
    print_trajectory(traj)
    rec = qa_record(traj, truth)
    rec["clip_model"] = cfg.clip_model
    if cfg.strategy == AGENT:
        from vidlab.understanding.evaluate import agent_tools

        rec["tools"] = agent_tools(cfg.clip_model)
    if truth is not None:
        mark = "right" if rec["correct"] else "WRONG"
        print(
            f"truth: {truth} ({rec['truth_option']}); the policy chose {traj.predicted} "
            f"({rec['predicted_option']}): {mark}"
        )
    if args.json:
        atomic_write_text(args.json, json.dumps(rec, indent=2, default=str))
        print(f"trajectory written to {args.json}")
    return 0


def _require_policy(args: argparse.Namespace) -> None:
    """``vidlab qa`` answers with the policy the user named (flag, ``policy=`` override or preset): the config's
    default, const:A, answers "A" without looking, and a printed answer from it would pass for a model's."""
    from vidlab.config import load_preset

    if args.policy or any(o.split("=", 1)[0].strip() == "policy" for o in args.overrides or []):
        return
    if args.preset and "policy" in load_preset(args.preset, EvalConfig.PRESET_DIR):
        return
    raise UsageError(
        "--policy is required: which model answers? e.g. --policy toy:where (the trained toy-world policy), "
        "hf:Qwen/Qwen2.5-VL-7B-Instruct, openai:URL@MODEL, or const:A (the answer-A baseline, no model)"
    )


def run_qa(cfg: EvalConfig, video: str, question: str, options: list[str] | None = None) -> Any:
    """Run one question with ``cfg`` (policy, strategy, agents) and return the ``Trajectory``. The video is
    opened first, so a file that is not a video is one line before any model loads."""
    from vidlab.understanding.benchmarks import QAItem
    from vidlab.understanding.evaluate import QAWorker
    from vidlab.video import open_video

    QAItem("cli", video, question, options, "A" if options else "", "mc" if options else "oe")  # validates
    with open_video(video) as reader:
        return QAWorker(cfg.qa_settings()).trajectory(reader, question, options, video_path=str(video))


# -------------------------------------------------------------------------------------------------- eval-qa
EVAL_EPILOG = """\
examples:
  # the trained toy policy (the default one: toy:where) vs uniform baselines on the toy world, on a laptop
  vidlab eval-qa --benchmark jsonl --data outputs/toyworld/test/questions.jsonl --policy toy:where \
      --strategies agent uniform:16 uniform:56 episode.frame_resize=fit --out outputs/toyworld-eval
  # Video-MME long split, a local Qwen3-VL, agent vs uniform baselines, on 2 Ray GPU workers
  vidlab eval-qa --benchmark videomme --data ~/data/Video-MME --split long --policy hf:Qwen/Qwen3-VL-8B-Instruct \\
      --strategies agent uniform:16 uniform:32 uniform:56 --clip-model ViT-B-16:openai \\
      --backend ray --num-workers 2 run.gpus_per_worker=1 --out runs/videomme-long
  # any lmms-eval-style JSONL, quick look at 20 questions through a vLLM server
  vidlab eval-qa --benchmark jsonl --data questions.jsonl --policy openai:http://127.0.0.1:8000/v1@my-vlm --limit 20 --out runs/q
  # the authors' evaluation settings for their checkpoints: 640x360 frames, the last tool call of a bad turn runs
  vidlab eval-qa ... episode.frame_resize=reference episode.on_bad_turn=last_tool_call
  # re-plot several finished runs (e.g. two policies) on one accuracy-vs-frames chart
  vidlab eval-qa --compare runs/qwen25 runs/qwen3 --out runs/compare

benchmarks and the local layout they expect (see docs/guides/videobrain-qa.md):
  longvideobench  DIR/lvb_val.json + DIR/videos/         videomme  DIR/videomme/*.parquet + DIR/data/{videoID}.mp4
  mlvu            DIR/json/N_task.json + DIR/video/N_task/  lvbench   DIR/video_info.meta.jsonl + DIR/videos/{key}.mp4
  egoschema       DIR/questions.json + DIR/subset_answers.json + DIR/videos/{q_uid}.mp4
  jsonl           one question per line: id, video, question, options, answer, category, duration

A folder is one job: its identity (every setting that changes an answer, the data's content fingerprint, each
video's fingerprint per question) is kept in OUT/job.json. A rerun with the same identity resumes (finished
questions are skipped, failed ones retried; more --num-workers or a larger --limit still resume); a rerun with
other settings or data is refused, naming what differs: pass another --out, or --overwrite to start over.
A second run into a folder that is in use is refused in one line and touches nothing.
Outputs: OUT/<strategy>/results.jsonl (one record per question), OUT/summary.json, OUT/summary.md,
OUT/accuracy_vs_frames.png, OUT/problems.jsonl (records the loader skipped), OUT/config.yaml, OUT/job.json,
OUT/failures.jsonl (every question that failed, with its video and the reason, and every skipped record).
A jsonl file's relative video paths resolve against its own folder (or --video-dir). Exit status: 0 every
question answered, 3 some failed (a missing or undecodable video, a policy that kept failing), 4 none was
answered, each failure named on stderr; 2 a usage error (docs/reference/cli.md, "Paths and exit codes").
"""


def _eval_parser() -> argparse.ArgumentParser:
    p = _Parser(
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
    p.add_argument(
        "--video-dir",
        "--video-root",
        dest="video_dir",
        help="where the videos are, if not in the release layout under --data (a jsonl file: its own folder); "
        "--video-root is the same flag, named as in classify and train-agent",
    )
    p.add_argument(
        "--policy",
        help="policy spec: toy:where (the default toy policy), toy:shipped, toy:DIR, hf:..., hf-tiny:..., "
        "openai:URL@MODEL, replay:FILE, const:X, pixel:COLOUR",
    )
    p.add_argument(
        "--strategies",
        nargs="+",
        help="agent, uniform:K, clip:K, topk:K, aks:K, bolt:K (several = one comparison plot)",
    )
    p.add_argument("--out", help="output folder (default outputs/eval-qa)")
    p.add_argument(
        "--overwrite", action="store_true", help="start the job in --out over (deletes its records)"
    )
    p.add_argument("--backend", help="local (in-process, default) or ray")
    p.add_argument("--num-workers", type=int, help="Ray workers (each loads the policy once)")
    p.add_argument("--limit", type=int, help="evaluate only the first N questions (N >= 1)")
    p.add_argument(
        "--clip-model",
        help="CLIP model for clip_sample and clip:K, e.g. ViT-B-16:openai; auto (default): the policy's own "
        "CLIP if it ships one (toy:where and toy:shipped do), else none; none: no clip_sample",
    )
    p.add_argument("--judge", help="open-ended scoring: rule (default), rule:exact, openai:URL@MODEL")
    p.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="skip JSONL lines that are not JSON objects (listed in OUT/problems.jsonl) instead of refusing "
        "the file at the first one",
    )
    p.add_argument(
        "--compare", nargs="+", metavar="RUN_DIR", help="only re-plot finished runs together into --out"
    )
    _config_args(p)
    return p


def _print_summaries(summaries: dict[str, dict[str, Any]]) -> None:
    from vidlab.understanding.report import summary_table

    print(summary_table(summaries))


def eval_qa_main(argv: list[str] | None = None) -> int:
    """``vidlab eval-qa``: load a benchmark copy, evaluate every strategy, write results + summary + plot."""
    return _run("vidlab eval-qa", _eval_qa, argv)


def _eval_qa(argv: list[str]) -> int:
    from vidlab.understanding.evaluate import run_eval
    from vidlab.understanding.report import compare_runs

    args = _parse(_eval_parser(), argv, greedy=("strategies", "compare"))
    if args.compare:
        out = args.out or "outputs/eval-qa-compare"
        summaries, paths = compare_runs(args.compare, out)
        _print_summaries(summaries)
        print(f"wrote {paths['table']} and {paths['plot']}")
        return 0
    cfg = _resolve(
        args,
        {
            "benchmark": args.benchmark,
            "data": args.data,
            "split": args.split,
            "video_dir": args.video_dir,
            "policy": args.policy,
            "strategies": list(args.strategies) if args.strategies else None,
            "out": args.out,
            "run.backend": args.backend,
            "run.workers": args.num_workers,
            "limit": args.limit,
            "clip_model": args.clip_model,
            "judge": args.judge,
        },
    )
    if not cfg.data:
        raise UsageError("--data is required: the folder or annotation file of your local benchmark copy")
    from vidlab.understanding.benchmarks import load_benchmark
    from vidlab.understanding.config import check_strategy
    from vidlab.understanding.judge import load_judge
    from vidlab.understanding.policies import check_policy_spec

    check_policy_spec(cfg.policy)
    cfg, clip_how = _apply_clip_rule(args, cfg)
    for strategy in cfg.strategies:
        check_strategy(strategy, cfg.clip_model)
    load_judge(cfg.judge)  # a bad --judge spec is refused before the folder is touched
    _check_devices(cfg)
    from vidlab.distributed import check_run

    check_run(cfg.run)  # an unreachable RAY_ADDRESS: one line, before the folder is touched
    loaded = load_benchmark(  # zero usable questions, a malformed line, a non-text file: one line, exit 2
        cfg.benchmark,
        cfg.data,
        split=cfg.split,
        video_dir=cfg.video_dir,
        skip_bad_lines=args.skip_bad_lines,
    )
    if AGENT in cfg.strategies:
        print(_tools_line(cfg, clip_how), flush=True)
    from vidlab.outcome import BatchOutcome, finish
    from vidlab.understanding.evaluate import FAILURES

    failures: list[Any] = []
    summaries = run_eval(cfg, items=loaded, overwrite=args.overwrite, failures=failures)
    _print_summaries(summaries)
    out = Path(cfg.out)
    first: dict[str, Any] = next(iter(summaries.values()), {})
    n_prob = first.get("n_load_problems", 0)
    if n_prob:
        print(f"{n_prob} record(s) skipped by the loader: see {out / 'problems.jsonl'}")
    print(
        f"results in {out}/<strategy>/results.jsonl; summary {out / 'summary.md'}; plot {out / 'accuracy_vs_frames.png'}"
    )
    asked = len(loaded.items) if cfg.limit is None else min(cfg.limit, len(loaded.items))
    outcome = BatchOutcome(asked + len(loaded.problems), failures, str(out / FAILURES))
    return finish("vidlab eval-qa", outcome, what="question")


# ------------------------------------------------------------------------------------------------- classify
CLASSIFY_EPILOG = """\
examples:
  vidlab classify --data train.jsonl --policy hf:Qwen/Qwen3-VL-8B-Instruct --clip-model ViT-B-16:openai --out labelled.jsonl
  vidlab classify --data train.jsonl --policy openai:http://127.0.0.1:8000/v1@qwen --out labelled.jsonl classify.k=8

Rows are JSONL with id, video (or video_path), question, options (absent for open-ended) and answer. Each row is
answered k times from the 16 initial frames and k times from a richer view (more uniform frames + CLIP frames for
the question), then labelled direct / adaptive / active / filtered (rule: docs/guides/videobrain-qa.md,
"Data classification"). The label goes into "classification". The work is a resumable job in OUT.job/
(identity: the classify settings, policy, CLIP model, judge and the data's content; a rerun with other
settings is refused, naming what differs, unless --overwrite); the labelled rows go to OUT and failures to
OUT.errors.jsonl (retried on the next run).
Paths: a row's relative video resolves against the --data file's folder (or --video-root), and OUT names each
video relative to its own folder, so it feeds train-agent and eval-qa from anywhere. Exit status: 0 every row
labelled, 3 some rows failed, 4 none was labelled (each failure named on stderr), 2 a usage error
(docs/reference/cli.md, "Paths and exit codes").
"""


def _classify_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="vidlab classify",
        description="Label VideoBrain training rows Direct / Adaptive / Active (or filtered) with a policy.",
        epilog=CLASSIFY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", required=True, help="input rows (JSONL)")
    p.add_argument("--policy", help="policy spec (as for vidlab qa)")
    p.add_argument("--out", required=True, help="output JSONL with the labels written in")
    p.add_argument("--overwrite", action="store_true", help="start the job behind --out over")
    p.add_argument(
        "--clip-model",
        help="CLIP model for the richer view's retrieved frames; auto (default): the policy's own CLIP if it "
        "ships one, else none; none: uniform frames only",
    )
    p.add_argument(
        "--video-root",
        help="folder that relative video paths in the rows are under (default: the --data file's folder)",
    )
    p.add_argument("--k", type=int, help="samples per view (= classify.k; default 4)")
    p.add_argument("--judge", help="open-ended scoring: rule (default), rule:exact, openai:URL@MODEL")
    _config_args(p)
    return p


def classify_main(argv: list[str] | None = None) -> int:
    """``vidlab classify``: label rows with the documented rule in ``vidlab.understanding.classify.classify_rows``."""
    return _run("vidlab classify", _classify, argv)


def _classify(argv: list[str]) -> int:
    from vidlab.config import save_resolved
    from vidlab.distributed import fingerprint_file, open_job
    from vidlab.understanding.classify import classify_identity, classify_rows, job_dir_for, summarize
    from vidlab.understanding.judge import load_judge
    from vidlab.understanding.policies import check_policy_spec

    args = _parse(_classify_parser(), argv)
    cfg = _resolve(
        args,
        {
            "policy": args.policy,
            "clip_model": args.clip_model,
            "video_root": args.video_root,
            "judge": args.judge,
            "classify.k": args.k,
        },
    )
    # validate every input before anything is written
    data = _require_file(args.data, "the rows to classify (JSONL)", "--data")
    rows = _read_rows(data)
    check_policy_spec(cfg.policy)
    cfg, clip_how = _apply_clip_rule(args, cfg)
    judge = load_judge(cfg.judge)
    _check_devices(cfg)
    out = Path(args.out)
    if out.is_dir():
        raise UsageError(f"--out {str(out)!r} is a folder; pass the output JSONL file's path")
    ident = classify_identity(
        cfg.classify,
        cfg.policy,
        clip_model=cfg.clip_model,
        judge=cfg.judge,
        video_root=cfg.video_root,
        inputs={"data": fingerprint_file(data)},
    )
    job_dir = job_dir_for(out)
    with open_job(job_dir, ident, overwrite=args.overwrite):  # lock + identity before any write
        from vidlab.understanding.policies import load_policy

        if cfg.clip_model:
            print(f"CLIP model for the richer view: {clip_how}", flush=True)
        elif cfg.classify.rich_clip_frames:
            print(f"no CLIP frames in the richer view (uniform frames only): {clip_how}", flush=True)

        policy = load_policy(cfg.policy, **cfg.policy_kwargs)
        clip = None
        if cfg.clip_model:
            from vidlab.clip import load_model

            clip = load_model(cfg.clip_model)
        save_resolved(cfg, out.parent, name=f"{out.stem}.config.yaml")
        errors: list[dict] = []
        labelled = classify_rows(
            rows,
            policy,
            config=cfg.classify,
            clip_model=clip,
            index_cache_dir=cfg.cache_dir,
            judge=judge,
            out_path=out,
            video_root=cfg.video_root,
            errors=errors,
            identity=ident,
            data_file=data,
            frame_cache_mb=cfg.frame_cache_mb,
        )
    from vidlab.outcome import BatchOutcome, failure_from, finish
    from vidlab.understanding.classify import errors_path

    s = summarize(labelled)
    print(f"labelled {s['rows']} row(s): " + ", ".join(f"{k} {v}" for k, v in sorted(s["labels"].items())))
    print(f"written to {out} (job: {job_dir})")
    outcome = BatchOutcome(len(rows), [failure_from(e) for e in errors], str(errors_path(out)))
    return finish("vidlab classify", outcome, what="row")


class RowsError(UserError):
    """A rows file that is not JSONL of objects; names the file and line."""


def _read_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file; a malformed line is a ``RowsError`` naming the file and line."""
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise RowsError(f"{path}:{n}: not valid JSON ({e.msg})") from e
        if not isinstance(row, dict):
            raise RowsError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
        rows.append(row)
    if not rows:
        raise RowsError(f"{path}: no rows (expected one JSON object per line)")
    return rows
