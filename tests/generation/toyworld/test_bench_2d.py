"""The benchmark's 2-D position items, relations by axis, TS-Attn as a toy-world method, and the test-seed option:
boxes and their placebo, where a rendered subject lands against a quadrant, the chunk interleaving of three kinds."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from vidlab.generation.toyworld.evaluate import BOXES_2D, EvalItem, comp_config, item_layout, score_record
from vidlab.generation.toyworld.world import Scene, WorldConfig, WorldObject, render

ROOT = Path(__file__).resolve().parents[3]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "gen_toyworld_bench2d", ROOT / "benchmarks" / "gen_toyworld.py"
    )
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def _at(cx: float, cy: float) -> np.ndarray:
    cfg = WorldConfig()
    s = cfg.size
    obj = WorldObject("red", "circle", 0.13 * s, (cx * s, cy * s), (cx * s, cy * s))
    return render(Scene("a red circle", "single", [obj], config=cfg))


def test_quadrant_boxes_and_their_placebo_is_the_opposite_quadrant():
    item = EvalItem.of("a red circle", "top-left")
    real, _ = item_layout(item, "lam")
    placebo, truth = item_layout(item, "placebo")
    assert real.subjects[0].box_at(0.0) == pytest.approx(BOXES_2D["top-left"])
    assert placebo.subjects[0].box_at(0.0) == pytest.approx(BOXES_2D["bottom-right"])
    assert truth.subjects[0].box_at(0.0) == pytest.approx(BOXES_2D["top-left"])
    # left/right items keep their placebo: the other side (the point mirror of a vertically centred box)
    lp, _ = item_layout(EvalItem.of("a red circle", "left"), "placebo")
    assert lp.subjects[0].box_at(0.0) == pytest.approx((0.65, 0.3, 0.98, 0.7))


def test_a_rendered_subject_is_scored_against_its_quadrant_and_a_missing_one_is_a_miss():
    b = _bench()
    item = EvalItem.of("a red circle", "bottom-right")
    real, _ = item_layout(item, "lam")
    in_q = b._derive([score_record(item, _at(0.75, 0.72), real, real)])[0]
    assert (in_q["quadrant"], in_q["x_ok"], in_q["y_ok"], in_q["in_box"]) == (1.0, 1.0, 1.0, 1.0)
    assert in_q["toward2d"] > 0.25 and in_q["toward"] is None  # toward is the left/right figure only
    wrong_row = b._derive([score_record(item, _at(0.75, 0.28), real, real)])[0]
    assert (wrong_row["quadrant"], wrong_row["x_ok"], wrong_row["y_ok"]) == (0.0, 1.0, 0.0)
    missing = b.position_2d({"side": "top-left", "cx": None, "cy": None})
    assert missing["quadrant"] == 0.0 and missing["in_box"] == 0.0 and missing["toward2d"] is None
    centre = b.position_2d({"side": "centre", "cx": 0.52, "cy": 0.45})
    assert centre["quadrant"] is None and centre["x_ok"] is None and centre["in_box"] == 1.0
    top = b.position_2d({"side": "top", "cx": 0.9, "cy": 0.2})
    assert top["x_ok"] is None and top["y_ok"] == 1.0 and top["in_box"] == 0.0


def test_relations_are_split_by_axis_and_paired_per_axis():
    b = _bench()
    assert b.relation_axis("a red circle to the left of a blue square") == "horizontal"
    assert b.relation_axis("a red circle below a blue square") == "vertical"
    assert b.relation_axis("two red circles") is None

    def rec(prompt, rel, seed=0):
        return {
            "prompt": prompt,
            "item": prompt,
            "seed": seed,
            "relation": rel,
            "swapped": 0.0,
            "presence": 1.0,
            "seconds": 1.0,
        }

    h, v = "a red circle to the left of a blue square", "a red circle above a blue square"
    multi = {"baseline": [rec(h, 1.0), rec(v, 0.0)], "lam": [rec(h, 1.0), rec(v, 1.0)]}
    out = b.relation_by_axis(multi)
    assert (
        out["vertical"]["paired"]["lam"]["diff"] == 1.0 and out["horizontal"]["paired"]["lam"]["diff"] == 0.0
    )
    assert out["vertical"]["prompts"] == 1


def test_chunks_interleave_three_kinds_and_cover_every_item_once():
    b = _bench()
    multi, single, grid = list(range(20)), [f"s{i}" for i in range(8)], [f"g{i}" for i in range(10)]
    chunks = b._chunks(multi, single, 5, 4, grid, 5)
    for kind, items in (("multi", multi), ("single", single), ("grid2d", grid)):
        assert sorted(x for k, c in chunks if k == kind for x in c) == sorted(items)
    assert [k for k, _ in chunks[:3]] == ["single", "grid2d", "multi"]


def test_ts_attn_runs_as_lams_rule_with_its_own_settings():
    b = _bench()
    cfg = comp_config(b.run_name("ts_attn"), overrides=b.TS_ATTN_OV)
    assert cfg.enabled and not cfg.sci.enabled and cfg.lam.enabled and cfg.lam.rule == "ts_attn"
    assert (cfg.lam.ts_step_fraction, cfg.lam.ts_alpha_min, cfg.lam.ts_alpha_max) == (0.2, 1.0, 1.5)
    assert b.run_name("lam") == "lam"


@pytest.mark.parametrize(
    "argv,match",
    [
        (["--seed-base", "-1"], ">= 0"),
        (["--study-settings", "[1]"], "--study-settings"),
        (["--study-settings", '{"baseline": ["baseline", {}], "x": ["lam", {"lam.nope": 1}]}'], "x:"),
    ],
)
def test_bad_options_are_one_line_before_any_model_loads(argv, match, capsys):
    b = _bench()
    with pytest.raises(SystemExit) as exc:
        b.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert match in err


def test_colour_relation_reads_the_layout_without_the_shapes():
    from vidlab.generation.toyworld.detect import detect_video
    from vidlab.generation.toyworld.evaluate import colour_relation

    cfg = WorldConfig()
    s = cfg.size

    def two(shape_a, shape_b):
        a = WorldObject("red", shape_a, 0.13 * s, (0.25 * s, 0.5 * s), (0.25 * s, 0.5 * s))
        b = WorldObject("blue", shape_b, 0.13 * s, (0.75 * s, 0.5 * s), (0.75 * s, 0.5 * s))
        return detect_video(render(Scene("x", "relation", [a, b], config=cfg)))

    cap = "a red circle to the left of a blue square"
    assert colour_relation(cap, two("circle", "square")) == (True, False)
    # the shapes swapped: the shape-level relation fails (no red circle), the colours are still where asked
    assert colour_relation(cap, two("square", "circle")) == (True, False)
    assert colour_relation("a red circle to the right of a blue square", two("circle", "square")) == (
        False,
        True,
    )
    assert colour_relation("a red circle", two("circle", "square")) == (None, None)
