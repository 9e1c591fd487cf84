"""SCI: schedule, saliency, disambiguation direction, subject-only update, distinctness, anchors."""

import math

import pytest
import torch
import torch.nn.functional as F

from vidlab.generation.sci import compute_sci, encode_anchors, mean_pairwise_cosine, pooled, sci_weight


def test_schedule_shapes_and_window():
    assert sci_weight(0.0, 0.8, 0.0, 0.5, "constant") == 0.8
    assert sci_weight(0.49, 0.8, 0.0, 0.5, "constant") == 0.8
    assert sci_weight(0.5, 0.8, 0.0, 0.5, "constant") == 0.0  # end is exclusive
    assert sci_weight(0.25, 1.0, 0.0, 0.5, "linear") == pytest.approx(0.5)
    assert sci_weight(0.25, 1.0, 0.0, 0.5, "cosine") == pytest.approx(0.5)
    assert sci_weight(0.125, 1.0, 0.0, 0.5, "cosine") == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert sci_weight(0.1, 1.0, 0.2, 0.6, "linear") == 0.0  # before start
    assert sci_weight(0.0, 0.0, 0.0, 1.0, "constant") == 0.0
    with pytest.raises(ValueError, match="decay"):
        sci_weight(0.1, 1.0, 0.0, 1.0, "exp")


def _setup(n=3, L=20, d=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    anchors = torch.randn(n, d, generator=g)
    emb = torch.randn(L, d, generator=g) * 0.5
    groups = [[2 + 3 * i, 3 + 3 * i] for i in range(n)]
    for i, grp in enumerate(groups):  # in context each subject leans towards the others (confusion)
        emb[grp] += anchors[i] + 0.8 * anchors.sum(0)
    return emb, groups, anchors


def test_update_formula_matches_the_spec():
    emb, groups, anchors = _setup()
    n = len(groups)
    plan = compute_sci(emb, groups, anchors, tau=0.2, rescale=True)
    p = torch.stack([emb[g].mean(0) for g in groups])
    cos = F.normalize(p, dim=-1) @ F.normalize(anchors, dim=-1).T
    sal = torch.softmax(cos / 0.2, -1).diagonal()
    assert plan.saliency == pytest.approx(sal.tolist(), abs=1e-6)
    for i, g in enumerate(groups):
        delta = n * anchors[i] - anchors.sum(0)
        delta = delta / delta.norm() * emb[g].norm(dim=-1).mean()
        for t in g:
            torch.testing.assert_close(plan.update[t], (1 - sal[i]) * delta, rtol=1e-5, atol=1e-6)
    touched = {t for g in groups for t in g}
    others = [t for t in range(emb.shape[0]) if t not in touched]
    assert plan.update[others].abs().sum() == 0  # only subject tokens move


def test_without_rescale_delta_is_raw_and_weight_scales_linearly():
    emb, groups, anchors = _setup(n=2)
    plan = compute_sci(emb, groups, anchors, rescale=False)
    delta0 = 2 * anchors[0] - anchors.sum(0)
    torch.testing.assert_close(plan.update[groups[0][0]], (1 - plan.saliency[0]) * delta0)
    e = emb[None]
    torch.testing.assert_close(plan.apply(e, 0.5) - e, 0.5 * plan.update[None])
    assert torch.equal(plan.apply(e, 0.0), e)


def test_fewer_than_two_subjects_is_a_noop():
    emb, groups, anchors = _setup(n=1)
    plan = compute_sci(emb, groups, anchors)
    assert plan.is_noop and plan.update.abs().sum() == 0


def test_sci_makes_subjects_more_distinct():
    emb, groups, anchors = _setup(n=3)
    plan = compute_sci(emb, groups, anchors)
    before = mean_pairwise_cosine(pooled(emb, groups))
    after = mean_pairwise_cosine(pooled(plan.apply(emb[None], 1.0)[0], groups))
    assert after < before - 0.05, (before, after)
    assert plan.cosine_before == pytest.approx(before) and plan.cosine_after == pytest.approx(after, abs=1e-5)


def test_bad_inputs():
    emb, groups, anchors = _setup(n=2)
    with pytest.raises(ValueError, match="tau"):
        compute_sci(emb, groups, anchors, tau=0)
    with pytest.raises(ValueError, match="anchors"):
        compute_sci(emb, groups, anchors[:1])


def test_anchors_mean_pool_non_special_tokens_of_the_phrase_alone():
    from transformers import UMT5Config, UMT5EncoderModel

    from vidlab.generation.tiny import TEXT_ENCODER_KWARGS
    from vidlab.generation.tiny_tokenizer import build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    torch.manual_seed(0)
    enc = UMT5EncoderModel(UMT5Config(vocab_size=len(tok), **TEXT_ENCODER_KWARGS)).eval()
    anchors = encode_anchors(tok, enc, ["red cat", "a big blue dog"])
    for phrase, a in zip(["red cat", "a big blue dog"], anchors):
        ids = tok(phrase, return_tensors="pt").input_ids
        assert ids[0, -1].item() == tok.eos_token_id
        with torch.no_grad():
            hidden = enc(ids).last_hidden_state[0]
        torch.testing.assert_close(a, hidden[:-1].mean(0), rtol=1e-5, atol=1e-6)  # eos excluded
