"""Data classification: initial view vs a richer view, k samples each, labelled by the documented rule."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest

from vidlab.distributed import JobIdentityError
from vidlab.understanding.classify import (
    ClassifyConfig,
    classify_rows,
    label_from_accuracy,
    row_id,
    summarize,
)
from vidlab.understanding.policies.replay import ReplayPolicy

TOTAL = 300
QUESTION = "Does a red square appear in the video?"
OPTIONS = ["yes", "no"]


class RedSquarePolicy:
    """A real (if tiny) video policy: answers from the pixels of the frames it is shown."""

    name = "red-detector"

    def __init__(self):
        self.seen: list[int] = []

    def generate(self, messages, *, num_samples=1, temperature=0.0, max_new_tokens=512, seed=None):
        frames = [f for m in messages if m.role == "user" for f in m.frames]
        self.seen.append(len(frames))
        red = any(
            ((f.image[..., 0] > 180) & (f.image[..., 1] < 90) & (f.image[..., 2] < 90)).mean() > 0.01
            for f in frames
        )
        letter = "A" if red else "B"
        return [
            f"<thinking>{len(frames)} frames, red={red}</thinking><answer>{letter}</answer>"
        ] * num_samples


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    from vidlab.video.synth import Event, render_synthetic

    d = tmp_path_factory.mktemp("cls")

    def make(name, events):
        return str(
            render_synthetic(
                d / name, TOTAL, fps=10, width=192, height=144, seed=2, num_shapes=0, events=events
            )
        )

    return {
        # frames 84..91: between initial frames 79 and 99, but the 32-frame richer view has 86
        "needle": make("needle.mp4", [Event(84, 92, "square", "red", size=0.3)]),
        "always": make("always.mp4", [Event(0, TOTAL, "square", "red", size=0.3)]),
        "never": make("never.mp4", []),
    }


def rows_for(videos):
    return [
        {"id": "needle", "video": videos["needle"], "question": QUESTION, "options": OPTIONS, "answer": "A"},
        {"id": "always", "video": videos["always"], "question": QUESTION, "options": OPTIONS, "answer": 0},
        # the policy can never see it (there is none), but the label claims yes: unsolvable -> filtered
        {"id": "never", "video": videos["never"], "question": QUESTION, "options": OPTIONS, "answer": "A"},
        {"video": videos["never"], "question": QUESTION, "options": OPTIONS, "answer": "no", "extra": 1},
    ]


@pytest.mark.parametrize(
    "p0, p1, label",
    [
        (0.0, 0.0, "filtered"),
        (1.0, 1.0, "direct"),
        (0.75, 0.0, "direct"),
        (0.0, 1.0, "active"),
        (0.25, 0.75, "active"),
        (0.5, 0.75, "adaptive"),
        (0.25, 0.25, "adaptive"),
        (0.5, 0.0, "adaptive"),
    ],
)
def test_labelling_rule(p0, p1, label):
    assert label_from_accuracy(p0, p1)[0] == label


def test_rule_thresholds_are_configurable():
    assert label_from_accuracy(0.5, 0.5, ClassifyConfig(direct_min=0.5))[0] == "direct"
    assert label_from_accuracy(0.25, 0.5, ClassifyConfig(active_gain=0.25))[0] == "active"


def test_classify_labels_rows_from_what_the_policy_sees(videos, tmp_path):
    policy = RedSquarePolicy()
    out = tmp_path / "labelled.jsonl"
    cfg = ClassifyConfig(k=2, rich_clip_frames=0)
    labelled = classify_rows(rows_for(videos), policy, config=cfg, out_path=out, progress=False)
    got = {r["id"]: r["classification"] for r in labelled}
    assert got["needle"] == "active" and got["always"] == "direct" and got["never"] == "filtered"
    assert list(got.values())[3] == "direct"  # the answer "no" is right from the initial frames
    info = labelled[0]["classification_info"]
    assert info["acc_initial"] == 0.0 and info["acc_rich"] == 1.0 and info["k"] == 2
    assert info["initial_frames"] == 16 and info["rich_frames"] == 32
    assert info["initial_answers"] == ["B", "B"] and info["rich_answers"] == ["A", "A"]
    assert labelled[3]["extra"] == 1 and labelled[3]["id"] == row_id(rows_for(videos)[3])  # row fields kept
    assert sorted(policy.seen) == sorted([16, 32] * 4)
    on_disk = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["classification"] for r in on_disk] == [r["classification"] for r in labelled]
    assert summarize(labelled) == {"rows": 4, "labels": {"active": 1, "direct": 2, "filtered": 1}}

    # resumable: a rerun reads finished rows and never calls the policy
    class Boom:
        name = policy.name  # the same policy identity: the job resumes

        def generate(self, *a, **k):
            raise AssertionError("finished rows must not be redone")

    again = classify_rows(rows_for(videos), Boom(), config=cfg, out_path=out, progress=False)
    assert [r["classification"] for r in again] == [r["classification"] for r in labelled]
    dropped = classify_rows(
        rows_for(videos),
        Boom(),
        config=dataclasses.replace(cfg, drop_filtered=True),
        out_path=out,
        progress=False,
    )
    assert "filtered" not in {r["classification"] for r in dropped} and len(dropped) == 3
    # other settings never reuse these labels: refused, naming what differs, and nothing is touched
    before = out.read_text()
    with pytest.raises(JobIdentityError, match="k: 2 -> 4"):
        classify_rows(
            rows_for(videos), Boom(), config=ClassifyConfig(rich_clip_frames=0), out_path=out, progress=False
        )
    assert out.read_text() == before


def test_initial_view_grids_shift_within_the_video():
    from vidlab.understanding.classify import initial_view_indices

    views = initial_view_indices(TOTAL, 16, 4)
    base = views[0]
    assert len(views) == 4 and base == [int(x) for x in np.linspace(0, TOTAL - 1, 16)]
    stride = (TOTAL - 1) / 15
    for v, idx in enumerate(views[1:], start=1):
        shift = round(v * stride / 4)
        assert idx == sorted({(i + shift) % TOTAL for i in base}) and len(idx) == 16
        assert not set(idx) & set(base)  # a shifted grid never reuses a reference frame (the last one wraps)
    assert initial_view_indices(TOTAL, 16, 1) == [views[0]]
    assert all(0 <= t < 20 for v in initial_view_indices(20, 16, 4) for t in v)  # inside a short video


@pytest.fixture(scope="module")
def grid_video(tmp_path_factory):
    """A red square exactly on the 16 reference initial frames and nowhere else: only that grid sees it."""
    from vidlab.understanding.classify import initial_view_indices
    from vidlab.video.synth import Event, render_synthetic

    events = [Event(t, t + 1, "square", "red", size=0.3) for t in initial_view_indices(TOTAL, 16)[0]]
    return str(
        render_synthetic(
            tmp_path_factory.mktemp("grid") / "grid.mp4", TOTAL, fps=10, width=192, height=144, seed=2,
            num_shapes=0, events=events,
        )
    )  # fmt: skip


def test_shifted_initial_views_keep_a_grid_dependent_answer_from_being_direct(grid_video, videos):
    rows = [
        {"id": "grid", "video": grid_video, "question": QUESTION, "options": OPTIONS, "answer": "A"},
        {"id": "always", "video": videos["always"], "question": QUESTION, "options": OPTIONS, "answer": "A"},
    ]
    one = classify_rows(
        rows, RedSquarePolicy(), config=ClassifyConfig(k=2, rich_clip_frames=0), progress=False
    )
    assert [r["classification"] for r in one] == [
        "direct",
        "direct",
    ]  # the one-view rule: a lucky grid is Direct
    policy = RedSquarePolicy()
    cfg = ClassifyConfig(k=2, rich_clip_frames=0, initial_views=4)
    grid, always = classify_rows(rows, policy, config=cfg, progress=False)
    info = grid["classification_info"]
    assert info["acc_initial_views"] == [1.0, 0.0, 0.0, 0.0] and info["acc_initial"] == 0.25
    assert info["initial_answers"] == ["A", "A"] and info["initial_views_answers"] == [["B", "B"]] * 3
    assert info["acc_rich"] == 1.0 and grid["classification"] == "active"  # frame 0 is in the richer view too
    assert (
        always["classification"] == "direct"
        and always["classification_info"]["acc_initial_views"] == [1.0] * 4
    )
    assert sorted(policy.seen) == sorted([16, 16, 16, 16, 32] * 2)


@pytest.mark.parametrize(
    "views, label",
    [([1.0, 1.0, 0.75, 1.0], "direct"), ([1.0, 1.0, 1.0, 0.5], "adaptive"), ([1.0, 0.0, 0.0, 0.0], "active")],
)
def test_direct_needs_every_initial_view(views, label):
    p0 = sum(views) / len(views)
    assert label_from_accuracy(p0, 1.0, ClassifyConfig(initial_views=4), views)[0] == label


def test_one_initial_view_keeps_the_identity_of_earlier_jobs():
    from vidlab.understanding.classify import classify_identity

    old = classify_identity(ClassifyConfig(), "p", rows=[{"id": 1}])
    assert "initial_views" not in json.dumps(old)
    assert "initial_views" in json.dumps(
        classify_identity(ClassifyConfig(initial_views=2), "p", rows=[{"id": 1}])
    )


def test_adaptive_from_mixed_samples(videos):
    # one in four samples right in both views: a capability gap either strategy may close
    policy = ReplayPolicy([[f"<thinking>t</thinking><answer>{a}</answer>" for a in "ABBB"]])
    (row,) = classify_rows(
        rows_for(videos)[:1], policy, config=ClassifyConfig(k=4, rich_clip_frames=0), progress=False
    )
    assert row["classification"] == "adaptive"
    assert row["classification_info"]["acc_initial"] == 0.25 == row["classification_info"]["acc_rich"]


def test_tool_calls_or_garbage_count_as_wrong(videos):
    call = '<thinking>t</thinking><tool_call>{"name": "uniform_sample", "arguments": {"start_frame": 0, "end_frame": 50}}</tool_call>'
    policy = ReplayPolicy([[call, "A"]])
    (row,) = classify_rows(
        rows_for(videos)[1:2], policy, config=ClassifyConfig(k=2, rich_clip_frames=0), progress=False
    )
    assert row["classification"] == "filtered" and row["classification_info"]["initial_answers"] == [
        None,
        None,
    ]


def test_rich_view_adds_clip_frames(videos, tmp_path):
    from vidlab.clip import TINY_MODEL, load_model

    policy = RedSquarePolicy()
    cfg = ClassifyConfig(k=1, rich_uniform_frames=8, rich_clip_frames=6)
    (row,) = classify_rows(
        rows_for(videos)[1:2],
        policy,
        config=cfg,
        clip_model=load_model(TINY_MODEL),
        index_cache_dir=tmp_path,
        progress=False,
    )
    n = row["classification_info"]["rich_frames"]
    assert 8 < n <= 14 and policy.seen == [16, n]
    assert any(p.suffix == ".safetensors" for p in tmp_path.rglob("*"))  # served from the cached frame index


def test_bad_rows_are_recorded_and_the_run_goes_on(videos, tmp_path):
    rows = [
        {
            "id": "missing",
            "video": str(tmp_path / "nope.mp4"),
            "question": QUESTION,
            "options": OPTIONS,
            "answer": "A",
        },
        {
            "id": "noopts",
            "video": videos["always"],
            "question": QUESTION,
            "question_type": "mc",
            "answer": "A",
        },
        {"id": "ok", "video": "always.mp4", "question": QUESTION, "options": OPTIONS, "answer": "A"},
    ]
    out = tmp_path / "o.jsonl"
    errors: list[dict] = []
    root = os.path.dirname(videos["always"])
    labelled = classify_rows(
        rows, RedSquarePolicy(), config=ClassifyConfig(k=1, rich_clip_frames=0), out_path=out, video_root=root,
        progress=False, errors=errors,
    )  # fmt: skip
    assert [r["id"] for r in labelled] == ["ok"]
    reasons = {e["id"]: e["error"] for e in errors}
    assert "VideoReadError" in reasons["missing"] and "nope.mp4" in reasons["missing"]
    assert "multiple-choice question without options" in reasons["noopts"]
    logged = [json.loads(line) for line in (tmp_path / "o.jsonl.errors.jsonl").read_text().splitlines()]
    assert {e["id"] for e in logged} == {"missing", "noopts"}
    with pytest.raises(ValueError, match=r"classify\.k: expected an int in \[1, 256\], got 0"):
        ClassifyConfig(k=0)  # checked on construction, before any row is read
