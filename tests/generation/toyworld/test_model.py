"""The toy-world Wan's parts: a 4x VAE sizes the pipeline's latents, the compact prompt rows train exactly what
sampling sees, the gates can fail, and the shipped weights draw the subject they are asked for."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

from vidlab.generation.toyworld.model import WEIGHTS_DIR, ModelConfig  # noqa: E402

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
    from vidlab.generation.toyworld.model import (
        assemble_pipeline,
        build_text_encoder,
        build_transformer,
        build_vae,
    )
    from vidlab.generation.toyworld.tokenizer import build_word_tokenizer

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
    from vidlab.generation.toyworld.model import build_text_encoder, build_transformer
    from vidlab.generation.toyworld.tokenizer import build_word_tokenizer
    from vidlab.generation.toyworld.train import encode_prompts, encode_prompts_compact, use_pad_bias

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
    from vidlab.generation.toyworld.gates import vae_roundtrip
    from vidlab.generation.toyworld.model import build_vae

    torch.manual_seed(0)
    r = vae_roundtrip(build_vae(SMALL), n_per_caption=1, batch=12)
    assert r["clips"] == 24 and len(r["per_frame"]) == 5
    assert r["clean"] == 1.0
    assert r["min"] < 0.5 and not r["passed"]


@pytest.mark.slow
@pytest.mark.skipif(not (WEIGHTS_DIR / "model_index.json").is_file(), reason="no shipped toy-world weights")
def test_the_shipped_vae_passes_its_round_trip_gate_on_every_frame_position():
    """The gate before any Comp-Attn figure: 48 fresh full-frame single-subject clips through the shipped VAE keep
    their colour AND shape (exact detector) in >= 90% of frames at every frame position, frame 0 (its own
    causal chunk) included. The shipped VAE measured 0.938 on the worst position, the one before it 0.979 and
    an older one 0.479 (docs/results/toyworld-wan-training.md)."""
    from diffusers import AutoencoderKLWan

    from vidlab.generation.toyworld.gates import VAE_GATE, vae_roundtrip

    vae = AutoencoderKLWan.from_pretrained(WEIGHTS_DIR / "vae")
    r = vae_roundtrip(vae, n_per_caption=2)
    assert r["clean"] == 1.0 and r["clips"] == 48
    assert r["min"] >= VAE_GATE and r["passed"], r["per_frame"]


# every colour twice (two shapes), one seed each: 12 videos
SHIPPED_PROMPTS = [
    f"a {c} {sh}" for sh in ("circle", "square") for c in ("red", "green", "blue", "yellow", "purple", "cyan")
]


@pytest.mark.slow
@pytest.mark.skipif(not (WEIGHTS_DIR / "model_index.json").is_file(), reason="no shipped toy-world weights")
def test_the_shipped_weights_load_and_draw_the_asked_subjects():
    """Twelve single-subject prompts, one seed each, judged by the exact detector.

    The bar follows what the shipped model measurably does (docs/results/toyworld-wan-training.md: single-subject
    presence 0.875 on its 48 gate videos, colour 1.00; here colour 12/12, colour+shape 10/12, control 0/12), not a hand-picked video: the asked
    colour in at least 10 of 12 videos, colour AND shape in at least half, and the colour of another prompt (the
    control) in at most a quarter. An untrained, prompt-blind or shape-blind model fails it (the previous weights,
    presence 0.31, drew colour+shape in 4 of these 12 and the colour in 11: measured). Sampled at the folder's own settings (its ``generate``).
    """
    from diffusers import WanPipeline

    from vidlab.generation.toyworld.metrics import score_video

    meta = json.loads((WEIGHTS_DIR / "toyworld.json").read_text())
    g = meta["generate"]
    assert (g["height"], g["width"], g["frames"]) == (64, 64, 5)
    pipe = WanPipeline.from_pretrained(WEIGHTS_DIR)
    pipe.set_progress_bar_config(disable=True)
    assert pipe.vae_scale_factor_spatial == 4
    n = len(SHIPPED_PROMPTS)
    videos = pipe(
        prompt=SHIPPED_PROMPTS,
        negative_prompt=[""] * n,
        height=64,
        width=64,
        num_frames=5,
        num_inference_steps=int(g.get("steps", 12)),
        guidance_scale=float(g.get("guidance", 4.0)),
        # the prompt length it was trained at (WanPipeline's default is 512; vidlab passes the tokenizer's)
        max_sequence_length=pipe.tokenizer.model_max_length,
        generator=[torch.Generator().manual_seed(i) for i in range(n)],
        output_type="np",
    ).frames
    videos = np.asarray(videos)
    assert videos.shape == (n, 5, 64, 64, 3)
    asked = [score_video(p, v) for p, v in zip(SHIPPED_PROMPTS, videos)]
    # control: the colour+shape of the NEXT prompt (another colour) looked for in the same video
    other = [score_video(SHIPPED_PROMPTS[(i + 1) % n], v) for i, v in enumerate(videos)]
    assert sum(s.presence_colour for s in asked) >= n - 2, [s.presence_colour for s in asked]
    assert sum(s.presence for s in asked) >= n // 2, [s.presence for s in asked]
    assert sum(s.presence_colour for s in other) <= n // 4, [s.presence_colour for s in other]


@pytest.mark.slow
@pytest.mark.skipif(not (WEIGHTS_DIR / "model_index.json").is_file(), reason="no shipped toy-world weights")
def test_the_shape_swap_control_scores_the_told_shape_and_the_clips_own_apart():
    """At noise level 0 the denoiser changes nothing, so the probe is the VAE round trip: the clip's own subject is
    kept (as in the VAE gate) and the swapped shape the model was told is not there. A probe that scored the told
    caption as the clip's own (or never swapped) fails this."""
    from diffusers import WanPipeline

    from vidlab.generation.toyworld.gates import _swap_shape, denoise_probe

    assert _swap_shape("a red circle") == "a red square" and _swap_shape("a cyan star") == "a cyan triangle"
    pipe = WanPipeline.from_pretrained(WEIGHTS_DIR)
    pipe.set_progress_bar_config(disable=True)
    swapped = denoise_probe(pipe, level=0.0, steps=1, swap_shape=True)
    assert swapped["presence"] == swapped["presence_vae_only"] >= 0.9 and swapped["swap_shape"]
    assert swapped["presence_told"] <= 0.1


