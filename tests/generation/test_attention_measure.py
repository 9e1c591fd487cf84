"""The non-circular layout measure: captured maps say whether LAM biased them, ``layout_faithfulness`` reads
only unbiased ones and reports a placebo layout beside the real one; Wan2.2's per-expert LAM window."""

from functools import lru_cache

import numpy as np
import pytest
import torch

from vidlab.generation.attention_maps import AttentionMapStore
from vidlab.generation.attention_measure import NoUnbiasedMapsError, layout_faithfulness, placebo_layout
from vidlab.generation.comp_attn import apply_comp_attn
from vidlab.generation.config import CompAttnConfig
from vidlab.generation.layout import Layout, Relation, SubjectLayout
from vidlab.generation.tiny import build_tiny_pipeline

PROMPT = "a red cat on the left and a blue dog on the right"
LAYOUT = Layout(
    PROMPT,
    [
        SubjectLayout("red cat", [(0.0, (0.0, 0.0, 0.5, 1.0))]),
        SubjectLayout("blue dog", [(0.0, (0.5, 0.0, 1.0, 1.0))]),
    ],
    [Relation(0, "left of", 1)],
)
KW = dict(height=32, width=32, num_frames=9, num_inference_steps=4, output_type="latent")


@lru_cache(maxsize=2)
def _pipe(variant="wan2.1"):
    return build_tiny_pipeline(variant)


def _gen(cfg, variant="wan2.1", layout=LAYOUT):
    comp = apply_comp_attn(_pipe(variant), cfg)
    try:
        return comp.generate(PROMPT, layout=layout, generator=torch.Generator().manual_seed(0), **KW)
    finally:
        comp.remove()


def test_placebo_layout_mirrors_every_box_and_contradicts_the_relations():
    placebo = placebo_layout(LAYOUT)
    assert [s.phrase for s in placebo.subjects] == ["red cat", "blue dog"]
    assert placebo.subjects[0].box_at(0) == (0.5, 0.0, 1.0, 1.0)
    assert LAYOUT.relation_holds(LAYOUT.relations[0]) and not placebo.relation_holds(
        Relation(0, "left of", 1)
    )
    moving = Layout(
        "a bird", [SubjectLayout("bird", [(0.0, (0.0, 0.0, 0.2, 0.3)), (1.0, (0.6, 0.1, 0.8, 0.4))])]
    )
    mirrored = placebo_layout(moving).subjects[0]
    assert mirrored.box_at(0) == pytest.approx((0.8, 0.7, 1.0, 1.0)) and mirrored.box_at(1) == pytest.approx(
        (0.2, 0.6, 0.4, 0.9)
    )


def test_faithfulness_uses_only_unbiased_maps_and_exact_shares():
    masks = np.zeros((1, 1, 2, 2), dtype=bool)
    masks[0, 0, :, 0] = True  # left column
    store = AttentionMapStore(["cat"], (1, 2, 2), masks, masks[:, :, :, ::-1])
    biased = torch.tensor([[[1.0, 0.0, 1.0, 0.0]]])  # all of it in the box
    unbiased = torch.tensor([[[0.3, 0.1, 0.3, 0.3]]])  # 0.6 of 1.0 in the box, 0.4 in the placebo box
    store.add(0, biased, block=0, biased=True)
    store.add(2, unbiased, block=0, biased=False)
    assert store.biased_steps == [0] and store.step_biased(0) and not store.step_biased(2)
    f = layout_faithfulness(store)
    assert f.n_maps == 1 and f.steps == [2] and not f.biased
    assert (
        f.share == pytest.approx(0.6)
        and f.placebo_share == pytest.approx(0.4)
        and f.lift == pytest.approx(0.2)
    )
    assert f.chance == pytest.approx(0.5)
    circular = layout_faithfulness(store, include_biased=True)
    assert circular.biased and circular.share == pytest.approx(0.8)  # (1.0 + 0.6) / 2
    with pytest.raises(NoUnbiasedMapsError):
        layout_faithfulness(store, steps=[0])


def test_captured_maps_say_which_steps_and_blocks_lam_biased():
    cfg = CompAttnConfig(capture_attention=True)
    cfg.lam.step_fraction = 0.5  # 4 steps: LAM on steps 0 and 1
    cfg.lam.blocks = [0]  # block 1 is never modulated: its attention is unbiased even inside the window
    res = _gen(cfg)
    maps = res.maps
    assert maps.steps == [0, 1, 2, 3] and maps.biased_steps == [0, 1]
    flags = {(e.step, e.block): e.biased for e in maps.entries()}
    assert flags == {(s, b): (s < 2 and b == 0) for s in range(4) for b in range(2)}
    assert {(r["step"], r["block"]) for r in res.lam_log} == {(0, 0), (1, 0)}
    f = layout_faithfulness(maps)
    assert f.n_maps == 6 and not f.biased and f.placebo_share is not None
    # the placebo boxes are the mirror image: on this 2-subject left/right layout they tile the same frame
    assert 0.0 <= f.share <= 1.0 and f.share + f.placebo_share == pytest.approx(1.0, abs=1e-5)
    window_unbiased = layout_faithfulness(maps, steps=[0, 1])
    assert window_unbiased.n_maps == 2  # block 1 at steps 0 and 1


def test_wan22_lam_window_is_per_expert():
    # tiny Wan2.2, 4 steps: the high-noise expert runs step 0, the low-noise expert steps 1-3
    cfg = CompAttnConfig()
    cfg.sci.enabled = False
    cfg.lam.step_fraction = 0.6  # whole-schedule window: steps 0, 1, 2 ...
    default = _gen(cfg, "wan2.2")
    assert {t for t, _, _ in default.forwards} == {"transformer", "transformer_2"}
    # ... but by default (step_fraction_2 = 0) LAM stays off on the low-noise expert
    assert {(r["transformer"], r["step"]) for r in default.lam_log} == {("transformer", 0)}
    cfg.lam.step_fraction_2 = 0.5  # the first half of the low-noise expert's own steps (1, 2 of 1..3)
    both = _gen(cfg, "wan2.2")
    assert {(r["transformer"], r["step"]) for r in both.lam_log} == {
        ("transformer", 0),
        ("transformer_2", 1),
        ("transformer_2", 2),
    }
