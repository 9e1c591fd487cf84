"""The toy-world metrics judge ground-truth renders right, and contradicting ones wrong."""

from __future__ import annotations

import numpy as np

from vidlab.generation.toyworld.metrics import bootstrap_ci, phrase_subject, score_video
from vidlab.generation.toyworld.world import render, scene_for_caption


def _frames(caption: str, seed: int = 0) -> np.ndarray:
    return render(scene_for_caption(caption, np.random.default_rng(seed)))


def test_relation_holds_on_its_own_scene_and_swaps_on_the_opposite_one():
    cap = "a red circle to the left of a blue square"
    good = score_video(cap, _frames(cap))
    assert good.presence and good.relation and not good.swapped
    bad = score_video(cap, _frames("a red circle to the right of a blue square"))
    assert bad.presence and not bad.relation and bad.swapped
    above = score_video(
        "a green star above a yellow triangle", _frames("a yellow triangle above a green star")
    )
    assert above.presence and above.relation is False


def test_missing_subject_count_and_motion():
    cap = "a red circle to the left of a blue square"
    only_red = score_video(cap, _frames("a red circle"))
    assert not only_red.presence and only_red.relation is False
    assert score_video("two cyan stars", _frames("two cyan stars")).count is True
    assert score_video("two cyan stars", _frames("a cyan star")).count is False
    assert score_video("a green star moving right", _frames("a green star moving right")).relation is True
    assert score_video("a green star moving right", _frames("a green star moving left")).relation is False
    blank = np.full((9, 64, 64, 3), 30, np.uint8)
    assert not score_video("a red circle", blank).presence


def test_layout_iou_is_high_for_the_true_boxes_and_zero_when_absent():
    from vidlab.generation.layout import Layout, SubjectLayout

    scene = scene_for_caption("a purple square", np.random.default_rng(4))
    box = scene.objects[0].box(0.0, 64)
    lay = Layout(
        prompt="a purple square", subjects=[SubjectLayout(phrase="purple square", keyframes=[(0.0, box)])]
    )
    assert score_video("a purple square", render(scene), layout=lay).iou > 0.8
    assert score_video("a purple square", np.full((9, 64, 64, 3), 30, np.uint8), layout=lay).iou == 0.0
    assert phrase_subject("yellow triangles") == ("yellow", "triangle")


def test_bootstrap_interval_brackets_the_mean():
    m, lo, hi = bootstrap_ci([0, 1] * 50)
    assert m == 0.5 and lo < 0.5 < hi and hi - lo < 0.3
    assert bootstrap_ci([1.0] * 10) == (1.0, 1.0, 1.0)
