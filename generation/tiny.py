"""The offline tiny Wan pipeline: diffusers' own Wan classes at toy sizes, random weights, fixed seeds.

It runs the real ``WanPipeline`` code path (UMT5 text encoder, ``WanTransformer3DModel``, ``AutoencoderKLWan``,
flow-matching Euler scheduler) in about a second on a CPU, so tests, benchmarks and ``make quickstart`` exercise
exactly what a real checkpoint would, without downloading anything. ``variant="wan2.2"`` adds the second expert
(``transformer_2``) and ``boundary_ratio`` like Wan2.2-T2V-A14B.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from diffusers import WanPipeline

VARIANTS = ("wan2.1", "wan2.2")
# Wan2.2-T2V-A14B switches experts at t = 0.875 * 1000. The tiny scheduler (shift 7, few steps) spends most
# steps above that, so the tiny two-expert form uses a higher boundary to give both experts steps.
TINY_WAN22_BOUNDARY_RATIO = 0.95

TRANSFORMER_KWARGS: dict[str, Any] = dict(
    patch_size=(1, 2, 2),
    num_attention_heads=2,
    attention_head_dim=12,
    in_channels=16,
    out_channels=16,
    text_dim=32,
    freq_dim=256,
    ffn_dim=32,
    num_layers=2,
    cross_attn_norm=True,
    qk_norm="rms_norm_across_heads",
    rope_max_seq_len=32,
)
VAE_KWARGS: dict[str, Any] = dict(
    base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1, temperal_downsample=[False, True, True]
)
# The VAE's spatial factor -> its stages (always 4x in time, as every Wan VAE): 4x (a toy VAE), 8x (Wan2.1,
# Wan2.2-A14B), 16x (Wan2.2-TI2V-5B's factor).
VAE_SCALES: dict[int, dict[str, Any]] = {
    4: dict(dim_mult=[1, 1, 1], temperal_downsample=[True, True], scale_factor_spatial=4),
    8: dict(dim_mult=[1, 1, 1, 1], temperal_downsample=[False, True, True], scale_factor_spatial=8),
    16: dict(
        dim_mult=[1, 1, 1, 1, 1], temperal_downsample=[False, False, True, True], scale_factor_spatial=16
    ),
}


def build_tiny_vae(scale: int = 8, seed: int = 0):
    """A random ``AutoencoderKLWan`` that downsamples space by ``scale`` (4, 8 or 16) and time by 4."""
    import torch
    from diffusers import AutoencoderKLWan

    if scale not in VAE_SCALES:
        raise ValueError(f"tiny VAE scale {scale} is not one of {sorted(VAE_SCALES)}")
    torch.manual_seed(seed)
    kwargs = {**VAE_KWARGS, **VAE_SCALES[scale]} if scale != 8 else dict(VAE_KWARGS)
    return AutoencoderKLWan(**kwargs).eval()


TEXT_ENCODER_KWARGS: dict[str, Any] = dict(
    d_model=32,
    d_kv=8,
    d_ff=64,
    num_layers=2,
    num_heads=4,
    relative_attention_num_buckets=8,
    relative_attention_max_distance=32,
    dropout_rate=0.0,
    pad_token_id=0,
    eos_token_id=1,
    decoder_start_token_id=0,
)


def build_tiny_transformer(seed: int = 0, dtype: torch.dtype | None = None, **overrides: Any):
    """A ``WanTransformer3DModel`` at the tiny sizes (override any config key), eval mode, seeded."""
    import torch
    from diffusers import WanTransformer3DModel

    torch.manual_seed(seed)
    model = WanTransformer3DModel(**{**TRANSFORMER_KWARGS, **overrides}).eval()
    return model.to(dtype) if dtype not in (None, torch.float32) else model


def build_tiny_pipeline(
    variant: str = "wan2.1",
    seed: int = 0,
    dtype: torch.dtype | None = None,
    boundary_ratio: float | None = None,
    vae_scale: int = 8,
    patch: int = 2,
) -> WanPipeline:
    """Build the tiny ``WanPipeline`` (``variant`` "wan2.1": one transformer; "wan2.2": two experts).

    Components are seeded one after the other from ``seed`` so the same call gives the same weights.
    The VAE stays float32 (as Wan's model cards recommend); ``dtype`` applies to transformer and text encoder.
    ``vae_scale`` (4, 8, 16) and ``patch`` (the transformer's spatial patch) change the token grid; the
    defaults are Wan2.1's (8, 2) and keep the exact weights of earlier versions.
    """
    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, WanPipeline
    from transformers import UMT5Config, UMT5EncoderModel

    from vidlab.generation.tiny_tokenizer import build_tiny_tokenizer

    if variant not in VARIANTS:
        raise ValueError(f"tiny pipeline variant {variant!r} is not one of {VARIANTS}")
    dtype = dtype or torch.float32
    tokenizer = build_tiny_tokenizer()
    vae = build_tiny_vae(vae_scale, seed)
    scheduler = FlowMatchEulerDiscreteScheduler(shift=7.0)
    torch.manual_seed(seed)
    config = UMT5Config(vocab_size=len(tokenizer), **TEXT_ENCODER_KWARGS)
    text_encoder = UMT5EncoderModel(config).eval()
    if dtype != torch.float32:
        text_encoder = text_encoder.to(dtype)
    tr_kw: dict[str, Any] = {} if patch == 2 else {"patch_size": (1, int(patch), int(patch))}
    transformer = build_tiny_transformer(seed, dtype, **tr_kw)
    kwargs: dict[str, Any] = {}
    if variant == "wan2.2":
        kwargs["transformer_2"] = build_tiny_transformer(seed + 1, dtype, **tr_kw)
        kwargs["boundary_ratio"] = (
            TINY_WAN22_BOUNDARY_RATIO if boundary_ratio is None else float(boundary_ratio)
        )
    elif boundary_ratio is not None:
        raise ValueError("boundary_ratio only applies to the two-expert variant='wan2.2'")
    pipe = WanPipeline(
        tokenizer=tokenizer,
        text_encoder=text_encoder,
        vae=vae,
        scheduler=scheduler,
        transformer=transformer,
        **kwargs,
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe
