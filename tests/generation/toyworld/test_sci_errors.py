"""The two-subject error classes the SCI study counts, on constructed frames, and the SCI placebo's anchors."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

CAPTION = "a red circle to the left of a blue square"
ROOT = Path(__file__).resolve().parents[3]


def _frames(*objects: tuple[str, str, float, float], radius: float = 0.13):
    """Rendered clip of static objects (colour, shape, x, y as fractions of the side) and the detector's verdicts."""
    from vidlab.generation.toyworld.detect import detect_video
    from vidlab.generation.toyworld.world import Scene, WorldConfig, WorldObject, render

    px = WorldConfig().size
    objs = [WorldObject(c, s, radius * px, (x * px, y * px), (x * px, y * px)) for c, s, x, y in objects]
    scene = Scene(caption="constructed", kind="relation", objects=objs, config=WorldConfig())
    return detect_video(render(scene))


@pytest.mark.parametrize(
    "objects, cls, leak",
    [
        ([("red", "circle", 0.25, 0.5), ("blue", "square", 0.75, 0.5)], "correct", 0.0),
        ([("red", "square", 0.25, 0.5), ("blue", "circle", 0.75, 0.5)], "swap", 1.0),
        ([("red", "circle", 0.25, 0.5)], "drop_one", 0.0),
        ([("green", "star", 0.5, 0.5)], "drop_both", 0.0),
        # red drawn as the other subject's shape, blue as a third shape: one leak, not a full swap
        ([("red", "square", 0.25, 0.5), ("blue", "triangle", 0.75, 0.5)], "shape", 0.5),
        # the two colours drawn as one touching blob
        ([("red", "circle", 0.42, 0.5), ("blue", "square", 0.62, 0.5)], "merge", None),
    ],
)
def test_each_error_class_is_found_on_a_constructed_clip(objects, cls, leak):
    from vidlab.generation.toyworld.evaluate import two_subject_error

    got = two_subject_error(CAPTION, _frames(*objects))
    assert got is not None and got["class"] == cls, got
    if leak is not None:
        assert got["leak"] == leak
    assert [s[:2] for s in got["subjects"]] == [["circle", "square"], ["square", "circle"]]


def test_the_error_class_is_undefined_where_a_swap_is_not_and_records_carry_it():
    from vidlab.generation.toyworld.evaluate import EvalItem, score_record, two_subject_error
    from vidlab.generation.toyworld.world import Scene, WorldConfig, WorldObject, render

    same_colour = "a red circle to the left of a red square"
    assert two_subject_error(same_colour, _frames(("red", "circle", 0.25, 0.5))) is None
    assert two_subject_error("a red circle", _frames(("red", "circle", 0.5, 0.5))) is None
    objs = [WorldObject("red", "square", 8.0, (16.0, 32.0), (16.0, 32.0))]
    objs.append(WorldObject("blue", "circle", 8.0, (48.0, 32.0), (48.0, 32.0)))
    clip = render(Scene(caption="x", kind="relation", objects=objs, config=WorldConfig()))
    rec = score_record(EvalItem.of(CAPTION), clip, None, _layout(CAPTION))
    assert rec["error"]["class"] == "swap" and rec["presence"] is False
    assert rec["error"]["subjects"][0][2] == ["square"]  # red is drawn as a square only


def _layout(prompt: str):
    from vidlab.generation.toyworld.evaluate import planned_layout

    return planned_layout(prompt)


