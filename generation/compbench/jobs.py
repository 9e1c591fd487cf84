"""The generation job: items (prompt x seed x method), planning first, sharded generation, the manifest.

``generate_run(cfg)`` validates the config and the suite, takes the job folder (``<out>/gen``: lock +
identity, so a rerun with other generation settings is refused, naming what differs), plans every layout,
then runs :class:`CompbenchWorker` over the items with :func:`vidlab.distributed.run_job` (local, or Ray
actors with ``run.gpus_per_worker`` each). Items are ordered prompt by prompt, so the methods of one
prompt run back to back on a loaded pipeline. A finished item counts only if its mp4 is complete (decodes
to the expected frame count); failures are recorded and retried on the next run. ``<out>/manifest.jsonl``
then holds one row per item: prompt id, category, method, seed, paths, seconds, peak memory, status, error.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from vidlab.generation.compbench.config import CompbenchConfig
from vidlab.generation.compbench.planning import layout_path, plan_all
from vidlab.generation.compbench.suite import Prompt, Suite, load_suite
from vidlab.generation.config import LAMConfig

GEN_DIR = "gen"
MANIFEST = "manifest.jsonl"


def video_relpath(p: Prompt, seed: int, method: str) -> str:
    return f"videos/{method}/seed{seed}/{p.category}/{p.video_name}"


def item_id(p: Prompt, seed: int, method: str) -> str:
    return f"{p.id}|s{seed}|{method}"


def select_prompts(cfg: CompbenchConfig, suite: Suite | None = None) -> tuple[Suite, list[Prompt]]:
    suite = suite or load_suite(cfg.data or None)
    return suite, suite.select(cfg.categories, cfg.prompts_per_category, cfg.prompt_ids)


def build_items(cfg: CompbenchConfig, prompts: list[Prompt]) -> list[dict[str, Any]]:
    """One item per prompt x seed x method, grouped by prompt (then seed) so methods run back to back."""
    items = []
    out = Path(cfg.out)
    for p in prompts:
        for seed in cfg.seeds:
            for method in cfg.methods:
                items.append(
                    {
                        "id": item_id(p, seed, method),
                        "prompt_id": p.id,
                        "category": p.category,
                        "index": p.index,
                        "prompt": p.text,
                        "seed": int(seed),
                        "method": method,
                        "layout": str(layout_path(out, p.id).relative_to(out)),
                        "video": video_relpath(p, seed, method),
                    }
                )
    return items


def identity(cfg: CompbenchConfig, suite: Suite) -> dict[str, Any]:
    """What makes a video what it is: generation settings, planner, the benchmark files (not the selection,
    worker counts or scoring, so a bigger selection or more GPUs resume the same job)."""
    import os

    from vidlab.distributed import make_identity

    generate = dataclasses.asdict(cfg.generate)
    if generate["comp_attn"]["lam"].get("mask_source") == "box":  # the rule before the setting existed:
        del generate["comp_attn"]["lam"]["mask_source"]  # runs made before it keep their identity and resume
    lam_defaults = dataclasses.asdict(LAMConfig())
    for key in (
        "rule",
        "ts_step_fraction",
        "ts_alpha_min",
        "ts_alpha_max",
        "ts_erode",
        "ts_blocks",
        "ts_subjects",
    ):
        # TS-Attn's settings, added later: at their defaults they leave older runs' identity as it was
        if key in generate["comp_attn"]["lam"] and generate["comp_attn"]["lam"][key] == lam_defaults[key]:
            del generate["comp_attn"]["lam"][key]
    generate.pop("planner_cache", None)  # how the LLM plan cache is used never changes a planned video
    if not generate.get("planner_accept_repaired"):  # the rule before the setting existed (same reason)
        generate.pop("planner_accept_repaired", None)
    return make_identity(
        {
            "generate": generate,
            "planner": cfg.planner,
            # the LLM that plans the layouts (None for the rule planner)
            "planner_model": os.environ.get("VIDLAB_LLM_MODEL") if cfg.planner == "llm" else None,
            "measure_layout": cfg.measure_layout,
        },
        {"suite": suite.fingerprint},
        command="compbench generate",
    )


def video_complete(out: Path, item: dict[str, Any], frames: int) -> bool:
    """The item's mp4 exists, is not a fragment and decodes to ``frames`` frames."""
    path = out / item["video"]
    if not path.is_file() or path.stat().st_size == 0:
        return False
    try:
        from vidlab.video import open_video

        with open_video(path) as r:
            return r.num_frames == frames
    except Exception:  # noqa: BLE001 - any unreadable file is "not done"
        return False


