"""The Comp-Attn processor for Wan's cross-attention (``blocks[i].attn2``).

When the controller says this call is not modulated (uncond pass, outside LAM's step window, a block not
selected, no generation running) it hands the call to the original ``WanAttnProcessor`` object untouched, so
the output is exactly diffusers' own. When LAM is active it computes the same projections, derives the
subject-column attention and the layout bias (``vidlab.generation.lam``), and runs diffusers'
``dispatch_attention_fn`` with the bias as an additive float mask.

Backends: every call runs on the processor's own attention backend (``transformer.set_attention_backend``)
except the one masked call of a modulated ``attn2``, and that one too where the backend takes a float mask
(native SDPA, flex, xformers). Where it does not (flash, sage, ...: ``takes_float_mask``) the masked call
alone goes to PyTorch SDPA (``mask_backend``), so ``attn1`` (where Wan spends its time) and every unmodulated
``attn2`` stay on the fast kernel. ``CompAttnBackendError`` only where diffusers has no SDPA backend registered.
With ``lam.rule="ts_attn"`` the active call runs TS-Attn's rule instead (``vidlab.generation.ts_attn``: a per-head bias
from the model's own subject regions, no layout).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from vidlab.generation import lam as L
from vidlab.generation.errors import CompAttnBackendError, CompAttnError

if TYPE_CHECKING:  # pragma: no cover
    from vidlab.generation.controller import Controller

# Backends whose kernels take no float mask (diffusers 0.42: flash*, _flash_3*, sage*, _sage_*, aiter, the
# SDPA flash kernel, NPU (boolean masks only) and XLA raise on, or misread, an additive mask).
_MASKLESS_PREFIXES = (
    "flash",
    "_flash",
    "sage",
    "_sage",
    "aiter",
    "_native_flash",
    "_native_npu",
    "_native_xla",
)
# where a masked call goes when the processor's backend takes no mask: PyTorch SDPA, diffusers' default
MASK_FALLBACK = "native"  # AttentionBackendName.NATIVE


def backend_name(backend: Any) -> str:
    """Name of the backend a processor dispatches to (its own, else diffusers' active default)."""
    if backend is None:
        from diffusers.models.attention_dispatch import _AttentionBackendRegistry

        backend = _AttentionBackendRegistry.get_active_backend()[0]
    return str(getattr(backend, "value", backend))


def takes_float_mask(backend: Any) -> bool:
    """Whether ``backend`` (a name, an ``AttentionBackendName``, or None for the active one) accepts an additive
    float ``attn_mask``."""
    return not backend_name(backend).startswith(_MASKLESS_PREFIXES)


def mask_backend(backend: Any) -> Any:
    """The backend a masked (LAM-modulated) call runs on: ``backend`` itself where it takes a float mask, else
    PyTorch SDPA (``MASK_FALLBACK``); ``CompAttnBackendError`` where diffusers has no such backend registered."""
    if takes_float_mask(backend):
        return backend
    from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry

    fallback = AttentionBackendName.NATIVE  # a member, not AttentionBackendName(...): traced by torch.compile
    if fallback in _AttentionBackendRegistry._backends and takes_float_mask(fallback):
        return fallback
    raise CompAttnBackendError(
        f"LAM adds an additive float mask to Wan's cross-attention, which the {backend_name(backend)!r} attention "
        f"backend does not accept, and no mask-capable backend ({MASK_FALLBACK!r}, PyTorch SDPA) is registered in "
        "diffusers to run those calls on; set 'native', 'flex' or 'xformers' (transformer.set_attention_backend(...)), "
        "use lam.apply=reweight (no mask), or turn LAM off (lam.enabled=false)"
    )


class CompAttnProcessor:
    """attn2 processor: exact pass-through unless the controller activates LAM or map capture."""

    def __init__(self, original: Any, controller: Controller, block: int):
        self.original = original
        self.controller = controller
        self.block = block
        self.pending: list = []  # what a compiled forward recorded here, drained by the controller outside it
        controller.processors.append(self)

    # diffusers sets these on every processor (set_attention_backend, context parallel); keep both in step.
    @property
    def _attention_backend(self) -> Any:
        return getattr(self.original, "_attention_backend", None)

    @_attention_backend.setter
    def _attention_backend(self, value: Any) -> None:
        self.original._attention_backend = value

    @property
    def _parallel_config(self) -> Any:
        return getattr(self.original, "_parallel_config", None)

    @_parallel_config.setter
    def _parallel_config(self, value: Any) -> None:
        self.original._parallel_config = value

    def __call__(
        self,
        attn: Any,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        rotary_emb: Any = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        ctl = self.controller
        lam_on = ctl.lam_active(self.block)
        capture = ctl.capture_active(self.block)
        if not (lam_on or capture):
            return self.original(
                attn, hidden_states, encoder_hidden_states, attention_mask, rotary_emb, **kwargs
            )
        if attn.add_k_proj is not None:
            raise CompAttnError("Comp-Attn does not support image-conditioned (I2V) cross-attention")
        targets = ctl.targets_on(hidden_states.device)
        if hidden_states.shape[1] != targets.masks.shape[1]:
            raise ValueError(
                f"the layout masks cover {targets.masks.shape[1]} video tokens but this forward has "
                f"{hidden_states.shape[1]}: generate with the height/width/frames the layout was rasterised for"
            )
        from diffusers.models.transformers.transformer_wan import _get_qkv_projections

        q_raw, k_raw, value = _get_qkv_projections(attn, hidden_states, encoder_hidden_states)
        query = attn.norm_q(q_raw).unflatten(2, (attn.heads, -1))
        key = attn.norm_k(k_raw).unflatten(2, (attn.heads, -1))
        value = value.unflatten(2, (attn.heads, -1))
        probs: torch.Tensor | None
        bias_cols: torch.Tensor | None = None
        if lam_on and ctl.config.lam.rule == "ts_attn":
            raw = (q_raw.unflatten(2, (attn.heads, -1)), k_raw.unflatten(2, (attn.heads, -1)))
            out, bias_cols, probs = self._ts_attn(
                attn, query, key, value, raw, attention_mask, targets, capture
            )
        else:
            sub, probs = self._probe(query, key, targets)
            if lam_on:
                out, bias_cols = self._modulated(attn, query, key, value, attention_mask, sub, probs, targets)
            else:
                out = self.original(
                    attn, hidden_states, encoder_hidden_states, attention_mask, rotary_emb, **kwargs
                )
        if capture:
            assert probs is not None
            maps = L.group_attention(L.biased_probs(probs, bias_cols), targets.groups)
            ctl.record_map(self.block, maps, biased=bias_cols is not None, pending=self.pending)
        return out

    def _probe(
        self, query: torch.Tensor, key: torch.Tensor, targets: L.LamTargets
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Subject-column logits (B, H, S, n) and exact probabilities (B, H, S, n) by ``lam.probe``."""
        cfg = self.controller.config.lam
        scale = query.shape[-1] ** -0.5
        if cfg.probe == "fused":
            sub = L.subject_logits(query, key, targets.cols, scale)
            probs = L.subject_probs_fused(query, key, targets.cols, self._attention_backend)
        elif cfg.probe == "logsumexp":
            sub, lse = L.subject_logits_and_lse(query, key, targets.cols, scale, cfg.chunk_elements)
            probs = (sub - lse.unsqueeze(-1)).exp()
        else:
            raise ValueError(f"unknown lam.probe {cfg.probe!r}; choose one of {L.PROBES}")
        return sub, probs

    def _ts_attn(
        self,
        attn: Any,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        raw: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor | None,
        targets: L.LamTargets,
        capture: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """TS-Attn (``lam.rule="ts_attn"``): regions and statistics from the raw (pre-norm) projections ``raw``,
        the per-head bias on the subject columns, attention on the normalised ``query``/``key`` (see ts_attn.py).

        Returns the output, the per-head column bias and the exact subject-column probabilities (computed only
        when ``capture`` or ``lam.apply="reweight"`` needs them, else None)."""
        from vidlab.generation import ts_attn as T

        cfg = self.controller.config.lam
        if targets.grid is None:
            raise ValueError(
                "TS-Attn needs the token grid of the targets (build them with lam.build_targets)"
            )
        scale = query.shape[-1] ** -0.5
        stats = T.raw_statistics(raw[0], raw[1], targets.cols, scale, cfg.chunk_elements)
        regions = T.subject_regions(stats.region_cols, targets.groups, targets.grid, cfg.ts_erode)
        bias, alpha = T.column_bias(
            stats, regions, targets.groups, cfg.ts_alpha_min, cfg.ts_alpha_max, cfg.ts_subjects
        )
        probs = self._probe(query, key, targets)[1] if (capture or cfg.apply == "reweight") else None
        out = self._biased_attention(
            attn, query, key, value, attention_mask, bias, probs, targets, T.full_mask
        )
        # logged: each region's IoU with the layout box (TS-Attn never reads the box) and the mean dynamic
        # alpha on the subject's own columns over its region's queries of every video (0: empty regions)
        own = torch.stack([alpha[..., g].mean((1, 3)) for g in targets.groups], 1)  # (B, G, S)
        reg = regions.to(own.dtype)
        alpha_log = ((own * reg).sum((0, 2)) / reg.sum((0, 2)).clamp_min(1.0)).expand(own.shape[0], -1)
        self.controller.record_lam(self.block, L.iou(regions, targets.masks), alpha_log, self.pending)
        return out, bias, probs

    def _modulated(
        self,
        attn: Any,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        sub: torch.Tensor,
        probs: torch.Tensor,
        targets: L.LamTargets,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """LAM: region -> IoU -> alpha -> additive bias on the subject columns -> dispatched attention."""
        cfg = self.controller.config.lam
        region = L.adaptive_region(
            L.group_attention(probs, targets.groups), targets.frames, cfg.threshold, cfg.threshold_value
        )
        iou = L.iou(region, targets.masks)
        alpha = L.iou_alpha(iou, cfg.alpha_min, cfg.alpha_max)
        if cfg.mask_source == "box":
            bias_cols = L.column_bias(sub, targets, alpha, cfg.spread)
        elif cfg.mask_source == "fused":
            bias_cols = L.column_bias(sub, targets, alpha, cfg.spread, L.fused_masks(region, targets.masks))
        else:
            raise ValueError(f"unknown lam.mask_source {cfg.mask_source!r}; choose one of {L.MASK_SOURCES}")
        out = self._biased_attention(
            attn, query, key, value, attention_mask, bias_cols, probs, targets, L.full_bias
        )
        self.controller.record_lam(self.block, iou, alpha, self.pending)
        return out, bias_cols

    def _biased_attention(
        self,
        attn: Any,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        bias_cols: torch.Tensor,
        probs: torch.Tensor | None,
        targets: L.LamTargets,
        scatter: Callable[[torch.Tensor, torch.Tensor, int, torch.dtype], torch.Tensor],
    ) -> torch.Tensor:
        """Dispatched attention with ``bias_cols`` on the subject columns, by ``lam.apply``: "mask" adds the bias
        scattered by ``scatter`` (LAM's shared-head or TS-Attn's per-head layout) to the attention mask,
        "reweight" corrects the unbiased output from the exact ``probs``; then the output projection."""
        from diffusers.models.attention_dispatch import dispatch_attention_fn

        cfg = self.controller.config.lam
        if cfg.apply == "mask":
            mask = scatter(bias_cols, targets.cols, key.shape[1], query.dtype)
            if attention_mask is not None:
                mask = mask + attention_mask
        elif cfg.apply == "reweight":
            mask = attention_mask
        else:
            raise ValueError(f"unknown lam.apply {cfg.apply!r}; choose one of {L.APPLY_MODES}")
        # the masked call alone leaves a mask-less backend (flash, sage): for PyTorch SDPA (mask_backend)
        backend = self._attention_backend if mask is None else mask_backend(self._attention_backend)
        out = dispatch_attention_fn(
            query,
            key,
            value,
            attn_mask=mask,
            dropout_p=0.0,
            is_causal=False,
            backend=backend,
            parallel_config=None,
        )
        if cfg.apply == "reweight":
            assert probs is not None
            out = L.reweight_output(out, probs, bias_cols, value, targets.cols)
        out = out.flatten(2, 3).type_as(query)
        return attn.to_out[1](attn.to_out[0](out))
