"""Data classification ("dual view"): label each training sample Direct, Adaptive, Active, or filtered.

The authors' exact rule is not public; ours (documented in understanding/README.md): the policy answers the
question ``k`` times (temperature sampling) from the **initial view** (the 16 initial frames) and ``k`` times from a
**richer view** (more uniform frames plus CLIP frames retrieved with the question as the query), each in one
turn with no tools. With ``initial_views = V > 1`` the initial view is asked ``V`` times: the reference grid
``linspace(0, total-1, 16)`` and ``V - 1`` copies of it shifted by ``v/V`` of its stride (the last frame
wrapping to the start; ``k`` samples each), so
that an answer only the exact 16 frames give -- a lucky guess from incidental content, right on every sample
because the policy is confident -- does not make the row Direct. With ``p0`` the mean accuracy over all initial
views, ``min0`` the lowest per-view accuracy (``p0`` itself for one view) and ``p1`` the richer view's:

1. ``p0 == 0 and p1 == 0``        -> filtered  (neither view ever solves it: no learning signal)
2. ``min0 >= direct_min``          -> direct    (the initial frames are sufficient, whichever grid is drawn)
3. ``p1 - p0 >= active_gain``      -> active    (more visual information is genuinely required)
4. otherwise                       -> adaptive  (a capability gap; either strategy may help)

Rows are JSONL dicts in and out; the label goes into ``classification`` with the evidence in
``classification_info``. With an output file the rows run as a ``vidlab.distributed.run_job`` in
``<out>.job/`` (resumable by row ``id``, or a hash of video + question; locked; identity-checked), and the
labelled rows and the failures (``<out>.errors.jsonl``, retried on the next run) are written atomically.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from vidlab.errors import UserError
from vidlab.understanding import protocol as P
from vidlab.understanding.agents import ClipAgent, UniformAgent, linspace_frames
from vidlab.understanding.config import ClassifyConfig
from vidlab.understanding.judge import Judge, load_judge
from vidlab.understanding.messages import Policy
from vidlab.understanding.reward import ground_truth_letter

log = logging.getLogger(__name__)


class ClassifyError(UserError, ValueError):
    """A dataset row that cannot be classified; names the row and the reason."""

    def __init__(self, row_id: str, reason: str):
        super().__init__(f"row {row_id}: {reason}")
        self.row_id = row_id
        self.reason = reason

    def __reduce__(self):
        return (type(self), (self.row_id, self.reason))


def label_from_accuracy(
    p0: float, p1: float, config: ClassifyConfig | None = None, per_view: Sequence[float] | None = None
) -> tuple[str, str]:
    """The labelling rule on initial-view accuracy ``p0`` (mean over the initial views), richer-view accuracy
    ``p1`` and the accuracy of each initial view (``per_view``; default ``[p0]``); returns (label, why)."""
    c = config or ClassifyConfig()
    views = list(per_view) if per_view else [p0]
    if p0 <= 0.0 and p1 <= 0.0:
        return "filtered", "neither view answered correctly"
    if min(views) >= c.direct_min:
        if len(views) == 1:
            return "direct", f"initial view accuracy {p0:.2f} >= {c.direct_min}"
        return "direct", f"every initial view's accuracy >= {c.direct_min} (lowest {min(views):.2f})"
    if p1 - p0 >= c.active_gain:
        return "active", f"richer view gains {p1 - p0:.2f} >= {c.active_gain}"
    if len(views) > 1 and p0 >= c.direct_min:
        return "adaptive", f"initial views disagree ({', '.join(f'{v:.2f}' for v in views)}), richer {p1:.2f}"
    return "adaptive", f"mixed: initial {p0:.2f}, richer {p1:.2f}"


def label_from_looks(
    per_view: Sequence[float],
    p_one: float,
    p_two: float,
    config: ClassifyConfig | None = None,
) -> tuple[str, str, int | None]:
    """The labelling rule with a richer view of *two looks*, for worlds where one call is not enough.

    ``per_view``: accuracy on each initial view; ``p_one``: the best accuracy over views of the initial frames plus
    one call; ``p_two``: accuracy on the initial frames plus two looks (a coarse call, then a zoom on what it
    found). The richer view is the two-look one, so a question only two looks answer is Active, not filtered;
    ``looks`` says how many looks the question needs (0 for Direct, 1 when some one-call view already gains
    ``active_gain``, 2 when only the two-look view does; None for filtered or Adaptive). Returns (label, why,
    looks)."""
    c = config or ClassifyConfig()
    p0 = sum(per_view) / max(1, len(per_view))
    label, why = label_from_accuracy(p0, max(p_one, p_two), c, per_view)
    if label == "filtered":
        return label, "no view answered correctly (initial, one look, two looks)", None
    if label == "direct":
        return label, why, 0
    if label == "active":
        if p_one - p0 >= c.active_gain:
            return label, f"one look gains {p_one - p0:.2f} >= {c.active_gain}", 1
        return label, f"one look gains {p_one - p0:.2f}, two looks {p_two - p0:.2f} >= {c.active_gain}", 2
    return label, why, None


def initial_view_indices(total: int, n: int, views: int = 1) -> list[list[int]]:
    """The frame indices of the initial views: ``linspace(0, total-1, n)`` and ``views - 1`` copies shifted by
    ``v / views`` of the grid's stride; a frame shifted past the end wraps to the start (so a shifted grid never
    repeats the reference's last frame); sorted, de-duplicated."""
    base = linspace_frames(0, total, n)
    out = [base]
    stride = (total - 1) / max(1, n - 1)
    for v in range(1, views):
        shift = int(round(v * stride / views))
        out.append(sorted({(i + shift) % total for i in base}))
    return out


