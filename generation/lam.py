"""LAM — Layout-forcing Attention Modulation (a documented reconstruction; see docs/guides/comp-attn.md).

Pure tensor functions used by the attn2 processor: the subject-column attention probabilities (only those
columns, never the full probability matrix), the adaptive region where the model currently puts a subject,
the IoU-guided strength, and the additive logit bias that pushes each subject's attention into its layout
box. Shapes follow diffusers' dispatch convention: query (B, S, H, D), key (B, L, H, D).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

THRESHOLD_RULES = ("top_half_mean", "mean", "fixed")
SPREAD_RULES = ("max_min", "std")
MASK_SOURCES = ("box", "fused")


@dataclass
class LamTargets:
    """What LAM needs for one generation: the subject key columns, their grouping, and the layout masks."""

    cols: torch.Tensor  # (n,) long: text-token positions of all subjects, each once
    groups: list[list[int]]  # per subject group: positions into ``cols``
    masks: torch.Tensor  # (G, S) bool: layout mask of each group on the video-token grid
    frames: int  # latent frames T (S = T * H' * W')
    grid: tuple[int, int, int] | None = None  # (T, H', W') token grid (TS-Attn's erosion needs it)

    def to(self, device: torch.device) -> LamTargets:
        """The same targets on ``device`` (the processor moves them once per device)."""
        return LamTargets(self.cols.to(device), self.groups, self.masks.to(device), self.frames, self.grid)


def group_subjects(token_indices: Sequence[Sequence[int]]) -> tuple[list[tuple[int, ...]], list[int]]:
    """Merge subjects that share the same tokens ("three cats" is one phrase for three boxes).

    Returns the distinct token tuples and, per input subject, the index of its group.
    """
    groups: list[tuple[int, ...]] = []
    member: list[int] = []
    for idx in token_indices:
        key = tuple(sorted(int(i) for i in idx))
        if not key:
            raise ValueError("every subject needs at least one token position")
        if key not in groups:
            groups.append(key)
        member.append(groups.index(key))
    return groups, member


def instance_target(instance_masks: torch.Tensor, separate: bool = True) -> torch.Tensor:
    """The one mask a counted phrase's tokens are pushed toward, from its instances' masks (k, S) bool.

    The rule ("three cats": one phrase, three boxes): the phrase's attention is pushed toward the **union**
    of its instances' boxes, and with ``separate`` the video tokens that two or more instance boxes cover are
    taken out of it, so they get the outside (negative) bias. The gaps between instances are outside the union
    anyway, so the instances are pushed apart rather than merged into one blob. If the instances overlap
    completely (nothing would be left), the plain union is kept.
    """
    union = instance_masks.any(0)
    if not separate or instance_masks.shape[0] < 2:
        return union
    apart = union & (instance_masks.sum(0) < 2)
    return apart if bool(apart.any()) else union


def build_targets(
    token_indices: Sequence[Sequence[int]], masks: torch.Tensor, separate_instances: bool = True
) -> LamTargets:
    """Targets from per-subject token positions and per-subject masks (N, T, H', W') (bool).

    Subjects sharing tokens (the copies of a counted subject) get one target from ``instance_target``: the
    union of their masks, minus the tokens where instances overlap when ``separate_instances``. Overlapping
    but different token sets are an error.
    """
    if masks.ndim != 4 or masks.shape[0] != len(token_indices):
        raise ValueError(
            f"masks must be (N={len(token_indices)}, T, H', W') booleans, got shape {tuple(masks.shape)}"
        )
    groups, member = group_subjects(token_indices)
    flat = masks.reshape(masks.shape[0], -1).bool()
    merged = torch.stack(
        [
            instance_target(flat[[i for i, m in enumerate(member) if m == g]], separate_instances)
            for g in range(len(groups))
        ]
    )
    seen: dict[int, int] = {}
    cols: list[int] = []
    pos_groups: list[list[int]] = []
    for g, toks in enumerate(groups):
        here = []
        for t in toks:
            if t in seen:
                raise ValueError(
                    f"token position {t} belongs to two different subjects (groups {seen[t]} and {g})"
                )
            seen[t] = g
            here.append(len(cols))
            cols.append(t)
        pos_groups.append(here)
    grid = (int(masks.shape[1]), int(masks.shape[2]), int(masks.shape[3]))
    return LamTargets(torch.tensor(cols, dtype=torch.long), pos_groups, merged, grid[0], grid)


def subject_logits_and_lse(
    query: torch.Tensor, key: torch.Tensor, cols: torch.Tensor, scale: float, chunk_elements: int = 1 << 24
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled logits of the subject columns (B, H, S, n) and the softmax normaliser over ALL keys (B, H, S).

    The normaliser is a logsumexp over q·k for every text token, computed in query chunks of at most
    ``chunk_elements`` logits and reduced at once, so memory stays bounded and no probability matrix is kept;
    everything is float32 whatever the input dtype. Exact: softmax(q·k)[cols] = exp(logits - lse).
    """
    b, s, h, d = query.shape
    k = key.permute(0, 2, 3, 1).float()  # (B, H, D, L)
    k_cols = k.index_select(-1, cols)  # (B, H, D, n)
    step = max(1, int(chunk_elements) // max(1, b * h * key.shape[1]))
    sub_out = query.new_empty((b, h, s, cols.numel()), dtype=torch.float32)
    lse_out = query.new_empty((b, h, s), dtype=torch.float32)
    for s0 in range(0, s, step):
        q = query[:, s0 : s0 + step].permute(0, 2, 1, 3).float() * scale  # (B, H, c, D)
        lse_out[:, :, s0 : s0 + step] = torch.matmul(q, k).logsumexp(-1)
        sub_out[:, :, s0 : s0 + step] = torch.matmul(q, k_cols)
    return sub_out, lse_out


PROBES = ("fused", "logsumexp")
APPLY_MODES = ("mask", "reweight")


def subject_logits(query: torch.Tensor, key: torch.Tensor, cols: torch.Tensor, scale: float) -> torch.Tensor:
    """Scaled logits q·k of the subject columns only: (B, H, S, n) float32 (cheap: n columns)."""
    k = key.index_select(1, cols).float()  # (B, n, H, D)
    return torch.einsum("bshd,bnhd->bhsn", query.float(), k) * scale


def subject_probs_fused(
    query: torch.Tensor, key: torch.Tensor, cols: torch.Tensor, backend: object = None
) -> torch.Tensor:
    """Exact softmax probabilities of the subject columns (B, H, S, n) through the fused attention kernel.

    Attention with one-hot values returns the probability columns themselves: out[s, j] = P[s, cols[j]].
    The values are padded to the head dim (so every backend takes them), so this costs one plain
    cross-attention call and never forms the (S, L) probability matrix.
    """
    from diffusers.models.attention_dispatch import dispatch_attention_fn

    b, num_keys, h, d = key.shape
    outs = []
    for j0 in range(0, cols.numel(), d):
        cc = cols[j0 : j0 + d]
        v = key.new_zeros((b, num_keys, h, d))
        v[:, cc, :, torch.arange(cc.numel(), device=cc.device)] = 1
        o = dispatch_attention_fn(query, key, v, attn_mask=None, backend=backend, parallel_config=None)
        outs.append(o[..., : cc.numel()])
    return torch.cat(outs, dim=-1).permute(0, 2, 1, 3).float()


def group_attention(probs: torch.Tensor, groups: list[list[int]]) -> torch.Tensor:
    """Head-averaged attention mass of each subject group: (B, H, S, n) -> (B, G, S)."""
    mean = probs.mean(1)  # (B, S, n)
    return torch.stack([mean[..., g].sum(-1) for g in groups], dim=1)


def adaptive_region(
    attn: torch.Tensor, frames: int, rule: str = "top_half_mean", value: float = 0.5
) -> torch.Tensor:
    """Where the model currently puts each subject: (B, G, S) attention -> (B, G, S) bool region.

    Each latent frame is normalised by its maximum, then thresholded per frame: ``top_half_mean`` (mean of
    the values at or above the frame's median), ``mean`` (frame mean) or ``fixed`` (``value`` in [0, 1]).
    """
    b, g, s = attn.shape
    if s % frames:
        raise ValueError(f"{s} video tokens do not split into {frames} latent frames")
    a = attn.reshape(b, g, frames, s // frames)
    a = a / a.amax(-1, keepdim=True).clamp_min(torch.finfo(a.dtype).tiny)
    if rule == "top_half_mean":
        top = a.sort(-1, descending=True).values[..., : max(1, (a.shape[-1] + 1) // 2)]
        thr = top.mean(-1, keepdim=True)
    elif rule == "mean":
        thr = a.mean(-1, keepdim=True)
    elif rule == "fixed":
        thr = torch.full_like(a[..., :1], float(value))
    else:
        raise ValueError(f"unknown LAM threshold rule {rule!r}; choose one of {THRESHOLD_RULES}")
    return (a >= thr).reshape(b, g, s)


def iou(region: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """IoU of regions (B, G, S) with layout masks (G, S) -> (B, G); an empty union counts as IoU 1."""
    m = masks.unsqueeze(0)
    inter = (region & m).sum(-1).float()
    union = (region | m).sum(-1).float()
    return torch.where(union > 0, inter / union.clamp_min(1), torch.ones_like(inter))


def iou_alpha(iou_value: torch.Tensor, alpha_min: float, alpha_max: float) -> torch.Tensor:
    """IoU-guided strength: the further the attention is from the layout, the harder it is pushed."""
    return alpha_min + (alpha_max - alpha_min) * (1.0 - iou_value)


def fused_masks(region: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """``lam.mask_source="fused"``: the layout box united with the model's own attention region, (B, G, S).

    MagicComp (v1 of Comp-Attn) fuses the adaptive region ``L_adapt`` with the planned box ``L_prior`` into
    the mask LAM pushes toward (``L_fuse = L_adapt ⊕ L_prior``); read here as the union, per latent frame:
    where the model already draws the subject stays "inside" (no negative push) and the box is added.
    """
    return region | masks.unsqueeze(0)


def column_bias(
    sub_logits: torch.Tensor,
    targets: LamTargets,
    alpha: torch.Tensor,
    spread: str = "max_min",
    inside_masks: torch.Tensor | None = None,
) -> torch.Tensor:
    """Bias on the subject columns (B, S, n): ``+alpha*pos`` inside the group's mask, ``alpha*neg`` outside.

    ``pos``/``neg`` measure the spread of that column's head-averaged logits over the video tokens:
    ``max_min`` uses (max - mean) and (min - mean); ``std`` uses +std and -std. The mask is the layout's
    (``targets.masks``, ``lam.mask_source="box"``) unless ``inside_masks`` (B, G, S) is given
    (``"fused"``: ``fused_masks``).
    """
    logits = sub_logits.mean(1)  # (B, S, n)
    mean = logits.mean(1, keepdim=True)
    if spread == "max_min":
        pos = logits.amax(1, keepdim=True) - mean
        neg = logits.amin(1, keepdim=True) - mean
    elif spread == "std":
        pos = logits.std(1, keepdim=True)
        neg = -pos
    else:
        raise ValueError(f"unknown LAM spread rule {spread!r}; choose one of {SPREAD_RULES}")
    inside = torch.zeros_like(logits, dtype=torch.bool)
    scale = torch.zeros_like(logits[:, :1])  # (B, 1, n)
    for g, cols in enumerate(targets.groups):
        if inside_masks is None:
            inside[..., cols] = targets.masks[g].view(1, -1, 1)
        else:
            inside[..., cols] = inside_masks[:, g].unsqueeze(-1)
        scale[..., cols] = alpha[:, g].view(-1, 1, 1)
    return scale * torch.where(inside, pos, neg)


def full_bias(bias_cols: torch.Tensor, cols: torch.Tensor, num_keys: int, dtype: torch.dtype) -> torch.Tensor:
    """Scatter column biases (B, S, n) into an additive attention mask (B, 1, S, L), broadcast over heads."""
    b, s, _ = bias_cols.shape
    out = bias_cols.new_zeros((b, 1, s, num_keys), dtype=dtype)
    out[:, 0].index_copy_(-1, cols, bias_cols.to(dtype))
    return out


def biased_probs(probs: torch.Tensor, bias_cols: torch.Tensor | None) -> torch.Tensor:
    """Subject-column probabilities (B, H, S, n) after adding ``bias_cols`` (B, S, n), or per head (B, H, S, n),
    to their logits.

    Exact from the unbiased probabilities p: the biased normaliser is Z' = (1 - sum_c p_c) + sum_c p_c exp(b_c),
    evaluated in log space.
    """
    if bias_cols is None:
        return probs
    logp = probs.float().clamp_min(1e-30).log()
    shifted = logp + (bias_cols if bias_cols.ndim == 4 else bias_cols.unsqueeze(1)).float()
    rest = torch.log1p(-probs.float().sum(-1, keepdim=True).clamp(max=1 - 1e-7))
    log_z = torch.logsumexp(torch.cat([rest, shifted], dim=-1), dim=-1, keepdim=True)
    return (shifted - log_z).exp()


def reweight_output(
    out: torch.Tensor, probs: torch.Tensor, bias_cols: torch.Tensor, value: torch.Tensor, cols: torch.Tensor
) -> torch.Tensor:
    """Attention output with the column bias applied, from the UNbiased output (B, S, H, D) — no mask needed.

    softmax(l + b) v = (o + sum_c p_c (e^b_c - 1) v_c) / (1 + sum_c p_c (e^b_c - 1)) with o = softmax(l) v and
    p the unbiased subject-column probabilities (B, H, S, n) and b the bias (B, S, n), or per head (B, H, S, n).
    Exact algebra; works on mask-less backends.
    """
    b = bias_cols.float().permute(0, 2, 1, 3) if bias_cols.ndim == 4 else bias_cols.float().unsqueeze(2)
    w = probs.permute(0, 2, 1, 3) * torch.expm1(b)  # (B, S, H, n)
    v_cols = value.index_select(1, cols).float()  # (B, n, H, D)
    corr = torch.einsum("bshn,bnhd->bshd", w, v_cols)
    z = 1.0 + w.sum(-1, keepdim=True)
    return ((out.float() + corr) / z).to(out.dtype)
