"""Long-video QA evaluation: one record per question, sharded over ``vidlab.distributed.run_job``, resumable.

Each *strategy* is evaluated into its own folder ``OUT/<label>/`` (``results.jsonl`` holds one record per
question, a rerun skips questions already done): ``agent`` runs the VideoBrain episode (initial view + tool
calls); ``uniform:K``, ``clip:K`` and the selectors ``topk:K``, ``aks:K``, ``bolt:K`` are the scripted baselines. Then ``OUT/summary.json``, ``OUT/summary.md``
and ``OUT/accuracy_vs_frames.png`` compare the strategies (:mod:`vidlab.understanding.report`): accuracy overall, by
category and by duration group, the mean number of distinct frames shown and tool calls per question.

The settings travel as objects: :class:`~vidlab.understanding.config.QASettings` (how a question is answered) from
the config to :class:`QAWorker`, :class:`~vidlab.distributed.RunConfig` (where the job runs) to ``run_job``::

    summary = evaluate_items(items, cfg.qa_settings("uniform:8"), "out/uniform-8", run=cfg.run)

Scoring: multiple choice is correct when the extracted option letter equals the answer; a reply with no
valid option letter is wrong and its reason is kept. Open-ended answers are scored by a judge in [0, 1].
An undecodable or missing video becomes a ``video_error`` record (score 0) and the job goes on.

Each video's CLIP frame index is built once, by the first question that needs it, into ``cache_dir``, and then
shared by every later question, strategy, policy with the same CLIP and rerun (two Ray workers wanting the same
index wait for one another on its file lock). A record's ``clip_index`` says which it was: ``"built"`` (this
question built it), ``"cached"`` (it was there) or None (no CLIP); a summary's ``index_builds`` counts the builds.
``clip_index`` and ``seconds`` are the only fields of a record that depend on the run rather than the question.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vidlab.distributed import RunConfig
from vidlab.identity import fingerprint_file, fingerprint_or_none
from vidlab.understanding.benchmarks import LoadResult, QAItem, duration_bucket, load_benchmark
from vidlab.understanding.config import (
    AGENT,
    EvalConfig,
    QASettings,
    StrategyError,
    check_strategy,
    strategy_label,
)
from vidlab.understanding.env import Trajectory
from vidlab.understanding.report import SUMMARY_JSON, summarize, write_report

log = logging.getLogger(__name__)

__all__ = [
    "AGENT",
    "EvalConfig",
    "QASettings",
    "QAWorker",
    "RUN_FIELDS",
    "StrategyError",
    "agent_tools",
    "check_strategy",
    "eval_identity",
    "evaluate_items",
    "job_items",
    "load_results",
    "policy_clip_model",
    "resolve_clip_model",
    "run_eval",
    "strategy_label",
]

# ``clip_model`` values with a meaning of their own: the policy's own CLIP, or none at all
AUTO_CLIP = "auto"
NO_CLIP = ("none", "off")


# Settings that change how fast a job runs or where it writes, never what it answers: left out of a job's
# identity, so a rerun with more workers, another backend or a larger --limit resumes the same job.
RUNTIME_KEYS = (
    "out",
    "run",
    "limit",
    "strategies",
    "strategy",
    "cache_dir",
    "data",
    "video_root",
    "classify",
    "frame_cache_mb",
)
# Policy options that are credentials or transport settings (never stored in job.json).
SECRET_OR_TRANSPORT = ("api_key", "timeout", "max_retries", "backoff", "budget", "max_reply_bytes")
# The fields of a per-question record that depend on the run (timing, whether the index was there), not on the
# question: two runs agree when their records agree without them (local vs Ray, resumed vs uninterrupted).
RUN_FIELDS = ("clip_index", "seconds")


def _answer_settings(cfg: EvalConfig, drop: Sequence[str] = RUNTIME_KEYS) -> dict[str, Any]:
    d = dataclasses.asdict(cfg)
    for k in drop:
        d.pop(k, None)
    d["policy_kwargs"] = {k: v for k, v in (cfg.policy_kwargs or {}).items() if k not in SECRET_OR_TRANSPORT}
    return d


def policy_inputs(policy: str) -> dict[str, Any]:
    """Fingerprints of files a policy spec reads (``replay:FILE``); other policies read none we can hash."""
    scheme, _, rest = str(policy).partition(":")
    if scheme == "replay" and rest:
        return {"policy_file": fingerprint_file(rest)}
    return {}


def data_fingerprint(data: str | Path) -> Any:
    """Content fingerprint of a benchmark copy: the annotation file, or every annotation file in a folder
    (``*.json``, ``*.jsonl``, ``*.parquet``, sorted by relative path). Videos are fingerprinted per question."""
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


def policy_clip_model(policy: str) -> str | None:
    """The CLIP model a policy ships with, or None: its registered class's optional ``clip_model(rest)``
    (``toy:shipped`` -> the shipped toy CLIP; ``toy:DIR`` -> ``DIR/clip`` when it is there)."""
    from vidlab.understanding.policies.registry import get_policy_class, split_spec

    scheme, rest = split_spec(policy)
    own = getattr(get_policy_class(scheme, policy), "clip_model", None)
    found = own(rest) if callable(own) else None
    return str(found) if found else None


def resolve_clip_model(clip_model: str | None, policy: str) -> str | None:
    """The one rule for ``clip_model`` everywhere (CLI, demo, Python): ``"auto"`` is the policy's own CLIP
    (:func:`policy_clip_model`; None when it ships none), ``"none"``/``"off"``/None is no CLIP (no
    ``clip_sample`` tool), anything else is a CLIP spec used as given."""
    if clip_model is None or str(clip_model).strip().lower() in NO_CLIP:
        return None
    if str(clip_model).strip().lower() == AUTO_CLIP:
        return policy_clip_model(policy)
    return str(clip_model)


def agent_tools(clip_model: str | None) -> list[str]:
    """The tools an agent episode offers: ``uniform_sample`` always, ``clip_sample`` with a CLIP model."""
    from vidlab.understanding import protocol as P

    return [P.UNIFORM, P.CLIP] if clip_model else [P.UNIFORM]


def strategy_identity(common: dict[str, Any], strategy: str) -> dict[str, Any]:
    return {**common, "strategy": strategy_label(strategy)}


# ------------------------------------------------------------------------------------------------ worker
class QAWorker:
    """Answers benchmark questions with one policy and one strategy; stateful (model loaded once per worker).

    ``settings`` say how (:class:`~vidlab.understanding.config.QASettings`); ``policy`` is a ready policy object that
    takes the place of ``settings.policy`` (in-process runs, tests)."""

    def __init__(self, settings: QASettings, policy: Any = None):
        from vidlab.understanding.policies import load_policy

        clip = resolve_clip_model(settings.clip_model, settings.policy)  # "auto" / "none" -> a spec or None
        if clip != settings.clip_model:
            settings = dataclasses.replace(settings, clip_model=clip)
        check_strategy(settings.strategy, settings.clip_model)  # before loading a model: fail fast on a typo
        self.settings = settings
        self.strategy = settings.strategy
        if self.strategy != AGENT:
            from vidlab.understanding.policies.baselines import BaselineSpec

            self.baseline: Any = BaselineSpec.parse(self.strategy)
        else:
            self.baseline = None
        self.policy = (
            policy
            if policy is not None and not isinstance(policy, str)
            else load_policy(policy or settings.policy, **(settings.policy_kwargs or {}))
        )
        self.policy_name = getattr(self.policy, "name", type(self.policy).__name__)
        self.episode = settings.episode
        self.clip_spec, self.clip_sampling = settings.clip_model, settings.clip_sampling
        self.clip_parity, self.cache_dir = settings.clip_parity, settings.cache_dir
        self.judge_spec = settings.judge
        self._clip: Any = None
        self._judge: Any = None
        # decoded, resized frames shared by every question and strategy of a video in this process (budget 0:
        # nothing kept, decodes still counted)
        from vidlab.video.frame_cache import shared_frame_cache

        self.frame_cache = shared_frame_cache(settings.frame_cache_mb)
        # (path, key, reader, CLIP index) of the video of the previous question, kept while the cache is on
        self._video: tuple[str, Any, Any, Any] | None = None
        self._index_built: list[
            bool
        ] = []  # per FrameIndex.build of the current question: built (True) or found

    def clip_model(self) -> Any:
        if self._clip is None:
            self._clip = _process_clip(self.clip_spec)
        return self._clip

    def judge(self) -> Any:
        if self._judge is None:
            from vidlab.understanding.judge import load_judge

            self._judge = load_judge(self.judge_spec)
        return self._judge

    def _clip_agent(self, video_path: str, reader: Any) -> Any:
        from vidlab.clip import FrameIndex
        from vidlab.understanding.agents import ClipAgent

        model = self.clip_model()
        video = self._video if self._video is not None and self._video[0] == str(video_path) else None
        index = video[3] if video is not None else None
        if index is not None:  # the previous question's, of the same video: found, not built
            self._index_built.append(False)
        else:
            index = FrameIndex.build(
                video_path, model, self.clip_sampling, cache_dir=self.cache_dir, progress=False
            )
            self._index_built.append(bool(index.meta.get("built")))
            if video is not None:
                self._video = (*video[:3], index)
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
        from vidlab.understanding.env import run_episode
        from vidlab.video import open_video

        path = str(video) if video_path is None and not hasattr(video, "get_frames") else video_path
        reader = open_video(video) if not hasattr(video, "get_frames") else video
        if self.baseline is not None:
            from vidlab.understanding.policies.baselines import run_baseline

            clip = self._clip_agent(str(path), reader) if self.clip_spec else None
            return run_baseline(
                self.baseline, self.policy, reader, question, options, clip_agent=clip, config=self.episode
            )
        return run_episode(self.policy, reader, question, options, self.episode, self.agents(reader, path))

    def agents(self, reader: Any, video_path: str | None = None) -> dict[str, Any]:
        """The agents an episode on ``reader`` gets: uniform always, CLIP when a CLIP model is configured."""
        from vidlab.understanding import protocol as P
        from vidlab.understanding.agents import UniformAgent

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

        item = QAItem.from_dict(job_item.get("item", job_item))
        t0 = time.perf_counter()
        self._index_built = []
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
        from vidlab.video.frame_cache import CachedReader

        raw, key = self._open(item.video_path)
        reader: Any = CachedReader(raw, self.frame_cache, key)
        if item.duration is None:
            base["duration"] = round(float(reader.duration), 3)
        if not item.duration_group:
            base["duration_group"] = duration_bucket(float(base["duration"]))
        traj = self.trajectory(reader, item.question, item.options, video_path=item.video_path)
        rec = {**base, **self.score(item, traj)}
        rec["clip_index"] = ("built" if any(self._index_built) else "cached") if self._index_built else None
        rec["seconds"] = round(time.perf_counter() - t0, 3)
        return rec

    def _open(self, path: str) -> tuple[Any, Any]:
        """The reader of ``path`` and its frame-cache key. With the frame cache on, the reader (and the video's
        CLIP index) stay open from the previous question of the same video (questions run grouped by video);
        with it off (``frame_cache_mb=0``, the path before the cache) every question opens the video afresh."""
        from vidlab.video import open_video
        from vidlab.video.frame_cache import video_key

        keep = self.frame_cache.budget_bytes > 0
        if keep and self._video is not None and self._video[0] == str(path):
            try:
                if video_key(path) == self._video[1]:
                    return self._video[2], self._video[1]
            except OSError:
                pass
        if self._video is not None:
            self._close_video()
        reader = open_video(path)  # VideoReadError -> an error record, the job goes on
        key = video_key(path)
        if keep:
            self._video = (str(path), key, reader, None)
        return reader, key

    def _close_video(self) -> None:
        video, self._video = self._video, None
        for part in (video or ())[2:]:
            with contextlib.suppress(Exception):  # noqa: BLE001 - closing what is no longer used
                closer = getattr(part, "close", None)
                if closer is not None:
                    closer()

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
                prints[it.video_path] = fingerprint_or_none(it.video_path)
            job["video_sha256"] = prints[it.video_path]
        out.append(job)
    return out


def _process_clip(spec: str) -> Any:
    """The CLIP model ``spec`` loaded once per process: every strategy's worker (and every video group's, see
    :func:`run_eval`) shares it, and its text-embedding cache."""
    model = _CLIPS.get(spec)
    if model is None:
        from vidlab.clip import load_model

        model = load_model(spec)
        _CLIPS.clear()  # one model at a time: a run uses one CLIP
        _CLIPS[spec] = model
    return model


_CLIPS: dict[str, Any] = {}


def group_by_video(todo: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Job items reordered so that each video's questions come together (videos in order of first appearance,
    questions in their order): its frames are then decoded once and served from the frame cache."""
    first: dict[str, int] = {}
    for it in todo:
        first.setdefault(str(it["item"]["video_path"]), len(first))
    order = sorted(range(len(todo)), key=lambda n: (first[str(todo[n]["item"]["video_path"])], n))
    return [todo[n] for n in order]


