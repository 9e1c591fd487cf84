"""The toy world renders deterministically and the learning-free detector reads it back (>= 99% on clean renders)."""

from __future__ import annotations

import numpy as np
import pytest

from vidlab.generation.toyworld.detect import box_iou, detect_frame
from vidlab.generation.toyworld.world import (
    KINDS,
    CaptionError,
    WorldConfig,
    all_captions,
    parse_caption,
    render,
    sample_scene,
    scene_boxes,
    scene_for_caption,
    write_clip,
)


def test_same_seed_same_pixels_other_seed_other_scene():
    a = render(sample_scene("relation", np.random.default_rng(3)))
    b = render(sample_scene("relation", np.random.default_rng(3)))
    c = render(sample_scene("relation", np.random.default_rng(4)))
    assert a.shape == (5, 64, 64, 3) and a.dtype == np.uint8
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_every_caption_parses_to_its_kind_and_others_are_refused():
    for kind in KINDS:
        caps = all_captions(kind)
        assert caps and all(parse_caption(c).kind == kind for c in caps)
    p = parse_caption("a red circle to the left of a blue square")
    assert p.subjects == (("red", "circle"), ("blue", "square")) and p.relation == "left of"
    assert parse_caption("two yellow triangles").subjects == (("yellow", "triangle"),)
    with pytest.raises(CaptionError, match="a purple cat"):
        parse_caption("a purple cat")


def _frame_correct(frame, scene, f, gt) -> bool:
    dets = detect_frame(frame)
    if len(dets) != len(scene.objects):
        return False
    used = set()
    for j, o in enumerate(scene.objects):
        hit = [
            k
            for k, d in enumerate(dets)
            if k not in used
            and d.colour == o.colour
            and d.shape == o.shape
            and box_iou(d.box, gt[f, j]) > 0.7
        ]
        if not hit:
            return False
        used.add(hit[0])
    return True


def test_detector_is_at_least_99_percent_right_on_clean_renders():
    rng = np.random.default_rng(2026)
    ok = total = 0
    for i in range(48):
        scene = sample_scene(KINDS[i % len(KINDS)], rng)
        frames, gt = render(scene), scene_boxes(scene)
        for f in (0, 2, 4):
            total += 1
            ok += _frame_correct(frames[f], scene, f, gt)
    assert ok / total >= 0.99, f"detector right on {ok}/{total} clean frames"


def test_detector_finds_nothing_on_an_empty_frame_and_the_motion_it_should():
    assert detect_frame(np.full((64, 64, 3), 30, np.uint8)) == []
    scene = scene_for_caption("a green star moving right", np.random.default_rng(0))
    frames = render(scene)
    first, last = detect_frame(frames[0])[0], detect_frame(frames[-1])[0]
    assert (first.colour, first.shape) == ("green", "star")
    assert last.centre[0] - first.centre[0] > 0.3


def test_a_clip_written_through_vidlab_video_still_reads_back(tmp_path):
    """h264 + yuv420p shift colours and blur edges; the detector still finds the subjects."""
    from vidlab.video import open_video

    scene = scene_for_caption(
        "a red circle to the left of a blue square", np.random.default_rng(1), WorldConfig()
    )
    path = write_clip(scene, tmp_path / "clip.mp4")
    with open_video(path) as reader:
        frames = np.asarray(reader.get_frames(list(range(reader.num_frames))))
    assert len(frames) == WorldConfig().frames
    found = {(d.colour, d.shape) for d in detect_frame(frames[len(frames) // 2])}
    assert {("red", "circle"), ("blue", "square")} <= found


def test_a_grid_world_puts_every_centre_on_the_grid_at_every_frame_and_the_detector_still_reads_it():
    """``WorldConfig.grid``: centres on multiples of grid x size at every frame (a moving shape's travel is
    rounded so each step lands on it), shapes still inside the frame and apart; the default world is unchanged
    (positions anywhere) and an impossible grid is refused naming the sizes."""
    wc = WorldConfig(grid=0.125, radius=(0.135, 0.135))
    rng = np.random.default_rng(7)
    ok = total = 0
    for i in range(64):
        scene = sample_scene(KINDS[i % len(KINDS)], rng, wc)
        for o in scene.objects:
            for f in range(wc.frames):
                cx, cy = o.centre(f / (wc.frames - 1))
                assert cx % 8 == 0 and cy % 8 == 0, (scene.caption, f, cx, cy)
                assert o.radius < cx < 64 - o.radius and o.radius < cy < 64 - o.radius
        frames, gt = render(scene), scene_boxes(scene)
        for f in (0, 2, 4):
            total += 1
            ok += _frame_correct(frames[f], scene, f, gt)
    assert ok / total >= 0.99, f"detector right on {ok}/{total} clean grid frames"
    anywhere = [sample_scene("single", np.random.default_rng(s)).objects[0].start for s in range(20)]
    assert any(x % 8 or y % 8 for x, y in anywhere)
    with pytest.raises(ValueError, match="no grid point"):
        scene_for_caption("a red circle", np.random.default_rng(0), WorldConfig(grid=0.8, radius=(0.2, 0.2)))
