"""num_videos_per_prompt, negative prompts and prompt batches on the tiny pipeline.

Comp-Attn used to expand the prompt twice (its own encode_prompt and the pipeline's), giving n² latents
against n text rows; now the neutral settings equal plain diffusers bit for bit at n = 2, and LAM and SCI
run at n = 2 on every row.
"""

from functools import lru_cache

import pytest
import torch

from vidlab.generation.comp_attn import apply_comp_attn
from vidlab.generation.config import CompAttnConfig
from vidlab.generation.errors import BatchNotSupportedError
from vidlab.generation.layout import Layout, SubjectLayout
from vidlab.generation.tiny import build_tiny_pipeline

PROMPT = "a red cat on the left and a blue dog on the right"
KW = dict(height=32, width=32, num_frames=9, num_inference_steps=2, output_type="latent")
LAYOUT = Layout(
    PROMPT,
    [
        SubjectLayout("red cat", [(0.0, (0.0, 0.0, 0.5, 1.0))]),
        SubjectLayout("blue dog", [(0.0, (0.5, 0.0, 1.0, 1.0))]),
    ],
)


@lru_cache(maxsize=1)
def _pipe():
    return build_tiny_pipeline("wan2.1")


def _plain(prompt=PROMPT, **kw):
    return _pipe()(prompt, generator=torch.Generator().manual_seed(0), **{**KW, **kw}).frames


def _comp(cfg, prompt=PROMPT, **kw):
    comp = apply_comp_attn(_pipe(), cfg)
    try:
        return comp.generate(
            prompt, layout=LAYOUT, generator=torch.Generator().manual_seed(0), **{**KW, **kw}
        )
    finally:
        comp.remove()


def _neutral():
    cfg = CompAttnConfig()
    cfg.sci.strength = 0.0
    cfg.lam.enabled = False
    return cfg


def test_two_videos_per_prompt_neutral_equals_diffusers_bit_for_bit_with_a_negative_prompt():
    ref = _plain(num_videos_per_prompt=2, negative_prompt="blurry, low quality")
    assert ref.shape[0] == 2 and not torch.equal(ref[0], ref[1])  # two different videos
    got = _comp(_neutral(), num_videos_per_prompt=2, negative_prompt="blurry, low quality")
    assert got.output.frames.shape == ref.shape
    assert torch.equal(got.output.frames, ref)
    assert torch.equal(torch.as_tensor(got.frames), ref[0])
    # the negative prompt is used (not silently dropped): without it the output differs
    assert not torch.equal(_plain(num_videos_per_prompt=2), ref)


def test_two_videos_per_prompt_with_lam_modulate_every_video():
    ref = _plain(num_videos_per_prompt=2)
    cfg = CompAttnConfig()
    cfg.sci.enabled = False
    res = _comp(cfg, num_videos_per_prompt=2)
    assert res.output.frames.shape == ref.shape and res.lam_log
    for k in range(2):  # LAM changed both videos, not only the first row
        assert not torch.allclose(res.output.frames[k], ref[k], atol=1e-5)


def test_two_videos_per_prompt_with_sci_only():
    ref = _plain(num_videos_per_prompt=2)
    cfg = CompAttnConfig()
    cfg.lam.enabled = False
    cfg.sci.strength = 2.0  # the tiny random encoder keeps subjects salient: push hard enough to see it
    res = _comp(cfg, num_videos_per_prompt=2)
    assert res.output.frames.shape == ref.shape and not res.lam_log and res.sci_weights[0] > 0
    for k in range(2):
        assert not torch.equal(res.output.frames[k], ref[k])


def test_a_batch_of_prompts_passes_through_when_off_and_is_refused_clearly_when_on():
    prompts = [PROMPT, "a bird above a boat"]
    ref = _plain(prompts, negative_prompt=["blurry", "dark"])
    off = _comp(CompAttnConfig(enabled=False), prompts, negative_prompt=["blurry", "dark"])
    assert ref.shape[0] == 2 and torch.equal(off.output.frames, ref)
    with pytest.raises(BatchNotSupportedError, match="one prompt per call"):
        _comp(CompAttnConfig(), prompts)
    one = _comp(_neutral(), [PROMPT])  # a one-element list is one prompt
    assert torch.equal(one.output.frames, _plain())
