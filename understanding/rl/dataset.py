"""QA rows -> verl RL parquet rows for the VideoBrain agent loop, validated, bad rows reported.

Sources: the benchmark loaders (``benchmark:NAME:PATH``), a JSONL file of questions (``jsonl:PATH`` or a path
ending ``.jsonl``; ``id``, ``video``, ``question``, ``options``, ``answer``, optional ``question_type`` and
``classification``, as ``vidlab classify`` writes), or any iterable of dicts / ``QAItem`` (e.g. the toy world).

One verl row (what ``verl.utils.dataset.RLHFDataset`` reads and the agent loop consumes):
- ``prompt``: ``[system, user]`` messages exactly as ``vidlab.understanding.protocol.build_initial_messages`` builds them,
  each initial frame written as ``\\nframe {idx}: <image>`` (verl swaps each ``<image>`` for the next image);
- ``images``: the 16 initial frames (``linspace(0, total-1, 16)``, fit into 640x360) as ``{"bytes": PNG}``;
- ``data_source`` (``videobrain``), ``agent_name`` (``videobrain_agent``), ``ability``,
  ``reward_model: {style: rule, ground_truth}`` (the answer letter, or the reference text for open-ended);
- ``extra_info``: ``index``, ``id``, ``question``, ``options``, ``question_type``, ``classification``,
  ``videobrain`` (video path, total frames, fps, initial frames, tools offered) and ``tools_kwargs``
  (``{tool: {create_kwargs: {video, total_frames, fps, initial_frames}}}``), ``need_tools_kwargs``.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vidlab.errors import UserError
from vidlab.understanding import protocol as P
from vidlab.understanding.agents import NUM_INITIAL, UniformAgent
from vidlab.understanding.reward import normalize_class

DATA_SOURCE = "videobrain"
AGENT_NAME = "videobrain_agent"
PLACEHOLDERS = ("<image>", "<video>", "<audio>")


class DatasetSourceError(UserError, ValueError):
    """A dataset source that cannot be read (unknown spec, missing file)."""


class NoUsableRowsError(DatasetSourceError):
    """Every row of a source was unusable: ``bad`` lists each (id, reason), ``problems_path`` the file holding them.
    A command names them and exits "nothing succeeded" (:mod:`vidlab.outcome`)."""

    def __init__(self, message: str, bad: list[dict[str, str]], problems_path: str | None = None):
        super().__init__(message)
        self.bad, self.problems_path = bad, problems_path


@dataclass
class ConvertReport:
    """What a conversion wrote and what it refused (each bad row with its id and the reason)."""

    path: str
    rows: int
    bad: list[dict[str, str]] = field(default_factory=list)
    problems_path: str | None = None
    filtered: int = 0  # rows ``vidlab classify`` labelled filtered: left out by design (no learning signal)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "rows": self.rows,
            "bad": len(self.bad),
            "problems_path": self.problems_path,
            "filtered": self.filtered,
        }


def iter_source(source: Any, video_root: str | os.PathLike | None = None) -> Iterator[Any]:
    """Rows from a source spec (``jsonl:PATH``, ``benchmark:NAME:PATH``, a ``.jsonl`` path) or an iterable.

    A JSONL row's video follows the one path rule (:mod:`vidlab.datafiles`): a relative path resolves under
    ``video_root`` when given, else under the file's folder (``vidlab classify``'s labelled file reads as it was
    written, from any working directory); a benchmark's videos are looked for under ``video_root`` when given."""
    if not isinstance(source, (str, os.PathLike)):
        yield from source
        return
    spec = str(source)
    if spec.startswith("benchmark:"):
        parts = spec.split(":", 2)
        if len(parts) != 3:
            raise DatasetSourceError(f"dataset source {spec!r}: expected benchmark:NAME:PATH")
        from vidlab.understanding.benchmarks import load_benchmark

        result = load_benchmark(parts[1], parts[2], video_dir=video_root)
        for prob in result.problems:
            yield {"__problem__": f"{prob.record}: {prob.reason}"}
        yield from result.items
        return
    path = Path(spec[len("jsonl:") :] if spec.startswith("jsonl:") else spec)
    if path.suffix != ".jsonl" and not spec.startswith("jsonl:"):
        raise DatasetSourceError(
            f"dataset source {spec!r}: use jsonl:PATH, a .jsonl file, or benchmark:NAME:PATH (names: "
            "longvideobench, videomme, mlvu, lvbench, egoschema, jsonl)"
        )
    if not path.is_file():
        raise DatasetSourceError(f"dataset source {spec!r}: no such file {str(path)!r}")
    from vidlab.datafiles import resolve_path

    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            yield {"__problem__": f"{path}:{n}: not JSON ({e.msg})"}
            continue
        if isinstance(row, dict):
            video = row.get("video") or row.get("video_path")
            if isinstance(video, str) and video:
                row = {**row, "video": str(resolve_path(video, path, video_root))}
        yield row


