"""LAM pieces: subject-column probabilities (two exact probes), region, IoU, alpha, bias, biased probs."""

import pytest
import torch

from vidlab.generation import lam as L


def _qk(b=2, s=48, h=3, d=16, keys=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, s, h, d, generator=g), torch.randn(b, keys, h, d, generator=g)


def _reference_probs(q, k, scale):
    return torch.softmax(torch.einsum("bshd,blhd->bhsl", q, k) * scale, dim=-1)


def test_both_probes_give_the_exact_subject_columns():
    q, k = _qk()
    cols = torch.tensor([1, 5, 6, 19])
    ref = _reference_probs(q, k, 0.25)[..., cols]
    sub, lse = L.subject_logits_and_lse(q, k, cols, 0.25, chunk_elements=200)  # many small chunks
    torch.testing.assert_close((sub - lse[..., None]).exp(), ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(L.subject_probs_fused(q, k, cols), _reference_probs(q, k, 16**-0.5)[..., cols])
    torch.testing.assert_close(L.subject_logits(q, k, cols, 0.25), sub)


def test_fused_probe_handles_more_columns_than_the_head_dim():
    q, k = _qk(d=4, keys=12)
    cols = torch.arange(10)
    torch.testing.assert_close(L.subject_probs_fused(q, k, cols), _reference_probs(q, k, 0.5)[..., cols])


def test_region_rules_and_iou():
    # 2 frames of 4 tokens: attention peaks on tokens 0-1 in frame 0 and token 3 in frame 1
    attn = torch.tensor([[[4.0, 4.0, 0.5, 0.1, 0.2, 0.1, 0.3, 2.0]]])
    region = L.adaptive_region(attn, frames=2, rule="top_half_mean")
    assert region.tolist() == [[[True, True, False, False, False, False, False, True]]]
    assert L.adaptive_region(attn, 2, "fixed", 0.1).tolist() == [
        [[True, True, True, False, True, False, True, True]]
    ]
    assert L.adaptive_region(attn, 2, "mean")[0, 0, :4].tolist() == [True, True, False, False]
    masks = torch.tensor([[True, False, False, False, False, False, True, True]])
    assert L.iou(region, masks).item() == pytest.approx(2 / 4)
    with pytest.raises(ValueError, match="threshold rule"):
        L.adaptive_region(attn, 2, "otsu")
    with pytest.raises(ValueError, match="latent frames"):
        L.adaptive_region(attn, 3)


def test_alpha_is_iou_guided():
    a = L.iou_alpha(torch.tensor([0.0, 0.5, 1.0]), 0.25, 1.0)
    torch.testing.assert_close(a, torch.tensor([1.0, 0.625, 0.25]))


def test_targets_merge_shared_tokens_and_reject_overlaps():
    masks = torch.zeros(3, 1, 2, 2, dtype=torch.bool)
    masks[0, 0, 0, 0] = masks[1, 0, 1, 1] = masks[2, 0, 0, 1] = True
    t = L.build_targets([[4, 5], [4, 5], [9]], masks)  # "three cats"-style copies share tokens 4, 5
    assert t.cols.tolist() == [4, 5, 9] and t.groups == [[0, 1], [2]]
    assert t.masks.tolist() == [[True, False, False, True], [False, True, False, False]]
    with pytest.raises(ValueError, match="two different subjects"):
        L.build_targets([[4, 5], [5, 6]], masks[:2])
    with pytest.raises(ValueError, match="masks must be"):
        L.build_targets([[1]], masks)


def test_bias_is_positive_inside_negative_outside_and_only_on_subject_columns():
    q, k = _qk(b=1, s=8, keys=12)
    masks = torch.zeros(2, 2, 2, 2, dtype=torch.bool)
    masks[0, :, :, 0] = True
    masks[1, :, :, 1] = True
    t = L.build_targets([[2, 3], [7]], masks)
    sub = L.subject_logits(q, k, t.cols, 0.25)
    alpha = torch.tensor([[1.0, 0.5]])
    bias_cols = L.column_bias(sub, t, alpha, "max_min")
    assert bias_cols.shape == (1, 8, 3)
    inside = t.masks[0]
    assert (bias_cols[0, inside, 0] > 0).all() and (bias_cols[0, ~inside, 0] < 0).all()
    mean = sub.mean(1)[0, :, 2]  # group 1's column, head-averaged
    torch.testing.assert_close(bias_cols[0, t.masks[1], 2], 0.5 * (mean.max() - mean.mean()).expand(4))
    full = L.full_bias(bias_cols, t.cols, 12, torch.float32)
    assert full.shape == (1, 1, 8, 12)
    others = [c for c in range(12) if c not in (2, 3, 7)]
    assert full[..., others].abs().sum() == 0
    std_bias = L.column_bias(sub, t, alpha, "std")
    assert (std_bias[0, inside, 0] > 0).all()
    with pytest.raises(ValueError, match="spread"):
        L.column_bias(sub, t, alpha, "range")


def test_biased_probs_equal_softmax_of_biased_logits():
    q, k = _qk(b=1, s=10, keys=9)
    cols = torch.tensor([0, 4])
    bias_cols = torch.randn(1, 10, 2) * 2
    logits = torch.einsum("bshd,blhd->bhsl", q, k) * 0.25
    full = torch.zeros(1, 1, 10, 9)
    full[..., cols] = bias_cols[:, None]
    ref = torch.softmax(logits + full, -1)[..., cols]
    probs = torch.softmax(logits, -1)[..., cols]
    torch.testing.assert_close(L.biased_probs(probs, bias_cols), ref, rtol=1e-4, atol=1e-6)
    assert L.biased_probs(probs, None) is probs


def test_group_attention_sums_a_subjects_columns_and_averages_heads():
    probs = torch.arange(2 * 3 * 4 * 3, dtype=torch.float32).reshape(2, 3, 4, 3)
    out = L.group_attention(probs, [[0, 1], [2]])
    torch.testing.assert_close(out[:, 0], probs[..., :2].sum(-1).mean(1))
    torch.testing.assert_close(out[:, 1], probs[..., 2].mean(1))


def test_mask_source_fused_is_the_box_united_with_the_region_and_box_is_unchanged():
    torch.manual_seed(0)
    masks = torch.zeros(2, 8, dtype=torch.bool)
    masks[0, :4], masks[1, 4:] = True, True
    targets = L.LamTargets(torch.tensor([1, 2, 5]), [[0, 1], [2]], masks, frames=2)
    sub = torch.randn(2, 3, 8, 3)  # (B, H, S, n)
    alpha = torch.tensor([[0.5, 1.0], [0.25, 0.75]])
    box = L.column_bias(sub, targets, alpha)
    # "box" is the layout mask alone: +alpha*pos on the box's tokens, alpha*neg elsewhere (written out here)
    logits = sub.mean(1)
    mean = logits.mean(1, keepdim=True)
    pos, neg = logits.amax(1, keepdim=True) - mean, logits.amin(1, keepdim=True) - mean
    inside = masks[[0, 0, 1]].T.unsqueeze(0)  # (1, S, n)
    want = alpha[:, [0, 0, 1]].unsqueeze(1) * torch.where(inside, pos, neg)
    assert torch.equal(box, want)
    # a region inside the box adds nothing: fused == box, bit for bit
    inner = torch.zeros(2, 2, 8, dtype=torch.bool)
    inner[:, 0, 1] = True
    assert torch.equal(L.column_bias(sub, targets, alpha, inside_masks=L.fused_masks(inner, masks)), box)
    # where the model already draws subject 0 outside its box (token 6), fused stops pushing it away there
    region = inner.clone()
    region[0, 0, 6] = True
    fused = L.column_bias(sub, targets, alpha, inside_masks=L.fused_masks(region, masks))
    changed = (fused != box).nonzero().tolist()
    assert changed and {(b, s) for b, s, _ in changed} == {(0, 6)} and {c for _, _, c in changed} == {0, 1}
    assert torch.all(fused[0, 6, :2] > 0) and torch.all(box[0, 6, :2] <= 0)


def test_mask_source_changes_generation_only_when_fused():
    from vidlab.generation.comp_attn import apply_comp_attn
    from vidlab.generation.config import CompAttnConfig
    from vidlab.generation.tiny import build_tiny_pipeline

    pipe = build_tiny_pipeline()
    kw = dict(height=32, width=32, num_frames=9, num_inference_steps=4, output_type="latent")
    out = {}
    for source in ("box", "fused", "default"):
        cfg = CompAttnConfig()
        if source != "default":
            cfg.lam.mask_source = source
        with apply_comp_attn(pipe, cfg) as comp:
            res = comp.generate("a red cat and a blue dog", generator=torch.Generator().manual_seed(0), **kw)
        out[source] = (torch.as_tensor(res.output.frames), res.lam_log)
    assert torch.equal(out["box"][0], out["default"][0])  # box is the default, unchanged
    assert not torch.equal(out["fused"][0], out["box"][0])
    # the first modulated call sees the same region and IoU either way: only the mask LAM pushes toward differs
    assert out["fused"][1][0] == out["box"][1][0]
