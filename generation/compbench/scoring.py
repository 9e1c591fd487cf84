"""``score_run(cfg)``: every configured metric over every generated video, resumably; official CSVs merged.

Each metric is its own job folder ``<out>/scores/<metric>/`` (lock + identity: the metric settings and the
benchmark files), run with :func:`vidlab.distributed.run_job` (the metric's model loads once per worker).
An item is a finished manifest row plus the video's size and mtime, so a regenerated video is scored
again. After the run, the metric's ``finalize`` (e.g. presence-threshold calibration) turns the records
into ``<out>/scores/<metric>.jsonl``; ``score.ingest=DIR`` adds ``<out>/scores/official.json``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from vidlab.generation.compbench.config import CompbenchConfig, ScoreConfig
from vidlab.generation.compbench.metrics import MetricError, VideoContext, get_metric

SCORES = "scores"
SCORE_FAILURES = (
    "score_failures.jsonl"  # <out>/: every (metric, video) that could not be scored, path and reason
)


class ScoreWorker:
    """Builds one metric (its model loads once) and scores manifest rows with it."""

    def __init__(self, metric: str, score: dict[str, Any], data: str, out: str) -> None:
        from vidlab.config import from_dict
        from vidlab.generation.compbench.suite import load_suite

        self.cfg = from_dict(ScoreConfig, score)
        self.suite = load_suite(data or None)
        self.out = Path(out)
        self.metric = get_metric(metric)(self.cfg, self.suite)

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        from vidlab.datafiles import resolve_path
        from vidlab.generation.compbench.jobs import MANIFEST

        manifest = self.out / MANIFEST  # the manifest's paths resolve against its folder (the one path rule)
        ctx = VideoContext(
            row=item,
            prompt=self.suite.get(item["prompt_id"]),
            video=resolve_path(item["video"], manifest),
            layout_file=resolve_path(item["layout"], manifest) if item.get("layout") else None,
            num_frames=self.cfg.num_frames,
        )
        return self.metric.score(ctx)


def score_items(cfg: CompbenchConfig) -> list[dict[str, Any]]:
    """The finished videos, from a manifest rebuilt from the job records (a killed run left an old one)."""
    from vidlab.datafiles import resolve_path
    from vidlab.generation.compbench.jobs import MANIFEST, write_manifest

    manifest = Path(cfg.out) / MANIFEST
    items = []
    for r in write_manifest(cfg):
        if r["status"] != "ok" or r["method"] not in cfg.methods:
            continue
        st = resolve_path(r["video"], manifest).stat()
        keep = (
            "id",
            "prompt_id",
            "category",
            "index",
            "method",
            "seed",
            "video",
            "layout",
            "layout_faithfulness",
        )
        items.append({**{k: r[k] for k in keep if k in r}, "video_stamp": f"{st.st_size}-{st.st_mtime_ns}"})
    return items


def score_run(cfg: CompbenchConfig, overwrite: bool = False) -> dict[str, Any]:
    """Run every metric of ``cfg.score.metrics`` (see module docstring); returns per-metric summaries."""
    from vidlab.datafiles import resolve_path
    from vidlab.distributed import make_identity, read_job, run_job
    from vidlab.generation.compbench.jobs import MANIFEST
    from vidlab.generation.compbench.suite import load_suite
    from vidlab.io import atomic_write_json, atomic_write_text
    from vidlab.outcome import Failure, write_failures

    for name in cfg.score.metrics:
        check = getattr(get_metric(name), "check", None)  # unknown names fail here, before any model loads
        if check is not None:
            check(cfg)
    suite = load_suite(cfg.data or None)
    items = score_items(cfg)
    if not items:
        raise MetricError(
            f"no generated videos to score in {cfg.out} (run `vidlab compbench generate` first)"
        )
    out = Path(cfg.out)
    summaries: dict[str, Any] = {}
    everything: list[Any] = []  # every (metric, video) that failed: <out>/score_failures.jsonl
    score_dict = dataclasses.asdict(cfg.score)
    for name in cfg.score.metrics:
        job = out / SCORES / name
        settings = {k: v for k, v in score_dict.items() if k not in ("metrics", "ingest", "device")}
        ident = make_identity(settings, {"suite": suite.fingerprint}, command="compbench score", metric=name)
        summary = run_job(
            items,
            ScoreWorker,
            job,
            backend="local",
            max_retries=0,
            worker_kwargs={"metric": name, "score": score_dict, "data": cfg.data, "out": str(out)},
            desc=f"score {name}",
            progress=cfg.run.progress,
            identity=ident,
            overwrite=overwrite,
        )
        recs = read_job(job, ids=[it["id"] for it in items])
        ok = dict(recs.ok)
        finalize = getattr(get_metric(name), "finalize", None)
        if finalize is not None:
            ok = finalize(cfg.score, ok)
        lines = []
        for it in items:
            if it["id"] in ok:
                row = {k: it[k] for k in ("id", "prompt_id", "category", "index", "method", "seed")}
                lines.append(json.dumps({**row, **ok[it["id"]]}, ensure_ascii=False))
        atomic_write_text(out / SCORES / f"{name}.jsonl", "\n".join(lines) + ("\n" if lines else ""))
        failed = sorted(
            it["id"] for it in items if it["id"] not in recs.ok
        )  # this run's and earlier runs' failures
        errors = [{"id": k, **_error_of(recs.failed.get(k))} for k in failed[:3]]
        videos = {it["id"]: it["video"] for it in items}
        for k in failed:
            e = _error_of(recs.failed.get(k))
            why = f"{e['type']}: {e['message']}" if "type" in e else e["message"]
            everything.append(Failure(f"{name} {k}", why, str(resolve_path(videos[k], out / MANIFEST))))
        summaries[name] = {
            "scored": sum(1 for r in ok.values() if r.get("score") is not None),
            "not_applicable": sum(1 for r in ok.values() if r.get("score") is None),
            "failed": len(failed),
            "errors": errors or summary.errors[:3],
        }
    listed = write_failures(out / SCORE_FAILURES, everything)
    for s in summaries.values():
        if s["failed"]:
            s["failures_file"] = str(listed)
    if cfg.score.ingest:
        from vidlab.generation.compbench.official.csv_ingest import ingest_dir

        official = ingest_dir(cfg.score.ingest, cfg.methods)
        atomic_write_json(out / SCORES / "official.json", official)
        summaries["official"] = {m: sorted(c) for m, c in official.items()}
    return summaries


def _error_of(err: dict[str, Any] | None) -> dict[str, Any]:
    """The type and message of a failed item (``read_job``'s ``failed`` entry): what the user needs to fix it."""
    if not err:
        return {"message": "no record (the run stopped before it)"}
    return {k: str(err[k])[:300] for k in ("type", "message") if k in err}


def failed_items(summaries: dict[str, Any]) -> dict[str, int]:
    """``{metric: number of videos it failed on}`` for the metrics that failed on any (``score`` exits 1)."""
    return {m: int(s["failed"]) for m, s in summaries.items() if isinstance(s, dict) and s.get("failed")}


def read_scores(out: str | Path) -> dict[str, list[dict[str, Any]]]:
    """``{metric: rows}`` from ``<out>/scores/*.jsonl``."""
    d = Path(out) / SCORES
    res: dict[str, list[dict[str, Any]]] = {}
    for p in sorted(d.glob("*.jsonl")) if d.is_dir() else []:
        res[p.stem] = [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]
    return res
