"""``vidlab compbench {generate,score,report,export}``: the T2V-CompBench jobs, one config for all four.

vidlab compbench generate --preset compbench/tiny                 # plan all layouts, then generate
vidlab compbench generate --preset compbench/wan2.1-t2v-14b run.workers=8
vidlab compbench score    --preset compbench/tiny score.metrics=[clip_alignment,clip_presence]
vidlab compbench report   --preset compbench/tiny                 # tables + chart in <out>/report/
vidlab compbench export   --preset compbench/tiny --root videos/  # <root>/<method>/<category>/0001.mp4
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

EPILOG = """subcommands share one config (CompbenchConfig): --preset NAME|PATH (configs/compbench/*.yaml; default
compbench/tiny) and trailing key=value overrides, e.g.
  out=outputs/cb  categories=[spatial_relationship,numeracy]  prompts_per_category=5  seeds=[0,1]
  methods=[baseline,both]  planner=llm  generate.steps=30  generate.comp_attn.lam.step_fraction=0.25
  run.backend=ray  run.workers=8  run.gpus_per_worker=1  score.clip_model=ViT-L-14:openai
  score.presence_threshold=0.22  score.ingest=official_csvs/  export_seed=0

generate plans every layout first (layouts/, LLM planner cache reused), then generates prompt x seed x method
items (baseline, sci, lam, both share layout and seed), resumably: rerun the same command to finish or retry.
A rerun with different generation settings is refused (pass another out=DIR, or --overwrite).
generate and score end by naming each item that failed (<out>/failures.jsonl, <out>/score_failures.jsonl) and
exit 0 (all made), 3 (some failed) or 4 (none made); 2 is a usage error (docs/reference/cli.md).
"""


def _parser() -> argparse.ArgumentParser:
    from vidlab.config import add_config_args

    p = argparse.ArgumentParser(
        prog="vidlab compbench",
        description="T2V-CompBench jobs: generate (sharded, resumable), score (pluggable metrics, official CSV "
        "ingest), report (per-category deltas with bootstrap CIs, time overhead, bar chart), export (the official "
        "evaluators' folder layout).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    sub = p.add_subparsers(
        dest="command", required=True, metavar="{plan,generate,score,report,export,metrics}"
    )
    helps = {
        "plan": "only the planning stage: write every prompt's layout (reusing the LLM planner's cache)",
        "generate": "plan layouts, then generate every prompt x seed x method (resumable)",
        "score": "run the configured metrics over the generated videos (resumable); ingest official CSVs",
        "report": "per-category tables (md + csv) with deltas, bootstrap CIs, time overhead, bar chart",
        "export": "link the videos into <root>/<method>/<category>/0001.mp4 for the official scripts",
        "metrics": "list the registered metrics",
    }
    for name, text in helps.items():
        sp = sub.add_parser(
            name,
            help=text,
            description=text,
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name != "metrics":
            add_config_args(sp, example="prompts_per_category=5 seeds=[0,1] generate.steps=30")
        if name in ("generate", "score"):
            sp.add_argument(
                "--overwrite", action="store_true", help="discard a previous job with other settings"
            )
        if name == "export":
            sp.add_argument("--root", help="export folder (default: export_root, else <out>/official)")
            sp.add_argument(
                "--allow-missing", action="store_true", help="export what exists even if items are missing"
            )
    return p


def _config(args: argparse.Namespace) -> Any:
    from vidlab.config import config_from_args
    from vidlab.generation.compbench.config import CompbenchConfig

    if not getattr(args, "preset", None):
        args.preset = "compbench/tiny"
    return config_from_args(CompbenchConfig, args).check()


def _own_words(exc: Exception, cfg: Any) -> Exception:
    """A job-identity refusal in compbench's own words: it has no --out; the folder is ``out=``."""
    from vidlab.distributed import JobIdentityError

    if not isinstance(exc, JobIdentityError) or not exc.differences:
        return exc
    diffs = exc.differences
    shown = "; ".join(diffs[:4]) + (f"; and {len(diffs) - 4} more" if len(diffs) > 4 else "")
    return JobIdentityError(
        f"out={cfg.out!r} holds a compbench job with other settings ({shown}); pass another out=DIR, "
        "or --overwrite to replace it",
        diffs,
    )


def check_devices(cfg: Any) -> None:
    """Refuse, naming the setting, a ``generate.device`` this machine lacks or GPU workers on a local Ray with
    no GPU (Ray would otherwise wait forever for a node that can fulfil ``{'GPU': 1}``)."""
    from vidlab.devices import check_devices as check_settings  # the one device check of every command

    run = cfg.run
    gpus = getattr(run, "gpus_per_worker", getattr(run, "num_gpus_per_worker", 0))
    check_settings(
        {"generate.device": cfg.generate.device},
        backend=run.backend,
        gpus_per_worker=gpus,
        hint=" generate.device=cpu",
    )


def _finish(
    cfg: Any, command: str, total: int, listed: str | None, what: str = "item", retry: bool = True
) -> int:
    """The batch ending (:mod:`vidlab.outcome`): each failure named on stderr from ``listed``; exit 0, 3 or 4."""
    from vidlab.outcome import BatchOutcome, failure_from, finish

    rows = [json.loads(x) for x in Path(listed).read_text().splitlines() if x.strip()] if listed else []
    outcome = BatchOutcome(max(total, len(rows)), [failure_from(r) for r in rows], listed)
    return finish(f"vidlab compbench {command}", outcome, what=what, retry=retry)


def compbench_main(argv: list[str] | None = None) -> int:
    """Entry point of ``vidlab compbench``; returns the exit status."""
    from vidlab.distributed import JobIdentityError

    args = _parser().parse_args(argv)
    try:
        return _main(args)
    except JobIdentityError as e:
        raise _own_words(e, _config(args)) from None


def _main(args: argparse.Namespace) -> int:
    if args.command == "metrics":
        from vidlab.generation.compbench.metrics import available, get_metric

        for name in available():
            cls = get_metric(name)
            print(f"{name:22s} {getattr(cls, 'description', '')}")
        return 0
    from vidlab.distributed import check_run

    cfg = _config(args)
    if args.command == "plan":
        from vidlab.generation.compbench.jobs import plan_run

        res = plan_run(cfg)
        print(
            f"layouts: {res.planned} planned, {res.reused} reused, {len(res.failed)} failed (in {cfg.out}/layouts)"
        )
        from vidlab.generation.compbench.jobs import plan_failures
        from vidlab.outcome import BatchOutcome, finish

        outcome = BatchOutcome(res.planned + res.reused + len(res.failed), plan_failures(res.failed))
        return finish("vidlab compbench plan", outcome, what="layout")
    if args.command == "generate":
        from vidlab.generation.compbench.jobs import generate_run

        check_devices(cfg)  # a GPU preset on a machine without one: one line, before Ray waits for a GPU node
        check_run(cfg.run)  # an unreachable RAY_ADDRESS: one line, before the plans or the job are written

        res = generate_run(cfg, overwrite=args.overwrite)
        fails = res["plan_failed"]
        print(
            f"{res['items']} items: {res['status']}; layouts planned {res['planned']}, reused {res['plans_reused']}, "
            f"failed {len(fails)}; manifest {res['manifest']}"
        )
        return _finish(cfg, "generate", res["items"] + len(fails), res.get("failures_file"), retry=True)
    if args.command == "score":
        from vidlab.devices import check_devices as check_settings
        from vidlab.generation.compbench.scoring import failed_items, score_run

        check_settings({"score.device": cfg.score.device})  # scoring runs in this process
        summaries = score_run(cfg, overwrite=args.overwrite)
        print(json.dumps(summaries, indent=1))
        failed_items(summaries)  # a silent partial score would skew the report: each failure is named below
        from vidlab.generation.compbench.scoring import SCORE_FAILURES

        total = sum(
            int(s["scored"]) + int(s["not_applicable"]) + int(s["failed"])
            for m, s in summaries.items()
            if m != "official"
        )
        listed = Path(cfg.out) / SCORE_FAILURES
        return _finish(cfg, "score", total, str(listed) if listed.is_file() else None, what="score")
    if args.command == "report":
        from vidlab.generation.compbench.report import build_report

        res = build_report(cfg)
        print(open(res["markdown"], encoding="utf-8").read())
        print(f"wrote {res['markdown']}, {res['csv']} and {res['png']}")
        return 0
    from vidlab.generation.compbench.export import export_official

    res = export_official(cfg, root=args.root, allow_missing=args.allow_missing)
    print(
        f"exported seed {res['seed']} to {res['root']}: {res['linked']} linked, {res['copied']} copied, "
        f"{len(res['missing'])} missing"
    )
    return 0
