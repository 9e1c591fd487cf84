"""The attn2 processor: exact pass-through, LAM = masked attention with the layout bias, backend handling."""

from types import SimpleNamespace

import pytest
import torch

from vidlab.generation.config import CompAttnConfig
from vidlab.generation.controller import CallState, Controller
from vidlab.generation.lam import build_targets
from vidlab.generation.processor import CompAttnProcessor


def _attn(seed=0, dim=24, heads=2):
    from diffusers.models.transformers.transformer_wan import WanAttention, WanAttnProcessor

    torch.manual_seed(seed)
    return WanAttention(
        dim, heads, dim // heads, cross_attention_dim_head=dim // heads, processor=WanAttnProcessor()
    )


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield


def _setup(lam_on=True, capture=False, **lam):
    attn = _attn()
    cfg = CompAttnConfig(capture_attention=capture)
    for k, v in lam.items():
        setattr(cfg.lam, k, v)
    # four steps; LAM's window (step_fraction 0.3) holds step 0 only
    pipe = SimpleNamespace(scheduler=SimpleNamespace(timesteps=torch.tensor([4.0, 3.0, 2.0, 1.0])))
    pipe._current_timestep = torch.tensor(4.0)
    ctl = Controller(cfg, pipe)
    masks = torch.zeros(2, 2, 2, 2, dtype=torch.bool)
    masks[0, :, :, 0] = True
    masks[1, :, 1, :] = True
    call = CallState(targets=build_targets([[1, 2], [5]], masks))
    if capture:
        from vidlab.generation.attention_maps import AttentionMapStore

        call.maps = AttentionMapStore(["a", "b"], (2, 2, 2), call.targets.masks.numpy())
    ctl.begin(call)
    ctl.on_forward("transformer", "cond" if lam_on else "uncond")  # step 0: inside LAM's window
    original = attn.processor
    proc = CompAttnProcessor(original, ctl, block=0)
    attn.set_processor(proc)
    g = torch.Generator().manual_seed(1)
    x, ctx = torch.randn(2, 8, 24, generator=g), torch.randn(2, 10, 24, generator=g)
    return attn, original, proc, ctl, x, ctx


def test_inactive_call_is_exactly_the_original_processor():
    attn, original, proc, ctl, x, ctx = _setup(lam_on=False)
    out = attn(x, ctx)
    assert torch.equal(out, original(attn, x, ctx))
    ctl.end()
    assert torch.equal(attn(x, ctx), out)


def test_capture_only_keeps_the_output_exact_and_records_maps():
    attn, original, proc, ctl, x, ctx = _setup(lam_on=True, capture=True, enabled=False)
    out = attn(x, ctx)
    assert torch.equal(out, original(attn, x, ctx))
    maps = ctl.call.maps
    assert maps.steps == [0] and maps.map(0).shape == (2, 2, 2, 2)


def test_lam_is_softmax_with_the_bias_on_subject_columns():
    attn, original, proc, ctl, x, ctx = _setup(lam_on=True, capture=True)
    out = attn(x, ctx)
    assert not torch.allclose(out, original(attn, x, ctx))
    # reference: the same projections, dense softmax(q k^T * scale + bias) v, then to_out
    q = attn.norm_q(attn.to_q(x)).unflatten(2, (2, -1))
    k = attn.norm_k(attn.to_k(ctx)).unflatten(2, (2, -1))
    v = attn.to_v(ctx).unflatten(2, (2, -1))
    logits = torch.einsum("bshd,blhd->bhsl", q, k) * 12**-0.5
    log = ctl.call.lam_log[-1]
    assert log["block"] == 0 and len(log["iou"]) == 2
    from vidlab.generation import lam as L

    t = ctl.call.targets
    sub = L.subject_logits(q, k, t.cols, 12**-0.5)
    probs = torch.softmax(logits, -1)[..., t.cols]
    iou = L.iou(L.adaptive_region(L.group_attention(probs, t.groups), t.frames), t.masks)
    bias = L.full_bias(L.column_bias(sub, t, L.iou_alpha(iou, 0.25, 1.0)), t.cols, 10, torch.float32)
    ref = torch.einsum("bhsl,blhd->bshd", torch.softmax(logits + bias, -1), v).flatten(2)
    ref = attn.to_out[1](attn.to_out[0](ref))
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    # captured maps are the biased attention: subject 0 mass inside its mask beats the unbiased share
    m = ctl.call.maps
    assert m.inside_share()[0][0] > float(L.group_attention(probs, t.groups)[:, 0][:, t.masks[0]].sum() / 2)


def _forward_at(ctl, step, name):
    """What WanPipeline does before a forward: set the current timestep, enter cache_context(name)."""
    ctl.pipe._current_timestep = ctl.pipe.scheduler.timesteps[step]
    ctl.on_forward("transformer", name)


def test_lam_window_blocks_and_uncond():
    attn, original, proc, ctl, x, ctx = _setup(lam_on=True, blocks=[1])
    assert torch.equal(attn(x, ctx), original(attn, x, ctx))  # block 0 not selected
    ctl.config.lam.blocks = None
    _forward_at(ctl, 2, "cond")  # progress 0.5, beyond step_fraction 0.3
    assert torch.equal(attn(x, ctx), original(attn, x, ctx))
    _forward_at(ctl, 0, "uncond")  # uncond pass
    assert torch.equal(attn(x, ctx), original(attn, x, ctx))
    _forward_at(ctl, 0, "cond")
    assert not torch.equal(attn(x, ctx), original(attn, x, ctx))


def test_backend_attribute_is_shared_with_the_original():
    """(Which calls run where on a mask-less backend such as flash: test_backend_routing.py.)"""
    attn, original, proc, ctl, x, ctx = _setup(lam_on=True)
    proc._attention_backend = "flex"
    assert original._attention_backend == "flex"
    proc._attention_backend = "native"
    assert original._attention_backend == "native"
    attn(x, ctx)


def test_token_count_mismatch_is_a_clear_error():
    attn, original, proc, ctl, x, ctx = _setup(lam_on=True)
    with pytest.raises(ValueError, match="video tokens"):
        attn(torch.randn(2, 12, 24), ctx)


def test_reweight_mode_equals_the_mask_and_runs_without_one():
    attn, original, proc, ctl, x, ctx = _setup(lam_on=True, capture=True)
    masked = attn(x, ctx)
    ctl.config.lam.apply = "reweight"
    reweighted = attn(x, ctx)
    torch.testing.assert_close(reweighted, masked, rtol=1e-4, atol=1e-5)
    assert ctl.call.lam_log[0] == ctl.call.lam_log[1]  # same region, IoU and alpha either way
    ctl.config.lam.apply = "nope"
    with pytest.raises(ValueError, match="lam.apply"):
        attn(x, ctx)
