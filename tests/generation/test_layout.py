"""Layouts: interpolation, validation, JSON/YAML round trips, Wan latent grids, overlays, relation geometry."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from vidlab.generation.layout import (
    Layout,
    LayoutError,
    Relation,
    SubjectLayout,
    box_relation_holds,
    box_to_grid_mask,
    clamp_box,
    latent_frame_times,
)


def two_subjects() -> Layout:
    cat = SubjectLayout(
        "red cat", [(0.0, (0.0, 0.2, 0.4, 0.8)), (1.0, (0.6, 0.2, 1.0, 0.8))], attributes=["red"]
    )
    vase = SubjectLayout("vase", [(0.0, (0.5, 0.5, 0.9, 0.9))])
    return Layout("a red cat walks past a vase", [cat, vase], [Relation(0, "moving right")], planner="user")


# ---- interpolation ----------------------------------------------------------------------------------
def test_box_at_interpolates_and_clamps():
    s = SubjectLayout("cat", [(0.25, (0.0, 0.0, 0.2, 0.2)), (0.75, (0.4, 0.6, 0.8, 1.0))])
    assert s.box_at(0.0) == (0.0, 0.0, 0.2, 0.2)  # before the first keyframe: held
    assert s.box_at(1.0) == (0.4, 0.6, 0.8, 1.0)  # after the last: held
    assert s.box_at(0.5) == pytest.approx((0.2, 0.3, 0.5, 0.6))
    assert s.box_at(0.375) == pytest.approx((0.1, 0.15, 0.35, 0.4))


def test_keyframes_accept_dicts_and_pairs():
    a = SubjectLayout("cat", [{"t": 0, "box": [0, 0, 1, 1]}, [1, [0.1, 0.1, 0.9, 0.9]]])
    assert a.keyframes == [(0.0, (0.0, 0.0, 1.0, 1.0)), (1.0, (0.1, 0.1, 0.9, 0.9))]


# ---- validation -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("phrase", "keyframes", "message"),
    [
        ("", [(0, (0, 0, 1, 1))], "non-empty"),
        ("   ", [(0, (0, 0, 1, 1))], "non-empty"),
        ("cat", [], "at least one keyframe"),
        ("cat", [(0, (0, 0, 1.2, 1))], "x1=1.2 is outside [0, 1]"),
        ("cat", [(0, (-0.1, 0, 1, 1))], "x0=-0.1 is outside [0, 1]"),
        ("cat", [(0, (0.5, 0, 0.5, 1))], "x0=0.5 must be < x1=0.5"),
        ("cat", [(0, (0, 0.7, 1, 0.2))], "y0=0.7 must be < y1=0.2"),
        ("cat", [(1.5, (0, 0, 1, 1))], "time t=1.5 is outside [0, 1]"),
        ("cat", [(0.5, (0, 0, 1, 1)), (0.2, (0, 0, 1, 1))], "strictly increasing"),
        ("cat", [(0.5, (0, 0, 1, 1)), (0.5, (0, 0, 1, 1))], "strictly increasing"),
        ("cat", [(0, (0, 0, 1))], "box must be [x0, y0, x1, y1]"),
        ("cat", [(0, (0, 0, "a", 1))], "must be a number"),
        ("cat", [(0, (0, 0, float("nan"), 1))], "must be finite"),
        ("cat", [(0,)], "must be (t, [x0, y0, x1, y1])"),
    ],
)
def test_invalid_subjects_raise_precise_layout_errors(phrase, keyframes, message):
    with pytest.raises(LayoutError) as info:
        SubjectLayout(phrase, keyframes)
    assert isinstance(info.value, ValueError)
    assert message in str(info.value)


def test_error_names_the_subject_and_keyframe():
    with pytest.raises(LayoutError, match=r"subject 'dog' keyframe 1 \(t=1\): y1=2 is outside"):
        SubjectLayout("dog", [(0, (0, 0, 1, 1)), (1, (0, 0, 1, 2))])


@pytest.mark.parametrize(
    ("relations", "message"),
    [
        ([{"subject": 0, "relation": "inside", "object": 1}], "unknown relation 'inside'"),
        ([{"subject": 0, "relation": "left of", "object": 5}], "object index 5"),
        ([{"subject": 0, "relation": "left of"}], "needs an object"),
        ([{"relation": "left of"}], "must have 'subject'"),
    ],
)
def test_invalid_relations(relations, message):
    d = two_subjects().to_dict()
    d["relations"] = relations
    with pytest.raises(LayoutError, match=message):
        Layout.from_dict(d)


def test_span_must_point_at_the_phrase():
    with pytest.raises(LayoutError, match="span 0:3"):
        Layout("a cat", [SubjectLayout("cat", [(0, (0, 0, 1, 1))], span=(0, 3))])
    ok = Layout("a cat", [SubjectLayout("cat", [(0, (0, 0, 1, 1))], span=(2, 5))])
    assert ok.subjects[0].span == (2, 5)


def test_unknown_keys_and_versions_are_rejected():
    d = two_subjects().to_dict()
    with pytest.raises(LayoutError, match="unknown keys"):
        Layout.from_dict({**d, "boxes": []})
    with pytest.raises(LayoutError, match="version 9"):
        Layout.from_dict({**d, "version": 9})
    with pytest.raises(LayoutError, match="not valid JSON"):
        Layout.from_json("{not json")


def test_clamp_box():
    assert clamp_box((-0.2, 0.1, 1.4, 0.9)) == (0.0, 0.1, 1.0, 0.9)
    assert clamp_box((0.8, 0.9, 0.2, 0.1)) == (0.2, 0.1, 0.8, 0.9)  # corners sorted
    x0, y0, x1, y1 = clamp_box((1.2, 0.5, 1.3, 0.5))  # degenerate and outside: a small box at the edge
    assert 0 <= x0 < x1 <= 1 and 0 <= y0 < y1 <= 1


# ---- serialisation ----------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml"])
def test_save_load_round_trip(tmp_path, suffix):
    layout = two_subjects()
    path = layout.save(tmp_path / f"layout{suffix}")
    back = Layout.load(path)
    assert back.to_dict() == layout.to_dict()
    assert Layout.from_json(layout.to_json()).to_dict() == layout.to_dict()
    assert not list(tmp_path.glob("*.tmp"))


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(LayoutError, match="missing.json: no such file"):
        Layout.load(tmp_path / "missing.json")
    # true reasons, and a FIFO is never opened (reading it would block)
    import os

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(LayoutError, match="named pipe"):
        Layout.load(fifo)
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(LayoutError, match="is a folder"):
        Layout.load(tmp_path / "dir.json")
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(LayoutError, match="empty file"):
        Layout.load(tmp_path / "empty.json")
    from vidlab.errors import UserError

    assert issubclass(LayoutError, UserError) and issubclass(LayoutError, ValueError)
    bad = tmp_path / "bad.yaml"
    bad.write_text("prompt: a cat\nsubjects:\n  - phrase: cat\n    keyframes: [{t: 0, box: [0, 0, 2, 1]}]\n")
    with pytest.raises(LayoutError, match=r"bad\.yaml.*x1=2 is outside"):
        Layout.load(bad)
    txt = tmp_path / "layout.txt"
    txt.write_text("{}")
    with pytest.raises(LayoutError, match=r"\.json, \.yaml or \.yml"):
        Layout.load(txt)
    with pytest.raises(LayoutError, match=r"\.json, \.yaml or \.yml"):
        two_subjects().save(tmp_path / "x.toml")


# ---- Wan latent grid --------------------------------------------------------------------------------
def test_latent_frame_times_follow_the_4k_plus_1_rule():
    t = latent_frame_times(81)
    assert t.shape == (21,)
    assert t[0] == 0.0
    # latent frame 1 covers pixel frames 1..4 (centre 2.5); latent frame 20 covers 77..80 (centre 78.5)
    assert t[1] == pytest.approx(2.5 / 80) and t[-1] == pytest.approx(78.5 / 80)
    assert np.all(np.diff(t) > 0)
    assert latent_frame_times(1).tolist() == [0.0]
    assert len(latent_frame_times(9)) == 3
    for bad in (80, 0, 10):
        with pytest.raises(LayoutError, match="4k\\+1"):
            latent_frame_times(bad)


def test_latent_masks_shape_and_motion():
    layout = two_subjects()
    m = layout.latent_masks(81, 480, 832)
    assert m.shape == (2, 21, 30, 52) and m.dtype == bool
    cat = m[0]
    cols_first = np.flatnonzero(cat[0].any(axis=0))
    cols_last = np.flatnonzero(cat[-1].any(axis=0))
    assert cols_first.max() < 26 and cols_last.min() > 26  # left half at t=0, right half at the end
    assert np.all(m[1] == m[1][0])  # the vase is static
    # rows: the cat box spans y 0.2..0.8 of 30 rows -> rows 6..23
    assert np.flatnonzero(cat[0].any(axis=1)).tolist() == list(range(6, 24))
    with pytest.raises(LayoutError, match="multiple of spatial_stride"):
        layout.latent_masks(81, 470, 832)


def test_half_coverage_rule_and_never_empty():
    # 4x4 grid, cells 0.25 wide. A box over [0, 0.375] covers column 0 fully and column 1 by half: both in.
    m = box_to_grid_mask((0.0, 0.0, 0.375, 1.0), 4, 4)
    assert m[0].tolist() == [True, True, False, False]
    # Just under half of column 1: out.
    m = box_to_grid_mask((0.0, 0.0, 0.37, 1.0), 4, 4)
    assert m[0].tolist() == [True, False, False, False]
    # A tiny box gets the one cell holding its centre.
    m = box_to_grid_mask((0.6, 0.6, 0.61, 0.61), 4, 4)
    assert m.sum() == 1 and m[2, 2]
    # Latent masks for a tiny subject are never empty on any frame.
    tiny = Layout("a dot", [SubjectLayout("dot", [(0, (0.5, 0.5, 0.501, 0.501))])])
    assert tiny.latent_masks(9, 32, 32).reshape(3, -1).sum(axis=1).tolist() == [1, 1, 1]


# ---- overlays ---------------------------------------------------------------------------------------
def test_render_overlays_draws_each_box(tmp_path):
    layout = two_subjects()
    paths = layout.render_overlays(tmp_path, width=200, height=100)
    assert [p.name for p in paths] == ["layout_00_t0.00.png", "layout_01_t1.00.png"]
    first = np.asarray(Image.open(paths[0]).convert("RGB"))
    assert first.shape == (100, 200, 3)
    red = (230, 25, 75)  # subject 0's colour; its box spans x 0..0.4 at t=0 and 0.6..1 at t=1

    def edge_columns(img):  # columns holding a vertical box edge (many pixels of the subject colour)
        return set(np.flatnonzero(np.all(img == red, axis=-1).sum(axis=0) >= 30).tolist())

    assert edge_columns(first) <= {0, 1, 78, 79, 80} and 0 in edge_columns(first)
    last = np.asarray(Image.open(paths[1]).convert("RGB"))
    assert edge_columns(last) <= {118, 119, 120, 198, 199} and len(edge_columns(last)) >= 2
    more = layout.render_overlays(tmp_path / "five", width=64, height=64, num_keyframes=5)
    assert len(more) == 5 and all(p.is_file() for p in more)


# ---- relation geometry ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("relation", "a", "b", "holds"),
    [
        ("left of", (0.0, 0.0, 0.4, 1.0), (0.6, 0.0, 1.0, 1.0), True),
        ("left of", (0.6, 0.0, 1.0, 1.0), (0.0, 0.0, 0.4, 1.0), False),
        ("right of", (0.6, 0.0, 1.0, 1.0), (0.0, 0.0, 0.4, 1.0), True),
        ("above", (0.0, 0.0, 1.0, 0.4), (0.0, 0.6, 1.0, 1.0), True),
        ("below", (0.0, 0.0, 1.0, 0.4), (0.0, 0.6, 1.0, 1.0), False),
        ("on", (0.3, 0.1, 0.7, 0.52), (0.1, 0.5, 0.9, 0.9), True),
        ("on", (0.3, 0.0, 0.7, 0.2), (0.1, 0.5, 0.9, 0.9), False),  # floating, not touching
        ("under", (0.3, 0.6, 0.7, 0.9), (0.1, 0.1, 0.9, 0.5), True),
        ("under", (0.0, 0.6, 0.05, 0.9), (0.1, 0.1, 0.9, 0.5), False),  # no horizontal overlap
        ("in front of", (0.1, 0.3, 0.7, 0.95), (0.4, 0.05, 0.9, 0.6), True),
        ("behind", (0.1, 0.3, 0.7, 0.95), (0.4, 0.05, 0.9, 0.6), False),
        ("near", (0.0, 0.0, 0.4, 0.4), (0.5, 0.0, 0.9, 0.4), True),
        ("near", (0.0, 0.0, 0.2, 0.2), (0.8, 0.8, 1.0, 1.0), False),
    ],
)
def test_box_relation_holds(relation, a, b, holds):
    assert box_relation_holds(relation, a, b) is holds


def test_motion_relation_and_groups():
    layout = two_subjects()
    assert layout.relation_holds(Relation(0, "moving right"))
    assert not layout.relation_holds(Relation(0, "moving left"))
    assert not layout.relation_holds(Relation(1, "moving right"))  # static
    copies = [
        SubjectLayout("cats", [(0, (0.1 + 0.3 * k, 0.1, 0.3 + 0.3 * k, 0.3))], count_index=k)
        for k in range(3)
    ]
    g = Layout("three cats", copies)
    assert g.group_of(1) == [0, 1, 2]
    assert g.group_box_at(2, 0.0) == pytest.approx((0.1, 0.1, 0.9, 0.3))


# ---- properties -------------------------------------------------------------------------------------
@st.composite
def layouts(draw):
    n = draw(st.integers(0, 4))
    subjects = []
    for i in range(n):
        times = sorted(set(draw(st.lists(st.floats(0, 1), min_size=1, max_size=4))))
        kfs = []
        for t in times:
            x0, x1 = sorted(draw(st.lists(st.floats(0, 1), min_size=2, max_size=2, unique=True)))
            y0, y1 = sorted(draw(st.lists(st.floats(0, 1), min_size=2, max_size=2, unique=True)))
            kfs.append((t, (x0, y0, x1, y1)))
        subjects.append(SubjectLayout(f"thing{i}", kfs))
    return Layout(" ".join(f"thing{i}" for i in range(n)) or "nothing", subjects)


@settings(max_examples=40, deadline=None)
@given(layout=layouts(), t=st.floats(-0.5, 1.5), suffix=st.sampled_from([".json", ".yaml"]))
def test_any_valid_layout_round_trips_and_rasterises(layout, t, suffix, tmp_path_factory):
    """Property: valid layouts survive JSON/YAML exactly; boxes stay in range; every mask is non-empty."""
    path = layout.save(tmp_path_factory.mktemp("rt") / f"l{suffix}")
    assert Layout.load(path).to_dict() == layout.to_dict()
    for s in layout.subjects:
        x0, y0, x1, y1 = s.box_at(t)
        assert 0 <= x0 <= x1 <= 1 and 0 <= y0 <= y1 <= 1
    masks = layout.latent_masks(9, 32, 48)
    assert masks.shape == (len(layout.subjects), 3, 2, 3)
    assert masks.any(axis=(2, 3)).all()
