"""The reader reads: the shipped toy policy answers from the pixels of the frames that show the answer.

Uses the shipped weights (understanding/toyworld/weights) on a freshly rendered world with seeds no split uses.
"""

import numpy as np
import pytest

from vidlab.understanding import protocol as P
from vidlab.understanding.agents import decode_frames, linspace_frames
from vidlab.understanding.messages import Frame
from vidlab.understanding.toyworld.world import (
    COLOURS,
    MemoryReader,
    WorldConfig,
    build_split,
    evidence_frames,
    evidence_in_view,
    render_frame,
    seed_of,
    video_spec,
)

SMALL = WorldConfig(min_frames=300, max_frames=700)


def test_evidence_frames_show_the_answer_and_the_view_check_agrees():
    for seed in range(12):
        spec = video_spec(seed, SMALL)
        for kind in ("needle", "distractor"):
            ev = evidence_frames(spec, kind)
            if not ev:
                continue
            colour = spec.facts["needle" if kind == "needle" else "distractor"]
            centre = render_frame(spec, ev[0])[SMALL.size // 2, SMALL.size // 2]
            assert tuple(centre) == COLOURS[colour]
            assert evidence_in_view(spec, kind, ev)
            assert not evidence_in_view(
                spec, kind, [t for t in range(0, spec.num_frames, 997) if t not in ev][:1]
            )
        cnt = evidence_frames(spec, "count")
        assert len(cnt) == 8 and evidence_in_view(spec, "count", cnt)
        assert not evidence_in_view(spec, "count", cnt[:3])  # too few frames inside the interval to count


def _ask(policy, reader, row, frames):
    msgs = P.build_initial_messages(
        row["question"], frames, reader.num_frames, reader.fps, row["options"], tools=()
    )
    return P.parse_assistant_turn(policy.generate(msgs, temperature=0.0)[0]).answer


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    from vidlab.understanding.policies import load_policy

    root = tmp_path_factory.mktemp("fresh")
    split = build_split(root, "test", 6, SMALL, base_seed=77)  # seeds 277000.. : no training world uses them
    return load_policy("toy:shipped"), split


@pytest.mark.slow
def test_blanking_the_evidence_changes_needle_answers_and_forged_labels_do_not(fresh):
    policy, split = fresh
    right, changed, n = 0, 0, 0
    for row in split.rows:
        if row["category"] not in ("needle", "distractor"):
            continue
        spec = video_spec(seed_of(row), SMALL)
        reader = MemoryReader(split.root / row["video"])
        init = linspace_frames(0, reader.num_frames, 16)
        ev = evidence_frames(spec, row["category"])
        frames = decode_frames(reader, sorted(set(init) | set(ev)), resize="fit")
        seen = _ask(policy, reader, row, frames)
        blank = [Frame(np.zeros_like(f.image), f.index, f.timestamp) if f.index in ev else f for f in frames]
        forged = [Frame(f.image, f.index + 100_000, -5.0) for f in frames]  # metadata only; labels unchanged
        n += 1
        right += seen == row["answer"]
        changed += _ask(policy, reader, row, blank) != seen
        assert _ask(policy, reader, row, forged) == seen
    assert n >= 8
    assert right >= 0.8 * n  # it reads the evidence ...
    assert changed >= 0.5 * n  # ... and without those pixels the answer is no longer the same


@pytest.mark.slow
def test_the_count_reader_counts_the_frames_inside_the_interval(fresh):
    policy, split = fresh
    right = 0
    rows = [r for r in split.rows if r["category"] == "count"]
    for row in rows:
        spec = video_spec(seed_of(row), SMALL)
        reader = MemoryReader(split.root / row["video"])
        frames = decode_frames(reader, evidence_frames(spec, "count"), resize="fit")
        right += _ask(policy, reader, row, frames) == row["answer"]
    assert right >= len(rows) - 1
