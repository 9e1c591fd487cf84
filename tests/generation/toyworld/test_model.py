"""The toy-world Wan's parts: a 4x VAE sizes the pipeline's latents, the compact prompt rows train exactly what
sampling sees, the gates can fail, and the shipped weights draw the subject they are asked for."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from generation.toyworld.model import WEIGHTS_DIR, ModelConfig  # noqa: E402

SMALL = ModelConfig(
    z_dim=4,
    vae_base_dim=4,
    text_dim=16,
    text_heads=2,
    heads=2,
    head_dim=8,
    layers=1,
    ffn_dim=32,
    freq_dim=32,
)


def _pipe(cfg: ModelConfig):
    from generation.toyworld.model import assemble_pipeline, build_text_encoder, build_transformer, build_vae
    from generation.toyworld.tokenizer import build_word_tokenizer

    torch.manual_seed(0)
    tok = build_word_tokenizer()
    return assemble_pipeline(
        tok, build_text_encoder(cfg, len(tok)), build_vae(cfg), build_transformer(cfg), cfg
    )


def test_a_4x_vae_gives_the_pipeline_a_16x16_latent_and_an_8x8_token_grid_at_64px():
    pipe = _pipe(SMALL)
    assert (pipe.vae_scale_factor_spatial, pipe.vae_scale_factor_temporal) == (4, 4)
    seen = []
    hook = pipe.transformer.register_forward_pre_hook(
        lambda m, args, kwargs: seen.append(tuple(kwargs["hidden_states"].shape)), with_kwargs=True
    )
    try:
        out = pipe(
            "a red circle",
            height=64,
            width=64,
            num_frames=5,
            num_inference_steps=2,
            guidance_scale=1.0,
            generator=torch.Generator().manual_seed(0),
            output_type="np",
        ).frames
    finally:
        hook.remove()
    assert np.asarray(out).shape == (1, 5, 64, 64, 3)
    assert seen and seen[0] == (1, 4, 2, 16, 16)  # 2 latent frames of 16 x 16
    p = pipe.transformer.config.patch_size
    assert (seen[0][2] // p[0], seen[0][3] // p[1], seen[0][4] // p[2]) == (2, 8, 8)
    # an 8x VAE (the old design) would have left a 4 x 4 grid at the same size
    old = _pipe(
        ModelConfig(
            **{**SMALL.__dict__, "vae_dim_mult": [1, 2, 2, 2], "vae_temporal_downsample": [False, True, True]}
        )
    )
    assert old.vae_scale_factor_spatial == 8


def test_compact_prompt_rows_with_the_pad_bias_equal_the_full_512_rows():
    from generation.toyworld.model import build_text_encoder, build_transformer
    from generation.toyworld.tokenizer import build_word_tokenizer
    from generation.toyworld.train import encode_prompts, encode_prompts_compact, use_pad_bias

    torch.manual_seed(0)
    tok = build_word_tokenizer()
    te, tr = build_text_encoder(SMALL, len(tok)), build_transformer(SMALL)
    with torch.no_grad():
        for p in tr.parameters():
            p.normal_(0, 0.1)
    import copy

    tr2 = copy.deepcopy(tr)
    proc = use_pad_bias(tr2)
    texts = ["a red circle", "", "a red circle to the left of a blue square", "two yellow triangles"]
    x = torch.randn(4, 4, 2, 8, 8)
    t = torch.tensor([10.0, 300.0, 700.0, 999.0])
    with torch.no_grad():
        full = tr(
            hidden_states=x,
            timestep=t,
            encoder_hidden_states=encode_prompts(tok, te, texts),
            return_dict=False,
        )[0]
        emb, bias = encode_prompts_compact(tok, te, texts)
        assert emb.shape[1] == len(tok(texts[2]).input_ids) + 1
        proc.bias = bias[:, None, None, :]
        compact = tr2(hidden_states=x, timestep=t, encoder_hidden_states=emb, return_dict=False)[0]
        proc.bias = None
        unbiased = tr2(hidden_states=x, timestep=t, encoder_hidden_states=emb, return_dict=False)[0]
    assert torch.allclose(full, compact, atol=1e-5), (full - compact).abs().max()
    assert (full - unbiased).abs().max() > 1e-3  # without the bias the compact rows would train another model


def test_the_vae_gate_fails_an_untrained_vae_and_the_detector_passes_the_clean_renders():
    from generation.toyworld.gates import vae_roundtrip
    from generation.toyworld.model import build_vae

    torch.manual_seed(0)
    r = vae_roundtrip(build_vae(SMALL), n_per_caption=1, batch=12)
    assert r["clips"] == 24 and len(r["per_frame"]) == 5
    assert r["clean"] == 1.0
    assert r["min"] < 0.5 and not r["passed"]


@pytest.mark.slow
@pytest.mark.skipif(not (WEIGHTS_DIR / "model_index.json").is_file(), reason="no shipped toy-world weights")
def test_the_shipped_weights_load_and_draw_the_asked_subject():
    from diffusers import WanPipeline

    from generation.toyworld.metrics import score_video

    meta = json.loads((WEIGHTS_DIR / "toyworld.json").read_text())
    g = meta["generate"]
    assert (g["height"], g["width"], g["frames"]) == (64, 64, 5)
    pipe = WanPipeline.from_pretrained(WEIGHTS_DIR)
    pipe.set_progress_bar_config(disable=True)
    assert pipe.vae_scale_factor_spatial == 4
    frames = pipe(
        "a red circle",
        negative_prompt="",
        height=64,
        width=64,
        num_frames=5,
        num_inference_steps=12,
        guidance_scale=4.0,
        generator=torch.Generator().manual_seed(0),
        output_type="np",
    ).frames[0]
    assert frames.shape == (5, 64, 64, 3)
    assert score_video("a red circle", frames).presence
    # and the subject follows the prompt: the same noise asked for a blue square does not give a red circle
    other = pipe(
        "a blue square",
        negative_prompt="",
        height=64,
        width=64,
        num_frames=5,
        num_inference_steps=12,
        guidance_scale=4.0,
        generator=torch.Generator().manual_seed(0),
        output_type="np",
    ).frames[0]
    assert not score_video("a red circle", other).presence_colour
