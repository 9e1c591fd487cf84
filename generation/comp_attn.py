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
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # pragma: no cover
    import torch

# torch, numpy and diffusers are imported where used: the config classes stay importable without them.


def _range(lo: float | None, hi: float | None) -> dict[str, Any]:
    """Field metadata for vidlab.config's range check (inclusive; None = open)."""
    return {"range": (lo, hi)}


@dataclass
class SCIConfig:
    """SCI settings (reconstruction; see README): schedule ``w(t)`` and saliency temperature."""

    enabled: bool = True
    strength: float = field(default=0.5, metadata=_range(0.0, None))  # peak w(t); 0 makes SCI a no-op
    start: float = field(default=0.0, metadata=_range(0.0, 1.0))  # progress (0 = first step) where SCI starts
    end: float = field(default=0.5, metadata=_range(0.0, 1.0))  # progress where it stops
    decay: Literal["constant", "linear", "cosine"] = "cosine"  # shape of w over [start, end)
    tau: float = field(default=0.2, metadata=_range(1e-6, None))  # saliency softmax temperature
    rescale: bool = True  # rescale delta_i to the mean norm of the subject's token embeddings

    def __post_init__(self) -> None:
        if self.start > self.end:
            raise ValueError(f"start={self.start} must be <= end={self.end}")


@dataclass
class LAMConfig:
    """LAM settings (reconstruction; see README): IoU-guided strength, step window, blocks, rules."""

    enabled: bool = True
    # strength when the attention region already matches the box (IoU 1) / does not overlap at all (IoU 0)
    alpha_min: float = field(default=0.25, metadata=_range(0.0, None))
    alpha_max: float = field(default=1.0, metadata=_range(0.0, None))
    # modulate steps with progress < this share of the whole schedule (Wan2.1; Wan2.2's high-noise expert)
    step_fraction: float = field(default=0.3, metadata=_range(0.0, 1.0))
    # Wan2.2's low-noise expert (transformer_2): share of ITS OWN steps to modulate; 0 = LAM off there
    step_fraction_2: float = field(default=0.0, metadata=_range(0.0, 1.0))
    blocks: list[int] | None = None  # transformer block indices to modulate; None = all
    threshold: Literal["top_half_mean", "mean", "fixed"] = "top_half_mean"  # region rule per latent frame
    # threshold for rule "fixed" (on per-frame max-normalised attention)
    threshold_value: float = field(default=0.5, metadata=_range(0.0, 1.0))
    spread: Literal["max_min", "std"] = "max_min"  # bias scale: max-mean inside, min-mean outside | +-std
    apply: Literal["mask", "reweight"] = "mask"  # additive float mask | exact rescale of the output, no mask
    probe: Literal["fused", "logsumexp"] = "fused"  # how subject-column probabilities are found
    # logsumexp probe: logits per chunk when computing the normaliser
    chunk_elements: int = field(default=16_777_216, metadata=_range(1, None))
    separate_instances: bool = True  # counted phrase: tokens two instance boxes cover get the outside bias

    def __post_init__(self) -> None:
        if self.alpha_min > self.alpha_max:
            raise ValueError(f"alpha_min={self.alpha_min} must be <= alpha_max={self.alpha_max}")


@dataclass
class CompAttnConfig:
    """Everything Comp-Attn does, as config values (defaults <- preset ``comp_attn:`` <- overrides)."""

    enabled: bool = True
    sci: SCIConfig = field(default_factory=SCIConfig)
    lam: LAMConfig = field(default_factory=LAMConfig)
    capture_attention: bool = False  # keep per-step subject cross-attention maps (costs time)
    capture_blocks: list[int] | None = None  # blocks to average maps over; None = all
    # Wan's text length (prompt tokens, zero-padded)
    max_sequence_length: int = field(default=512, metadata=_range(1, None))


from generation.errors import (  # noqa: E402  (re-exported: callers import them from here)
    BatchNotSupportedError,
    CompAttnError,
    EmptyPromptError,
    GenerationInputError,
    NoSubjectsError,
    NoSubjectsWarning,
    PromptTruncatedWarning,
)
from generation.subjects import SubjectNotFoundError  # noqa: E402


class SubjectNotInLayoutError(SubjectNotFoundError):
    """``subjects=`` names a phrase the layout has no box for."""

    def __init__(self, missing: list[str], known: list[str]):
        self.missing, self.known = missing, known
        self.phrase, self.prompt, self.reason = ", ".join(missing), "", "no box in the layout"
        ValueError.__init__(self, f"subject(s) {missing} have no box in the layout (its subjects: {known})")


@dataclass
class PreparedInputs:
    """A prompt checked, its layout loaded or planned, and the subjects chosen — before any model loads."""

    prompt: str
    clean_prompt: str  # as WanPipeline cleans it (ftfy, whitespace): what the tokenizer sees
    layout: Any
    chosen: list[tuple[int, Any]]  # (index in layout.subjects, SubjectLayout)


