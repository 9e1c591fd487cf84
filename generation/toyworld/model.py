"""The toy world's Wan: diffusers' own ``AutoencoderKLWan`` + ``WanTransformer3DModel`` + UMT5, at small sizes.

``build_vae``, ``build_text_encoder`` and ``build_transformer`` make untrained components from ``ModelConfig``;
``assemble_pipeline`` puts them into a ``WanPipeline`` with ``FlowMatchEulerDiscreteScheduler`` (exactly the classes
a Wan2.1 checkpoint uses), and ``save_pipeline`` writes it as a diffusers folder with safetensors, loadable by
``WanPipeline.from_pretrained`` / ``vidlab generate --model DIR``. ``WEIGHTS_DIR`` is where the shipped weights live.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from diffusers import WanPipeline

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"


@dataclass
class ModelConfig:
    """Sizes of the three trained parts.

    The VAE compresses ``2 ** (len(vae_dim_mult) - 1)`` x in space (default 4x: a 64 px frame is a 16 x 16 latent,
    an 8 x 8 token grid with patch 2) and ``2 ** sum(vae_temporal_downsample)`` x in time (4x, as Wan's does).
    An 8x VAE at 64 px left a 4 x 4 token grid and could not carry shape (measured before commit 063fd2f,
    2026-12-01).
    """

    z_dim: int = 16  # 8 lost every shape in the VAE round trip (colour kept 7/8, colour+shape 0/8)
    vae_base_dim: int = 8
    vae_decoder_base_dim: int | None = None  # None: as the encoder; a wider decoder draws crisper edges
    vae_dim_mult: list[int] = field(default_factory=lambda: [1, 2, 2])
    vae_temporal_downsample: list[bool] = field(default_factory=lambda: [True, True])
    text_dim: int = 64
    text_layers: int = 2
    text_heads: int = 4
    heads: int = 4
    # hidden 4 x 32 = 128: room beyond the 64 values each token outputs (patch 1x2x2 x 16 channels)
    head_dim: int = 32
    layers: int = 6
    ffn_dim: int = 512
    freq_dim: int = 64
    patch: list[int] = field(default_factory=lambda: [1, 2, 2])
    flow_shift: float = 2.0  # the sampler's shift (the scheduler in the saved folder)
    # prompt rows the transformer is trained with and samples at (WanPipeline's ``max_sequence_length``; saved as
    # the tokenizer's ``model_max_length``, which vidlab reads). Wan: 512; the shipped model: 16. Every caption
    # fits in 11 tokens, and at 512 the ~508 identical zero-padding keys took 82-96% of each cross-attention of
    # the previous weights (docs/results/toyworld-wan-training.md)
    text_len: int = 16

    @property
    def vae_scale_spatial(self) -> int:
        return 2 ** (len(self.vae_dim_mult) - 1)

    @property
    def vae_scale_temporal(self) -> int:
        return 2 ** sum(bool(t) for t in self.vae_temporal_downsample)


def build_vae(cfg: ModelConfig, latents_mean=None, latents_std=None):
    from diffusers import AutoencoderKLWan

    kw: dict[str, Any] = {}
    if latents_mean is not None:
        kw = dict(latents_mean=[float(v) for v in latents_mean], latents_std=[float(v) for v in latents_std])
    else:
        kw = dict(latents_mean=[0.0] * cfg.z_dim, latents_std=[1.0] * cfg.z_dim)
    return AutoencoderKLWan(
        base_dim=cfg.vae_base_dim,
        decoder_base_dim=cfg.vae_decoder_base_dim,
        z_dim=cfg.z_dim,
        dim_mult=list(cfg.vae_dim_mult),
        num_res_blocks=1,
        temperal_downsample=[bool(t) for t in cfg.vae_temporal_downsample],
        dropout=0.0,
        scale_factor_spatial=cfg.vae_scale_spatial,  # WanPipeline sizes latents (and Comp-Attn its grid) by these
        scale_factor_temporal=cfg.vae_scale_temporal,
        **kw,
    )


def build_text_encoder(cfg: ModelConfig, vocab_size: int):
    from transformers import UMT5Config, UMT5EncoderModel

    conf = UMT5Config(
        vocab_size=vocab_size,
        d_model=cfg.text_dim,
        d_kv=cfg.text_dim // cfg.text_heads,
        d_ff=2 * cfg.text_dim,
        num_layers=cfg.text_layers,
        num_heads=cfg.text_heads,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=32,
        dropout_rate=0.0,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    return UMT5EncoderModel(conf)


def build_transformer(cfg: ModelConfig):
    from diffusers import WanTransformer3DModel

    return WanTransformer3DModel(
        patch_size=tuple(int(p) for p in cfg.patch),
        num_attention_heads=cfg.heads,
        attention_head_dim=cfg.head_dim,
        in_channels=cfg.z_dim,
        out_channels=cfg.z_dim,
        text_dim=cfg.text_dim,
        freq_dim=cfg.freq_dim,
        ffn_dim=cfg.ffn_dim,
        num_layers=cfg.layers,
        cross_attn_norm=True,
        qk_norm="rms_norm_across_heads",
        rope_max_seq_len=32,
    )


def build_scheduler(cfg: ModelConfig):
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler(shift=cfg.flow_shift)


def assemble_pipeline(tokenizer, text_encoder, vae, transformer, cfg: ModelConfig) -> WanPipeline:
    """A ``WanPipeline`` of the given parts (eval mode) with the flow-matching Euler scheduler."""
    from diffusers import WanPipeline

    for m in (text_encoder, vae, transformer):
        m.eval()
    pipe = WanPipeline(
        tokenizer=tokenizer,
        text_encoder=text_encoder,
        vae=vae,
        transformer=transformer,
        scheduler=build_scheduler(cfg),
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


def save_pipeline(pipe: WanPipeline, out_dir: str | Path, meta: dict | None = None) -> Path:
    """Write ``pipe`` as a diffusers folder (safetensors) atomically: a temp folder renamed into place."""
    import json
    import shutil

    out = Path(out_dir)
    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    pipe.save_pretrained(tmp, safe_serialization=True)
    if meta is not None:
        (tmp / "toyworld.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
    if out.exists():
        old = out.with_name(out.name + ".old")
        if old.exists():
            shutil.rmtree(old)
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old)
    else:
        tmp.rename(out)
    return out


def model_config_dict(cfg: ModelConfig) -> dict:
    return asdict(cfg)
