"""TS-Attn as a rule of the Comp-Attn processor (``lam.rule: ts_attn``): the published sibling, side by side.

TS-Attn (ICLR 2026, arXiv 2604.19473; same first author as Comp-Attn, same stack: diffusers + Wan2.2) has public
code: https://github.com/Hong-yu-Zhang/TS-Attn at commit ``b800edd250c5ad39d9103e86e8370ee9db4483a1`` (files
``models_2_2_t2v/transformer_TsAttn.py``, ``models_2_2_t2v/pipeline_TsAttn.py``, ``configs/TS-Attn_t2v.yaml``).
This module is written from a reading of that code, not copied from it. What the code does, checked line by line:

* **Where and when** (transformer_TsAttn.py, ``WanTsAttnTransformer3DModel.forward`` and ``WanTransformerBlock``):
  the bias goes into ``attn2`` (cross-attention) of the blocks with an **odd** index only
  (``use_control=(i % 2 != 0)``; the region is computed in every block but used only there), when the current
  timestep is one of the first ``int(time_step_ratio x steps)`` timesteps of the whole schedule (pipeline_TsAttn.py:
  ``timesteps[:int(ratio * len)]``; ``time_step_ratio: 0.2`` in the yaml), whichever Wan2.2 expert runs it, and on the
  **conditional pass only** (the unconditional call passes ``subject_mask=None, event_mask=None``).
* **The subject region** (``WanTransformerBlock.forward``): logits ``to_q(x) . to_k(ctx) / sqrt(d)`` from the
  projections **before** ``norm_q``/``norm_k`` (the attention itself uses the normalised ones), softmax over all text
  keys, mean over heads, min-max normalised over **all** video tokens and keys at once (``+1e-6``), the subject's
  token columns averaged, kept where **strictly above** the mean of the top ``int(0.5 x S)`` values, then
  ``erode_isolated``: per latent frame a token stays only if one of its 8 neighbours (3x3 window, zero padding) is in
  the region (``use_erode: True``).
* **The bias** (``TsAttnCrossAttnProcessor.build_cross_attn_mask``, ``mask_type="soft"``, hard-coded in the call):
  on the raw (pre-norm) logits of each head and query, ``+alpha (max - mean)`` on the current event's tokens and the
  subject's tokens, ``alpha (min - mean)`` on the other events' tokens, added only for queries in the subject's region;
  ``alpha = 1 + 0.5 (1 - p_hat)`` per head, query and key, ``p_hat`` the softmax of those logits min-max normalised
  over the keys (``get_dynamic_alpha``: alpha_min 1, alpha_max 1.5, eps 1e-12). The region is split along the token
  order (time) into one segment per event by ``event_range``; with no event list the control is off.
* Read by no code: ``threshold: 0.2`` and ``mask_type: "soft"`` in the yaml (the call passes ``"soft"`` itself).

**Our reading for compositional prompts** (what ``ts_attn`` does here). The toy world's and T2V-CompBench's prompts
name subjects, not a sequence of events, so the subjects play the events' part over one segment (the whole video):
for each subject, the queries in its region get ``+alpha (max - mean)`` on its own tokens and ``alpha (min - mean)`` on
every other subject's tokens. With one subject and one event this is exactly the code's rule. Differences, on
purpose: (1) the code keeps only the **last** subject's bias when several are given (its list is reset per subject and
concatenated after the loop); here every subject's bias is added (a query in two regions gets both), and
``lam.ts_subjects: last`` is the parity mode that keeps only the last one, as the code does; (2) the
top-half threshold is per video (the code's ``.mean()`` pools the batch; identical for one video); (3) subject tokens
are the phrase's located tokens (``vidlab.generation.subjects``), not every occurrence of its token ids; (4) the temporal
event split is not implemented (no prompt here has events); (5) float32 statistics. Only the subject columns of
the bias are non-zero, so the statistics come from query-chunked passes that never keep the (S x L) matrix; the
mask handed to the attention kernel is (B, H, S, L): TS-Attn's bias differs per head.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

SOURCE = "Hong-yu-Zhang/TS-Attn@b800edd250c5ad39d9103e86e8370ee9db4483a1"
NORM_EPS = 1e-6  # the region's min-max normalisation
ALPHA_EPS = 1e-12  # get_dynamic_alpha's p_hat normalisation
TOP_FRACTION = 0.5  # the region threshold: mean of the top half


@dataclass
class RawStats:
    """Per head and query statistics of the raw (pre-norm) cross-attention logits, and the subject columns."""

    col_logits: torch.Tensor  # (B, H, S, n) logits of the subject columns
    row_max: torch.Tensor  # (B, H, S) over all keys
    row_min: torch.Tensor
    row_mean: torch.Tensor
    row_lse: torch.Tensor  # logsumexp over all keys: softmax(l)[c] = exp(l_c - lse)
    region_cols: torch.Tensor  # (B, S, n) head-mean probabilities of the subject columns, min-max normalised


def raw_statistics(
    query: torch.Tensor, key: torch.Tensor, cols: torch.Tensor, scale: float, chunk_elements: int = 1 << 24
) -> RawStats:
    """Everything TS-Attn reads from ``softmax(q k^T scale)``, for query (B, S, H, D) and key (B, L, H, D).

    One pass over query chunks of at most ``chunk_elements`` logits: per head and query the max, min, mean and
    logsumexp over all keys and the subject columns' logits; the head-mean probabilities' minimum and maximum over
    ALL queries and keys (the region's normalisation) and their subject columns. Float32 throughout.
    """
    b, s, h, _ = query.shape
    num_keys = key.shape[1]
    k = key.permute(0, 2, 3, 1).float()  # (B, H, D, L)
    step = max(1, int(chunk_elements) // max(1, b * h * num_keys))
    n = cols.numel()
    col_logits = query.new_empty((b, h, s, n), dtype=torch.float32)
    stats = [query.new_empty((b, h, s), dtype=torch.float32) for _ in range(4)]
    hm_cols = query.new_empty((b, s, n), dtype=torch.float32)
    gmin = torch.full((b,), float("inf"), device=query.device)
    gmax = torch.full((b,), float("-inf"), device=query.device)
    for s0 in range(0, s, step):
        q = query[:, s0 : s0 + step].permute(0, 2, 1, 3).float() * scale  # (B, H, c, D)
        logits = torch.matmul(q, k)  # (B, H, c, L)
        sl = slice(s0, s0 + step)
        stats[0][:, :, sl] = logits.amax(-1)
        stats[1][:, :, sl] = logits.amin(-1)
        stats[2][:, :, sl] = logits.mean(-1)
        stats[3][:, :, sl] = logits.logsumexp(-1)
        col_logits[:, :, sl] = logits.index_select(-1, cols)
        head_mean = logits.softmax(-1).mean(1)  # (B, c, L)
        gmin = torch.minimum(gmin, head_mean.amin(dim=(1, 2)))
        gmax = torch.maximum(gmax, head_mean.amax(dim=(1, 2)))
        hm_cols[:, sl] = head_mean.index_select(-1, cols)
    lo, hi = gmin.view(b, 1, 1), gmax.view(b, 1, 1)
    region_cols = (hm_cols - lo) / (hi - lo + NORM_EPS)
    return RawStats(col_logits, stats[0], stats[1], stats[2], stats[3], region_cols)


def erode_isolated(mask: torch.Tensor, grid: tuple[int, int, int]) -> torch.Tensor:
    """Drop isolated tokens: (..., S) bool over a (T, H', W') token grid; a token stays only if one of its 8
    neighbours in the same latent frame (3x3 window, zero padding) is in the mask."""
    t, hh, ww = grid
    lead = mask.shape[:-1]
    if mask.shape[-1] != t * hh * ww:
        raise ValueError(f"a mask of {mask.shape[-1]} tokens is not a {t}x{hh}x{ww} token grid")
    g = mask.reshape(-1, 1, hh, ww).float()
    kernel = torch.ones((1, 1, 3, 3), dtype=g.dtype, device=g.device)
    kernel[0, 0, 1, 1] = 0
    neighbours = F.conv2d(g, kernel, padding=1)
    return ((neighbours > 0) & (g > 0)).reshape(*lead, t * hh * ww)


def subject_regions(
    region_cols: torch.Tensor, groups: Sequence[Sequence[int]], grid: tuple[int, int, int], erode: bool = True
) -> torch.Tensor:
    """Where the model puts each subject: (B, S, n) normalised column attention -> (B, G, S) bool.

    Per subject the mean over its columns, kept where strictly above the mean of its top ``int(0.5 S)`` values
    (at least one), then ``erode_isolated`` when ``erode``.
    """
    sel = torch.stack([region_cols[..., list(g)].mean(-1) for g in groups], dim=1)  # (B, G, S)
    k = max(1, int(sel.shape[-1] * TOP_FRACTION))
    thr = sel.sort(-1, descending=True).values[..., :k].mean(-1, keepdim=True)
    region = sel > thr
    return erode_isolated(region, grid) if erode else region


def dynamic_alpha(stats: RawStats, alpha_min: float = 1.0, alpha_max: float = 1.5) -> torch.Tensor:
    """TS-Attn's strength per head, query and subject key (B, H, S, n): ``alpha_min + (alpha_max - alpha_min)
    (1 - p_hat)``, ``p_hat = (p - min p) / (max p - min p + 1e-12)`` over the keys, ``p`` the softmax of the raw logits
    (exact from the row statistics: max p = exp(max - lse), min p = exp(min - lse))."""
    lse = stats.row_lse.unsqueeze(-1)
    p = (stats.col_logits - lse).exp()
    p_max = (stats.row_max.unsqueeze(-1) - lse).exp()
    p_min = (stats.row_min.unsqueeze(-1) - lse).exp()
    p_hat = (p - p_min) / (p_max - p_min + ALPHA_EPS)
    return alpha_min + (1.0 - p_hat) * (alpha_max - alpha_min)


def column_bias(
    stats: RawStats,
    regions: torch.Tensor,
    groups: Sequence[Sequence[int]],
    alpha_min: float = 1.0,
    alpha_max: float = 1.5,
    subjects: str = "all",
) -> tuple[torch.Tensor, torch.Tensor]:
    """TS-Attn's bias on the subject columns (B, H, S, n), and the dynamic alpha it used (B, H, S, n).

    For each subject g and each query in ``regions[:, g]``: ``+alpha (max - mean)`` on g's own columns and
    ``alpha (min - mean)`` on every other subject's columns; a query in several regions gets the sum.
    ``subjects="last"`` applies only the last subject's bias, as the published code does (``lam.ts_subjects``).
    """
    if subjects not in ("all", "last"):
        raise ValueError(f"unknown TS-Attn subjects rule {subjects!r}; choose 'all' or 'last'")
    alpha = dynamic_alpha(stats, alpha_min, alpha_max)
    pos = (stats.row_max - stats.row_mean).unsqueeze(-1)  # (B, H, S, 1)
    neg = (stats.row_min - stats.row_mean).unsqueeze(-1)
    n = stats.col_logits.shape[-1]
    out = torch.zeros_like(stats.col_logits)
    chosen = list(enumerate(groups))
    if subjects == "last":
        chosen = chosen[-1:]
    for gi, own_cols in chosen:
        own = torch.zeros(n, dtype=torch.bool, device=out.device)
        own[list(own_cols)] = True
        where = regions[:, gi].view(regions.shape[0], 1, -1, 1).to(out.dtype)  # (B, 1, S, 1)
        out = out + alpha * torch.where(own, pos, neg) * where
    return out, alpha


def full_mask(bias_cols: torch.Tensor, cols: torch.Tensor, num_keys: int, dtype: torch.dtype) -> torch.Tensor:
    """Scatter per-head column biases (B, H, S, n) into the additive attention mask (B, H, S, L)."""
    b, h, s, _ = bias_cols.shape
    out = bias_cols.new_zeros((b, h, s, num_keys), dtype=dtype)
    out.index_copy_(-1, cols, bias_cols.to(dtype))
    return out


def default_blocks(num_layers: int) -> list[int]:
    """The blocks TS-Attn biases when ``lam.ts_blocks`` is None: the odd-indexed ones (the code's i % 2 != 0)."""
    return [i for i in range(num_layers) if i % 2 == 1]


def in_window(step: int, num_steps: int, fraction: float) -> bool:
    """TS-Attn's step window: the first ``int(fraction x steps)`` steps of the whole schedule."""
    return step < int(float(fraction) * num_steps)


__all__ = [
    "SOURCE",
    "RawStats",
    "column_bias",
    "default_blocks",
    "dynamic_alpha",
    "erode_isolated",
    "full_mask",
    "in_window",
    "raw_statistics",
    "subject_regions",
]
