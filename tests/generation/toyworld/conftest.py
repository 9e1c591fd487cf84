"""The tiny training config and untrained pipeline folders the fine-tuning tests start from (``init_from``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

TINY = [
    "size=32",
    "frames=5",
    "clips=4",
    "dit_steps=2",
    "dit_anneal_steps=0",
    "dit_batch=2",
    "eval_every=0",
    "ckpt_every=1",
    "model.z_dim=4",
    "model.vae_base_dim=4",
    "model.vae_dim_mult=[1,1,1]",
    "model.text_dim=16",
    "model.text_heads=2",
    "model.heads=2",
    "model.head_dim=12",
    "model.layers=1",
    "model.ffn_dim=32",
    "model.freq_dim=32",
]


def _cfg(ck: Path, *extra: str) -> Any:
    from vidlab.config import resolve
    from vidlab.generation.toyworld.train import TrainConfig

    return resolve(TrainConfig, None, [*TINY, f"ckpt_dir={ck}", *extra])


def _folder(path: Path, seed: int = 7, text_encoder: Callable[[Any], Any] | None = None) -> Path:
    """A tiny untrained pipeline folder, its weights drawn from ``seed``; its text encoder is the toy UMT5, or
    ``text_encoder(model_config)``."""
    import torch

    from vidlab.generation.toyworld.model import (
        assemble_pipeline,
        build_text_encoder,
        build_transformer,
        build_vae,
        save_pipeline,
    )
    from vidlab.generation.toyworld.tokenizer import build_word_tokenizer

    model = _cfg(path.parent / "unused").model
    tok = build_word_tokenizer(model_max_length=model.text_len)
    torch.manual_seed(seed)
    te = text_encoder(model) if text_encoder is not None else build_text_encoder(model, len(tok))
    vae = build_vae(model, [0.1] * model.z_dim, [0.9] * model.z_dim)
    pipe = assemble_pipeline(tok, te, vae, build_transformer(model), model)
    return save_pipeline(pipe, path, {"what": "tiny test folder"})


@pytest.fixture
def tiny_train() -> SimpleNamespace:
    """``cfg(ckpt_dir, *overrides)``: the tiny TrainConfig; ``words``: its ``key=value`` words (for the CLI);
    ``folder(path, seed=7, text_encoder=None)``: an untrained pipeline folder of that size."""
    return SimpleNamespace(cfg=_cfg, words=tuple(TINY), folder=_folder)