def frames_per_question(settings: QASettings) -> int:
    """The most frames one question of ``settings.strategy`` can show (the initial view and every call)."""
    ep = settings.episode
    if settings.strategy == AGENT:
        return ep.num_initial_frames + ep.max_calls * max(ep.uniform_frames, ep.clip_frames)
    from vidlab.understanding.policies.baselines import BaselineSpec

    return int(BaselineSpec.parse(settings.strategy).k)


def video_groups(
    todo: Sequence[dict[str, Any]], budget_bytes: int, frames_per_item: int, frame_bytes: int
) -> list[list[dict[str, Any]]]:
    """Consecutive runs of whole videos (``todo`` grouped by video) whose frames, counted as every question
    showing ``frames_per_item`` distinct frames of ``frame_bytes``, fill at most half the cache budget."""
    groups: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    used = 0
    for _video, part in _runs_of_video(todo):
        need = len(part) * frames_per_item * frame_bytes
        if current and used + need > budget_bytes // 2:
            groups.append(current)
            current, used = [], 0
        current += part
        used += need
    if current:
        groups.append(current)
    return groups


def _runs_of_video(todo: Sequence[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    runs: list[tuple[str, list[dict[str, Any]]]] = []
    for it in todo:
        v = str(it["item"]["video_path"])
        if runs and runs[-1][0] == v:
            runs[-1][1].append(it)
        else:
            runs.append((v, [it]))
    return runs


def _merge_jobs(parts: Sequence[Any]) -> Any:
    """One JobSummary for the parts of a strategy run video group by video group."""
    from vidlab.distributed.executor import JobSummary

    seconds = sum(p.seconds for p in parts)
    done = sum(p.done for p in parts)
    return JobSummary(
        total=sum(p.total for p in parts),
        done=done,
        skipped=sum(p.skipped for p in parts),
        failed=sum(p.failed for p in parts),
        seconds=round(seconds, 4),
        items_per_s=round(done / seconds, 4) if seconds > 0 else 0.0,
        errors=[e for p in parts for e in p.errors],
        done_ids=[i for p in parts for i in p.done_ids],
        startup_seconds=round(sum(p.startup_seconds for p in parts), 4),
        backend=parts[0].backend,
        num_workers=parts[0].num_workers,
        out_dir=parts[0].out_dir,
        problems=[q for p in parts for q in p.problems],
    )


# What a valid per-question record holds; a damaged line (e.g. a string score) is redone, not trusted.
def _record_check() -> Any:
    from vidlab.distributed import require_fields

    return require_fields(
        id=str, score=float, correct=bool, frames_used=int, num_tool_calls=int, valid=bool, status=str
    )


def load_results(out_dir: str | Path, ids: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Per-question records of one strategy folder (latest per id; only ``ids`` when given); failed
    questions come back scored 0.

    A question whose worker raised (an undecodable or missing video, a policy endpoint that kept failing)
    has ``status == "error"``, ``error`` = ``"Type: message"`` and its category / duration from the item,
    so it still counts in the denominators; a rerun retries it.
    """
    from vidlab.distributed import error_text, read_job

    job = read_job(out_dir, ids=ids, check_result=_record_check())
    recs = [{**res, "id": rid, "status": "ok"} for rid, res in job.ok.items()]
    for rid, err in job.failed.items():
        item = (err.get("item") or {}).get("item") or {}
        recs.append(
            {
                "id": rid,
                "status": "error",
                "error": error_text(err),
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
    settings: QASettings,
    out_dir: str | Path,
    *,
    run: RunConfig | None = None,
    policy: Any = None,
    identity: dict[str, Any] | None = None,
    overwrite: bool = False,
    ran: Any = None,
) -> dict[str, Any]:
    """Evaluate ``settings.strategy`` on ``items`` into ``out_dir`` where ``run`` says; returns its summary
    (also written as JSON). ``policy``: a ready policy object in place of ``settings.policy``. Questions run
    grouped by video (:func:`group_by_video`); ``ran``: the JobSummary of a pass that already ran them
    (:func:`run_eval`'s video groups), so only the summary is made.

    ``identity`` (see :func:`eval_identity`) makes the folder refuse a rerun with other settings
    (``vidlab.distributed.JobIdentityError``) instead of reusing answers they did not produce."""
    from vidlab.distributed import run_job
    from vidlab.io import atomic_write_json

    out = Path(out_dir)
    todo = group_by_video(job_items(items))
    label = strategy_label(settings.strategy)
    job = ran or run_job(
        todo,
        QAWorker,
        out,
        run=run or RunConfig(),
        worker_kwargs={"settings": settings, "policy": policy},
        desc=f"eval {label}",
        identity=identity,
        overwrite=overwrite,
        check_result=_record_check(),
    )
    records = load_results(out, ids=[d["id"] for d in todo])
    summary = summarize(records, label=label)
    summary["clip_model"] = settings.clip_model
    summary["index_builds"] = sum(r.get("clip_index") == "built" for r in records)
    if settings.strategy == AGENT:  # what the agent could call: clip_sample only with a CLIP model
        summary["tools"] = agent_tools(settings.clip_model)
    summary["job"] = _job_dict(job)
    atomic_write_json(out / SUMMARY_JSON, summary)
    return summary


def _job_dict(job: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(job) and not isinstance(job, type):
        return json.loads(json.dumps(dataclasses.asdict(job), default=str))
    return {"repr": repr(job)}


FRAME_CACHE_JSON = "frame_cache.json"


def _run_by_video(
    qa: Sequence[QAItem], cfg: EvalConfig, common: dict[str, Any], policy: Any, overwrite: bool, budget: int
) -> dict[str, Any]:
    """Several strategies in one process: every strategy over a group of videos before the next group, so the
    frame cache holds a video's frames for all of them ({label: JobSummary}; {} where this does not apply: one
    strategy, the Ray backend, the cache off)."""
    from tqdm.auto import tqdm

    from vidlab.distributed import run_job

    if len(cfg.strategies) < 2 or cfg.run.backend != "local" or budget <= 0:
        return {}
    todo = group_by_video(job_items(qa))
    w, h = cfg.episode.max_size
    per_item = max(frames_per_question(cfg.qa_settings(s)) for s in cfg.strategies)
    groups = video_groups(todo, budget, per_item, int(w) * int(h) * 3)
    if len(groups) < 2:
        return {}  # everything fits at once: strategy by strategy, as always
    parts: dict[str, list[Any]] = {}
    for n, group in enumerate(tqdm(groups, desc="eval by video group", unit="group")):
        for strategy in cfg.strategies:
            label = strategy_label(strategy)
            parts.setdefault(label, []).append(
                run_job(
                    group,
                    QAWorker,
                    Path(cfg.out) / label,
                    run=cfg.run,
                    worker_kwargs={"settings": cfg.qa_settings(strategy), "policy": policy},
                    desc=f"eval {label}",
                    progress=False,
                    identity=strategy_identity(common, strategy),
                    overwrite=overwrite and n == 0,
                    check_result=_record_check(),
                )
            )
    return {label: _merge_jobs(p) for label, p in parts.items()}


def run_eval(
    cfg: EvalConfig,
    items: LoadResult | Sequence[QAItem] | None = None,
    policy: Any = None,
    overwrite: bool = False,
    skip_bad_lines: bool = False,
    failures: list[Any] | None = None,
) -> dict[str, Any]:
    """Load the benchmark (unless ``items`` is given), evaluate every strategy, write the comparison report.

    Every question that failed (a missing or undecodable video, a policy that kept failing) and every record the
    loader skipped is listed in ``OUT/failures.jsonl`` (id, video path, reason) and appended to ``failures``
    (:class:`vidlab.outcome.Failure`) when given: the command names them and exits non-zero.

    ``cfg.clip_model`` may be ``"auto"`` (the policy's own CLIP) or ``"none"`` (:func:`resolve_clip_model`).
    A benchmark copy with no usable question is a ``BenchmarkError``, and so is a malformed JSONL line (named by
    its line number) unless ``skip_bad_lines``, which skips such lines into ``problems.jsonl``.

    Every input is validated first (strategies, policy spec, CLIP spec, benchmark copy); then ``cfg.out`` is taken
    (its lock, and the identity check: a folder made with other settings or other data is refused with a
    ``JobIdentityError`` naming what differs), and only then is anything written into it."""
    from vidlab.config import save_resolved
    from vidlab.distributed import open_job
    from vidlab.io import atomic_write_json, atomic_write_text
    from vidlab.understanding.policies import check_policy_spec

    if policy is None:
        check_policy_spec(cfg.policy)
    clip = resolve_clip_model(cfg.clip_model, cfg.policy)  # "auto" / "none" -> a spec or None
    if clip != cfg.clip_model:
        cfg = dataclasses.replace(cfg, clip_model=clip)
    for strategy in cfg.strategies:  # all of them before the first job starts
        check_strategy(strategy, cfg.clip_model)
    if cfg.clip_model:
        from vidlab.clip.models import check_model_spec

        check_model_spec(cfg.clip_model)  # a misspelt CLIP is one line, before any model loads
    out = Path(cfg.out)
    if items is None:
        loaded = load_benchmark(
            cfg.benchmark,
            cfg.data,
            split=cfg.split,
            video_dir=cfg.video_dir,
            limit=cfg.limit,
            skip_bad_lines=skip_bad_lines,
        )
    elif isinstance(items, LoadResult):
        loaded = items
    else:
        loaded = LoadResult(cfg.benchmark, list(items))
    qa = loaded.items if cfg.limit is None else loaded.items[: cfg.limit]
    if not qa:
        from vidlab.understanding.benchmarks import BenchmarkError

        raise BenchmarkError(cfg.data or cfg.benchmark, "no questions to evaluate")
    common = eval_identity(cfg)
    policy_obj: Any = None
    if policy is not None:
        common["policy_object"] = getattr(policy, "name", type(policy).__name__)
    elif cfg.run.backend == "local":
        # in-process: load the model once for every strategy, and before anything is written, so that a
        # model that cannot load is reported without leaving a half-made folder (Ray actors load their own)
        from vidlab.understanding.policies import load_policy

        policy_obj = load_policy(cfg.policy, **(cfg.policy_kwargs or {}))
    summaries: dict[str, dict[str, Any]] = {}
    from vidlab.video.frame_cache import shared_frame_cache

    frame_cache = shared_frame_cache(cfg.frame_cache_mb)
    frame_cache.reset_counts()  # OUT/frame_cache.json: this run's decodes, hits and distinct frames
    with open_job(out, common, overwrite=overwrite):
        save_resolved(cfg, out)
        atomic_write_text(
            out / "problems.jsonl", "".join(json.dumps(dataclasses.asdict(p)) + "\n" for p in loaded.problems)
        )
        use = policy if policy is not None else policy_obj  # None: each Ray worker loads its own
        ran = _run_by_video(qa, cfg, common, use, overwrite, frame_cache.budget_bytes)
        for strategy in cfg.strategies:
            label = strategy_label(strategy)
            summaries[label] = evaluate_items(
                qa,
                cfg.qa_settings(strategy),
                out / label,
                run=cfg.run,
                policy=use,
                identity=strategy_identity(common, strategy),
                overwrite=overwrite and label not in ran,
                ran=ran.get(label),
            )
        if cfg.run.backend == "local":  # Ray actors keep their own caches, in their own processes
            atomic_write_json(out / FRAME_CACHE_JSON, frame_cache.stats.to_dict())
        title = (
            f"{cfg.benchmark}"
            + (f" ({cfg.split})" if cfg.split else "")
            + f", policy {cfg.policy if policy is None else getattr(policy, 'name', '?')}"
        )
        for s in summaries.values():
            s["n_load_problems"] = len(loaded.problems)
        write_report(summaries, out, title)
        failed = eval_failures(out, qa, loaded.problems, list(summaries))
        from vidlab.outcome import write_failures

        write_failures(out / FAILURES, failed)
        if failures is not None:
            failures.extend(failed)
    return summaries


FAILURES = "failures.jsonl"


def eval_failures(
    out: str | Path, qa: Sequence[QAItem], problems: Sequence[Any], labels: Sequence[str]
) -> list[Any]:
    """The failed items of an evaluation in ``out``: each record the loader skipped, then each question that
    failed in any strategy (its video path and the first strategy's reason, naming the strategies where it
    failed in only some)."""
    from vidlab.outcome import Failure

    found = [Failure(p.record, p.reason, p.source) for p in problems]
    ids = [d["id"] for d in job_items(qa, fingerprint_videos=False)]
    where: dict[str, list[str]] = {}
    first: dict[str, dict[str, Any]] = {}
    for label in labels:
        for r in load_results(Path(out) / label, ids=ids):
            if r.get("status") == "error":
                where.setdefault(str(r["id"]), []).append(label)
                first.setdefault(str(r["id"]), r)
    for rid in ids:
        if rid in first:
            r, only = first[rid], where[rid]
            tail = f" (in {', '.join(only)})" if len(only) < len(labels) else ""
            found.append(Failure(rid, f"{r.get('error')}{tail}", str(r.get("video_path") or "")))
    return found
