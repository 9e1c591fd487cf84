"""The toy world: deterministic by seed, disjoint splits, real mp4 files, questions eval-qa can read."""

import numpy as np
import pytest

from vidlab.understanding.toyworld.world import (
    KINDS,
    MemoryReader,
    WorldConfig,
    build_split,
    questions,
    render_frame,
    split_seeds,
    video_spec,
)

SMALL = WorldConfig(min_frames=150, max_frames=260)


def test_spec_is_deterministic_and_seed_dependent():
    a, b, c = video_spec(5, SMALL), video_spec(5, SMALL), video_spec(6, SMALL)
    assert a == b
    assert (a.num_frames, a.border, a.events) != (c.num_frames, c.border, c.events)
    assert np.array_equal(render_frame(a, 17), render_frame(b, 17))


def test_splits_are_disjoint():
    tr, va, te = (set(split_seeds(n, 50)) for n in ("train", "val", "test"))
    assert not (tr & va) and not (tr & te) and not (va & te)
    assert not set(split_seeds("train", 50, base_seed=1)) & tr


def test_events_never_overlap_and_facts_match_the_frames():
    for seed in range(8):
        spec = video_spec(seed, SMALL)
        ev = sorted(spec.events, key=lambda e: e.start)
        assert all(x.end <= y.start for x, y in zip(ev, ev[1:]))
        a, b = spec.count_interval
        assert sum(1 for e in spec.events if e.role == "count") == spec.count
        assert all(a <= e.start and e.end <= b for e in spec.events if e.role == "count")
        assert not any(
            e.shape == "circle" and e.role != "count" and e.start < b and e.end > a for e in spec.events
        )
        tri = [e for e in spec.events if e.shape == "triangle"]
        if tri:
            assert tri[0].colour == spec.facts["needle"]
            assert spec.event_at(tri[0].start).shape == "triangle"


def test_questions_cover_the_kinds_with_a_valid_answer_letter():
    spec = video_spec(3, SMALL)
    rows = questions(spec, "videos/x.mp4")
    assert [r["category"] for r in rows] == list(KINDS)
    for r in rows:
        assert 0 <= ord(r["answer"]) - 65 < len(r["options"])
    needle = rows[1]
    assert needle["options"][ord(needle["answer"]) - 65] == spec.facts["needle"]
    distractor = rows[3]
    assert spec.facts["foil"] in distractor["options"]


@pytest.mark.slow
def test_split_is_real_mp4_that_eval_qa_reads(tmp_path):
    from vidlab.understanding.benchmarks import load_benchmark
    from vidlab.video import open_video

    split = build_split(tmp_path, "test", 1, SMALL)
    path = split.root / split.rows[0]["video"]
    spec = video_spec(split.seeds[0], SMALL)
    with open_video(path) as r:
        assert r.num_frames == spec.num_frames
        got = r.get_frames([0, spec.num_frames // 2]).astype(int)
    want = np.stack([render_frame(spec, 0), render_frame(spec, spec.num_frames // 2)]).astype(int)
    assert np.abs(got - want).mean() < 3  # yuv444 h264 keeps the colours
    mem = MemoryReader(path)
    assert np.array_equal(mem.get_frames([3]), open_video(path).get_frames([3]))
    loaded = load_benchmark("jsonl", split.jsonl)
    assert len(loaded.items) == 4 and not loaded.problems
    assert {i.category for i in loaded.items} == set(KINDS)


def test_toyworld_data_command_writes_a_split_and_refuses_bad_arguments_in_one_line(tmp_path, capsys):
    import json

    from vidlab.understanding.toyworld.cli import world_main

    assert world_main([str(tmp_path), "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "n must be at least 1" in err
    assert world_main([str(tmp_path), "1", "--max-frames", "80", "--base-seed", "3", "--no-progress"]) == 0
    rows = [json.loads(x) for x in (tmp_path / "test" / "questions.jsonl").read_text().splitlines()]
    assert [r["category"] for r in rows] == list(KINDS)
    assert rows[0]["video"] == "videos/203000.mp4" and (tmp_path / "test" / rows[0]["video"]).is_file()
