"""Long-video QA evaluation: one record per question, sharded over ``vidlab.distributed.run_job``, resumable.

Each *strategy* is evaluated into its own folder ``OUT/<label>/`` (``results.jsonl`` holds one record per
question, a rerun skips questions already done): ``agent`` runs the VideoBrain episode (initial view + tool
calls); ``uniform:K`` and ``clip:K`` are the scripted baselines. Then ``OUT/summary.json``, ``OUT/summary.md``
and ``OUT/accuracy_vs_frames.png`` compare the strategies: accuracy overall, by category and by duration
group, the mean number of distinct frames shown and tool calls per question.

Scoring: multiple choice is correct when the extracted option letter equals the answer; a reply with no
valid option letter is wrong and its reason is kept. Open-ended answers are scored by a judge in [0, 1].
An undecodable or missing video becomes a ``video_error`` record (score 0) and the job goes on.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from understanding import checks as C
from understanding.benchmarks import LoadResult, QAItem, duration_bucket, load_benchmark
from understanding.classify import ClassifyConfig
from understanding.env import EpisodeConfig, Trajectory
from vidlab.config import ConfigError
from vidlab.errors import UserError

log = logging.getLogger(__name__)

AGENT = "agent"
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
PLOT = "accuracy_vs_frames.png"


@dataclass
class EvalConfig:
    """Settings of ``vidlab eval-qa`` (and of ``qa`` / ``classify``: one preset serves all three commands).

    Written next to the results as ``config.yaml``. ``strategy`` is ``vidlab qa``'s single strategy;
    ``video_root`` and ``classify`` are ``vidlab classify``'s.
    """

    benchmark: str = "jsonl"
    data: str = ""
    split: str | None = None
    video_dir: str | None = None
    limit: int | None = field(default=None, metadata=C.rng(1))
    policy: str = "const:A"
    policy_kwargs: dict[str, Any] = field(default_factory=dict)  # e.g. max_pixels, dtype, api_key, timeout
    strategies: tuple[str, ...] = (AGENT,)
    strategy: str = AGENT
    out: str = "outputs/eval-qa"
    backend: Literal["local", "ray"] = "local"
    num_workers: int = field(default=1, metadata=C.rng(1, 4096))
    num_cpus_per_worker: float = field(default=1.0, metadata=C.rng(0.0))
    num_gpus_per_worker: float = field(default=0.0, metadata=C.rng(0.0))
    max_retries: int = field(default=1, metadata=C.rng(0, 100))
    judge: str = "rule"  # open-ended scoring: rule | rule:exact | openai:URL@MODEL
    clip_model: str | None = None  # e.g. ViT-B-16:openai; None = no clip_sample tool and no clip:K baseline
    clip_sampling: str = "fps=1"
    clip_parity: bool = True
    cache_dir: str | None = None
    video_root: str | None = None
    episode: EpisodeConfig = field(default_factory=EpisodeConfig)
    classify: ClassifyConfig = field(default_factory=ClassifyConfig)

    def __post_init__(self) -> None:
        C.validate(self)
        if not self.strategies:
            raise ConfigError("strategies: expected at least one of agent, uniform:K, clip:K, got []")


# Settings that change how fast a job runs or where it writes, never what it answers: left out of a job's
# identity, so a rerun with more workers, another backend or a larger --limit resumes the same job.
RUNTIME_KEYS = (
    "out",
    "backend",
    "num_workers",
    "num_cpus_per_worker",
    "num_gpus_per_worker",
    "max_retries",
    "limit",
    "strategies",
    "strategy",
    "cache_dir",
    "data",
    "video_root",
    "classify",
)
# Policy options that are credentials or transport settings (never stored in job.json).
SECRET_OR_TRANSPORT = ("api_key", "timeout", "max_retries", "backoff")


def _answer_settings(cfg: EvalConfig, drop: Sequence[str] = RUNTIME_KEYS) -> dict[str, Any]:
    d = dataclasses.asdict(cfg)
    for k in drop:
        d.pop(k, None)
    d["policy_kwargs"] = {k: v for k, v in (cfg.policy_kwargs or {}).items() if k not in SECRET_OR_TRANSPORT}
    return d


def policy_inputs(policy: str) -> dict[str, Any]:
    """Fingerprints of files a policy spec reads (``replay:FILE``); other policies read none we can hash."""
    from vidlab.distributed import fingerprint_file

    scheme, _, rest = str(policy).partition(":")
    if scheme == "replay" and rest:
        return {"policy_file": fingerprint_file(rest)}
    return {}


def data_fingerprint(data: str | Path) -> Any:
    """Content fingerprint of a benchmark copy: the annotation file, or every annotation file in a folder
    (``*.json``, ``*.jsonl``, ``*.parquet``, sorted by relative path). Videos are fingerprinted per question."""
    from vidlab.distributed import fingerprint_file

    p = Path(data)
    if p.is_file():
        return fingerprint_file(p)
    files = sorted(
        f
        for ext in ("*.json", "*.jsonl", "*.parquet")
        for f in p.rglob(ext)
        if f.is_file() and f.stat().st_size
    )
    return {str(f.relative_to(p)): fingerprint_file(f)["sha256"] for f in files[:2000]}


def eval_identity(cfg: EvalConfig, command: str = "eval-qa") -> dict[str, Any]:
    """The identity of an evaluation: every setting that changes an answer or a score, plus the content
    fingerprint of the data (and of a replay policy's file). Each question's video is fingerprinted into its
    job item, so a changed video redoes just its questions."""
    from vidlab.distributed import make_identity

    inputs: dict[str, Any] = {"data": data_fingerprint(cfg.data) if cfg.data else None}
    inputs.update(policy_inputs(cfg.policy))
    return make_identity(_answer_settings(cfg), inputs, command=command)


def strategy_identity(common: dict[str, Any], strategy: str) -> dict[str, Any]:
    return {**common, "strategy": strategy_label(strategy)}


def video_fingerprint(path: str) -> str | None:
    """A video's content fingerprint, or None when it cannot be read (the worker then records why)."""
    from vidlab.clip.identity import file_fingerprint

    try:
        return file_fingerprint(path)
    except Exception:  # noqa: BLE001 - a missing/unreadable video becomes that question's error record
        return None


class StrategyError(UserError, ValueError):
    """A strategy spec that is not agent, uniform:K or clip:K, or one the config cannot run."""


def strategy_label(strategy: str) -> str:
    """Folder/legend name of a strategy: ``agent``, ``uniform-32``, ``clip-8``."""
    if strategy == AGENT:
        return AGENT
    from understanding.policies.baselines import BaselineSpec

    return BaselineSpec.parse(strategy).label


def check_strategy(strategy: str, clip_model: str | None) -> str:
    """Validate a strategy (``agent``, ``uniform:K``, ``clip:K``) against the config; returns its label."""
    try:
        label = strategy_label(strategy)
    except ValueError as e:
        raise StrategyError(str(e)) from e
    if label.startswith("clip-") and not clip_model:
        raise StrategyError(f"strategy {strategy!r} needs clip_model (e.g. --clip-model ViT-B-16:openai)")
    return label


# ------------------------------------------------------------------------------------------------ worker
class QAWorker:
    """Answers benchmark questions with one policy and one strategy; stateful (model loaded once per worker)."""

    def __init__(
        self,
        policy: Any,
        strategy: str = AGENT,
        episode: dict[str, Any] | EpisodeConfig | None = None,
        clip_model: str | None = None,
        clip_sampling: str = "fps=1",
        clip_parity: bool = True,
        cache_dir: str | None = None,
        judge: str = "rule",
        policy_kwargs: dict[str, Any] | None = None,
    ):
        from understanding.policies import load_policy

        check_strategy(strategy, clip_model)  # before loading a model: fail fast on a typo
        self.strategy = strategy
        if strategy != AGENT:
            from understanding.policies.baselines import BaselineSpec

            self.baseline: Any = BaselineSpec.parse(strategy)
        else:
            self.baseline = None
        self.policy = load_policy(policy, **(policy_kwargs or {})) if isinstance(policy, str) else policy
        self.policy_name = getattr(self.policy, "name", type(self.policy).__name__)
        if isinstance(episode, EpisodeConfig):
            self.episode = episode
        else:
            from vidlab.config import from_dict

            self.episode = from_dict(EpisodeConfig, dict(episode or {}))
        self.clip_spec, self.clip_sampling, self.clip_parity = clip_model, clip_sampling, clip_parity
        self.cache_dir = cache_dir
        self.judge_spec = judge
        self._clip: Any = None
        self._judge: Any = None

    def clip_model(self) -> Any:
        if self._clip is None:
            from vidlab.clip import load_model

            self._clip = load_model(self.clip_spec)
        return self._clip

    def judge(self) -> Any:
        if self._judge is None:
            from understanding.judge import load_judge

            self._judge = load_judge(self.judge_spec)
        return self._judge

    def _clip_agent(self, video_path: str, reader: Any) -> Any:
        from understanding.agents import ClipAgent
        from vidlab.clip import FrameIndex

        model = self.clip_model()
        index = FrameIndex.build(
            video_path, model, self.clip_sampling, cache_dir=self.cache_dir, progress=False
        )
        return ClipAgent(
            index,
            model,
            self.clip_parity,
            reader=reader,
            max_size=self.episode.max_size,
            resize=self.episode.frame_resize,
        )

    def trajectory(
        self, video: Any, question: str, options: Sequence[str] | None = None, video_path: str | None = None
    ) -> Trajectory:
        """Run this worker's strategy on one question; ``video`` is a path or an open reader."""
        from understanding.env import run_episode
        from vidlab.video import open_video

        path = str(video) if video_path is None and not hasattr(video, "get_frames") else video_path
        reader = open_video(video) if not hasattr(video, "get_frames") else video
        if self.baseline is not None:
            from understanding.policies.baselines import run_baseline

            clip = self._clip_agent(str(path), reader) if self.clip_spec else None
            return run_baseline(
                self.baseline, self.policy, reader, question, options, clip_agent=clip, config=self.episode
            )
        return run_episode(self.policy, reader, question, options, self.episode, self.agents(reader, path))

    def agents(self, reader: Any, video_path: str | None = None) -> dict[str, Any]:
        """The agents an episode on ``reader`` gets: uniform always, CLIP when a CLIP model is configured."""
        from understanding import protocol as P
        from understanding.agents import UniformAgent

        agents: dict[str, Any] = {
            P.UNIFORM: UniformAgent(
                reader, self.episode.uniform_frames, self.episode.max_size, self.episode.frame_resize
            )
        }
        if self.clip_spec:
            agents[P.CLIP] = self._clip_agent(str(video_path), reader)
        return agents

    def process(self, job_item: dict[str, Any]) -> dict[str, Any]:
        """One question -> one record (prediction, correctness, reason, frames, calls); a bad video raises."""
        from vidlab.video import open_video

        item = QAItem.from_dict(job_item.get("item", job_item))
        t0 = time.perf_counter()
        base: dict[str, Any] = {
            "id": item.id,
            "strategy": strategy_label(self.strategy),
            "policy": self.policy_name,
            "question_type": item.question_type,
            "category": item.category,
            "duration": item.duration,
            "duration_group": item.duration_group,
            "video_path": item.video_path,
            "answer": item.answer,
        }
        reader = open_video(item.video_path)  # VideoReadError -> an error record, the job goes on
        if item.duration is None:
            base["duration"] = round(float(reader.duration), 3)
        if not item.duration_group:
            base["duration_group"] = duration_bucket(float(base["duration"]))
        traj = self.trajectory(reader, item.question, item.options, video_path=item.video_path)
        rec = {**base, **self.score(item, traj)}
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        return rec

    def score(self, item: QAItem, traj: Any) -> dict[str, Any]:
        """Correctness and the trajectory facts that go into a record."""
        if item.question_type == "mc":
            prediction = traj.predicted
            score = 1.0 if prediction is not None and prediction == item.answer else 0.0
            reason = traj.predicted_reason
        else:
            prediction = traj.answer
            score = (
                float(self.judge().score(item.question, item.answer, traj.answer or ""))
                if traj.answer
                else 0.0
            )
            reason = "judged" if traj.answer else "no answer"
        return {
            "status": "ok",
            "prediction": prediction,
            "raw_answer": traj.answer,
            "score": score,
            "correct": score >= 0.5,
            "reason": reason,
            "valid": traj.valid,
            "invalid_reason": traj.invalid_reason,
            "end_reason": traj.end_reason,
            "frames_used": len(traj.frames_used),
            "frame_indices": list(traj.frames_used),
            "num_tool_calls": traj.num_tool_calls,
            "tool_calls": traj.tool_calls,
            "num_turns": len(traj.assistant_turns),
            "assistant_turns": list(traj.assistant_turns),
            "total_frames": traj.total_frames,
            "fps": traj.fps,
        }


# ------------------------------------------------------------------------------------------------- run
def job_items(items: Sequence[QAItem], fingerprint_videos: bool = True) -> list[dict[str, Any]]:
    """QAItems as executor items (``{"id", "item", "video_sha256"}``); repeated ids get ``#2``, ``#3`` suffixes.

    The video's content fingerprint is part of the item, so the executor redoes a question whose video
    changed (its record's item hash no longer matches)."""
    seen: dict[str, int] = {}
    prints: dict[str, str | None] = {}
    out = []
    for it in items:
        n = seen.get(it.id, 0) + 1
        seen[it.id] = n
        d = it.to_dict()
        if n > 1:
            d["id"] = f"{it.id}#{n}"
        job = {"id": d["id"], "item": d}
        if fingerprint_videos:
            if it.video_path not in prints:
                prints[it.video_path] = video_fingerprint(it.video_path)
            job["video_sha256"] = prints[it.video_path]
        out.append(job)
    return out


# What a valid per-question record holds; a damaged line (e.g. a string score) is redone, not trusted.
def _record_check() -> Any:
    from vidlab.distributed import require_fields

    return require_fields(
        id=str, score=float, correct=bool, frames_used=int, num_tool_calls=int, valid=bool, status=str
    )


def load_results(out_dir: str | Path) -> list[dict[str, Any]]:
    """Per-question records of one strategy folder (latest per id); failed questions come back scored 0.

    A question whose worker raised (an undecodable or missing video, a policy endpoint that kept failing)
    has ``status == "error"``, ``error`` = ``"Type: message"`` and its category / duration from the item,
    so it still counts in the denominators; a rerun retries it.
    """
    from vidlab.distributed.records import read_records

    recs = []
    for rid, rec in read_records(out_dir, check_result=_record_check()).items():
        if rec.get("status") == "ok":
            recs.append({**rec["result"], "id": rid, "status": "ok"})
            continue
        err = rec.get("error") or {}
        item = (rec.get("item") or {}).get("item") or {}
        recs.append(
            {
                "id": rid,
                "status": "error",
                "error": f"{err.get('type', 'Error')}: {err.get('message', '')}",
                "error_type": err.get("type"),
                "question_type": item.get("question_type"),
                "category": item.get("category"),
                "duration": item.get("duration"),
                "duration_group": item.get("duration_group") or "?",
                "video_path": item.get("video_path"),
                "answer": item.get("answer"),
                "prediction": None,
                "score": 0.0,
                "correct": False,
                "reason": "failed",
            }
        )
    return sorted(recs, key=lambda r: str(r["id"]))


def evaluate_items(
    items: Sequence[QAItem],
    policy: Any,
    out_dir: str | Path,
    *,
    strategy: str = AGENT,
    backend: str = "local",
    num_workers: int = 1,
    num_cpus_per_worker: float = 1.0,
    num_gpus_per_worker: float = 0.0,
    max_retries: int = 1,
    episode: EpisodeConfig | None = None,
    clip_model: str | None = None,
    clip_sampling: str = "fps=1",
    clip_parity: bool = True,
    cache_dir: str | None = None,
    judge: str = "rule",
    policy_kwargs: dict[str, Any] | None = None,
    identity: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Evaluate one strategy on ``items`` into ``out_dir``; returns its summary (also written as JSON).

    ``identity`` (see :func:`eval_identity`) makes the folder refuse a rerun with other settings
    (``vidlab.distributed.JobIdentityError``) instead of reusing answers they did not produce."""
    from vidlab.distributed import run_job
    from vidlab.io import atomic_write_json

    out = Path(out_dir)
    worker_kwargs = {
        "policy": policy,
        "strategy": strategy,
        "episode": dataclasses.asdict(episode or EpisodeConfig()),
        "clip_model": clip_model,
        "clip_sampling": clip_sampling,
        "clip_parity": clip_parity,
        "cache_dir": cache_dir,
        "judge": judge,
        "policy_kwargs": policy_kwargs or {},
    }
    todo = job_items(items)
    job = run_job(
        todo,
        QAWorker,
        out,
        backend=backend,
        num_workers=num_workers,
        num_cpus_per_worker=num_cpus_per_worker,
        num_gpus_per_worker=num_gpus_per_worker,
        max_retries=max_retries,
        worker_kwargs=worker_kwargs,
        desc=f"eval {strategy_label(strategy)}",
        identity=identity,
        overwrite=overwrite,
        check_result=_record_check(),
    )
    wanted = {d["id"] for d in todo}
    records = [r for r in load_results(out) if r["id"] in wanted]
    summary = summarize(records, label=strategy_label(strategy))
    summary["job"] = _job_dict(job)
    atomic_write_json(out / SUMMARY_JSON, summary)
    return summary


def _job_dict(job: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(job) and not isinstance(job, type):
        return json.loads(json.dumps(dataclasses.asdict(job), default=str))
    return {"repr": repr(job)}


# -------------------------------------------------------------------------------------------- summaries
def _mean(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def _groups(records: Sequence[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by[str(r.get(key) or "?")].append(r)
    return {
        k: {
            "n": len(v),
            "accuracy": _mean([float(r["score"]) for r in v]),
            "mean_frames": _mean([r["frames_used"] for r in v if r.get("status", "ok") == "ok"]),
        }
        for k, v in sorted(by.items())
    }


def summarize(records: Sequence[dict[str, Any]], *, label: str = "") -> dict[str, Any]:
    """Accuracy overall / by category / by duration group, mean frames and tool calls, error and invalid counts.

    ``accuracy`` counts failed questions (undecodable video, policy errors) as wrong: the denominator is every
    question asked; ``accuracy_answered`` leaves them out. ``macro_accuracy`` is the mean of per-category
    accuracies (MLVU's M-avg). Frame and call means are over questions that ran.
    """
    ran = [r for r in records if r.get("status", "ok") == "ok"]
    failed = [r for r in records if r.get("status", "ok") != "ok"]
    cats = _groups(records, "category")
    macro = [g["accuracy"] for g in cats.values() if g["accuracy"] is not None]
    unparsable = [r for r in ran if r.get("question_type") == "mc" and r.get("prediction") is None]
    video_errors = [r for r in failed if r.get("error_type") == "VideoReadError"]
    return {
        "label": label,
        "n": len(records),
        "n_ran": len(ran),
        "n_failed": len(failed),
        "n_video_errors": len(video_errors),
        "accuracy": _mean([float(r["score"]) for r in records]),
        "accuracy_answered": _mean([float(r["score"]) for r in ran]),
        "macro_accuracy": _mean(macro),
        "by_category": cats,
        "by_duration": _groups(records, "duration_group"),
        "mean_frames": _mean([r["frames_used"] for r in ran]),
        "mean_tool_calls": _mean([r["num_tool_calls"] for r in ran]),
        "mean_turns": _mean([r.get("num_turns", 0) for r in ran]),
        "invalid_rate": _mean([0.0 if r.get("valid") else 1.0 for r in ran]),
        "n_unparsable": len(unparsable),
        "unparsable_examples": [{"id": r["id"], "reason": r.get("reason")} for r in unparsable[:5]],
        "failures": [{"id": r["id"], "error": r.get("error")} for r in failed[:20]],
    }


def summary_table(summaries: dict[str, dict[str, Any]]) -> str:
    """A markdown table: one row per strategy, then per-category and per-duration accuracy tables."""

    def pct(x: Any) -> str:
        return "-" if x is None else f"{100 * x:.1f}"

    def num(x: Any) -> str:
        return "-" if x is None else f"{x:.2f}"

    lines = [
        "| strategy | n | accuracy % | macro % | mean frames | mean tool calls | invalid % | unparsable | video errors | failed |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, s in summaries.items():
        lines.append(
            f"| {label} | {s['n']} | {pct(s['accuracy'])} | {pct(s['macro_accuracy'])} | {num(s['mean_frames'])} | "
            f"{num(s['mean_tool_calls'])} | {pct(s['invalid_rate'])} | {s['n_unparsable']} | "
            f"{s['n_video_errors']} | {s['n_failed']} |"
        )
    for key, title in (("by_category", "category"), ("by_duration", "duration group")):
        groups = sorted({g for s in summaries.values() for g in s[key]})
        if not groups:
            continue
        lines += [
            "",
            f"Accuracy % by {title}:",
            "",
            f"| {title} | " + " | ".join(summaries) + " |",
            "|---|" + "---|" * len(summaries),
        ]
        for g in groups:
            cells = [pct(s[key].get(g, {}).get("accuracy")) for s in summaries.values()]
            n = max(s[key].get(g, {}).get("n", 0) for s in summaries.values())
            lines.append(f"| {g} (n={n}) | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_accuracy_vs_frames(summaries: dict[str, dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Accuracy (y) against mean frames shown per question (x); baselines of one method joined by a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    series: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for label, s in summaries.items():
        if s.get("accuracy") is None or s.get("mean_frames") is None:
            continue
        family = label.rsplit("-", 1)[0] if label.rsplit("-", 1)[-1].isdigit() else label
        series[family].append((float(s["mean_frames"]), 100 * float(s["accuracy"]), label))
    markers = {"uniform": "o", "clip": "s"}
    for family, pts in sorted(series.items()):
        pts.sort()
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        m = markers.get(family.split("/")[-1], "*")
        ax.plot(
            xs,
            ys,
            marker=m,
            markersize=10 if m == "*" else 6,
            linestyle="-" if len(pts) > 1 else "none",
            label=family,
        )
        for x, y, lab in pts:
            ax.annotate(lab, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel("mean frames shown per question")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(title or "accuracy vs frames")
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=8)
    fig.tight_layout()
    from vidlab.io import atomic_path

    out = Path(path)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return out


def write_report(
    summaries: dict[str, dict[str, Any]], out_dir: str | Path, title: str = ""
) -> dict[str, Path]:
    """``summary.json`` (all strategies), ``summary.md`` (tables) and the accuracy-vs-frames PNG in ``out_dir``."""
    from vidlab.io import atomic_write_json, atomic_write_text

    out = Path(out_dir)
    paths = {"json": out / SUMMARY_JSON, "table": out / SUMMARY_MD, "plot": out / PLOT}
    atomic_write_json(paths["json"], summaries)
    atomic_write_text(paths["table"], (f"# {title}\n\n" if title else "") + summary_table(summaries))
    plot_accuracy_vs_frames(summaries, paths["plot"], title)
    return paths


def load_summaries(run_dirs: Sequence[str | Path]) -> dict[str, dict[str, Any]]:
    """Strategy summaries from finished run folders (``OUT`` or ``OUT/<label>``), for comparing policies."""
    found: dict[str, dict[str, Any]] = {}
    for d in map(Path, run_dirs):
        f = d / SUMMARY_JSON
        if not f.is_file():
            raise StrategyError(f"{d}: no {SUMMARY_JSON} (run `vidlab eval-qa ... --out {d}` first)")
        data = json.loads(f.read_text())
        if "label" in data and "accuracy" in data:  # one strategy folder
            data = {data["label"]: data}
        for label, s in data.items():
            found[f"{d.name}/{label}" if len(run_dirs) > 1 else label] = s
    return found


def compare_runs(
    run_dirs: Sequence[str | Path], out_dir: str | Path
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Put finished runs on one table and plot in ``out_dir`` (a folder of its own: never an eval job's)."""
    from vidlab.distributed import make_identity, open_job

    summaries = load_summaries(run_dirs)  # every run readable before the output folder is touched
    ident = make_identity({"runs": [str(Path(d).resolve()) for d in run_dirs]}, command="eval-qa --compare")
    with open_job(out_dir, ident, overwrite=True):
        return summaries, write_report(summaries, out_dir, "comparison")


def run_eval(
    cfg: EvalConfig,
    items: LoadResult | Sequence[QAItem] | None = None,
    policy: Any = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Load the benchmark (unless ``items`` is given), evaluate every strategy, write the comparison report.

    Every input is validated first (strategies, policy spec, benchmark copy); then ``cfg.out`` is taken
    (its lock, and the identity check: a folder made with other settings or other data is refused with a
    ``JobIdentityError`` naming what differs), and only then is anything written into it."""
    from understanding.policies import check_policy_spec
    from vidlab.config import save_resolved
    from vidlab.distributed import open_job
    from vidlab.io import atomic_write_text

    for strategy in cfg.strategies:  # all of them before the first job starts
        check_strategy(strategy, cfg.clip_model)
    if policy is None:
        check_policy_spec(cfg.policy)
    out = Path(cfg.out)
    if items is None:
        loaded = load_benchmark(
            cfg.benchmark, cfg.data, split=cfg.split, video_dir=cfg.video_dir, limit=cfg.limit
        )
    elif isinstance(items, LoadResult):
        loaded = items
    else:
        loaded = LoadResult(cfg.benchmark, list(items))
    qa = loaded.items if cfg.limit is None else loaded.items[: cfg.limit]
    common = eval_identity(cfg)
    policy_obj: Any = None
    if policy is not None:
        common["policy_object"] = getattr(policy, "name", type(policy).__name__)
    elif cfg.backend == "local":
        # in-process: load the model once for every strategy, and before anything is written, so that a
        # model that cannot load is reported without leaving a half-made folder (Ray actors load their own)
        from understanding.policies import load_policy

        policy_obj = load_policy(cfg.policy, **(cfg.policy_kwargs or {}))
    summaries: dict[str, dict[str, Any]] = {}
    with open_job(out, common, overwrite=overwrite):
        save_resolved(cfg, out)
        atomic_write_text(
            out / "problems.jsonl", "".join(json.dumps(dataclasses.asdict(p)) + "\n" for p in loaded.problems)
        )
        for strategy in cfg.strategies:
            label = strategy_label(strategy)
            summaries[label] = evaluate_items(
                qa,
                policy if policy is not None else (policy_obj if cfg.backend == "local" else cfg.policy),
                out / label,
                strategy=strategy,
                backend=cfg.backend,
                num_workers=cfg.num_workers,
                num_cpus_per_worker=cfg.num_cpus_per_worker,
                num_gpus_per_worker=cfg.num_gpus_per_worker,
                max_retries=cfg.max_retries,
                episode=cfg.episode,
                clip_model=cfg.clip_model,
                clip_sampling=cfg.clip_sampling,
                clip_parity=cfg.clip_parity,
                cache_dir=cfg.cache_dir,
                judge=cfg.judge,
                policy_kwargs=cfg.policy_kwargs,
                identity=strategy_identity(common, strategy),
                overwrite=overwrite,
            )
        title = (
            f"{cfg.benchmark}"
            + (f" ({cfg.split})" if cfg.split else "")
            + f", policy {cfg.policy if policy is None else getattr(policy, 'name', '?')}"
        )
        for s in summaries.values():
            s["n_load_problems"] = len(loaded.problems)
        write_report(summaries, out, title)
    return summaries