def row_id(row: dict) -> str:
    """A row's id: its ``id`` field, else a hash of video and question."""
    if row.get("id") is not None:
        return str(row["id"])
    key = json.dumps([str(row.get("video") or row.get("video_path")), row.get("question")], sort_keys=True)
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def _video_key(row: dict) -> str | None:
    return "video_path" if row.get("video_path") else "video" if row.get("video") else None


def _video_path(
    row: dict, video_root: str | os.PathLike | None, data_file: str | os.PathLike | None = None
) -> str:
    """The row's video by the one path rule (:mod:`vidlab.datafiles`): absolute as is, a relative one under
    ``video_root`` when given, else under the data file's folder (else the working directory: rows built in code)."""
    from vidlab.datafiles import resolve_path

    key = _video_key(row)
    if key is None:
        raise ClassifyError(row_id(row), "no 'video' or 'video_path' field")
    return str(resolve_path(str(row[key]), data_file, video_root))


def _rebased(row: dict, video_root: Any, data_file: Any, out: Path) -> dict:
    """``row`` as written to ``out``: a relative video path rewritten relative to ``out``'s folder, so the labelled
    file resolves by the same rule from wherever it is read (``vidlab train-agent``, ``vidlab eval-qa``)."""
    from vidlab.datafiles import relative_to_file

    key = _video_key(row)
    if key is None or Path(str(row[key])).expanduser().is_absolute():
        return row
    return {**row, key: relative_to_file(_video_path(row, video_root, data_file), out)}


def _score_samples(
    texts: Sequence[str], row: dict, options: list[str] | None, judge: Judge | None
) -> tuple[list[float], list[str | None]]:
    """Correctness of each sampled one-turn answer (a tool call or malformed output counts as wrong)."""
    gt = row.get("answer")
    scores: list[float] = []
    answers: list[str | None] = []
    letters = P.option_letters(len(options)) if options else []
    gt_letter = ground_truth_letter(gt, letters, options) if options else None
    for t in texts:
        parsed = P.parse_assistant_turn(t)
        ans = parsed.answer if parsed.ok else None
        if ans is None:
            scores.append(0.0)
            answers.append(None)
            continue
        if options:
            letter, _ = P.extract_choice(ans, letters, options)
            scores.append(1.0 if letter is not None and letter == gt_letter else 0.0)
            answers.append(letter)
        else:
            judge = judge or load_judge()
            scores.append(float(judge.score(str(row.get("question", "")), str(gt), ans)))
            answers.append(ans)
    return scores, answers


