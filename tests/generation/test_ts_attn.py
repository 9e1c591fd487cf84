"""TS-Attn (``lam.rule="ts_attn"``): the region, erosion and dynamic alpha against hand-computed tensors, the
processor against a dense re-statement of the published code's rule, exactness when inactive, and the tiny
pipeline end to end (odd blocks, the first int(0.2 x steps) steps, cond pass only)."""

import math
from types import SimpleNamespace

import pytest
import torch

from vidlab.generation import ts_attn as T
from vidlab.generation.config import CompAttnConfig, LAMConfig
from vidlab.generation.controller import CallState, Controller
from vidlab.generation.lam import build_targets
from vidlab.generation.processor import CompAttnProcessor


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield


def test_erode_drops_tokens_without_a_neighbour_in_their_frame():
    # one frame of 3x4 tokens: an isolated token at (0, 0), a pair at (2, 2)-(2, 3), a diagonal pair (0, 3)/(1, 2)
    m = torch.zeros(3, 4, dtype=torch.bool)
    m[0, 0] = m[2, 2] = m[2, 3] = m[0, 3] = m[1, 2] = True
    out = T.erode_isolated(m.reshape(1, 12), (1, 3, 4)).reshape(3, 4)
    want = m.clone()
    want[0, 0] = False  # alone; every other token has a 3x3 neighbour (diagonals count)
    assert torch.equal(out, want)
    # frames are separate: the same token in two frames does not keep itself alive
    two = torch.zeros(2, 2, 2, dtype=torch.bool)
    two[0, 0, 0] = two[1, 0, 0] = True
    assert not T.erode_isolated(two.reshape(1, 8), (2, 2, 2)).any()
    with pytest.raises(ValueError, match="token grid"):
        T.erode_isolated(m.reshape(1, 12), (1, 3, 3))


def test_region_is_strictly_above_the_mean_of_the_top_half():
    # one subject with two columns: their mean per token is [0.1, 0.9, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4]
    mean = torch.tensor([0.1, 0.9, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4])
    cols = torch.stack([mean - 0.05, mean + 0.05], -1).unsqueeze(0)  # (1, 8, 2)
    region = T.subject_regions(cols, [[0, 1]], (1, 2, 4), erode=False)
    # top half (int(8 x 0.5) = 4 values): 0.9, 0.8, 0.7, 0.5 -> mean 0.725; strictly above: 0.9, 0.8
    assert region.tolist() == [[[False, True, False, False, False, False, True, False]]]
    # a token equal to the threshold is out (strict >): values 1, 1, 0, 0 -> top-half mean 1
    flat = torch.tensor([[[1.0], [1.0], [0.0], [0.0]]])
    assert not T.subject_regions(flat, [[0]], (1, 2, 2), erode=False).any()
    # erosion on: tokens 1 (0, 1) and 6 (1, 2) of the 2x4 grid are diagonal neighbours, both stay
    assert T.subject_regions(cols, [[0, 1]], (1, 2, 4)).sum() == 2


def test_dynamic_alpha_by_hand():
    # raw logits [0, ln 3] (two keys): p = [0.25, 0.75] -> p_hat = [0, 1] -> alpha = 1 + 0.5 (1 - p_hat) = [1.5, 1]
    q = torch.tensor([[[[1.0]]]])  # (B, S, H, D) = (1, 1, 1, 1)
    k = torch.tensor([[[[0.0]], [[math.log(3.0)]]]])  # (B, L, H, D) = (1, 2, 1, 1)
    stats = T.raw_statistics(q, k, torch.tensor([0, 1]), scale=1.0)
    torch.testing.assert_close(T.dynamic_alpha(stats), torch.tensor([[[[1.5, 1.0]]]]))
    torch.testing.assert_close(T.dynamic_alpha(stats, 2.0, 4.0), torch.tensor([[[[4.0, 2.0]]]]))
    # three keys, logits [0, ln 2, ln 5]: p = [1/8, 2/8, 5/8] -> p_hat = [0, 1/4, 1] -> alpha [1.5, 1.375, 1]
    k3 = torch.tensor([0.0, math.log(2.0), math.log(5.0)]).view(1, 3, 1, 1)
    s3 = T.raw_statistics(q, k3, torch.tensor([0, 1, 2]), scale=1.0)
    torch.testing.assert_close(T.dynamic_alpha(s3), torch.tensor([[[[1.5, 1.375, 1.0]]]]))


