"""Backends that replay recorded model outputs: re-score from logs, and drive the adapters' tests.

Each reads one JSON file keyed by the video's *content* (``frame_key``: sha256 of the frames it is asked
about), so a replay can never answer for a different video; an unknown key is a ``KeyError`` naming it.

* ``RecordedMLLM(path)``: ``{key: [reply_1, reply_2, ...]}`` where key = frame_key(grid image);
* ``RecordedDetector(path)``: ``{key: {phrase: [[cx, cy, w, h, prob, label], ...]}}`` per frame;
* ``RecordedTracker(path)``: ``{key: {phrase: [fore_dx, fore_dy, back_dx, back_dy] | null}}`` per clip.

Record with the real backend wrapped in ``Recorder`` (same keys), then replay without the weights.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np


def frame_key(arr: np.ndarray) -> str:
    a = np.ascontiguousarray(arr)
    return hashlib.sha256(str(a.shape).encode() + a.tobytes()).hexdigest()[:24]


class _Replay:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.data: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))

    def lookup(self, arr: np.ndarray) -> Any:
        key = frame_key(arr)
        if key not in self.data:
            raise KeyError(f"{self.path} has no recorded output for frames {key} (recorded for other videos)")
        return self.data[key]


class RecordedMLLM(_Replay):
    def chat(self, image: np.ndarray, questions: list[str]) -> list[str]:
        replies = list(self.lookup(image))
        if len(replies) < len(questions):
            raise KeyError(f"{self.path}: {len(replies)} recorded replies for {len(questions)} questions")
        return replies[: len(questions)]


class RecordedDetector(_Replay):
    def detect(self, image: np.ndarray, caption: str) -> list[tuple[list[float], float, str]]:
        rec = self.lookup(image).get(caption, [])
        return [([float(v) for v in r[:4]], float(r[4]), str(r[5])) for r in rec]


class RecordedTracker(_Replay):
    def displacement(self, frames: np.ndarray, phrase: str) -> tuple[float, float, float, float] | None:
        rec = self.lookup(frames).get(phrase)
        return None if rec is None else tuple(float(v) for v in rec)  # type: ignore[return-value]


class Recorder:
    """Wrap a real backend; every answer is stored under the same key the replays use; ``save(path)``."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.data: dict[str, Any] = {}

    def chat(self, image: np.ndarray, questions: list[str]) -> list[str]:
        out = self.backend.chat(image, questions)
        self.data[frame_key(image)] = list(out)
        return out

    def detect(self, image: np.ndarray, caption: str) -> list[tuple[list[float], float, str]]:
        out = self.backend.detect(image, caption)
        self.data.setdefault(frame_key(image), {})[caption] = [
            [*map(float, b), float(p), str(lab)] for b, p, lab in out
        ]
        return out

    def displacement(self, frames: np.ndarray, phrase: str) -> Any:
        out = self.backend.displacement(frames, phrase)
        self.data.setdefault(frame_key(frames), {})[phrase] = None if out is None else [float(v) for v in out]
        return out

    def save(self, path: str | Path) -> Path:
        from vidlab.io import atomic_write_json

        return atomic_write_json(path, self.data)
