"""The offline tiny Wan pipeline: diffusers' own classes, eval mode, seeded, save/load round trip."""

import numpy as np
import pytest
import torch

from vidlab.generation.tiny import build_tiny_pipeline

KW = dict(height=16, width=16, num_frames=9, num_inference_steps=2, output_type="np")


def _run(pipe, seed=0, **kw):
    return pipe("a red cat", generator=torch.Generator().manual_seed(seed), **{**KW, **kw}).frames


def test_wan21_form_runs_and_every_module_is_eval():
    from diffusers import AutoencoderKLWan, WanPipeline, WanTransformer3DModel

    pipe = build_tiny_pipeline("wan2.1")
    assert isinstance(pipe, WanPipeline)
    assert isinstance(pipe.transformer, WanTransformer3DModel) and isinstance(pipe.vae, AutoencoderKLWan)
    assert pipe.transformer_2 is None and pipe.config.boundary_ratio is None
    for name in ("transformer", "text_encoder", "vae"):
        assert not any(m.training for m in getattr(pipe, name).modules()), name
    assert (pipe.tokenizer.pad_token_id, pipe.tokenizer.eos_token_id) == (0, 1)
    frames = _run(pipe)
    assert frames.shape == (1, 9, 16, 16, 3)
    assert np.isfinite(frames).all()


def test_same_seed_same_weights_other_seed_differs():
    a, b, c = (build_tiny_pipeline(seed=s) for s in (0, 0, 1))
    wa, wb, wc = (p.transformer.blocks[0].attn2.to_q.weight for p in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)


def test_wan22_form_uses_both_experts():
    pipe = build_tiny_pipeline("wan2.2")
    assert pipe.transformer_2 is not None and pipe.config.boundary_ratio is not None
    assert not torch.equal(pipe.transformer.proj_out.weight, pipe.transformer_2.proj_out.weight)
    calls = []
    hooks = [
        getattr(pipe, n).register_forward_pre_hook(lambda *_a, n=n: calls.append(n))
        for n in ("transformer", "transformer_2")
    ]
    _run(pipe, num_inference_steps=4)
    for h in hooks:
        h.remove()
    assert "transformer" in calls and "transformer_2" in calls


def test_bad_variant_is_a_clear_error():
    with pytest.raises(ValueError, match="variant"):
        build_tiny_pipeline("wan3")
    with pytest.raises(ValueError, match="boundary_ratio"):
        build_tiny_pipeline("wan2.1", boundary_ratio=0.9)


def test_save_pretrained_then_from_pretrained_offline(tmp_path):
    from diffusers import WanPipeline

    pipe = build_tiny_pipeline("wan2.2")
    pipe.save_pretrained(tmp_path)
    loaded = WanPipeline.from_pretrained(tmp_path)
    loaded.set_progress_bar_config(disable=True)
    assert loaded.config.boundary_ratio == pipe.config.boundary_ratio and loaded.transformer_2 is not None
    assert loaded.tokenizer("a red cat").input_ids == pipe.tokenizer("a red cat").input_ids
    for name in ("transformer", "transformer_2", "text_encoder", "vae"):
        sa, sb = getattr(pipe, name).state_dict(), getattr(loaded, name).state_dict()
        assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa), name
    # Same weights; outputs agree up to float rounding (loaded tensors have a different memory layout).
    np.testing.assert_allclose(_run(pipe), _run(loaded), atol=1e-4)