def _study():
    spec = importlib.util.spec_from_file_location("sci_study", ROOT / "benchmarks" / "sci_study.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sci_study"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_binding_excess_cancels_a_shape_confusion_and_counts_a_binding_one():
    study = _study()

    def rec(told: str, other: str, drawn: list[str]) -> dict:
        return {"error": {"class": "shape", "leak": 0, "foreign": 0, "subjects": [[told, other, drawn]]}}

    # circles drawn as squares half the time, whatever the other subject is: no binding excess
    plain = [
        rec("circle", o, ["square"] if i % 2 else ["circle"]) for o in ("square", "star") for i in range(8)
    ]
    assert study.binding_excess(plain)["excess"] == pytest.approx(0.0)
    # circles drawn as squares only when the other subject is a square: +1 in the (circle, square) bucket, 0 in
    # the (circle, star) one (stars never drawn), weighted equally
    bound = [rec("circle", "square", ["square"])] * 4 + [rec("circle", "star", ["circle"])] * 4
    assert study.binding_excess(bound)["excess"] == pytest.approx(0.5)


def test_placement_counts_only_the_videos_that_draw_both_subjects():
    study = _study()

    def rec(presence: bool, relation: bool, swapped: bool) -> dict:
        return {"presence": presence, "relation": relation, "swapped": swapped}

    # a subject missing: never counted, whatever its figures say; of the 4 with both, 3 as told, 1 opposite
    recs = [rec(False, False, True)] * 5 + [rec(True, True, False)] * 3 + [rec(True, False, True)]
    assert study.placement(recs) == {"videos_with_both": 4, "relation": 0.75, "opposite": 0.25}
    assert study.placement([rec(False, False, False)]) == {
        "videos_with_both": 0,
        "relation": None,
        "opposite": None,
    }


def test_the_placebo_anchors_come_from_other_subjects_and_replace_the_true_ones(monkeypatch):
    study = _study()
    from vidlab.generation.toyworld.splits import test_prompts

    prompts = study.distinct_prompts(test_prompts())
    table = study.placebo_phrases(prompts)
    assert set(table) == set(prompts)
    for p, wrong in table.items():
        true = study.subject_phrases(p)
        assert len(wrong) == len(true) == 2
        words = {w for ph in true for w in ph.split()}
        assert words.isdisjoint(w for ph in wrong for w in ph.split()), (
            p,
            wrong,
        )  # no colour, no shape shared

    import vidlab.generation.sci as sci

    seen: list[list[str]] = []
    monkeypatch.setattr(sci, "encode_anchors", lambda tok, te, phrases: seen.append(list(phrases)))
    p = prompts[0]
    with study.placebo_anchors({tuple(study.subject_phrases(p)): table[p]}):
        sci.encode_anchors(None, None, study.subject_phrases(p))
        with pytest.raises(KeyError):  # never a silent fall-back to the true anchors
            sci.encode_anchors(None, None, ["green star", "cyan circle"])
    assert seen == [table[p]]
    sci.encode_anchors(None, None, ["x"])  # restored afterwards
    assert seen[-1] == ["x"]


def test_the_placebo_changes_what_sci_does_to_the_prompt():
    """With real embeddings from a tiny encoder: SCI's update from another prompt's anchors differs from the true
    one (same token groups, other anchors)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from vidlab.generation.sci import compute_sci, encode_anchors
    from vidlab.generation.subjects import subject_token_indices
    from vidlab.generation.toyworld.model import ModelConfig, build_text_encoder
    from vidlab.generation.toyworld.tokenizer import build_word_tokenizer

    study = _study()
    tok = build_word_tokenizer(model_max_length=16)
    torch.manual_seed(0)
    te = build_text_encoder(ModelConfig(), len(tok)).eval()
    p = CAPTION
    true = study.subject_phrases(p)
    from vidlab.generation.toyworld.splits import test_prompts

    wrong = study.placebo_phrases([p], study.distinct_prompts(test_prompts()))[p]
    enc = tok(p, return_tensors="pt")
    with torch.no_grad():
        emb = te(enc.input_ids, enc.attention_mask).last_hidden_state[0]
    groups = subject_token_indices(tok, p, true)
    a_true, a_wrong = encode_anchors(tok, te, true), encode_anchors(tok, te, wrong)
    assert not torch.allclose(a_true, a_wrong)
    u_true = compute_sci(emb, groups, a_true).update
    u_wrong = compute_sci(emb, groups, a_wrong).update
    assert float((u_true - u_wrong).norm()) > 0.1 * float(u_true.norm())
    assert np.isfinite(float(u_wrong.norm()))