def test_bias_raises_own_tokens_and_lowers_the_other_subjects_only_in_the_region():
    # raw logits of 2 queries over 3 keys (one head): [[0, 1, 2], [3, 0, 0]] -> per row max, min, mean
    q = torch.tensor([[[[1.0]], [[1.0]]]])  # (1, 2, 1, 1)
    k = torch.tensor([0.0, 1.0, 2.0]).view(1, 3, 1, 1)
    stats = T.raw_statistics(q, k, torch.tensor([0, 1]), scale=1.0)
    stats.col_logits = torch.tensor([[[[0.0, 1.0], [3.0, 0.0]]]])
    stats.row_max = torch.tensor([[[2.0, 3.0]]])
    stats.row_min = torch.tensor([[[0.0, 0.0]]])
    stats.row_mean = torch.tensor([[[1.0, 1.0]]])
    stats.row_lse = torch.tensor([[[math.log(1 + math.e + math.e**2), math.log(math.e**3 + 2)]]])
    regions = torch.tensor([[[True, False], [False, True]]])  # subject 0 at query 0, subject 1 at query 1
    bias, alpha = T.column_bias(stats, regions, [[0], [1]])
    # query 0 (subject 0's region): col 0 (own) +alpha (2 - 1); col 1 (other) alpha (0 - 1)
    # query 1 (subject 1's region): col 1 (own) +alpha (3 - 1); col 0 (other) alpha (0 - 1)
    want = torch.tensor(
        [[[[alpha[0, 0, 0, 0] * 1.0, -alpha[0, 0, 0, 1]], [-alpha[0, 0, 1, 0], alpha[0, 0, 1, 1] * 2]]]]
    )
    torch.testing.assert_close(bias, want)
    # query 0: p over [0, 1, 2]; p_hat(col 0) = 0 -> alpha 1.5; col 1: (e - 1) / (e^2 - 1) -> 1 + 0.5 (1 - that)
    torch.testing.assert_close(alpha[0, 0, 0, 0], torch.tensor(1.5))
    torch.testing.assert_close(
        alpha[0, 0, 0, 1], torch.tensor(1 + 0.5 * (1 - (math.e - 1) / (math.e**2 - 1)))
    )
    # a query in no region gets no bias at all
    none, _ = T.column_bias(stats, torch.zeros_like(regions), [[0], [1]])
    assert not none.any()
    # parity with the published code (lam.ts_subjects="last"): only the last subject's bias survives
    last, _ = T.column_bias(stats, regions, [[0], [1]], subjects="last")
    torch.testing.assert_close(last[0, 0, 0], torch.zeros(2))  # query 0 is only in subject 0's region
    torch.testing.assert_close(last[0, 0, 1], want[0, 0, 1])
    with pytest.raises(ValueError, match="choose 'all' or 'last'"):
        T.column_bias(stats, regions, [[0], [1]], subjects="first")


def test_raw_statistics_equal_the_dense_computation_in_any_chunking():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 12, 3, 8, generator=g), torch.randn(2, 7, 3, 8, generator=g)
    cols = torch.tensor([1, 4, 5])
    logits = torch.einsum("bshd,blhd->bhsl", q, k) * 8**-0.5
    hm = logits.softmax(-1).mean(1)  # (B, S, L)
    lo, hi = hm.amin((1, 2), keepdim=True), hm.amax((1, 2), keepdim=True)
    for chunk in (1 << 24, 3 * 7 * 2 * 5):  # one pass; chunks of 5 queries
        st = T.raw_statistics(q, k, cols, 8**-0.5, chunk)
        torch.testing.assert_close(st.col_logits, logits[..., cols])
        torch.testing.assert_close(st.row_max, logits.amax(-1))
        torch.testing.assert_close(st.row_min, logits.amin(-1))
        torch.testing.assert_close(st.row_mean, logits.mean(-1))
        torch.testing.assert_close(st.row_lse, logits.logsumexp(-1))
        torch.testing.assert_close(st.region_cols, ((hm - lo) / (hi - lo + 1e-6))[..., cols])


def test_window_and_default_blocks_follow_the_published_code():
    assert T.default_blocks(6) == [1, 3, 5]
    # timesteps[:int(0.2 * n)]: 12 steps -> steps 0, 1; 5 steps -> step 0; 4 steps -> none
    assert [s for s in range(12) if T.in_window(s, 12, 0.2)] == [0, 1]
    assert [s for s in range(5) if T.in_window(s, 5, 0.2)] == [0]
    assert not any(T.in_window(s, 4, 0.2) for s in range(4))
    with pytest.raises(ValueError, match="ts_alpha_min"):
        LAMConfig(ts_alpha_min=2.0, ts_alpha_max=1.0)


