"""Metric registry and the offline metrics that need no generation run: calibration, toy-world detector
adapter on rendered toy-world clips, and the clear errors of unavailable metrics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vidlab.generation.compbench.config import CompbenchConfig, ScoreConfig
from vidlab.generation.compbench.metrics import (
    MetricError,
    VideoContext,
    available,
    get_metric,
    official_indices,
)
from vidlab.generation.compbench.metrics.clip import calibrate_threshold
from vidlab.generation.compbench.suite import Prompt


def test_registry_lists_builtins_and_rejects_unknown_names():
    names = available()
    for n in ("clip_alignment", "clip_presence", "layout_faithfulness", "toyworld_shapes", "official_mllm"):
        assert n in names
    with pytest.raises(MetricError, match="did you mean clip_alignment"):
        get_metric("clip_alignmnt")


def test_official_frame_sampling():
    assert official_indices(81) == [int(x) for x in np.linspace(0, 80, 16, dtype=int)]
    assert official_indices(81)[:3] == [0, 5, 10] and official_indices(81)[-1] == 80
    assert official_indices(5) == [0, 1, 2, 3, 4]


def test_presence_threshold_calibration_separates_own_from_foreign():
    own = [0.30, 0.32, 0.35, 0.28]
    foreign = [0.10, 0.12, 0.29, 0.05]
    t = calibrate_threshold(own, foreign)
    assert 0.29 < t <= 0.30  # every own phrase passes, only the 0.29 foreign one would also pass below it
    assert calibrate_threshold(own, []) == min(own)
    # no separation at all: the threshold cannot make own look better than foreign
    same = calibrate_threshold([0.2, 0.3], [0.2, 0.3])
    assert isinstance(same, float)


def test_layout_faithfulness_needs_measure_layout():
    cls = get_metric("layout_faithfulness")
    with pytest.raises(MetricError, match="measure_layout=true"):
        cls.check(CompbenchConfig())
    cls.check(CompbenchConfig(measure_layout=True))
    m = cls(ScoreConfig(), None)
    row = {
        "layout_faithfulness": {"share": 0.6, "placebo_share": 0.2, "chance": 0.25, "lift": 0.4, "n_maps": 3}
    }
    ctx = VideoContext(row=row, prompt=None, video=Path("x.mp4"), layout_file=None)
    assert m.score(ctx) == {
        "score": 0.6,
        "control_placebo": 0.2,
        "control_chance": 0.25,
        "lift": 0.4,
        "n_maps": 3,
    }
    assert m.score(VideoContext(row={}, prompt=None, video=Path("x"), layout_file=None))["score"] is None


def test_official_adapters_without_a_backend_say_what_to_set():
    with pytest.raises(MetricError, match="score.mllm=module:factory"):
        get_metric("official_mllm")(ScoreConfig(), None)
    with pytest.raises(MetricError, match="cannot import"):
        get_metric("official_grounding")(ScoreConfig(detector="no_such_module_xyz:make"), None)


@pytest.mark.parametrize(
    "caption,wrong",
    [
        ("a red circle to the left of a blue square", "a blue square to the left of a red circle"),
        ("a green star moving right", "a green star moving left"),
        ("two yellow triangles", "a purple circle"),
    ],
)
def test_toyworld_adapter_on_rendered_clips(caption, wrong):
    world = pytest.importorskip("vidlab.generation.toyworld.world")
    scene = world.scene_for_caption(caption, np.random.default_rng(3))
    frames = world.render(scene)
    metric = get_metric("toyworld_shapes")(ScoreConfig(), None)

    def score(text):
        ctx = VideoContext(row={}, prompt=Prompt("numeracy", 1, text), video=Path("-"), layout_file=None)
        ctx._frames = frames[official_indices(len(frames))]
        return metric.score(ctx)["score"]

    assert score(caption) >= 0.9
    assert score(wrong) <= 0.1
    ctx = VideoContext(
        row={}, prompt=Prompt("numeracy", 1, "two cats chase a butterfly"), video=Path("-"), layout_file=None
    )
    assert metric.score(ctx)["score"] is None  # not a toy-world caption: no score, with the reason
