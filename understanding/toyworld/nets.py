"""Which network a saved or new toy policy uses: ``new_net`` (``ToyPolicyNet`` for the basic action set,
``where.WhereNet`` for the where-to-look one) and ``load_toy_policy``. Apart from ``policy.py`` so that the
where-to-look network, which builds on the basic one, is chosen here and ``policy.py`` imports neither."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from vidlab.understanding.toyworld.policy import PolicyNetConfig, ToyPolicy, ToyPolicyNet
from vidlab.understanding.toyworld.where import WhereNet


def new_net(cfg: PolicyNetConfig) -> ToyPolicyNet:
    """A fresh network for ``cfg.actions``: ``ToyPolicyNet`` (basic) or ``where.WhereNet``."""
    if cfg.actions == "where":
        return WhereNet(cfg)
    if cfg.actions != "basic":
        raise ValueError(f"policy actions must be 'basic' or 'where', got {cfg.actions!r}")
    return ToyPolicyNet(cfg)


def load_toy_policy(directory: str | os.PathLike, **kw: Any) -> ToyPolicy:
    """Load ``policy.safetensors`` + the CLIP named in ``policy.json`` (relative to the folder)."""
    from safetensors.torch import load_file

    from vidlab.clip import load_model

    d = Path(directory)
    meta_path = d / "policy.json"
    if not meta_path.is_file() or not (d / "policy.safetensors").is_file():
        from vidlab.understanding.policies.errors import PolicySpecError

        raise PolicySpecError(f"toy:{d}", "expected policy.json and policy.safetensors in that folder")
    meta = json.loads(meta_path.read_text())
    cfg = PolicyNetConfig(**meta["net"])
    net = new_net(cfg)
    net.load_state_dict(load_file(str(d / "policy.safetensors")))
    clip_dir = Path(meta.get("clip", "clip"))
    clip = load_model(clip_dir if clip_dir.is_absolute() else d / clip_dir, device="cpu", precision="fp32")
    return ToyPolicy(net, clip, name=kw.pop("name", f"toy:{d}"), **kw)