def check_devices(cfg: CompbenchConfig) -> None:
    """Refuse GPU settings this machine cannot meet, up front and in one line (before planning, before Ray
    would wait forever for a GPU node): ``run.gpus_per_worker`` > 0 with no local GPU and no cluster
    (``RAY_ADDRESS``), or a ``generate.device`` the machine does not have."""
    from vidlab.devices import require_local_gpus
    from vidlab.generation.pipeline import check_device

    require_local_gpus(
        cfg.run.gpus_per_worker,
        "run.gpus_per_worker",
        hint=" and generate.device=cpu to run on this machine's CPU",
    )
    if not (cfg.run.backend == "ray" and cfg.run.gpus_per_worker > 0):  # else the device is the worker's
        check_device(cfg.generate, setting="generate.device")


def generate_run(
    cfg: CompbenchConfig,
    worker_cls: type | None = None,
    worker_extra: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Plan, then generate every item (see the module docstring); returns a summary dict."""
    from vidlab.distributed import open_job, run_job
    from vidlab.generation.compbench.worker import CompbenchWorker
    from vidlab.io import sweep_stale

    cfg.check()
    check_devices(cfg)
    from vidlab.generation.pipeline import check_geometry

    check_geometry(cfg.generate)  # size/frames against the model's token grid, where it can be read unloaded
    suite, prompts = select_prompts(cfg)
    out = Path(cfg.out)
    items = build_items(cfg, prompts)
    ident = identity(cfg, suite)
    gen_dir = out / GEN_DIR
    with open_job(gen_dir, ident, overwrite=overwrite):
        from vidlab.config import save_resolved

        save_resolved(cfg, out, name="config.yaml")
        plan = plan_all(
            prompts,
            out,
            cfg.planner,
            threads=cfg.run.plan_threads,
            progress=cfg.run.progress,
            planner_kwargs=_planner_kwargs(cfg),
        )
        for d in {(out / it["video"]).parent for it in items}:
            sweep_stale(d)  # temporaries of a writer that was killed
        frames = cfg.generate.frames
        summary = run_job(
            items,
            worker_cls or CompbenchWorker,
            gen_dir,
            run=cfg.run,
            worker_kwargs={
                "generate": dataclasses.asdict(cfg.generate),
                "out": str(out),
                "measure_layout": cfg.measure_layout,
                **(worker_extra or {}),
            },
            validate=lambda it, res: video_complete(out, it, frames),
            desc="compbench generate",
            progress=cfg.run.progress,
            identity=ident,
        )
        rows = write_manifest(cfg, items)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    listed = write_failures(cfg, rows, plan.failed)
    return {
        "items": len(items),
        "status": counts,
        "failures_file": str(listed) if listed else None,
        "planned": plan.planned,
        "plans_reused": plan.reused,
        "plan_failed": plan.failed,
        "job": summary.to_dict(),
        "manifest": str(out / MANIFEST),
    }


FAILURES = (
    "failures.jsonl"  # <out>/: every item (and layout) generate could not make, with its path and reason
)


def generation_failures(
    cfg: CompbenchConfig, rows: list[dict[str, Any]], plan_failed: dict[str, str]
) -> list[Any]:
    """Each layout the planner could not make, then each manifest row that is not ``ok`` (its video path by the
    one path rule: relative to the manifest's folder, ``out``)."""
    from vidlab.datafiles import resolve_path
    from vidlab.outcome import Failure

    manifest = Path(cfg.out) / MANIFEST
    found = plan_failures(plan_failed)
    for r in rows:
        if r["status"] != "ok":
            why = r.get("error") or "not generated (the run stopped before it)"
            found.append(Failure(r["id"], why, str(resolve_path(r["video"], manifest))))
    return found


def plan_failures(plan_failed: dict[str, str]) -> list[Any]:
    """Each layout the planner could not make, as a :class:`vidlab.outcome.Failure` (``layout <prompt id>``)."""
    from vidlab.outcome import Failure

    return [Failure(f"layout {pid}", " ".join(str(err).split())) for pid, err in plan_failed.items()]


def write_failures(
    cfg: CompbenchConfig, rows: list[dict[str, Any]], plan_failed: dict[str, str]
) -> Path | None:
    """``<out>/failures.jsonl`` (:func:`generation_failures`), or no such file when everything was made."""
    from vidlab.outcome import write_failures as write

    return write(Path(cfg.out) / FAILURES, generation_failures(cfg, rows, plan_failed))


def plan_run(cfg: CompbenchConfig) -> Any:
    """The planning stage alone, under the job's lock and identity (``vidlab compbench plan``)."""
    from vidlab.distributed import open_job

    cfg.check()
    suite, prompts = select_prompts(cfg)
    with open_job(Path(cfg.out) / GEN_DIR, identity(cfg, suite)):
        return plan_all(
            prompts,
            cfg.out,
            cfg.planner,
            threads=cfg.run.plan_threads,
            progress=cfg.run.progress,
            planner_kwargs=_planner_kwargs(cfg),
        )


def _planner_kwargs(cfg: Any) -> dict[str, Any] | None:
    """The generate preset's planner options for this job's planner (the toy world's box cap), as
    ``vidlab generate`` plans them."""
    from vidlab.generation.pipeline import planner_kwargs

    return planner_kwargs(dataclasses.replace(cfg.generate, planner=cfg.planner))


def manifest_rows(cfg: CompbenchConfig, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per item from the job records (latest wins; ``pending`` if it never ran)."""
    from vidlab.distributed import JobRecords, error_text, read_job

    out = Path(cfg.out)
    job = (
        read_job(out / GEN_DIR, ids=[it["id"] for it in items]) if (out / GEN_DIR).is_dir() else JobRecords()
    )
    rows = []
    for it in items:
        res = job.ok.get(it["id"]) or {}
        err = job.failed.get(it["id"])
        status = "ok" if it["id"] in job.ok else "error" if err is not None else "pending"
        if status == "ok" and not video_complete(out, it, cfg.generate.frames):
            status, err = (
                "pending",
                {"type": "IncompleteVideo", "message": f"{it['video']} is missing or damaged"},
            )
        rows.append(
            {
                "id": it["id"],
                "prompt_id": it["prompt_id"],
                "category": it["category"],
                "index": it["index"],
                "prompt": it["prompt"],
                "method": it["method"],
                "seed": it["seed"],
                "video": it["video"],
                "layout": it["layout"],
                "seconds": res.get("seconds"),
                "peak_gpu_mb": res.get("peak_gpu_mb"),
                "peak_rss_mb": res.get("peak_rss_mb"),
                "status": status,
                "error": None if status == "ok" or err is None else error_text(err),
                "attempts": job.attempts.get(it["id"]),
                **(
                    {"layout_faithfulness": res["layout_faithfulness"]}
                    if "layout_faithfulness" in res
                    else {}
                ),
            }
        )
    return rows


def write_manifest(cfg: CompbenchConfig, items: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """(Re)write ``<out>/manifest.jsonl`` atomically from the job records."""
    import json

    from vidlab.io import atomic_write_text

    if items is None:
        _, prompts = select_prompts(cfg)
        items = build_items(cfg, prompts)
    rows = manifest_rows(cfg, items)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    atomic_write_text(Path(cfg.out) / MANIFEST, text)
    return rows


def read_manifest(out: str | Path) -> list[dict[str, Any]]:
    import json

    from vidlab.generation.compbench.suite import SuiteError

    path = Path(out) / MANIFEST
    if not path.is_file():
        raise SuiteError(f"{path} does not exist: run `vidlab compbench generate` with this config first")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