class _Classifier:
    """Classifies one row at a time (one reader per row, CLIP agent built per video when configured); frames go
    through ``frame_cache`` (``vidlab.video.frame_cache``) when set, so the rows of a video share them."""

    frame_cache: Any = None

    def __init__(
        self, policy: Policy, config: ClassifyConfig, clip_model: Any, index_cache_dir: Any, judge: Any
    ):
        self.policy, self.config, self.clip_model = policy, config, clip_model
        self.index_cache_dir, self.judge = index_cache_dir, judge

    def _clip_agent(self, video_path: str, reader: Any) -> ClipAgent | None:
        if not self.config.rich_clip_frames or self.clip_model is None:
            return None
        if self.index_cache_dir is not None:
            from vidlab.clip import FrameIndex, Sampling

            idx = FrameIndex.build(
                video_path, self.clip_model, Sampling.fps(1.0), cache_dir=self.index_cache_dir
            )
            return ClipAgent(
                idx, self.clip_model, parity=True, reader=reader, num_frames=self.config.rich_clip_frames
            )
        return ClipAgent(reader, self.clip_model, parity=True, num_frames=self.config.rich_clip_frames)

    def _answers(
        self, frames: list, question: str, options: list[str] | None, reader: Any, seed: int
    ) -> list[str]:
        msgs = P.build_initial_messages(
            question, frames, int(reader.num_frames), float(reader.fps), options, tools=()
        )
        c = self.config
        return self.policy.generate(
            msgs, num_samples=c.k, temperature=c.temperature, max_new_tokens=c.max_new_tokens, seed=seed
        )

    def classify(self, row: dict, video_root: Any, data_file: Any = None) -> dict:
        from vidlab.video import open_video

        rid = row_id(row)
        question = row.get("question")
        if not isinstance(question, str) or not question.strip():
            raise ClassifyError(rid, "no question")
        if row.get("answer") is None:
            raise ClassifyError(rid, "no answer (the ground truth is needed to classify)")
        options = row.get("options") or row.get("candidates")
        qtype = str(row.get("question_type") or ("mc" if options else "oe")).lower()
        if qtype == "mc" and not options:
            raise ClassifyError(rid, "multiple-choice question without options")
        options = [str(o) for o in options] if options else None
        path = _video_path(row, video_root, data_file)
        c = self.config
        opened: Any = open_video(path)
        if self.frame_cache is not None:
            from vidlab.video.frame_cache import CachedReader, video_key

            opened = CachedReader(opened, self.frame_cache, video_key(path))
        with opened as reader:
            uniform = UniformAgent(reader)
            total = int(reader.num_frames)
            init_idx = initial_view_indices(total, c.num_initial_frames, c.initial_views)
            rich_idx = set(linspace_frames(0, total, c.rich_uniform_frames))
            clip = self._clip_agent(path, reader)
            if clip is not None:
                rich_idx.update(clip.indices(0, total, question))
            rich_frames = uniform.frames(sorted(rich_idx))
            seed = c.seed + int(hashlib.sha1(rid.encode()).hexdigest()[:6], 16)
            init_frames = uniform.initial(c.num_initial_frames)  # view 0: the reference's initial view
            init_texts = [self._answers(init_frames, question, options, reader, seed)]
            rich_texts = self._answers(rich_frames, question, options, reader, seed + 1)
            for v, idx in enumerate(init_idx[1:], start=1):
                frames = uniform.frames(idx)
                init_texts.append(self._answers(frames, question, options, reader, seed + 1 + v))
        scored = [_score_samples(t, row, options, self.judge) for t in init_texts]
        s0, a0 = scored[0]
        s1, a1 = _score_samples(rich_texts, row, options, self.judge)
        per_view = [sum(s) / len(s) for s, _ in scored]
        p0, p1 = sum(per_view) / len(per_view), sum(s1) / len(s1)
        label, why = label_from_accuracy(p0, p1, c, per_view)
        out = dict(row)
        out["id"] = rid
        out["classification"] = label
        out["classification_info"] = {
            "acc_initial": round(p0, 4),
            "acc_rich": round(p1, 4),
            "k": c.k,
            "why": why,
            "initial_frames": len(init_frames),
            "rich_frames": len(rich_frames),
            "initial_answers": a0,
            "rich_answers": a1,
        }
        if len(init_idx) > 1:  # the shifted initial views (acc_initial is then the mean over all of them)
            out["classification_info"]["acc_initial_views"] = [round(p, 4) for p in per_view]
            out["classification_info"]["initial_views_answers"] = [a for _, a in scored[1:]]
        return out


class ClassifyWorker:
    """``vidlab.distributed.run_job`` worker: one row in, the labelled row out (policy loaded once).

    ``policy``/``clip_model``/``judge`` may be spec strings (loaded here, once per worker, as Ray actors
    need) or ready objects (the in-process backend)."""

    def __init__(
        self,
        policy: Any,
        config: dict[str, Any] | ClassifyConfig | None = None,
        clip_model: Any = None,
        index_cache_dir: Any = None,
        judge: Any = None,
        video_root: Any = None,
        policy_kwargs: dict[str, Any] | None = None,
        data_file: Any = None,
        frame_cache_mb: int | None = None,
    ):
        if isinstance(policy, str):
            from vidlab.understanding.policies import load_policy

            policy = load_policy(policy, **(policy_kwargs or {}))
        if isinstance(clip_model, str):
            from vidlab.clip import load_model

            clip_model = load_model(clip_model)
        if judge is None or isinstance(judge, str):
            judge = load_judge(judge)
        if not isinstance(config, ClassifyConfig):
            from vidlab.config import from_dict

            config = from_dict(ClassifyConfig, dict(config or {}), where="classify.")
        self.video_root, self.data_file = video_root, data_file
        self.classifier = _Classifier(policy, config, clip_model, index_cache_dir, judge)
        from vidlab.video.frame_cache import shared_frame_cache

        self.classifier.frame_cache = shared_frame_cache(frame_cache_mb)

    def process(self, item: dict[str, Any]) -> dict[str, Any]:
        return self.classifier.classify(item["row"], self.video_root, self.data_file)