@pytest.mark.skipif(not (WEIGHTS_DIR / "model_index.json").is_file(), reason="no shipped toy-world weights")
def test_vidlab_generate_on_the_toy_world_prints_the_detectors_verdict_beside_the_video(tmp_path, capsys):
    """The truth beside the result: on a toy-world model, `vidlab generate` judges its own video with the exact
    detector (printed, and in result.json) against the prompt and the layout it planned; other models are not
    judged."""
    from vidlab.generation.cli import generate_main
    from vidlab.generation.toyworld.metrics import score_video
    from vidlab.video import open_video

    out = tmp_path / "g"
    prompt = "a red circle to the left of a blue square"
    assert generate_main([prompt, "--preset", "generate/toyworld-calibrated", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    res = json.loads((out / "result.json").read_text())
    (v,) = res["detector"]
    assert set(v) >= {"presence", "presence_colour", "relation", "iou"} and v["kind"] == "relation"
    line = next(ln for ln in printed.splitlines() if ln.startswith("toy-world detector on "))
    assert (
        "every subject (colour+shape) yes" if v["presence"] else "every subject (colour+shape) NO"
    ) in line
    # the verdict is the detector's on the written video (up to the codec's loss: colours agree)
    with open_video(out / "video.mp4") as r:
        frames = r.get_frames(list(range(r.num_frames)))
    assert score_video(prompt, frames).presence_colour == v["presence_colour"]
    assert generate_main(["a red cat", "--preset", "tiny", "--out", str(tmp_path / "t")]) == 0
    assert "toy-world detector" not in capsys.readouterr().out
    assert "detector" not in json.loads((tmp_path / "t" / "result.json").read_text())
