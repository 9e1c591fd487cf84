"""Subjects stated or not: counted subjects get one box each and LAM's union-with-separation target; a
layout with no subjects warns (or is refused when LAM was asked for); a cut prompt names what was dropped."""

import warnings

import pytest
import torch

from vidlab.generation.comp_attn import apply_comp_attn, prepare_inputs
from vidlab.generation.config import CompAttnConfig
from vidlab.generation.errors import NoSubjectsError, NoSubjectsWarning, PromptTruncatedWarning
from vidlab.generation.lam import build_targets, column_bias, instance_target
from vidlab.generation.layout import Layout, SubjectLayout
from vidlab.generation.planners import plan_layout
from vidlab.generation.subjects import truncated_text
from vidlab.generation.tiny import build_tiny_pipeline
from vidlab.generation.tiny_tokenizer import build_tiny_tokenizer


def test_rule_planner_gives_each_counted_instance_its_own_box():
    layout = plan_layout("three cats on the left of a red car")
    cats = [s for s in layout.subjects if s.phrase == "cats"]
    assert [c.count_index for c in cats] == [0, 1, 2]
    boxes = [c.box_at(0) for c in cats]
    assert len(set(boxes)) == 3
    for a, b in zip(boxes, boxes[1:]):  # side by side, not overlapping: instances stay apart
        assert a[2] <= b[0]


def test_instance_target_is_the_union_minus_overlaps():
    a = torch.tensor([1, 1, 1, 0, 0, 0], dtype=torch.bool)
    b = torch.tensor([0, 0, 1, 1, 0, 0], dtype=torch.bool)
    c = torch.tensor([0, 0, 0, 0, 0, 1], dtype=torch.bool)
    got = instance_target(torch.stack([a, b, c]))
    assert got.tolist() == [True, True, False, True, False, True]  # token 2 (a and b overlap) is taken out
    assert instance_target(torch.stack([a, b, c]), separate=False).tolist() == [1, 1, 1, 1, 0, 1]
    assert instance_target(torch.stack([a, a])).tolist() == a.tolist()  # full overlap: keep the union


def test_lam_pushes_a_counted_phrase_toward_the_union_and_apart_at_overlaps():
    # three copies of "cats" share token 3; a fourth subject "dog" has token 6; grid 1 x 1 x 6
    masks = torch.zeros(4, 1, 1, 6, dtype=torch.bool)
    masks[0, 0, 0, :2] = True
    masks[1, 0, 0, 1:3] = True  # overlaps copy 0 at token 1
    masks[2, 0, 0, 4] = True
    masks[3, 0, 0, 5] = True
    targets = build_targets([[3], [3], [3], [6]], masks)
    assert len(targets.groups) == 2
    assert targets.masks[0].tolist() == [True, False, True, False, True, False]
    sub = torch.randn(1, 2, 6, 2)  # (B, H, S, n) logits of the two subject columns
    bias = column_bias(sub, targets, torch.ones(1, 2))
    cats = bias[0, :, 0]
    assert (cats[[0, 2, 4]] > 0).all() and (cats[[1, 3, 5]] < 0).all()  # union pushed up, overlap/gap down


def test_no_subjects_warns_and_is_refused_when_lam_is_asked_for():
    empty = Layout("a quiet night", [])
    with pytest.warns(NoSubjectsWarning, match="no subjects"):
        prep = prepare_inputs("a quiet night", empty)
    assert prep.chosen == []
    with pytest.raises(NoSubjectsError, match="LAM was asked for"):
        prepare_inputs("a quiet night", empty, require_subjects=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepare_inputs("a cat", Layout("a cat", [SubjectLayout("cat", [(0.0, (0.1, 0.1, 0.5, 0.5))])]))


def test_truncated_text_names_what_the_encoder_drops():
    tok = build_tiny_tokenizer()
    prompt = "a red cat " * 10 + "and a blue dog"
    assert truncated_text(tok, prompt, 512) == ""
    dropped = truncated_text(tok, prompt, 20)
    assert dropped.endswith("and a blue dog") and prompt.endswith(dropped)
    kept = tok(prompt, truncation=True, max_length=20)["input_ids"]
    assert tok.decode(kept, skip_special_tokens=True).strip() + " " + dropped == " ".join(prompt.split())


def test_generate_warns_when_the_prompt_is_cut():
    pipe = build_tiny_pipeline("wan2.1")
    prompt = "a red cat on the left of a blue dog " + "in a sunny garden " * 4
    layout = plan_layout(prompt)
    comp = apply_comp_attn(pipe, CompAttnConfig())
    try:
        with pytest.warns(PromptTruncatedWarning, match="drops .* word.*garden'"):
            comp.generate(
                prompt,
                layout=layout,
                max_sequence_length=16,
                height=16,
                width=16,
                num_frames=5,
                num_inference_steps=1,
                output_type="latent",
                generator=torch.Generator().manual_seed(0),
            )
    finally:
        comp.remove()