def _name(obj: Any) -> Any:
    if obj is None or isinstance(obj, str):
        return obj
    return getattr(obj, "name", None) or getattr(obj, "spec", None) or type(obj).__name__


def job_dir_for(out_path: str | os.PathLike) -> Path:
    """The job folder behind an output file: ``labelled.jsonl`` -> ``labelled.jsonl.job/``."""
    out = Path(out_path)
    return out.with_name(out.name + ".job")


def classify_identity(
    config: ClassifyConfig,
    policy: Any,
    *,
    clip_model: Any = None,
    judge: Any = None,
    video_root: Any = None,
    inputs: dict[str, Any] | None = None,
    rows: Sequence[dict] | None = None,
) -> dict[str, Any]:
    """What decides a label: the classification settings (less ``drop_filtered``, an output filter), the
    policy, CLIP model, judge and video root, and the content of the rows (``inputs``: the data file's
    fingerprint; else a hash of ``rows``). Each row's video is fingerprinted into its job item."""
    from vidlab.distributed import make_identity

    settings = asdict(config)
    settings.pop("drop_filtered", None)
    if (
        settings.get("initial_views") == 1
    ):  # the default (one initial view): jobs from before the setting resume
        settings.pop("initial_views")
    if inputs is None:
        blob = json.dumps(list(rows or []), sort_keys=True, default=str).encode()
        inputs = {"rows": hashlib.sha256(blob).hexdigest()}
    return make_identity(
        {"classify": settings},
        inputs,
        command="classify",
        policy=_name(policy),
        clip_model=_name(clip_model),
        judge=_name(judge) or "rule",
        video_root=str(video_root) if video_root is not None else None,
    )


def classify_rows(
    rows: Iterable[dict],
    policy: Policy | str,
    *,
    config: ClassifyConfig | None = None,
    clip_model: Any = None,
    index_cache_dir: str | os.PathLike | None = None,
    judge: Judge | str | None = None,
    out_path: str | os.PathLike | None = None,
    video_root: str | os.PathLike | None = None,
    progress: bool = True,
    errors: list[dict] | None = None,
    identity: dict[str, Any] | None = None,
    policy_kwargs: dict[str, Any] | None = None,
    data_file: str | os.PathLike | None = None,
    frame_cache_mb: int | None = None,
) -> list[dict]:
    """Label every row; returns the labelled rows in input order (filtered ones unless ``config.drop_filtered``).

    Rows run grouped by video, and the frames shown go through a bounded cache of ``frame_cache_mb`` MB
    (``vidlab.video.frame_cache``; None: sized to the machine, 0: off), so each frame is decoded once per run.

    Video paths follow the one path rule (:mod:`vidlab.datafiles`): a relative one resolves under ``video_root``
    when given, else under the folder of ``data_file`` (the file the rows came from). With ``data_file`` and
    ``out_path``, the labelled rows name their videos relative to ``out_path``'s folder, so the labelled file
    feeds ``vidlab train-agent`` or ``vidlab eval-qa`` from wherever it is read.

    With ``out_path`` the work runs as a ``vidlab.distributed.run_job`` in ``<out>.job/`` (resumable: a rerun
    skips finished rows; locked: a concurrent run into the same output refuses; identity-checked: a rerun with
    other settings or other rows refuses, naming what differs), then the labelled rows are written to
    ``out_path`` and the failures to ``<out>.errors.jsonl``, each atomically. Rows that fail (missing video,
    undecodable file, no options for a multiple-choice question) are recorded with their reason and appended
    to ``errors`` when given; the run goes on.
    """
    from vidlab.distributed import RunConfig, run_job
    from vidlab.io import atomic_write_text

    cfg = config or ClassifyConfig()
    rows = list(rows)
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for row in rows:
        rid = row_id(row)
        if rid in seen:
            raise ClassifyError(rid, "duplicate row id (ids must be unique so reruns can resume)")
        seen.add(rid)
        items.append({"id": rid, "row": row})
    worker_kwargs = {
        "policy": policy,
        "config": cfg,
        "clip_model": clip_model,
        "index_cache_dir": index_cache_dir,
        "judge": judge,
        "video_root": video_root,
        "policy_kwargs": policy_kwargs,
        "data_file": data_file,
        "frame_cache_mb": frame_cache_mb,
    }
    ids = [it["id"] for it in items]  # the output's order
    items = _group_by_video(items, video_root, data_file)
    if out_path is None:
        done = {r["id"]: r for r in _classify_in_memory(items, worker_kwargs, cfg, progress, errors)}
        return [done[i] for i in ids if i in done]
    from vidlab.identity import fingerprint_or_none

    for it in items:
        try:
            it["video_sha256"] = fingerprint_or_none(_video_path(it["row"], video_root, data_file))
        except ClassifyError:
            it["video_sha256"] = None
    out = Path(out_path)
    ident = identity or classify_identity(
        cfg, policy, clip_model=clip_model, judge=judge, video_root=video_root, rows=rows
    )
    job_dir = job_dir_for(out)
    run_job(
        items,
        ClassifyWorker,
        job_dir,
        run=RunConfig(retries=0),
        worker_kwargs=worker_kwargs,
        desc="classify",
        progress=progress,
        identity=ident,
    )
    from vidlab.distributed import error_text, read_job

    job = read_job(job_dir, ids=ids)
    results = [job.ok[i] for i in ids if i in job.ok]
    by_id = {it["id"]: it["row"] for it in items}
    failed = [
        _failure(rid, by_id[rid], error_text(job.failed.get(rid, {})), video_root, data_file)
        for rid in ids
        if rid not in job.ok
    ]
    if errors is not None:
        errors.extend(failed)
    elif failed:  # a caller that does not collect them still hears of them
        log.warning(
            "classify: %d of %d row(s) failed (first: %s: %s); all in %s",
            len(failed), len(items), failed[0]["id"], failed[0]["error"], errors_path(out),
        )  # fmt: skip
    if cfg.drop_filtered:
        results = [r for r in results if r.get("classification") != "filtered"]
    if data_file is not None:
        results = [_rebased(r, video_root, data_file, out) for r in results]
    atomic_write_text(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in results))
    err_path = errors_path(out)
    if failed:
        atomic_write_text(err_path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in failed))
    elif err_path.exists():
        err_path.unlink()
    return results