def _field(row: Any, *names: str) -> Any:
    for n in names:
        v = row.get(n) if isinstance(row, dict) else getattr(row, n, None)
        if v is not None:
            return v
    return None


def _png(image: Any) -> bytes:
    from vidlab.understanding.policies.images import to_pil

    buf = io.BytesIO()
    to_pil(image).save(buf, format="PNG")
    return buf.getvalue()


def convert_row(
    row: Any, index: int, tools: tuple[str, ...] = P.TOOL_NAMES, num_initial: int = NUM_INITIAL
) -> dict:
    """One QA row -> one verl row; raises ``ValueError`` naming the reason when the row is unusable."""
    if isinstance(row, dict) and "__problem__" in row:
        raise ValueError(row["__problem__"])
    qid = str(_field(row, "id", "question_id", "uid") or f"row{index}")
    question = _field(row, "question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("empty question")
    options = _field(row, "options", "candidates", "choices")
    options = [str(o) for o in options] if options else None
    qtype = str(_field(row, "question_type") or ("mc" if options else "oe")).lower()
    if qtype not in ("mc", "oe"):
        raise ValueError(f"question_type must be mc or oe, got {qtype!r}")
    answer = _field(row, "answer", "ground_truth")
    if answer is None or str(answer).strip() == "":
        raise ValueError("no answer")
    answer = str(answer).strip()
    if qtype == "mc":
        if not options:
            raise ValueError("multiple-choice question without options")
        if answer not in P.option_letters(len(options)):
            raise ValueError(
                f"answer {answer!r} is not one of the option letters {P.option_letters(len(options))}"
            )
    for text in [question, *(options or [])]:
        for ph in PLACEHOLDERS:
            if ph in text:
                raise ValueError(f"text contains {ph!r}, which verl would read as a media placeholder")
    raw_cls = _field(row, "classification")
    cls = normalize_class(raw_cls)
    if raw_cls not in (None, "") and cls is None:
        raise ValueError(f"unknown classification {raw_cls!r} (direct, adaptive, active)")
    video = _field(row, "video", "video_path")
    if not video:
        raise ValueError("no video path")
    video = str(Path(str(video)).resolve())
    if not os.path.isfile(video):
        raise ValueError(f"video {video!r} not found")
    agent = UniformAgent(video)  # decodes through vidlab.video; VideoReadError names the file and the reason
    frames = agent.initial(num_initial)
    total, fps = int(agent.reader.num_frames), float(agent.reader.fps)
    msgs = P.build_initial_messages(question, frames, total, fps, options, tools=tools)
    user = "".join(p if isinstance(p, str) else "<image>" for p in msgs[1].content)
    initial = [f.index for f in frames]
    create = {"video": video, "total_frames": total, "fps": fps, "initial_frames": initial}
    return {
        "data_source": DATA_SOURCE,
        "agent_name": AGENT_NAME,
        "ability": "video_qa",
        "prompt": [{"role": "system", "content": msgs[0].text}, {"role": "user", "content": user}],
        "images": [{"bytes": _png(f.image)} for f in frames],
        "reward_model": {"style": "rule", "ground_truth": answer},
        "extra_info": {
            "index": int(index),
            "id": qid,
            "question": question,
            "options": options,
            "question_type": qtype,
            "classification": cls,
            "videobrain": {**create, "tools": list(tools)},
            "tools_kwargs": {t: {"create_kwargs": dict(create)} for t in tools},
            "need_tools_kwargs": True,
        },
    }


def convert(
    source: Any,
    out_path: str | os.PathLike,
    *,
    tools: tuple[str, ...] = P.TOOL_NAMES,
    num_initial: int = NUM_INITIAL,
    limit: int | None = None,
    progress: bool | None = None,
    video_root: str | os.PathLike | None = None,
) -> ConvertReport:
    """Convert ``source`` to a verl parquet at ``out_path``; bad rows go to ``<out>.problems.jsonl``
    (``video_root``: see :func:`iter_source`). No usable row at all is a :class:`NoUsableRowsError`."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from tqdm import tqdm

    from vidlab.io import atomic_path, atomic_write_text

    good: list[dict] = []
    bad: list[dict[str, str]] = []
    filtered = 0
    rows: Iterable[Any] = iter_source(source, video_root)
    for i, row in enumerate(tqdm(rows, desc="verl rows", disable=progress is False, leave=False)):
        if limit is not None and len(good) >= limit:
            break
        if is_filtered(row):
            filtered += 1
            continue
        try:
            good.append(convert_row(row, len(good), tools, num_initial))
        except Exception as e:  # noqa: BLE001 - every unusable row is reported, never fatal
            rid = (
                str(_field(row, "id", "question_id", "uid") or f"row{i}")
                if not isinstance(row, str)
                else f"row{i}"
            )
            bad.append(
                {"id": rid, "reason": f"{type(e).__name__}: {e}" if not isinstance(e, ValueError) else str(e)}
            )
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    problems = out.with_name(out.name + ".problems.jsonl")
    if bad:
        atomic_write_text(problems, "".join(json.dumps(b) + "\n" for b in bad))
    elif problems.exists():
        problems.unlink()
    if not good:
        raise NoUsableRowsError(
            f"no usable rows in {source!r}"
            + (f"; first problem: {bad[0]['id']}: {bad[0]['reason']} (all in {problems})" if bad else ""),
            bad,
            str(problems) if bad else None,
        )
    with atomic_path(out) as tmp:
        pq.write_table(pa.Table.from_pylist(good), tmp)
    return ConvertReport(str(out), len(good), bad, str(problems) if bad else None, filtered)


def is_filtered(row: Any) -> bool:
    """A row ``vidlab classify`` labelled ``filtered`` (neither view ever answered it): no learning signal, so
    the trainers leave it out, by design and not as a failure."""
    value = _field(row, "classification")
    return isinstance(value, str) and value.strip().lower() == "filtered"


def read_back(
    path: str | os.PathLike, processor: Any, max_prompt_length: int = 32768, **data_config: Any
) -> Any:
    """Open a converted parquet with verl's own ``RLHFDataset`` (what the trainer uses)."""
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    cfg = OmegaConf.create(
        {
            "max_prompt_length": max_prompt_length,
            "filter_overlong_prompts": True,
            # None: datasets filters in this process (1 still starts a one-process pool, which hung once under
            # pytest-xdist before commit 2b5f8cf, 2026-12-02: a fork deadlock in datasets' multiprocess manager)
            "filter_overlong_prompts_workers": None,
            "cache_dir": data_config.pop("cache_dir", None) or str(Path(path).parent / ".verl-cache"),
            **data_config,
        }
    )
    return RLHFDataset(data_files=[str(path)], tokenizer=processor.tokenizer, processor=processor, config=cfg)