# ---- the processor ----------------------------------------------------------------------------------------
def _attn(seed=0, dim=24, heads=2):
    from diffusers.models.transformers.transformer_wan import WanAttention, WanAttnProcessor

    torch.manual_seed(seed)
    return WanAttention(
        dim, heads, dim // heads, cross_attention_dim_head=dim // heads, processor=WanAttnProcessor()
    )


def _setup(block=1, step=0, name="cond", **lam):
    attn = _attn()
    cfg = CompAttnConfig(capture_attention=True)
    cfg.lam.rule = "ts_attn"
    for k_, v_ in lam.items():
        setattr(cfg.lam, k_, v_)
    ts = torch.arange(10, 0, -1).float()  # ten steps: TS-Attn's window holds steps 0 and 1
    pipe = SimpleNamespace(scheduler=SimpleNamespace(timesteps=ts), _current_timestep=ts[step])
    ctl = Controller(cfg, pipe)
    masks = torch.zeros(2, 2, 3, 3, dtype=torch.bool)  # 2 latent frames of 3x3 tokens (S = 18)
    masks[0, :, :, 0] = True
    masks[1, :, :, 2] = True
    call = CallState(targets=build_targets([[1, 2], [5]], masks))
    from vidlab.generation.attention_maps import AttentionMapStore

    call.maps = AttentionMapStore(["a", "b"], (2, 3, 3), call.targets.masks.numpy())
    ctl.begin(call)
    ctl.on_forward("transformer", name)
    original = attn.processor
    attn.set_processor(CompAttnProcessor(original, ctl, block=block))
    g = torch.Generator().manual_seed(1)
    x, ctx = torch.randn(2, 18, 24, generator=g), torch.randn(2, 10, 24, generator=g)
    return attn, original, ctl, x, ctx


def _dense_reference(attn, x, ctx, own, other_cols, grid, heads=2):
    """The published rule written densely, full matrices as the code computes them (one subject at a time)."""
    d = 24 // heads
    qr, kr = attn.to_q(x).unflatten(2, (heads, -1)), attn.to_k(ctx).unflatten(2, (heads, -1))
    raw = torch.einsum("bshd,blhd->bhsl", qr, kr) / math.sqrt(d)  # (B, H, S, L): the code's unnorm weights
    hm = raw.softmax(-1).mean(1)
    norm = (hm - hm.amin((1, 2), keepdim=True)) / (
        hm.amax((1, 2), keepdim=True) - hm.amin((1, 2), keepdim=True) + 1e-6
    )
    p = raw.softmax(-1)
    p_hat = (p - p.amin(-1, keepdim=True)) / (p.amax(-1, keepdim=True) - p.amin(-1, keepdim=True) + 1e-12)
    alpha = 1 + (1 - p_hat) * 0.5
    mx, mn, mean = raw.amax(-1, keepdim=True), raw.amin(-1, keepdim=True), raw.mean(-1, keepdim=True)
    bias = torch.zeros_like(raw)
    for g, cols in enumerate(own):
        sel = norm[..., cols].mean(-1)  # (B, S)
        region = torch.zeros_like(sel, dtype=torch.bool)
        for b in range(sel.shape[0]):  # the top-half threshold per video
            top = sel[b].sort(descending=True).values[: sel.shape[1] // 2].mean()
            region[b] = sel[b] > top
        region = T.erode_isolated(region, grid)
        pos = torch.zeros(raw.shape[-1], dtype=torch.bool)
        pos[cols] = True
        neg = torch.zeros(raw.shape[-1], dtype=torch.bool)
        neg[other_cols[g]] = True
        b_ = alpha * ((mx - mean) * pos + (mn - mean) * neg)
        bias = bias + b_ * region[:, None, :, None]
    q = attn.norm_q(attn.to_q(x)).unflatten(2, (heads, -1))
    k = attn.norm_k(attn.to_k(ctx)).unflatten(2, (heads, -1))
    v = attn.to_v(ctx).unflatten(2, (heads, -1))
    logits = torch.einsum("bshd,blhd->bhsl", q, k) / math.sqrt(d)
    out = torch.einsum("bhsl,blhd->bshd", torch.softmax(logits + bias, -1), v).flatten(2)
    return attn.to_out[1](attn.to_out[0](out))


def test_processor_equals_the_dense_statement_of_the_published_rule():
    attn, original, ctl, x, ctx = _setup()
    out = attn(x, ctx)
    ref = _dense_reference(attn, x, ctx, own=[[1, 2], [5]], other_cols=[[5], [1, 2]], grid=(2, 3, 3))
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)
    assert not torch.allclose(out, original(attn, x, ctx), atol=1e-4)
    log = ctl.call.lam_log[-1]
    # alpha: the mean dynamic alpha on the subject's own columns over its region (0 when erosion emptied it)
    assert log["block"] == 1 and len(log["iou"]) == 2 and all(a == 0 or 1.0 <= a <= 1.5 for a in log["alpha"])
    assert max(log["alpha"]) >= 1.0
    assert ctl.call.maps.steps == [0]  # the captured maps are the biased attention of the cond pass


