"""A tiny synthetic needle benchmark written in the lmms-eval-style JSONL format (smoke runs, docs figures).

Each video is procedurally rendered (``vidlab.video.synth``) with no moving shapes; half of them show a red
square for ``needle_len`` frames at a random time, the other half show a blue square instead (a distractor).
Every question asks whether a red square ever appears (A. yes / B. no), so an answer needs the right frames:
the accuracy-versus-frames trade-off of uniform-K sampling and of an adaptive agent is visible in minutes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

QUESTION = "Does a red square appear at any point in the video?"


def write_needle_benchmark(
    out_dir: str | Path,
    n: int = 20,
    num_frames: int = 400,
    fps: float = 10.0,
    width: int = 96,
    height: int = 64,
    needle_len: int = 16,
    seed: int = 0,
) -> Path:
    """Render ``n`` videos + ``questions.jsonl`` into ``out_dir``; returns the JSONL path (load as ``jsonl``)."""
    from vidlab.video.synth import Event, render_synthetic

    out = Path(out_dir)
    (out / "videos").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        present = i % 2 == 0
        start = int(rng.integers(0, num_frames - needle_len))
        colour = "red" if present else "blue"
        ev = Event(start, start + needle_len, "square", colour, (0.5, 0.6), 0.4)
        name = f"videos/needle_{i:03d}.mp4"
        render_synthetic(out / name, num_frames, fps, width, height, seed=seed + i, events=[ev], num_shapes=0)
        rows.append(
            {
                "id": f"needle_{i:03d}",
                "video": name,
                "question": QUESTION,
                "options": ["yes", "no"],
                "answer": "A" if present else "B",
                "category": "present" if present else "absent",
                "duration": num_frames / fps,
                "extra": {"needle_start": start, "needle_len": needle_len, "colour": colour},
            }
        )
    path = out / "questions.jsonl"
    from vidlab.io import atomic_write_text

    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in rows))
    return path
