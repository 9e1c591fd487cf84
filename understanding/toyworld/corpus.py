"""A benchmark-sized corpus of the toy world: LVBench-shaped (tens of videos of 20-60 minutes, 10+ questions each).

``build_corpus(root)`` renders ``CorpusConfig.videos`` videos of the where-to-look world at 1 fps, between
``min_frames`` and ``max_frames`` frames (1200-3600: 20 to 60 minutes), under ``root/videos/``, and writes their
questions to ``root/questions.jsonl`` (the JSONL ``vidlab eval-qa --benchmark jsonl`` reads). Each video gets the
world's own questions (``static``, ``needle``, ``count``, ``distractor``, ``twolook``; see
:mod:`vidlab.understanding.toyworld.world`) plus ``extra_counts`` questions of a sixth kind, ``count_any``: "How many
circles appear between frame a and frame b?" over other intervals of the world's count-interval length, where the
answer counts every circle shown there (fillers included). Such an interval is only asked when no circle straddles
its ends, at most three circles lie inside, and consecutive circles are at least ``count_event`` frames apart, so
that the answer is one of the options and runs of frames can tell circles apart.

Rendering is cached: a rerun with the same configuration reuses every video already on disk and rewrites nothing
(``root/corpus.json`` records the configuration and seeds; another configuration is refused, not mixed in).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vidlab.errors import UserError
from vidlab.understanding.toyworld.world import (
    COUNT_WORDS,
    VideoSpec,
    WorldConfig,
    questions,
    video_spec,
    world_config,
    write_video,
)

CORPUS_SEED_OFFSET = 300_000  # disjoint from the train / val / test splits' seeds (0, 100,000, 200,000)
COUNT_ANY = "count_any"


def _corpus_world() -> dict[str, Any]:
    return asdict(world_config("where", min_frames=1200, max_frames=3600))


@dataclass
class CorpusConfig:
    """How many videos, how long, and how many extra count questions per video (defaults: the full corpus)."""

    videos: int = 50
    extra_counts: int = 6  # count_any questions per video, on top of the world's five
    base_seed: int = 0
    world: dict[str, Any] = field(default_factory=_corpus_world)  # WorldConfig fields

    def world_config(self) -> WorldConfig:
        return WorldConfig(**self.world)

    def seeds(self) -> list[int]:
        start = CORPUS_SEED_OFFSET + 1000 * int(self.base_seed)
        return list(range(start, start + int(self.videos)))


def quick_config(videos: int = 3, min_frames: int = 900, max_frames: int = 1200) -> CorpusConfig:
    """A small corpus for smoke runs and tests: few, short videos, the same kinds of questions."""
    return CorpusConfig(
        videos=videos, world=asdict(world_config("where", min_frames=min_frames, max_frames=max_frames))
    )


def count_any_intervals(spec: VideoSpec, k: int, length: int, min_gap: int) -> list[tuple[int, int, int]]:
    """Up to ``k`` intervals ``(a, b, count)`` of ``length`` frames, apart from the world's own count interval and
    starting at least ``length / 4`` frames from one another, each holding 0-3 whole circles (none straddling an end, consecutive ones >= ``min_gap`` apart).
    Seeded by the video's seed: the same video always gets the same questions."""
    rng = np.random.default_rng([spec.seed, 6151])
    n = spec.num_frames
    circles = [(e.start, e.end) for e in spec.events if e.shape == "circle"]
    planted = spec.count_interval
    out: list[tuple[int, int, int]] = []
    length = min(length, n // 2)
    for _ in range(2000):
        if len(out) >= k or n - length <= 0:
            break
        a = int(rng.integers(0, n - length + 1))
        b = a + length
        if a < planted[1] and planted[0] < b or any(abs(a - a2) < length // 4 for a2, _, _ in out):
            continue
        if any(s < a < e or s < b < e for s, e in circles):
            continue
        inside = sorted((s, e) for s, e in circles if a <= s and e <= b)
        if len(inside) >= len(COUNT_WORDS):
            continue
        if any(s2 - e1 < min_gap for (_, e1), (s2, _) in zip(inside, inside[1:])):
            continue
        out.append((a, b, len(inside)))
    return sorted(out)


def corpus_questions(spec: VideoSpec, video: str, cfg: CorpusConfig) -> list[dict[str, Any]]:
    """The world's questions of one video plus its ``count_any`` questions, as eval-qa JSONL rows."""
    rows = questions(spec, video)
    wc = cfg.world_config()
    for j, (a, b, count) in enumerate(
        count_any_intervals(spec, cfg.extra_counts, wc.count_interval, wc.count_event)
    ):
        rows.append(
            {
                "id": f"toy{spec.seed:05d}-{COUNT_ANY}{j}",
                "video": video,
                "question": f"How many circles appear between frame {a} and frame {b}?",
                "options": list(COUNT_WORDS),
                "answer": chr(65 + count),
                "question_type": "mc",
                "category": COUNT_ANY,
                "duration": round(spec.num_frames / spec.fps, 1),
            }
        )
    return rows


@dataclass
class Corpus:
    """A corpus on disk: its folder, configuration, seeds and question rows."""

    root: Path
    config: CorpusConfig
    seeds: list[int]
    rows: list[dict[str, Any]]
    rendered: int  # videos rendered by this call (0: all reused)

    @property
    def jsonl(self) -> Path:
        return self.root / "questions.jsonl"

    def frames(self) -> dict[int, int]:
        """{seed: number of frames} (from the world's spec: no decoding)."""
        wc = self.config.world_config()
        return {s: video_spec(s, wc).num_frames for s in self.seeds}


class CorpusMismatchError(UserError, ValueError):
    """The folder holds a corpus made with another configuration."""


def build_corpus(root: str | os.PathLike, cfg: CorpusConfig | None = None, progress: bool = False) -> Corpus:
    """Render (or reuse) the corpus's videos under ``root/videos/`` and write ``root/questions.jsonl``."""
    from vidlab.io import atomic_write_text

    cfg = cfg or CorpusConfig()
    d = Path(root)
    meta_path = d / "corpus.json"
    meta = {"config": asdict(cfg), "seeds": cfg.seeds()}
    if meta_path.is_file():
        old = json.loads(meta_path.read_text())
        if old != meta:
            raise CorpusMismatchError(
                f"{str(d)!r} holds a corpus made with another configuration; use another folder"
            )
    (d / "videos").mkdir(parents=True, exist_ok=True)
    wc = cfg.world_config()
    rows: list[dict[str, Any]] = []
    rendered = 0
    it: Iterable[int] = cfg.seeds()
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(cfg.seeds(), desc="render corpus", unit="video")
    atomic_write_text(meta_path, json.dumps(meta, indent=1))
    for s in it:
        spec = video_spec(s, wc)
        rel = f"videos/{s:06d}.mp4"
        if not (d / rel).is_file():
            write_video(spec, d / rel)
            rendered += 1
        rows.extend(corpus_questions(spec, rel, cfg))
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if not (d / "questions.jsonl").is_file() or (d / "questions.jsonl").read_text() != text:
        atomic_write_text(d / "questions.jsonl", text)
    return Corpus(d, cfg, cfg.seeds(), rows, rendered)
