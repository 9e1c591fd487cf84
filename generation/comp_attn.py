"""Comp-Attn on a diffusers ``WanPipeline``: config, ``apply_comp_attn``, ``CompAttn.generate`` and ``remove``.

``apply_comp_attn(pipe, config)`` swaps only the ``blocks[i].attn2`` processors of the transformer(s) (both
experts of Wan2.2) for ``CompAttnProcessor`` and adds one forward pre-hook per transformer that feeds the
controller. ``comp.generate(prompt, layout=...)`` plans or loads the layout, locates the subject tokens,
builds the SCI update and the LAM targets, and runs the pipeline. ``comp.remove()`` puts back the very same
processor objects and removes the hooks. With Comp-Attn disabled, or SCI strength 0 and LAM off, the output
is bit-identical to diffusers' own processors on the same seed (tested).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch

# torch, numpy and diffusers are imported where used: the config classes stay importable without them.


@dataclass
class SCIConfig:
    """SCI settings (reconstruction; see README): schedule ``w(t)`` and saliency temperature."""

    enabled: bool = True
    strength: float = 0.5  # peak w(t); 0 makes SCI a no-op
    start: float = 0.0  # denoising progress (0 = first step) where SCI starts
    end: float = 0.5  # progress where it stops
    decay: str = "cosine"  # shape of w over [start, end): constant | linear | cosine
    tau: float = 0.2  # saliency softmax temperature
    rescale: bool = True  # rescale delta_i to the mean norm of the subject's token embeddings


@dataclass
class LAMConfig:
    """LAM settings (reconstruction; see README): IoU-guided strength, step window, blocks, rules."""

    enabled: bool = True
    alpha_min: float = 0.25  # strength when the attention region already matches the box (IoU 1)
    alpha_max: float = 1.0  # strength when it does not overlap at all (IoU 0)
    step_fraction: float = 0.3  # modulate steps with progress < this fraction
    blocks: list[int] | None = None  # transformer block indices to modulate; None = all
    threshold: str = "top_half_mean"  # region rule per latent frame: top_half_mean | mean | fixed
    threshold_value: float = 0.5  # threshold for rule "fixed" (on per-frame max-normalised attention)
    spread: str = "max_min"  # bias scale: max_min (max-mean inside, min-mean outside) | std
    apply: str = "mask"  # mask: additive float mask in the attention call | reweight: exact rescale, no mask
    probe: str = "fused"  # how subject-column probabilities are found: fused (one-hot values) | logsumexp
    chunk_elements: int = 16_777_216  # logsumexp probe: logits per chunk when computing the normaliser


@dataclass
class CompAttnConfig:
    """Everything Comp-Attn does, as config values (defaults <- preset ``comp_attn:`` <- overrides)."""

    enabled: bool = True
    sci: SCIConfig = field(default_factory=SCIConfig)
    lam: LAMConfig = field(default_factory=LAMConfig)
    capture_attention: bool = False  # keep per-step subject cross-attention maps (costs time)
    capture_blocks: list[int] | None = None  # blocks to average maps over; None = all
    max_sequence_length: int = 512  # Wan's text length (prompt tokens, zero-padded)


class CompAttnError(RuntimeError):
    """The pipeline cannot take Comp-Attn (image-conditioned, already applied, bad block index, ...)."""


@dataclass
class CompAttnResult:
    """One generation: the frames, what conditioned them, and what Comp-Attn did."""

    frames: Any  # pipeline output frames of the first video (np.ndarray [F, H, W, 3] float in [0, 1])
    output: Any  # the pipeline's full output object
    layout: Any | None
    subjects: list[str]
    token_indices: list[list[int]]
    height: int
    width: int
    num_frames: int
    sci: dict[str, Any] | None = None
    sci_weights: dict[int, float] = field(default_factory=dict)
    lam_log: list[dict[str, Any]] = field(default_factory=list)
    maps: Any | None = None  # AttentionMapStore when capture_attention
    forwards: list[tuple[str, int, bool]] = field(default_factory=list)


def _transformers(pipe: Any) -> list[tuple[str, torch.nn.Module]]:
    return [(n, m) for n in ("transformer", "transformer_2") if (m := getattr(pipe, n, None)) is not None]


def _normalise_blocks(blocks: Any, num_layers: int, what: str) -> list[int] | None:
    if blocks is None:
        return None
    out = sorted({int(b) if int(b) >= 0 else num_layers + int(b) for b in blocks})
    bad = [b for b in out if not 0 <= b < num_layers]
    if bad:
        raise CompAttnError(f"{what} {list(blocks)} has indices outside 0..{num_layers - 1}: {bad}")
    return out


class CompAttn:
    """Comp-Attn installed on a Wan pipeline. Use ``generate`` to run it and ``remove`` to undo it."""

    def __init__(self, pipe: Any, config: CompAttnConfig | None = None):
        self.pipe = pipe
        self.config = copy.deepcopy(config) if config is not None else CompAttnConfig()
        if getattr(pipe, "_comp_attn", None) is not None:
            raise CompAttnError("Comp-Attn is already applied to this pipeline; call .remove() on it first")
        if "ImageToVideo" in type(pipe).__name__ or "VACE" in type(pipe).__name__:
            raise CompAttnError(
                f"{type(pipe).__name__} is image-conditioned; Comp-Attn supports Wan text-to-video pipelines only "
                "(image tokens are prepended to the text context there; not supported by design)"
            )
        trs = _transformers(pipe)
        if not trs:
            raise CompAttnError("the pipeline has no transformer")
        for name, tr in trs:
            cfg = getattr(tr, "config", SimpleNamespace())
            embedder = getattr(getattr(tr, "condition_embedder", None), "image_embedder", None)
            if getattr(cfg, "added_kv_proj_dim", None) is not None or embedder is not None:
                raise CompAttnError(
                    f"pipe.{name} has an image context (added_kv_proj_dim / image_embedder): image-to-video "
                    "transformers are not supported (LAM indexes text tokens only)"
                )
            n = len(tr.blocks)
            self.config.lam.blocks = _normalise_blocks(self.config.lam.blocks, n, "lam.blocks")
            self.config.capture_blocks = _normalise_blocks(self.config.capture_blocks, n, "capture_blocks")
        from generation.controller import Controller
        from generation.processor import CompAttnProcessor, check_mask_backend

        self.controller = Controller(self.config, pipe)
        self._originals: list[tuple[torch.nn.Module, Any]] = []
        self._hooks: list[Any] = []
        if self.config.enabled and self.config.lam.enabled and self.config.lam.apply == "mask":
            for _, tr in trs:
                check_mask_backend(getattr(tr.blocks[0].attn2.processor, "_attention_backend", None))
        for name, tr in trs:
            for i, block in enumerate(tr.blocks):
                original = block.attn2.processor
                self._originals.append((block.attn2, original))
                block.attn2.set_processor(CompAttnProcessor(original, self.controller, i))
            self._hooks.append(tr.register_forward_pre_hook(self.controller.pre_hook(name), with_kwargs=True))
        pipe._comp_attn = self

    def remove(self) -> None:
        """Restore the original attn2 processor objects and remove the hooks."""
        for module, original in self._originals:
            module.set_processor(original)
        for h in self._hooks:
            h.remove()
        self._originals, self._hooks = [], []
        self.controller.end()
        if getattr(self.pipe, "_comp_attn", None) is self:
            self.pipe._comp_attn = None

    # ------------------------------------------------------------------------------------------------
    def resolve_layout(
        self,
        prompt: str,
        layout: Any,
        planner: str,
        planner_kwargs: dict | None,
        subjects: list[str] | None = None,
    ) -> Any:
        """A ``Layout`` from a Layout, a JSON/YAML path, or by planning (``planner`` rule|llm)."""
        from generation.layout import Layout

        if layout is None:
            from generation.planners import plan_layout

            kw = dict(planner_kwargs or {})
            if subjects is not None:
                kw.setdefault("subjects", list(subjects))
            return plan_layout(prompt, planner=planner, **kw)
        if isinstance(layout, (str, os.PathLike)):
            return Layout.load(Path(layout))
        return layout

    def generate(
        self,
        prompt: str,
        layout: Any = None,
        subjects: list[str] | None = None,
        planner: str = "rule",
        planner_kwargs: dict | None = None,
        **pipeline_kwargs: Any,
    ) -> CompAttnResult:
        """Generate ``prompt`` with Comp-Attn; ``pipeline_kwargs`` go to ``WanPipeline.__call__``.

        ``layout``: a ``Layout``, a path to one, or None to plan it with ``planner``. ``subjects``: which of
        the layout's subject phrases to use (default: all of them).
        """
        import numpy as np
        import torch
        from diffusers.pipelines.wan.pipeline_wan import prompt_clean

        from generation.controller import CallState

        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"prompt must be a non-empty string, got {prompt!r}")
        pipe, cfg = self.pipe, self.config
        kw = dict(pipeline_kwargs)
        for key in ("prompt_embeds", "negative_prompt_embeds"):
            if kw.get(key) is not None:
                raise ValueError(f"{key} is computed by Comp-Attn from the prompt; pass the prompt instead")
        height, width, num_frames = self._geometry(kw)
        max_len = int(kw.pop("max_sequence_length", cfg.max_sequence_length))
        if not cfg.enabled:
            lay = self.resolve_layout(prompt, layout, planner, planner_kwargs) if layout is not None else None
            out = pipe(
                prompt=prompt,
                height=height,
                width=width,
                num_frames=num_frames,
                max_sequence_length=max_len,
                **kw,
            )
            return CompAttnResult(out.frames[0], out, lay, [], [], height, width, num_frames)
        lay = self.resolve_layout(prompt, layout, planner, planner_kwargs, subjects)
        chosen = self._select_subjects(lay, subjects)
        clean = prompt_clean(prompt)
        from generation.subjects import subject_token_indices

        items = [
            SimpleNamespace(
                phrase=s.phrase,
                count_index=getattr(s, "count_index", None),
                span=getattr(s, "span", None) if clean == prompt == getattr(lay, "prompt", None) else None,
            )
            for _, s in chosen
        ]
        token_indices = subject_token_indices(pipe.tokenizer, clean, items, max_length=max_len)
        masks = np.asarray(lay.latent_masks(num_frames, height, width), dtype=bool)[[i for i, _ in chosen]]

        guidance = float(kw.get("guidance_scale", 5.0))
        nvp = int(kw.get("num_videos_per_prompt", 1) or 1)
        negative = kw.pop("negative_prompt", None)
        tdtype = next(m for _, m in _transformers(pipe)).dtype
        with torch.no_grad():  # as inside the pipeline: grad mode changes kernel choice, hence bits
            embeds, neg_embeds = pipe.encode_prompt(
                prompt=prompt,
                negative_prompt=negative,
                do_classifier_free_guidance=guidance > 1.0,
                num_videos_per_prompt=nvp,
                max_sequence_length=max_len,
                device=pipe._execution_device,
            )
        embeds = embeds.to(tdtype)
        neg_embeds = neg_embeds.to(tdtype) if neg_embeds is not None else None

        call = CallState(cond_ref=embeds, uncond_ref=neg_embeds)
        phrases = [s.phrase for _, s in chosen]
        if chosen:
            from generation.lam import build_targets, group_subjects

            call.targets = build_targets(token_indices, torch.from_numpy(masks))
            groups, member = group_subjects(token_indices)
            group_names = [phrases[member.index(g)] for g in range(len(groups))]
            if cfg.sci.enabled:
                from generation.sci import compute_sci, encode_anchors

                anchors = encode_anchors(pipe.tokenizer, pipe.text_encoder, group_names)
                with torch.no_grad():
                    call.sci = compute_sci(embeds[0], groups, anchors, cfg.sci.tau, cfg.sci.rescale)
            if cfg.capture_attention:
                from generation.attention_maps import AttentionMapStore

                grid = (int(masks.shape[1]), int(masks.shape[2]), int(masks.shape[3]))
                call.maps = AttentionMapStore(group_names, grid, call.targets.masks.numpy())
        self.controller.begin(call)
        try:
            out = pipe(
                prompt=None,
                prompt_embeds=embeds,
                negative_prompt_embeds=neg_embeds,
                height=height,
                width=width,
                num_frames=num_frames,
                max_sequence_length=max_len,
                **kw,
            )
        finally:
            self.controller.end()
        return CompAttnResult(
            frames=out.frames[0],
            output=out,
            layout=lay,
            subjects=phrases,
            token_indices=[list(t) for t in token_indices],
            height=height,
            width=width,
            num_frames=num_frames,
            sci=call.sci.summary() if call.sci is not None else None,
            sci_weights=dict(call.sci_weights),
            lam_log=list(call.lam_log),
            maps=call.maps,
            forwards=list(call.forwards),
        )

    def _geometry(self, kw: dict[str, Any]) -> tuple[int, int, int]:
        """Height, width, frames as the pipeline will use them (frames 4k+1, sides multiples of 16)."""
        height = int(kw.pop("height", 480))
        width = int(kw.pop("width", 832))
        num_frames = int(kw.pop("num_frames", 81))
        if height % 16 or width % 16 or height <= 0 or width <= 0:
            raise ValueError(f"height and width must be positive multiples of 16, got {height}x{width}")
        if num_frames < 1 or (num_frames - 1) % 4:
            raise ValueError(f"num_frames must be 4k+1 (e.g. 17, 33, 81), got {num_frames}")
        return height, width, num_frames

    @staticmethod
    def _select_subjects(layout: Any, subjects: list[str] | None) -> list[tuple[int, Any]]:
        """(index, subject) pairs of the layout to use: all, or those whose phrase is listed."""
        items = list(enumerate(layout.subjects))
        if subjects is None:
            return items
        norm = {" ".join(p.lower().split()) for p in subjects}
        known = {" ".join(s.phrase.lower().split()) for _, s in items}
        missing = sorted(norm - known)
        if missing:
            raise ValueError(
                f"subject(s) {missing} have no box in the layout (its subjects: {[s.phrase for _, s in items]})"
            )
        return [(i, s) for i, s in items if " ".join(s.phrase.lower().split()) in norm]


def apply_comp_attn(pipe: Any, config: CompAttnConfig | None = None) -> CompAttn:
    """Install Comp-Attn on a Wan text-to-video pipeline and return the handle (``generate`` / ``remove``)."""
    return CompAttn(pipe, config)
