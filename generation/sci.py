"""SCI — Subject-aware Condition Interpolation (a documented reconstruction; see docs/guides/comp-attn.md).

Each subject gets an anchor (the phrase encoded alone by the same text encoder, mean-pooled over its
non-special tokens) and a saliency (how clearly its in-context embedding points at its own anchor rather than
at the other subjects'). Subject tokens of the *conditional* embedding move along a disambiguation direction
``delta_i = N a_i - sum_j a_j`` (rescaled to the tokens' own norm), by ``w(t) * (1 - sal_i)``, where ``w`` is
a schedule over denoising progress. With fewer than two distinct subjects SCI does nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

DECAYS = ("constant", "linear", "cosine")


def sci_weight(progress: float, strength: float, start: float, end: float, decay: str = "cosine") -> float:
    """Schedule ``w(t)``: ``strength`` shaped by ``decay`` on [start, end) of denoising progress, else 0."""
    if decay not in DECAYS:
        raise ValueError(f"unknown SCI decay {decay!r}; choose one of {DECAYS}")
    if strength == 0 or not (start <= progress < end):
        return 0.0
    x = (progress - start) / max(end - start, 1e-12)
    shape = {"constant": 1.0, "linear": 1.0 - x, "cosine": 0.5 * (1.0 + math.cos(math.pi * x))}[decay]
    return float(strength) * shape


def _execution_device(module: torch.nn.Module) -> torch.device:
    try:
        from diffusers.utils.torch_utils import get_module_execution_device

        return get_module_execution_device(module)
    except Exception:  # older diffusers: fall back to the parameters' device
        return next(module.parameters()).device


@torch.no_grad()
def encode_anchors(tokenizer: Any, text_encoder: torch.nn.Module, phrases: Sequence[str]) -> torch.Tensor:
    """Anchor per phrase (N, d): the phrase encoded alone, mean over its non-special tokens, float32."""
    enc = tokenizer(list(phrases), padding="longest", add_special_tokens=True, return_tensors="pt")
    ids, mask = enc["input_ids"], enc["attention_mask"]
    device = _execution_device(text_encoder)
    hidden = text_encoder(ids.to(device), mask.to(device)).last_hidden_state.float().cpu()
    special = torch.tensor(sorted(set(getattr(tokenizer, "all_special_ids", []) or [])), dtype=ids.dtype)
    keep = mask.bool() & ~torch.isin(ids, special)
    empty = [p for p, k in zip(phrases, keep) if not k.any()]
    if empty:
        raise ValueError(f"subject phrase(s) {empty} encode to no non-special tokens")
    keepf = keep.unsqueeze(-1).float()
    return (hidden * keepf).sum(1) / keepf.sum(1)


def pooled(embeds: torch.Tensor, groups: Sequence[Sequence[int]]) -> torch.Tensor:
    """Each subject as seen in context (N, d): the mean of its token embeddings."""
    e = embeds.float()
    return torch.stack([e[list(g)].mean(0) for g in groups])


def mean_pairwise_cosine(vectors: torch.Tensor) -> float:
    """Mean cosine similarity over distinct pairs of rows (how alike the subjects look); nan for N < 2."""
    n = vectors.shape[0]
    if n < 2:
        return float("nan")
    v = F.normalize(vectors.float(), dim=-1)
    sim = v @ v.T
    return float(sim[~torch.eye(n, dtype=torch.bool)].mean())


@dataclass
class SCIPlan:
    """The per-generation SCI update: ``E' = E + w(t) * update`` on the conditional embeddings only."""

    update: torch.Tensor  # (L, d) float32, zero outside subject tokens
    saliency: list[float] = field(default_factory=list)
    groups: list[list[int]] = field(default_factory=list)
    cosine_before: float = float("nan")
    cosine_after: float = float("nan")  # at w = 1 (full strength 1)

    @property
    def is_noop(self) -> bool:
        """True when the update is identically zero (fewer than two distinct subjects)."""
        return not bool(self.update.abs().sum() > 0)

    def apply(self, embeds: torch.Tensor, weight: float) -> torch.Tensor:
        """Conditional embeddings (B, L, d) with the update added at ``weight`` (a new tensor)."""
        upd = self.update.to(device=embeds.device, dtype=torch.float32)
        return (embeds.float() + weight * upd).to(embeds.dtype)

    def summary(self) -> dict[str, Any]:
        """Plain numbers for logs and result files."""
        return {
            "saliency": [round(s, 6) for s in self.saliency],
            "pairwise_cosine_before": self.cosine_before,
            "pairwise_cosine_after_w1": self.cosine_after,
        }


def compute_sci(
    embeds: torch.Tensor,
    groups: Sequence[Sequence[int]],
    anchors: torch.Tensor,
    tau: float = 0.2,
    rescale: bool = True,
) -> SCIPlan:
    """Build the SCI update from one prompt's embeddings (L, d), subject token groups and anchors (N, d).

    ``groups`` must be distinct subjects (one per anchor). Saliency: ``softmax_j(cos(p_i, a_j) / tau)[i]``.
    """
    if tau <= 0:
        raise ValueError(f"SCI tau must be > 0, got {tau}")
    e = embeds.float()
    n = len(groups)
    update = torch.zeros_like(e)
    if n != anchors.shape[0]:
        raise ValueError(f"{n} subject token groups but {anchors.shape[0]} anchors")
    if n < 2:
        return SCIPlan(update=update, saliency=[1.0] * n, groups=[list(g) for g in groups])
    a = anchors.float().to(e.device)
    p = pooled(e, groups)
    cos = F.normalize(p, dim=-1) @ F.normalize(a, dim=-1).T  # (N, N): cos(p_i, a_j)
    sal = torch.softmax(cos / tau, dim=-1).diagonal()
    delta = n * a - a.sum(0, keepdim=True)
    for i, g in enumerate(groups):
        d = delta[i]
        if rescale:
            target = e[list(g)].norm(dim=-1).mean()
            d = d * (target / d.norm().clamp_min(1e-12))
        update[list(g)] += (1.0 - sal[i]) * d
    after = pooled(e + update, groups)
    return SCIPlan(
        update=update,
        saliency=[float(s) for s in sal],
        groups=[list(g) for g in groups],
        cosine_before=mean_pairwise_cosine(p),
        cosine_after=mean_pairwise_cosine(after),
    )
