"""Exactness: Comp-Attn off, or SCI strength 0 + LAM off, equals diffusers' default bit for bit (Wan2.1 and
Wan2.2 forms); with it on the output differs; remove() restores the default."""

from functools import lru_cache

import numpy as np
import pytest
import torch

from vidlab.generation.comp_attn import apply_comp_attn
from vidlab.generation.config import CompAttnConfig
from vidlab.generation.layout import Layout, SubjectLayout
from vidlab.generation.tiny import build_tiny_pipeline

PROMPT = "a red cat on the left and a blue dog on the right"
# Latents (the denoiser's output; decoding is untouched and deterministic) keep the tests fast and sensitive:
# the random tiny VAE shrinks latent differences to ~1e-5 in pixels. One test also compares decoded frames.
KW = dict(height=32, width=32, num_frames=9, num_inference_steps=4, output_type="latent")
LAYOUT = Layout(
    PROMPT,
    [
        SubjectLayout("red cat", [(0.0, (0.0, 0.0, 0.5, 1.0))]),
        SubjectLayout("blue dog", [(0.0, (0.5, 0.0, 1.0, 1.0))]),
    ],
)


@lru_cache(maxsize=2)
def _pipe(variant):
    return build_tiny_pipeline(variant)


def _default(pipe, **kw):
    return pipe(PROMPT, generator=torch.Generator().manual_seed(0), **{**KW, **kw}).frames[0]


def _same(a, b):
    return torch.equal(torch.as_tensor(a), torch.as_tensor(b))


def _far(a, b):
    return not torch.allclose(torch.as_tensor(a), torch.as_tensor(b), atol=1e-3)


def _comp(pipe, cfg, **kw):
    comp = apply_comp_attn(pipe, cfg)
    try:
        res = comp.generate(PROMPT, layout=LAYOUT, generator=torch.Generator().manual_seed(0), **{**KW, **kw})
    finally:
        comp.remove()
    return res


def _neutral():
    cfg = CompAttnConfig()
    cfg.sci.strength = 0.0
    cfg.lam.enabled = False
    return cfg


@pytest.mark.parametrize("variant", ["wan2.1", "wan2.2"])
def test_off_and_neutral_are_bit_identical_and_on_differs(variant):
    pipe = _pipe(variant)
    originals = [
        b.attn2.processor
        for n in ("transformer", "transformer_2")
        if getattr(pipe, n)
        for b in getattr(pipe, n).blocks
    ]
    ref = _default(pipe)
    off = _comp(pipe, CompAttnConfig(enabled=False))
    assert _same(off.frames, ref)
    neutral = _comp(pipe, _neutral())
    assert _same(neutral.frames, ref)
    on = _comp(pipe, CompAttnConfig())
    assert _far(on.frames, ref)
    assert on.lam_log and on.sci_weights[0] > 0
    if variant == "wan2.2":  # both experts ran under Comp-Attn
        assert {t for t, _, _ in on.forwards} == {"transformer", "transformer_2"}
    # remove() restored the very same processor objects, and the default output
    now = [
        b.attn2.processor
        for n in ("transformer", "transformer_2")
        if getattr(pipe, n)
        for b in getattr(pipe, n).blocks
    ]
    assert all(a is b for a, b in zip(originals, now)) and len(now) == len(originals)
    assert _same(_default(pipe), ref)


def test_cond_only_guidance_is_exact_when_neutral_and_modulated_when_on():
    pipe = _pipe("wan2.1")
    ref = _default(pipe, guidance_scale=1.0)
    assert _same(_comp(pipe, _neutral(), guidance_scale=1.0).frames, ref)
    on = _comp(pipe, CompAttnConfig(), guidance_scale=1.0)
    assert all(cond for _, _, cond in on.forwards) and len(on.forwards) == KW["num_inference_steps"]
    # without guidance the effect is small on the random tiny model (~1e-4), but far above float noise
    assert on.lam_log and not torch.allclose(torch.as_tensor(on.frames), torch.as_tensor(ref), atol=1e-5)


@pytest.mark.slow
def test_each_part_alone_changes_the_output():
    pipe = _pipe("wan2.1")
    ref = _default(pipe)
    sci_only = CompAttnConfig()
    sci_only.lam.enabled = False
    lam_only = CompAttnConfig()
    lam_only.sci.enabled = False
    a, b = _comp(pipe, sci_only), _comp(pipe, lam_only)
    assert not _same(a.frames, ref) and not a.lam_log  # SCI moves little here: saliency is high
    assert _far(b.frames, ref) and b.lam_log and not b.sci_weights


def test_decoded_frames_are_bit_identical_when_neutral():
    pipe = _pipe("wan2.1")
    small = dict(output_type="np", num_inference_steps=2, height=16, width=16)
    ref = _default(pipe, **small)
    got = _comp(pipe, _neutral(), **small).frames
    assert got.dtype == ref.dtype and np.array_equal(got, ref)
