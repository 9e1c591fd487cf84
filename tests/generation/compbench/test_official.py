"""Official-metric adapters driven by RECORDED model outputs, and the official CSV ingest.

The recorded replies/detections/tracks below stand in for LLaVA, GroundingDINO and DOT; the expected
numbers are worked out by hand from the official scripts' rules (see generation/compbench/official/).
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from vidlab.generation.compbench.official import grounding, mllm, tracking
from vidlab.generation.compbench.official.csv_ingest import IngestError, ingest_dir, read_official_csv
from vidlab.generation.compbench.official.recorded import (
    RecordedDetector,
    RecordedMLLM,
    RecordedTracker,
    Recorder,
    frame_key,
)


@pytest.fixture
def frames16():
    return np.random.default_rng(0).integers(0, 256, size=(16, 8, 10, 3), dtype=np.uint8)


def test_grid_is_the_official_3x2_of_frames_0_3_6_9_12_15(frames16):
    assert mllm.grid_indices(16) == [0, 3, 6, 9, 12, 15]
    g = mllm.make_grid(frames16)
    assert g.shape == (24, 20, 3)
    np.testing.assert_array_equal(g[:8, :10], frames16[0])
    np.testing.assert_array_equal(g[:8, 10:], frames16[3])
    np.testing.assert_array_equal(g[8:16, :10], frames16[6])
    np.testing.assert_array_equal(g[16:, 10:], frames16[15])


def test_consistent_attr_replies_map_to_official_scores(tmp_path, frames16):
    grid = mllm.make_grid(frames16)
    meta = {"phrases": "a blue car; a white picket fence"}
    cases = [
        ('{"option": "A1,B2", "explanation": "fence partly visible"}', 4.5, 0.875),
        ('Sure! {"option": "B2,A1", "explanation": "x"}', 4.5, 0.875),
        ('{"option": "D1,D2", "explanation": "nothing"}', 1.0, 0.0),
        ('{"option": "B1,C2", "explanation": "x"}', 2.8, 0.45),
        ("I cannot tell.", None, None),
    ]
    for reply, raw, score in cases:
        path = tmp_path / "rec.json"
        path.write_text(json.dumps({frame_key(grid): ["A blue car passes a fence.", reply]}))
        res = mllm.score_grid(RecordedMLLM(path), "consistent_attr", "p", meta, frames16)
        assert res["raw"] == raw and (
            res["score"] == pytest.approx(score) if score is not None else res["score"] is None
        )
    q = mllm.consistent_attr_questions("a blue car", "a white picket fence")
    assert "'a white picket fence' is not present" in q[1] and "A1 to D1" in q[1]


def test_action_binding_and_replay_refuses_other_videos(tmp_path, frames16):
    meta = {
        "phrase_0": ["a dog?", "a dog runs through a field?"],
        "phrase_1": ["a cat?", "a cat climbs a tree?"],
    }
    path = tmp_path / "rec.json"
    path.write_text(
        json.dumps({frame_key(mllm.make_grid(frames16)): ["d", '{"score": 4, "explanation": "e"}']})
    )
    res = mllm.score_grid(
        RecordedMLLM(path),
        "action_binding",
        "A dog runs through a field while a cat climbs a tree",
        meta,
        frames16,
    )
    assert res["score"] == pytest.approx(0.8)
    q2 = mllm.action_binding_questions("P", meta)[1]
    assert "5: Both a dog and a cat are present, and a dog runs through a field, a cat climbs a tree." in q2
    with pytest.raises(KeyError, match="no recorded output"):
        mllm.score_grid(RecordedMLLM(path), "action_binding", "P", meta, frames16[::-1].copy())
    assert mllm.score_grid(RecordedMLLM(path), "interaction", "P", {}, frames16)["score"] is None


def _box(cx, cy, w=0.1, h=0.1):
    return [cx, cy, w, h]


def test_filter_box_keeps_the_more_confident_duplicate():
    dets = [(_box(0.2, 0.2), 0.5, "cat"), (_box(0.201, 0.2), 0.7, "cat"), (_box(0.7, 0.7), 0.6, "cat")]
    kept = grounding.filter_box(dets, 0.9)
    assert [d[1] for d in kept] == [0.7, 0.6]
    assert grounding.calculate_iou(_box(0.5, 0.5, 0.2, 0.2), _box(0.6, 0.5, 0.2, 0.2)) == pytest.approx(1 / 3)


def test_numeracy_from_recorded_detections(tmp_path, frames16):
    rec = {}
    for i, f in enumerate(frames16):
        cats = [[*_box(0.2, 0.3), 0.8, "cat"], [*_box(0.201, 0.3), 0.5, "cat"]]  # a duplicate: filtered
        if i < 8:
            cats.append([*_box(0.7, 0.3), 0.6, "cat"])
        rec[frame_key(f)] = {
            "cat": cats,
            "red ball": [[*_box(0.5, 0.8), 0.9, "red ball"]] if i % 2 == 0 else [],
        }
    path = tmp_path / "det.json"
    path.write_text(json.dumps(rec))
    det = RecordedDetector(path)
    one = grounding.score_numeracy(det, frames16, {"objects": "cat", "numbers": "2"})
    assert one["score"] == pytest.approx(0.5) and one["counts"][0] == [2] and one["counts"][8] == [1]
    two = grounding.score_numeracy(det, frames16, {"objects": "cat,red ball", "numbers": "2,1"})
    # frames 0-7: cats right (0.5), ball right on even frames (0.5); frames 8-15: ball on even frames only
    expected = np.mean([0.5 + 0.5 * (i % 2 == 0) if i < 8 else 0.5 * (i % 2 == 0) for i in range(16)])
    assert two["score"] == pytest.approx(expected)


def test_spatial_2d_from_recorded_detections(tmp_path, frames16):
    rec = {}
    plan = []
    for i, f in enumerate(frames16):
        kind = ["right", "wrong", "one", "none"][i % 4]
        dog = [[*_box(0.2, 0.5, 0.2, 0.2), 0.8, "dog"]] if kind in ("right", "one") else []
        if kind == "wrong":
            dog = [[*_box(0.8, 0.5, 0.2, 0.2), 0.8, "dog"]]
        bike = [[*_box(0.3, 0.5, 0.2, 0.2), 0.7, "bicycle"]] if kind in ("right", "wrong") else []
        rec[frame_key(f)] = {"dog": dog, "bicycle": bike}
        plan.append(kind)
    path = tmp_path / "det.json"
    path.write_text(json.dumps(rec))
    res = grounding.score_spatial(
        RecordedDetector(path), frames16, {"spatial": "left", "object_1": "dog", "object_2": "bicycle"}
    )
    iou = 1 / 3  # 0.2-wide boxes 0.1 apart
    per = {"right": 0.4 + 0.6 * (1 - iou), "wrong": 0.4, "one": 0.2, "none": 0.0}
    assert res["frame_scores"] == pytest.approx([per[k] for k in plan])
    assert res["score"] == pytest.approx(np.mean([per[k] for k in plan]))
    assert (
        grounding.score_spatial(
            RecordedDetector(path), frames16, {"spatial": "behind", "object_1": "dog", "object_2": "bicycle"}
        )["score"]
        is None
    )
    assert grounding.spatial_judge(_box(0.5, 0.2), _box(0.5, 0.6), "on") and not grounding.spatial_judge(
        _box(0.5, 0.2), _box(0.5, 0.6), "below"
    )


def test_motion_binding_from_recorded_tracks(tmp_path):
    frames = np.zeros((16, 50, 100, 3), dtype=np.uint8)
    frames[:, 0, 0, 0] = np.arange(16)  # a distinct clip
    path = tmp_path / "trk.json"
    # dog moved 50 px left while the camera panned 10 px right: net_left = 10 - (-50) = 60 px of 100
    path.write_text(
        json.dumps({frame_key(frames): {"dog": [-50, 0, 10, 0], "cat": None, "bird": [0, -20, 0, 0]}})
    )
    trk = RecordedTracker(path)
    res = tracking.score_motion(trk, frames, {"object_1": "dog", "d_1": "left", "object_2": "", "d_2": ""})
    assert res["raw"] == pytest.approx(0.6) and res["score"] == pytest.approx(0.2 + 0.8 * 0.6)
    wrong = tracking.score_motion(trk, frames, {"object_1": "dog", "d_1": "right"})
    assert wrong["raw"] == 0.0 and wrong["score"] == pytest.approx(0.2)
    both = tracking.score_motion(
        trk, frames, {"object_1": "dog", "d_1": "left", "object_2": "bird", "d_2": "up"}
    )
    assert both["raw"] == pytest.approx((0.6 + 20 / 50) / 2)
    half = tracking.score_motion(
        trk, frames, {"object_1": "dog", "d_1": "left", "object_2": "cat", "d_2": "up"}
    )
    assert half["raw"] == pytest.approx(0.3)
    missing = tracking.score_motion(trk, frames, {"object_1": "cat", "d_1": "left"})
    assert missing["raw"] == -1.0 and missing["score"] == 0.0


def test_recorder_round_trip(tmp_path, frames16):
    class Fake:
        def detect(self, image, caption):
            return [([0.5, 0.5, 0.1, 0.1], float(image.mean()) / 255, caption)]

    r = Recorder(Fake())
    live = grounding.score_numeracy(r, frames16, {"objects": "cat", "numbers": "1"})
    r.save(tmp_path / "rec.json")
    replay = grounding.score_numeracy(
        RecordedDetector(tmp_path / "rec.json"), frames16, {"objects": "cat", "numbers": "1"}
    )
    assert live == replay and live["score"] == 1.0


def _write_csv(path, rows):
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)


def test_csv_ingest_official_formats(tmp_path):
    d = tmp_path / "csvs"
    (d / "baseline").mkdir(parents=True)
    (d / "both").mkdir()
    _write_csv(
        d / "both" / "wan_consistent_attr_score.csv",
        [
            ["name", "prompt", "answer_1", "answer_2", "Score"],
            ["0001.png", "p1", "a", "b", "5"],
            ["0002.png", "p2", "a", "b", "bad reply"],
            ["0003.png", "p3", "a", "b", "3"],
            ["score: ", "0.75"],
        ],
    )
    _write_csv(
        d / "both" / "wan_numeracy_video.csv",
        [
            ["id", "Score_frame_1", "Score_1"],
            ["0001", "[1, 0]", "0.5"],
            ["0002", "[1, 1]", "1.0"],
            ["score: ", "0.75"],
        ],
    )
    _write_csv(
        d / "both" / "wan_numeracy_frame.csv", [["video_name", "score"], ["0001", "1"]]
    )  # intermediate: ignored
    _write_csv(
        d / "baseline" / "consistent_attr.csv",
        [["name", "prompt", "Score"], ["0.mp4", "p1", "3"], ["1.mp4", "p2", "1"], ["score: ", "0.25"]],
    )
    got = ingest_dir(d)
    ca = got["both"]["consistent_attr"]
    assert ca["category_score"] == 0.75 and ca["videos"] == {1: 1.0, 3: 0.5} and 2 not in ca["raw"]
    assert got["both"]["numeracy"]["videos"] == {1: 0.5, 2: 1.0}
    assert got["baseline"]["consistent_attr"]["videos"] == {1: 0.5, 2: 0.0}  # 0-based names -> 1-based ids
    bad = tmp_path / "bad.csv"
    _write_csv(bad, [["name", "Score"], ["first", "1"]])
    with pytest.raises(IngestError, match="no video number"):
        read_official_csv(bad, "interaction")
    with pytest.raises(IngestError, match="no official score CSVs"):
        ingest_dir(tmp_path / "csvs" / "both")
