"""Data classification ("dual view"): label each training sample Direct, Adaptive, Active, or filtered.

The authors' exact rule is not public; ours (documented in understanding/README.md): the policy answers the
question ``k`` times (temperature sampling) from the **initial view** (the 16 initial frames) and ``k`` times from a
**richer view** (more uniform frames plus CLIP frames retrieved with the question as the query), each in one
turn with no tools. With ``p0``/``p1`` the mean accuracy of the two views:

1. ``p0 == 0 and p1 == 0``        -> filtered  (neither view ever solves it: no learning signal)
2. ``p0 >= direct_min``            -> direct    (the initial frames are sufficient)
3. ``p1 - p0 >= active_gain``      -> active    (more visual information is genuinely required)
4. otherwise                       -> adaptive  (a capability gap; either strategy may help)

Rows are JSONL dicts in and out; the label goes into ``classification`` with the evidence in
``classification_info``. Output is appended a row at a time, so a rerun skips finished rows (by ``id``, or a
hash of video + question); failures go to ``<out>.errors.jsonl`` and are retried on the next run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from understanding import protocol as P
from understanding.agents import ClipAgent, UniformAgent, linspace_frames
from understanding.judge import Judge, load_judge
from understanding.messages import Policy
from understanding.reward import ground_truth_letter

log = logging.getLogger(__name__)


@dataclass
class ClassifyConfig:
    """How the two views are built and sampled, and the labelling thresholds."""

    k: int = 4  # samples per view
    temperature: float = 1.0
    max_new_tokens: int = 512
    seed: int = 0
    num_initial_frames: int = 16
    rich_uniform_frames: int = 32  # the richer view: this many uniform frames ...
    rich_clip_frames: int = (
        8  # ... plus the top CLIP frames for the question (0 disables; needs a CLIP model)
    )
    direct_min: float = 0.75
    active_gain: float = 0.5
    drop_filtered: bool = False  # keep filtered rows (labelled "filtered") unless asked to drop them


class ClassifyError(ValueError):
    """A dataset row that cannot be classified; names the row and the reason."""

    def __init__(self, row_id: str, reason: str):
        super().__init__(f"row {row_id}: {reason}")
        self.row_id = row_id
        self.reason = reason

    def __reduce__(self):
        return (type(self), (self.row_id, self.reason))


def label_from_accuracy(p0: float, p1: float, config: ClassifyConfig | None = None) -> tuple[str, str]:
    """The labelling rule on initial-view accuracy ``p0`` and richer-view accuracy ``p1``; returns (label, why)."""
    c = config or ClassifyConfig()
    if p0 <= 0.0 and p1 <= 0.0:
        return "filtered", "neither view answered correctly"
    if p0 >= c.direct_min:
        return "direct", f"initial view accuracy {p0:.2f} >= {c.direct_min}"
    if p1 - p0 >= c.active_gain:
        return "active", f"richer view gains {p1 - p0:.2f} >= {c.active_gain}"
    return "adaptive", f"mixed: initial {p0:.2f}, richer {p1:.2f}"


def row_id(row: dict) -> str:
    """A row's id: its ``id`` field, else a hash of video and question."""
    if row.get("id") is not None:
        return str(row["id"])
    key = json.dumps([str(row.get("video") or row.get("video_path")), row.get("question")], sort_keys=True)
    return hashlib.sha1(key.encode()).hexdigest()[:16]


def _video_path(row: dict, video_root: str | os.PathLike | None) -> str:
    v = row.get("video_path") or row.get("video")
    if not v:
        raise ClassifyError(row_id(row), "no 'video' or 'video_path' field")
    p = Path(str(v))
    if not p.is_absolute() and video_root is not None:
        p = Path(video_root) / p
    return str(p)


def _score_samples(
    texts: Sequence[str], row: dict, options: list[str] | None, judge: Judge | None
) -> tuple[list[float], list[str | None]]:
    """Correctness of each sampled one-turn answer (a tool call or malformed output counts as wrong)."""
    gt = row.get("answer")
    scores, answers = [], []
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
    """Classifies one row at a time (one reader per row, CLIP agent built per video when configured)."""

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

    def classify(self, row: dict, video_root: Any) -> dict:
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
        path = _video_path(row, video_root)
        c = self.config
        with open_video(path) as reader:
            uniform = UniformAgent(reader)
            total = int(reader.num_frames)
            init_frames = uniform.initial(c.num_initial_frames)
            rich_idx = set(linspace_frames(0, total, c.rich_uniform_frames))
            clip = self._clip_agent(path, reader)
            if clip is not None:
                rich_idx.update(clip.indices(0, total, question))
            rich_frames = uniform.frames(sorted(rich_idx))
            seed = c.seed + int(hashlib.sha1(rid.encode()).hexdigest()[:6], 16)
            init_texts = self._answers(init_frames, question, options, reader, seed)
            rich_texts = self._answers(rich_frames, question, options, reader, seed + 1)
        s0, a0 = _score_samples(init_texts, row, options, self.judge)
        s1, a1 = _score_samples(rich_texts, row, options, self.judge)
        p0, p1 = sum(s0) / len(s0), sum(s1) / len(s1)
        label, why = label_from_accuracy(p0, p1, c)
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
        return out


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    if not path.exists():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a torn last line from an interrupted run
            continue
    return rows


def _append(path: Path, record: dict) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def classify_rows(
    rows: Iterable[dict],
    policy: Policy,
    *,
    config: ClassifyConfig | None = None,
    clip_model: Any = None,
    index_cache_dir: str | os.PathLike | None = None,
    judge: Judge | None = None,
    out_path: str | os.PathLike | None = None,
    video_root: str | os.PathLike | None = None,
    progress: bool = True,
    errors: list[dict] | None = None,
) -> list[dict]:
    """Label every row; with ``out_path`` append each labelled row there and skip rows already in it.

    Returns the labelled rows (filtered ones included unless ``config.drop_filtered``). Rows that fail (missing
    video, undecodable file, no options for a multiple-choice question) are logged to ``<out>.errors.jsonl``
    and appended to ``errors`` when given; the run goes on.
    """
    cfg = config or ClassifyConfig()
    if cfg.k < 1:
        raise ValueError(f"ClassifyConfig.k must be >= 1, got {cfg.k}")
    out = Path(out_path) if out_path is not None else None
    err_path = out.with_name(out.name + ".errors.jsonl") if out is not None else None
    done: dict[str, dict] = {}
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        done = {str(r.get("id")): r for r in _read_jsonl(out)}
    worker = _Classifier(policy, cfg, clip_model, index_cache_dir, judge)
    rows = list(rows)
    results: list[dict] = []
    iterator: Iterable[dict] = rows
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(rows, desc="classify", unit="row")
    for row in iterator:
        rid = row_id(row)
        if rid in done:
            labelled = done[rid]
        else:
            try:
                labelled = worker.classify(row, video_root)
            except Exception as e:  # noqa: BLE001 - record and go on; the reason names the row
                record = {"id": rid, "error": f"{type(e).__name__}: {e}"}
                if err_path is not None:
                    _append(err_path, record)
                if errors is not None:
                    errors.append(record)
                log.warning("classify: %s: %s", rid, record["error"])
                continue
            if out is not None:
                _append(out, labelled)
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
