"""eval-qa decodes each shown frame once per run: questions grouped by video, every strategy over a group of
videos before the next, one bounded frame cache; the records are identical to a run without the cache."""

from __future__ import annotations

import json

import pytest

from vidlab.distributed import RunConfig
from vidlab.understanding.benchmarks import QAItem
from vidlab.understanding.config import EvalConfig
from vidlab.understanding.env import EpisodeConfig
from vidlab.understanding.evaluate import RUN_FIELDS, load_results, run_eval

CALL = (
    '<thinking>look closer</thinking><tool_call>{{"name": "uniform_sample", '
    '"arguments": {{"start_frame": {s}, "end_frame": {e}}}}}</tool_call>'
)


class OneLook:
    """Calls uniform_sample once on a range that depends on the question, then answers from the last frame's
    brightness (so the answer depends on the pixels shown)."""

    name = "one-look"

    def generate(self, messages, *, num_samples=1, temperature=0.0, max_new_tokens=512, seed=None):
        turn = sum(m.role == "assistant" for m in messages)
        q = messages[1].text.split("Question: ", 1)[1].split("\n", 1)[0]
        if turn == 0:
            k = int(q.split()[-1].rstrip("?"))
            return [CALL.format(s=3 * k, e=3 * k + 24)] * num_samples
        last = [p for m in messages for p in getattr(m, "content", []) if hasattr(p, "image")][-1]
        letter = "A" if int(last.image.mean()) % 2 == 0 else "B"
        return [f"<thinking>seen</thinking><answer>{letter}</answer>"] * num_samples


@pytest.fixture(scope="module")
def items(tmp_path_factory) -> list[QAItem]:
    from vidlab.video.synth import render_synthetic

    d = tmp_path_factory.mktemp("once")
    out = []
    for v in range(3):
        path = render_synthetic(d / f"v{v}.mp4", 48, fps=8, width=96, height=72, seed=v)
        for k in range(3):  # the questions of a video are not next to each other in the file
            out.append((k, QAItem(f"v{v}q{k}", str(path), f"What happens in part {k + v}?", ["x", "y"], "A")))
    return [it for _, it in sorted(out, key=lambda p: p[0])]


def _run(tmp_path, items, name: str, frame_cache_mb: int | None) -> tuple[dict, dict]:
    cfg = EvalConfig(
        out=str(tmp_path / name),
        strategies=("agent", "uniform:16", "uniform:12"),
        episode=EpisodeConfig(frame_resize="fit", max_size=(96, 72)),
        frame_cache_mb=frame_cache_mb,
        run=RunConfig(retries=0),
    )
    run_eval(cfg, items=items, policy=OneLook())
    records = {}
    for label in ("agent", "uniform-16", "uniform-12"):
        for r in load_results(tmp_path / name / label):
            assert r["status"] == "ok"
            records[(label, r["id"])] = {k: v for k, v in r.items() if k not in RUN_FIELDS}
    return records, json.loads((tmp_path / name / "frame_cache.json").read_text())


def _distinct_shown(records: dict) -> int:
    shown = {(r["video_path"], i) for r in records.values() for i in r["frame_indices"]}
    return len(shown)


def test_each_frame_decoded_once_and_records_identical(tmp_path, items):
    today, off = _run(tmp_path, items, "off", 0)
    distinct = _distinct_shown(today)
    assert off["decoded"] > 2 * distinct  # without the cache every question and strategy decodes again
    assert off["distinct"] == distinct

    # 1 MB holds 50 of these frames: one video's frames at a time, not all three videos' (~100 distinct), so
    # only going video group by video group across the strategies decodes each frame once
    grouped, on = _run(tmp_path, items, "grouped", 1)
    assert grouped == today
    assert on["decoded"] == on["distinct"] == distinct
    assert on["peak_bytes"] <= on["budget_bytes"] == 2**20
    assert on["hits"] == on["requested"] - distinct

    roomy, _ = _run(tmp_path, items, "roomy", None)  # the default budget: everything at once
    assert roomy == today


class Bright:
    """Answers at once from the brightness of the last frame shown."""

    name = "bright"

    def generate(self, messages, *, num_samples=1, temperature=0.0, max_new_tokens=512, seed=None):
        last = [p for m in messages for p in getattr(m, "content", []) if hasattr(p, "image")][-1]
        letter = "A" if int(last.image.mean()) % 2 == 0 else "B"
        return [f"<thinking>seen</thinking><answer>{letter}</answer>"] * num_samples


def test_classify_rows_of_a_video_share_its_frames_and_keep_their_order(items):
    from vidlab.understanding.classify import classify_rows
    from vidlab.understanding.config import ClassifyConfig
    from vidlab.video.frame_cache import shared_frame_cache

    rows = [
        {"id": it.id, "video": it.video_path, "question": it.question, "options": it.options, "answer": "A"}
        for it in items
    ]
    cfg = ClassifyConfig(k=1, initial_views=2, rich_clip_frames=0)
    cache = shared_frame_cache(0)
    cache.reset_counts()
    plain = classify_rows(rows, Bright(), config=cfg, progress=False, frame_cache_mb=0)
    decoded_without = cache.stats.decoded
    cache = shared_frame_cache(64)
    cache.clear()
    cache.reset_counts()
    cached = classify_rows(rows, Bright(), config=cfg, progress=False, frame_cache_mb=64)
    assert cached == plain and [r["id"] for r in cached] == [r["id"] for r in rows]
    assert cache.stats.decoded == cache.stats.distinct < decoded_without / 2