def _group_by_video(items: list[dict[str, Any]], video_root: Any, data_file: Any) -> list[dict[str, Any]]:
    """``items`` with each video's rows together (videos in order of first appearance): the rows of a video
    then share its decoded frames."""
    first: dict[str, int] = {}
    keys = []
    for it in items:
        try:
            v = _video_path(it["row"], video_root, data_file)
        except ClassifyError:
            v = ""
        keys.append(first.setdefault(v, len(first)))
    return [items[n] for n in sorted(range(len(items)), key=lambda n: (keys[n], n))]


def errors_path(out_path: str | os.PathLike) -> Path:
    """Where the rows that failed are listed (id, video path, reason): ``labelled.jsonl.errors.jsonl``."""
    out = Path(out_path)
    return out.with_name(out.name + ".errors.jsonl")


def _failure(rid: str, row: dict, error: str, video_root: Any, data_file: Any) -> dict[str, str]:
    """A failed row's record: id, the video it was about (as resolved; empty when it names none), the reason."""
    try:
        path = _video_path(row, video_root, data_file)
    except ClassifyError:
        path = ""
    return {"id": rid, "path": path, "error": error}


def _classify_in_memory(
    items: list[dict], worker_kwargs: dict[str, Any], cfg: ClassifyConfig, progress: bool, errors: Any
) -> list[dict]:
    worker = ClassifyWorker(**worker_kwargs)
    iterator: Iterable[dict] = items
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(items, desc="classify", unit="row")
    results = []
    for it in iterator:
        try:
            labelled = worker.process(it)
        except Exception as e:  # noqa: BLE001 - record and go on; the reason names the row
            record = _failure(
                it["id"], it["row"], f"{type(e).__name__}: {e}", worker.video_root, worker.data_file
            )
            if errors is not None:
                errors.append(record)
            log.warning("classify: %s: %s", it["id"], record["error"])
            continue
        if cfg.drop_filtered and labelled.get("classification") == "filtered":
            continue
        results.append(labelled)
    return results


def summarize(rows: Sequence[dict]) -> dict[str, Any]:
    """Counts per label, for the CLI's summary line."""
    counts: dict[str, int] = {}
    for r in rows:
        label = str(r.get("classification"))
        counts[label] = counts.get(label, 0) + 1
    return {"rows": len(rows), "labels": counts}


def config_dict(config: ClassifyConfig) -> dict[str, Any]:
    return asdict(config)