def clean_prompt(prompt: str) -> str:
    """The prompt as ``WanPipeline`` cleans it before tokenising (diffusers' ``prompt_clean``)."""
    from diffusers.pipelines.wan.pipeline_wan import prompt_clean

    return prompt_clean(prompt)


def check_prompt(prompt: Any) -> str:
    """The prompt, or ``EmptyPromptError`` / ``BatchNotSupportedError``."""
    if isinstance(prompt, (list, tuple)):
        if len(prompt) != 1:
            raise BatchNotSupportedError(
                f"Comp-Attn takes one prompt per call (layouts and subject tokens are per prompt), got "
                f"{len(prompt)}; call generate once per prompt, or use num_videos_per_prompt for several videos"
            )
        prompt = prompt[0]
    if not isinstance(prompt, str) or not prompt.strip():
        raise EmptyPromptError(f"the prompt is empty: give the text to generate (got {prompt!r})")
    return prompt


def resolve_layout(
    prompt: str,
    layout: Any,
    planner: str = "rule",
    planner_kwargs: dict | None = None,
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


def select_subjects(layout: Any, subjects: list[str] | None) -> list[tuple[int, Any]]:
    """(index, subject) pairs of the layout to use: all, or those whose phrase is listed."""
    items = list(enumerate(layout.subjects))
    if subjects is None:
        return items
    norm = {" ".join(p.lower().split()) for p in subjects}
    known = {" ".join(s.phrase.lower().split()) for _, s in items}
    missing = sorted(norm - known)
    if missing:
        raise SubjectNotInLayoutError(missing, [s.phrase for _, s in items])
    return [(i, s) for i, s in items if " ".join(s.phrase.lower().split()) in norm]


def prepare_inputs(
    prompt: Any,
    layout: Any = None,
    subjects: list[str] | None = None,
    planner: str = "rule",
    planner_kwargs: dict | None = None,
    require_subjects: bool = False,
) -> PreparedInputs:
    """Check everything about the inputs that needs no model: prompt, layout, subjects and their phrases.

    Raises typed ``UserError``s (``EmptyPromptError``, ``LayoutError``, ``SubjectNotFoundError``,
    ``NoSubjectsError`` when ``require_subjects`` and the layout has none); warns ``NoSubjectsWarning`` when
    the layout has no subjects otherwise. ``vidlab generate`` calls it before loading the pipeline.
    """
    import warnings

    from generation.subjects import find_phrase_spans

    text = check_prompt(prompt)
    if subjects is not None:
        if isinstance(subjects, str) or not all(isinstance(p, str) and p.strip() for p in subjects):
            raise SubjectNotFoundError(str(subjects), text, "subjects must be a list of non-empty phrases")
        find_phrase_spans(text, list(subjects))  # a subject missing from the prompt is named here
    lay = resolve_layout(text, layout, planner, planner_kwargs, subjects)
    chosen = select_subjects(lay, subjects)
    clean = clean_prompt(text)
    find_phrase_spans(clean, _span_items(chosen, clean, text, lay))
    if not chosen:
        msg = (
            f"the layout has no subjects for prompt {text!r}, so Comp-Attn (SCI and LAM) changes nothing; "
            "give a layout with subjects (--layout) or name them (--subjects)"
        )
        if require_subjects:
            raise NoSubjectsError(f"LAM was asked for, but {msg}")
        warnings.warn(msg, NoSubjectsWarning, stacklevel=2)
    return PreparedInputs(text, clean, lay, chosen)


def _span_items(chosen: list[tuple[int, Any]], clean: str, prompt: str, layout: Any) -> list[SimpleNamespace]:
    """Subject items for token lookup; a layout's character spans are trusted only on the very same text."""
    same = clean == prompt == getattr(layout, "prompt", None)
    return [
        SimpleNamespace(
            phrase=s.phrase,
            count_index=getattr(s, "count_index", None),
            span=getattr(s, "span", None) if same else None,
        )
        for _, s in chosen
    ]


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
        return resolve_layout(prompt, layout, planner, planner_kwargs, subjects)

    def generate(
        self,
        prompt: str,
        layout: Any = None,
        subjects: list[str] | None = None,
        planner: str = "rule",
        planner_kwargs: dict | None = None,
        require_subjects: bool = False,
        **pipeline_kwargs: Any,
    ) -> CompAttnResult:
        """Generate ``prompt`` with Comp-Attn; ``pipeline_kwargs`` go to ``WanPipeline.__call__``.

        ``layout``: a ``Layout``, a path to one, None to plan it with ``planner``, or the ``PreparedInputs``
        of ``prepare_inputs`` (then ``prompt``/``subjects``/``planner`` were already applied). ``subjects``: which of
        the layout's subject phrases to use (default: all of them). ``require_subjects``: refuse a layout with
        no subjects (``NoSubjectsError``) instead of warning. ``num_videos_per_prompt`` and
        ``negative_prompt`` work as in ``WanPipeline``; ``result.frames`` is the first video,
        ``result.output.frames`` all of them. One prompt per call while Comp-Attn is enabled.
        """
        import numpy as np
        import torch

        from generation.controller import CallState

        pipe, cfg = self.pipe, self.config
        kw = dict(pipeline_kwargs)
        for key in ("prompt_embeds", "negative_prompt_embeds"):
            if kw.get(key) is not None:
                raise GenerationInputError(
                    f"{key} is computed by Comp-Attn from the prompt; pass the prompt instead"
                )
        height, width, num_frames = self._geometry(kw)
        max_len = int(kw.pop("max_sequence_length", cfg.max_sequence_length))
        if not cfg.enabled:  # plain diffusers: any prompt batch, layout only reported back
            lay = layout.layout if isinstance(layout, PreparedInputs) else None
            if isinstance(prompt, str):
                check_prompt(prompt)
                self._warn_truncation(prompt, max_len)
                if layout is not None and lay is None:
                    lay = resolve_layout(prompt, layout, planner, planner_kwargs)
            out = pipe(
                prompt=prompt,
                height=height,
                width=width,
                num_frames=num_frames,
                max_sequence_length=max_len,
                **kw,
            )
            return CompAttnResult(out.frames[0], out, lay, [], [], height, width, num_frames)
        if isinstance(layout, PreparedInputs):  # already checked (vidlab generate checks before loading)
            prep = layout
        else:
            prep = prepare_inputs(prompt, layout, subjects, planner, planner_kwargs, require_subjects)
        prompt, lay, chosen, clean = prep.prompt, prep.layout, prep.chosen, prep.clean_prompt
        from generation.subjects import subject_token_indices

        self._warn_truncation(prompt, max_len)
        token_indices = subject_token_indices(
            pipe.tokenizer, clean, _span_items(chosen, clean, prompt, lay), max_length=max_len
        )
        all_masks = np.asarray(lay.latent_masks(num_frames, height, width), dtype=bool)
        masks = all_masks[[i for i, _ in chosen]]

        guidance = float(kw.get("guidance_scale", 5.0))
        # Encode once for every video of the prompt, then hand the pipeline the expanded embeddings with
        # num_videos_per_prompt=1: it takes the batch from prompt_embeds (expanding again gave n² latents).
        nvp = int(kw.pop("num_videos_per_prompt", 1) or 1)
        if nvp < 1:
            raise GenerationInputError(f"num_videos_per_prompt must be >= 1, got {nvp}")
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

            call.targets = build_targets(
                token_indices, torch.from_numpy(masks), separate_instances=cfg.lam.separate_instances
            )
            groups, member = group_subjects(token_indices)
            group_names = [phrases[member.index(g)] for g in range(len(groups))]
            if cfg.sci.enabled:
                from generation.sci import compute_sci, encode_anchors

                anchors = encode_anchors(pipe.tokenizer, pipe.text_encoder, group_names)
                with torch.no_grad():
                    call.sci = compute_sci(embeds[0], groups, anchors, cfg.sci.tau, cfg.sci.rescale)
            if cfg.capture_attention:
                from generation.attention_maps import AttentionMapStore
                from generation.attention_measure import placebo_layout

                placebo = np.asarray(placebo_layout(lay).latent_masks(num_frames, height, width), dtype=bool)
                placebo_targets = build_targets(
                    token_indices,
                    torch.from_numpy(placebo[[i for i, _ in chosen]]),
                    separate_instances=cfg.lam.separate_instances,
                )
                grid = (int(masks.shape[1]), int(masks.shape[2]), int(masks.shape[3]))
                call.maps = AttentionMapStore(
                    group_names, grid, call.targets.masks.numpy(), placebo_targets.masks.numpy()
                )
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

    def _warn_truncation(self, prompt: str, max_len: int) -> None:
        """``PromptTruncatedWarning`` naming the text the text encoder will not see."""
        import warnings

        from generation.subjects import truncated_text

        dropped = truncated_text(self.pipe.tokenizer, clean_prompt(prompt), max_len)
        if dropped:
            shown = dropped if len(dropped) <= 120 else dropped[:117] + "..."
            warnings.warn(
                f"the prompt is longer than max_sequence_length={max_len} tokens; the text encoder drops "
                f"{len(dropped.split())} word(s) from the end: {shown!r}",
                PromptTruncatedWarning,
                stacklevel=3,
            )

    def _geometry(self, kw: dict[str, Any]) -> tuple[int, int, int]:
        """Height, width, frames as the pipeline will use them (frames 4k+1, sides multiples of 16)."""
        height = int(kw.pop("height", 480))
        width = int(kw.pop("width", 832))
        num_frames = int(kw.pop("num_frames", 81))
        if height % 16 or width % 16 or height <= 0 or width <= 0:
            raise GenerationInputError(
                f"height and width must be positive multiples of 16, got {height}x{width}"
            )
        if num_frames < 1 or (num_frames - 1) % 4:
            raise GenerationInputError(f"num_frames must be 4k+1 (e.g. 17, 33, 81), got {num_frames}")
        return height, width, num_frames


def apply_comp_attn(pipe: Any, config: CompAttnConfig | None = None) -> CompAttn:
    """Install Comp-Attn on a Wan text-to-video pipeline and return the handle (``generate`` / ``remove``)."""
    return CompAttn(pipe, config)
