"""Every VAE/patch pair: the token grid comes from the pipeline (VAE scale factors x the transformer's patch),
so layout masks, LAM and the attention maps fit tiny pipelines with 4x, 8x and 16x VAEs and patch 1 and 2."""

import numpy as np
import pytest
import torch

from vidlab.generation.comp_attn import GenerationInputError, apply_comp_attn
from vidlab.generation.config import CompAttnConfig
from vidlab.generation.layout import Layout, SubjectLayout, TokenGrid
from vidlab.generation.tiny import build_tiny_pipeline, build_tiny_vae

PROMPT = "a red cat on the left and a blue dog on the right"
LAYOUT = Layout(
    PROMPT,
    [
        SubjectLayout("red cat", [(0.0, (0.0, 0.0, 0.5, 1.0))]),
        SubjectLayout("blue dog", [(0.0, (0.5, 0.0, 1.0, 1.0))]),
    ],
)


@pytest.mark.parametrize("scale", [4, 8, 16])
def test_diffusers_reads_the_tiny_vaes_scale_factor(scale):
    from diffusers import WanPipeline

    vae = build_tiny_vae(scale)
    assert vae.config.scale_factor_spatial == scale
    with torch.no_grad():
        z = vae.encode(torch.zeros(1, 3, 5, 64, 64)).latent_dist.mode()
    assert tuple(z.shape[2:]) == (2, 64 // scale, 64 // scale)  # it really downsamples by that factor
    pipe = WanPipeline(tokenizer=None, text_encoder=None, vae=vae, scheduler=None, transformer=None)
    assert (pipe.vae_scale_factor_spatial, pipe.vae_scale_factor_temporal) == (scale, 4)


@pytest.mark.parametrize(
    "scale,patch,side",
    [(4, 1, 32), (4, 2, 32), (8, 1, 32), (8, 2, 32), (16, 1, 32), (16, 2, 64)],
)
def test_lam_and_maps_fit_every_vae_and_patch(scale, patch, side):
    pipe = build_tiny_pipeline(vae_scale=scale, patch=patch)
    grid = TokenGrid.of(pipe)
    assert (grid.spatial_h, grid.spatial_w, grid.temporal) == (scale * patch, scale * patch, 4)
    cfg = CompAttnConfig(capture_attention=True)
    cfg.lam.step_fraction = 0.5
    with apply_comp_attn(pipe, cfg) as comp:
        res = comp.generate(
            PROMPT,
            layout=LAYOUT,
            height=side,
            width=side,
            num_frames=5,
            num_inference_steps=2,
            generator=torch.Generator().manual_seed(0),
            output_type="np",
        )
    tokens = side // (scale * patch)
    assert res.maps.grid == (2, tokens, tokens)
    assert res.lam_log and {e["step"] for e in res.lam_log} == {0}
    assert np.asarray(res.frames).shape == (5, side, side, 3)  # decoded by the same VAE
    masks = LAYOUT.latent_masks(5, side, side, grid)
    assert masks.shape == (2, 2, tokens, tokens)
    assert masks[0, :, :, : tokens // 2].all() and not masks[0, :, :, tokens // 2 :].any()


def test_a_side_that_fits_16_but_not_the_token_stride_is_one_clear_error():
    pipe = build_tiny_pipeline(vae_scale=16, patch=2)  # 32 px per token: WanPipeline would round 48 down
    with apply_comp_attn(pipe, CompAttnConfig()) as comp:
        with pytest.raises(GenerationInputError, match=r"multiples of 32 .*VAE 4x16x16, patch \(1, 2, 2\)"):
            comp.generate(PROMPT, layout=LAYOUT, height=48, width=64, num_frames=5, num_inference_steps=1)


def test_default_grid_is_wan21s_and_the_tiny_default_pipeline_reads_it():
    assert TokenGrid.of(build_tiny_pipeline()) == TokenGrid()
    assert LAYOUT.latent_masks(81, 480, 832).shape == (2, 21, 30, 52)