def test_reweight_equals_the_mask_under_ts_attn():
    attn, original, ctl, x, ctx = _setup()
    masked = attn(x, ctx)
    ctl.config.lam.apply = "reweight"
    torch.testing.assert_close(attn(x, ctx), masked, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "kw",
    [
        {"block": 0},  # an even block: the code's use_control is i % 2 != 0
        {"step": 2},  # beyond int(0.2 x 10) = 2 steps
        {"name": "uncond"},
        {"enabled": False},  # lam off
        {"ts_blocks": [3]},  # an explicit block list without this block
    ],
)
def test_inactive_calls_are_exactly_the_original_processor(kw):
    lam = {k_: v_ for k_, v_ in kw.items() if k_ in ("enabled", "ts_blocks")}
    rest = {k_: v_ for k_, v_ in kw.items() if k_ not in lam}
    attn, original, ctl, x, ctx = _setup(**rest, **lam)
    ctl.config.capture_attention = False
    ctl.call.maps = None
    ctl.on_forward("transformer", rest.get("name", "cond"))
    assert torch.equal(attn(x, ctx), original(attn, x, ctx))


# ---- the tiny pipeline end to end -------------------------------------------------------------------------
PROMPT = "a red cat on the left and a blue dog on the right"
KW = dict(height=32, width=32, num_frames=9, num_inference_steps=5, output_type="latent")


def _run(pipe, cfg):
    from vidlab.generation.comp_attn import apply_comp_attn

    comp = apply_comp_attn(pipe, cfg)
    try:
        return comp.generate(PROMPT, generator=torch.Generator().manual_seed(0), **KW)
    finally:
        comp.remove()


def test_tiny_pipeline_ts_attn_off_is_diffusers_and_on_biases_odd_blocks_in_its_window():
    from vidlab.generation.tiny import build_tiny_pipeline

    pipe = build_tiny_pipeline("wan2.1")
    ref = pipe(PROMPT, generator=torch.Generator().manual_seed(0), **KW).frames[0]
    off = CompAttnConfig(enabled=False)
    off.lam.rule = "ts_attn"
    assert torch.equal(torch.as_tensor(_run(pipe, off).frames), torch.as_tensor(ref))
    on = CompAttnConfig()
    on.sci.enabled = False
    on.lam.rule = "ts_attn"
    res = _run(pipe, on)
    # one biased call on a random tiny model moves the latents a little, but it moves them
    assert not torch.equal(torch.as_tensor(res.frames), torch.as_tensor(ref))
    # 2 blocks: only block 1 is odd; 5 steps: int(0.2 x 5) = 1 -> step 0 only; cond pass only
    assert {(e["step"], e["block"]) for e in res.lam_log} == {(0, 1)}
    assert len(res.lam_log) == 1 and len(res.lam_log[0]["iou"]) == 2


def test_wan22_window_counts_the_whole_schedule_on_both_experts():
    from vidlab.generation.tiny import build_tiny_pipeline

    pipe = build_tiny_pipeline("wan2.2")
    cfg = CompAttnConfig()
    cfg.sci.enabled = False
    cfg.lam.rule = "ts_attn"
    cfg.lam.ts_step_fraction = 0.8  # int(0.8 x 5) = 4: steps 0-3, on whichever expert runs them
    res = _run(pipe, cfg)
    ran = {(t, s) for t, s, cond in res.forwards if cond}
    logged = {(e["transformer"], e["step"]) for e in res.lam_log}
    assert logged == {(t, s) for t, s in ran if s < 4}
    assert {t for t, _ in logged} == {"transformer", "transformer_2"}
    assert {e["block"] for e in res.lam_log} == {1}
