"""Comp-Attn on a diffusers ``WanPipeline``: ``apply_comp_attn``, ``CompAttn.generate`` and ``remove``.

The settings live in ``vidlab.generation.config`` (``CompAttnConfig``, ``SCIConfig``, ``LAMConfig``); this module
re-exports them for one release.

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

from vidlab.generation.config import CompAttnConfig, LAMConfig, SCIConfig  # re-exported for one release
from vidlab.generation.errors import (  # re-exported: callers import them from here
    BatchNotSupportedError,
    CompAttnError,
    EmptyPromptError,
    GenerationInputError,
    NoSubjectsError,
    NoSubjectsWarning,
    PromptTruncatedWarning,
)
from vidlab.generation.subjects import SubjectNotFoundError, model_text_length

if TYPE_CHECKING:  # pragma: no cover
    import torch

# torch, numpy and diffusers are imported where used: this module stays importable without them.

__all__ = [
    "BatchNotSupportedError",
    "CompAttn",
    "CompAttnConfig",
    "CompAttnError",
    "CompAttnResult",
    "EmptyPromptError",
    "GenerationInputError",
    "LAMConfig",
    "NoSubjectsError",
    "NoSubjectsWarning",
    "PreparedInputs",
    "PromptTruncatedWarning",
    "SCIConfig",
    "SubjectNotFoundError",
    "SubjectNotInLayoutError",
    "apply_comp_attn",
    "prepare_inputs",
]


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
    from vidlab.generation.layout import Layout

    if layout is None:
        from vidlab.generation.planners import plan_layout

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

    from vidlab.generation.subjects import find_phrase_spans

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


class CompAttnSkippedWarning(UserWarning):
    """``pipe(...)`` was called with ``prompt_embeds`` and no prompt text, so Comp-Attn could not run on it."""


_PIPE_CLASSES: dict[type, type] = {}


def _pipeline_call(self: Any, *args: Any, **kwargs: Any) -> Any:
    """``pipe(...)`` while Comp-Attn is installed: ``CompAttn.generate`` on the same arguments."""
    base = type(self)._comp_attn_base
    comp = getattr(self, "_comp_attn", None)
    if comp is None or comp._busy:
        return base.__call__(self, *args, **kwargs)
    return comp._call_pipeline(base, args, kwargs)


def _comp_attn_class(base: type) -> type:
    """A subclass of the pipeline's class whose ``__call__`` runs Comp-Attn (same name, module and docs)."""
    if base not in _PIPE_CLASSES:
        _PIPE_CLASSES[base] = type(
            base.__name__,
            (base,),
            {
                "__call__": _pipeline_call,
                "_comp_attn_base": base,
                "__module__": base.__module__,
                "__doc__": base.__doc__,
            },
        )
    return _PIPE_CLASSES[base]


def _context_wrapper(controller: Any, tag: str, tr: Any) -> Any:
    """``tr.cache_context`` that tells the controller which pass comes before entering diffusers' own."""
    import contextlib

    original = type(tr).cache_context

    @contextlib.contextmanager
    def cache_context(name: str, *args: Any, **kwargs: Any) -> Any:
        controller.on_forward(tag, name)
        with original(tr, name, *args, **kwargs):
            yield

    return cache_context


class CompAttn:
    """Comp-Attn installed on a Wan pipeline: a plain ``pipe(prompt=...)`` now runs with it.

    ``generate`` runs it and returns what it did (``CompAttnResult``); ``pipe(...)`` is the same computation
    and returns the pipeline's own output (``comp.last_result`` holds the rest). The layout of a plain
    ``pipe(...)`` call is planned from its prompt with ``planner``, or the one given by ``set_layout``.
    ``remove()`` (or leaving ``with apply_comp_attn(pipe, cfg) as comp:``) restores the very same processor
    objects, the pipeline's class and the transformers' hooks.
    """

    def __init__(
        self,
        pipe: Any,
        config: CompAttnConfig | None = None,
        *,
        layout: Any = None,
        subjects: list[str] | None = None,
        planner: str = "rule",
        planner_kwargs: dict | None = None,
    ):
        self.pipe = pipe
        self.config = copy.deepcopy(config) if config is not None else CompAttnConfig()
        self.planner, self.planner_kwargs = planner, dict(planner_kwargs or {})
        self._layout, self._subjects = layout, subjects
        self._busy = False
        self.last_result: CompAttnResult | None = None
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
            if not callable(getattr(type(tr), "cache_context", None)):
                raise CompAttnError(
                    f"pipe.{name} ({type(tr).__name__}) has no cache_context(): Comp-Attn follows the denoising "
                    "loop through it; use diffusers >= 0.40 (see pyproject.toml)"
                )
            n = len(tr.blocks)
            self.config.lam.blocks = _normalise_blocks(self.config.lam.blocks, n, "lam.blocks")
            self.config.lam.ts_blocks = _normalise_blocks(self.config.lam.ts_blocks, n, "lam.ts_blocks")
            self.config.capture_blocks = _normalise_blocks(self.config.capture_blocks, n, "capture_blocks")
        from vidlab.generation.controller import Controller
        from vidlab.generation.processor import CompAttnProcessor

        self.controller = Controller(self.config, pipe)
        self._originals: list[tuple[torch.nn.Module, Any]] = []
        self._hooks: list[Any] = []
        self._contexts: list[torch.nn.Module] = []
        self._check_backend()
        for name, tr in trs:
            for i, block in enumerate(tr.blocks):
                original = block.attn2.processor
                self._originals.append((block.attn2, original))
                block.attn2.set_processor(CompAttnProcessor(original, self.controller, i))
            self._hooks.append(tr.register_forward_pre_hook(self.controller.pre_hook(name), with_kwargs=True))
            tr.cache_context = _context_wrapper(self.controller, name, tr)
            self._contexts.append(tr)
        self._class = type(pipe)
        if callable(pipe) and hasattr(pipe, "__dict__"):
            pipe.__class__ = _comp_attn_class(self._class)
        pipe._comp_attn = self

    def _check_backend(self) -> None:
        """LAM's masked calls need a backend that takes a float mask: on a mask-less one (flash, sage) they alone
        run on PyTorch SDPA (``processor.mask_backend``); refuse up front only where none is registered."""
        import logging

        from vidlab.generation.processor import backend_name, mask_backend, takes_float_mask

        if self.config.enabled and self.config.lam.enabled and self.config.lam.apply == "mask":
            for name, tr in _transformers(self.pipe):
                backend = getattr(tr.blocks[0].attn2.processor, "_attention_backend", None)
                routed = mask_backend(backend)
                if not takes_float_mask(backend):
                    logging.getLogger(__name__).info(
                        "pipe.%s runs attention on %r, which takes no mask: LAM's modulated attn2 calls run on "
                        "%r, every other call stays on %r",
                        name, backend_name(backend), backend_name(routed), backend_name(backend),
                    )  # fmt: skip

    def remove(self) -> None:
        """Restore the original attn2 processor objects, the pipeline's class, and remove the hooks."""
        for module, original in self._originals:
            module.set_processor(original)
        for h in self._hooks:
            h.remove()
        for tr in self._contexts:
            if "cache_context" in vars(tr):
                del tr.cache_context
        self._originals, self._hooks, self._contexts = [], [], []
        self.controller.end()
        if getattr(self.pipe, "_comp_attn", None) is self:
            self.pipe._comp_attn = None
            if type(self.pipe) is not self._class and getattr(type(self.pipe), "_comp_attn_base", None):
                self.pipe.__class__ = self._class

    def set_layout(self, layout: Any = None, subjects: list[str] | None = None) -> None:
        """The layout every following ``pipe(...)`` call uses: a ``Layout``, a JSON/YAML path, or None to plan
        one from each call's prompt with the planner (the default). ``subjects``: which of its phrases to use."""
        if layout is not None and not isinstance(layout, (str, os.PathLike)):
            from vidlab.generation.layout import Layout

            if not isinstance(layout, Layout):
                raise GenerationInputError(
                    f"set_layout takes a Layout, a path to one, or None, got {type(layout).__name__}"
                )
        self._layout, self._subjects = layout, subjects

    def _call_pipeline(self, base: type, args: tuple, kwargs: dict) -> Any:
        """A plain ``pipe(...)``: the same computation as ``generate`` on the same arguments."""
        import inspect
        import warnings

        import torch

        bound = inspect.signature(base.__call__).bind(self.pipe, *args, **kwargs)
        params = {k: v for k, v in bound.arguments.items() if k != "self"}
        var_kw = [
            p.name for p in inspect.signature(base.__call__).parameters.values() if p.kind is p.VAR_KEYWORD
        ]
        for name in var_kw:
            params.update(params.pop(name, {}))
        # a pipeline that carries its model's sampling settings (vidlab.generation.pipeline.with_call_defaults)
        params = {**(getattr(self.pipe, "vidlab_call_defaults", None) or {}), **params}
        prompt = params.pop("prompt", None)
        if prompt is None or params.get("prompt_embeds") is not None:
            if self.config.enabled:
                warnings.warn(
                    "pipe(...) got prompt_embeds instead of the prompt text, so Comp-Attn cannot find the subjects: "
                    "this call runs without it; pass prompt=... instead",
                    CompAttnSkippedWarning,
                    stacklevel=3,
                )
            self._busy = True
            try:
                return base.__call__(self.pipe, *args, **kwargs)
            finally:
                self._busy = False
        return_dict = params.pop("return_dict", True)
        with torch.no_grad():
            res = self.generate(
                prompt,
                layout=self._layout,
                subjects=self._subjects,
                planner=self.planner,
                planner_kwargs=self.planner_kwargs,
                **params,
            )
        self.last_result = res
        return res.output if return_dict else (res.output.frames,)

    def __enter__(self) -> CompAttn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

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

        from vidlab.generation.controller import CallState

        pipe, cfg = self.pipe, self.config
        kw = dict(pipeline_kwargs)
        for key in ("prompt_embeds", "negative_prompt_embeds"):
            if kw.get(key) is not None:
                raise GenerationInputError(
                    f"{key} is computed by Comp-Attn from the prompt; pass the prompt instead"
                )
        from vidlab.generation.layout import TokenGrid

        grid = TokenGrid.of(pipe)
        height, width, num_frames = self._geometry(kw, grid)
        max_len = model_text_length(
            pipe.tokenizer, kw.pop("max_sequence_length", None) or cfg.max_sequence_length
        )
        if not cfg.enabled:  # plain diffusers: any prompt batch, layout only reported back
            lay = layout.layout if isinstance(layout, PreparedInputs) else None
            if isinstance(prompt, str):
                check_prompt(prompt)
                self._warn_truncation(prompt, max_len)
                if layout is not None and lay is None:
                    lay = resolve_layout(prompt, layout, planner, planner_kwargs)
            self._busy = True
            try:
                out = pipe(
                    prompt=prompt,
                    height=height,
                    width=width,
                    num_frames=num_frames,
                    max_sequence_length=max_len,
                    **kw,
                )
            finally:
                self._busy = False
            return CompAttnResult(out.frames[0], out, lay, [], [], height, width, num_frames)
        if isinstance(layout, PreparedInputs):  # already checked (vidlab generate checks before loading)
            prep = layout
        else:
            prep = prepare_inputs(prompt, layout, subjects, planner, planner_kwargs, require_subjects)
        prompt, lay, chosen, clean = prep.prompt, prep.layout, prep.chosen, prep.clean_prompt
        from vidlab.generation.subjects import subject_token_indices

        self._warn_truncation(prompt, max_len)
        token_indices = subject_token_indices(
            pipe.tokenizer, clean, _span_items(chosen, clean, prompt, lay), max_length=max_len
        )
        all_masks = np.asarray(lay.latent_masks(num_frames, height, width, grid), dtype=bool)
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
            from vidlab.generation.lam import build_targets, group_subjects

            call.targets = build_targets(
                token_indices, torch.from_numpy(masks), separate_instances=cfg.lam.separate_instances
            )
            groups, member = group_subjects(token_indices)
            group_names = [phrases[member.index(g)] for g in range(len(groups))]
            if cfg.sci.enabled:
                from vidlab.generation.sci import compute_sci, encode_anchors

                anchors = encode_anchors(pipe.tokenizer, pipe.text_encoder, group_names)
                with torch.no_grad():
                    call.sci = compute_sci(embeds[0], groups, anchors, cfg.sci.tau, cfg.sci.rescale)
            if cfg.capture_attention:
                from vidlab.generation.attention_maps import AttentionMapStore
                from vidlab.generation.attention_measure import placebo_layout

                placebo = np.asarray(
                    placebo_layout(lay).latent_masks(num_frames, height, width, grid), dtype=bool
                )
                placebo_targets = build_targets(
                    token_indices,
                    torch.from_numpy(placebo[[i for i, _ in chosen]]),
                    separate_instances=cfg.lam.separate_instances,
                )
                shape = (int(masks.shape[1]), int(masks.shape[2]), int(masks.shape[3]))
                call.maps = AttentionMapStore(
                    group_names, shape, call.targets.masks.numpy(), placebo_targets.masks.numpy()
                )
        if call.targets is not None:
            call.targets = call.targets.to(pipe._execution_device)
        self._check_backend()
        self.controller.begin(call)
        self._busy = True
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
            self._busy = False
            self.controller.end()
        if not call.forwards and int(kw.get("num_inference_steps", 50) or 0) > 0:
            raise CompAttnError(
                "the pipeline ran its transformer without cache_context('cond'/'uncond'), so Comp-Attn could not "
                "follow the denoising loop; use a diffusers WanPipeline >= 0.40 (see pyproject.toml)"
            )
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

        from vidlab.generation.subjects import truncated_text

        dropped = truncated_text(self.pipe.tokenizer, clean_prompt(prompt), max_len)
        if dropped:
            shown = dropped if len(dropped) <= 120 else dropped[:117] + "..."
            warnings.warn(
                f"the prompt is longer than max_sequence_length={max_len} tokens; the text encoder drops "
                f"{len(dropped.split())} word(s) from the end: {shown!r}",
                PromptTruncatedWarning,
                stacklevel=3,
            )

    def _geometry(self, kw: dict[str, Any], grid: Any) -> tuple[int, int, int]:
        """Height, width, frames as the pipeline will use them, checked against its token grid.

        Frames must be t·k+1 (t = the VAE's temporal factor); sides multiples of 16 (``WanPipeline``'s own
        rule) and of the token stride (VAE spatial factor × patch), which the pipeline would otherwise round
        down silently, so the layout masks would not fit.
        """
        import math

        height = int(kw.pop("height", 480))
        width = int(kw.pop("width", 832))
        num_frames = int(kw.pop("num_frames", 81))
        mh, mw = math.lcm(16, grid.spatial_h), math.lcm(16, grid.spatial_w)
        if height % mh or width % mw or height <= 0 or width <= 0:
            side = f"{mh}" if mh == mw else f"{mh} (height) and {mw} (width)"
            raise GenerationInputError(
                f"height and width must be positive multiples of {side} for this pipeline "
                f"({grid.describe()}), got {height}x{width}"
            )
        t = grid.temporal
        if num_frames < 1 or (num_frames - 1) % t:
            raise GenerationInputError(
                f"num_frames must be {t}k+1 (e.g. {2 * t + 1}, {4 * t + 1}, {20 * t + 1}) for this pipeline's VAE, "
                f"got {num_frames}"
            )
        return height, width, num_frames


def apply_comp_attn(
    pipe: Any,
    config: CompAttnConfig | None = None,
    *,
    layout: Any = None,
    subjects: list[str] | None = None,
    planner: str = "rule",
    planner_kwargs: dict | None = None,
) -> CompAttn:
    """Install Comp-Attn on a Wan text-to-video pipeline and return the handle.

    Afterwards a plain ``pipe(prompt=..., ...)`` runs with Comp-Attn, exactly as ``comp.generate`` would on the
    same arguments: the layout is planned from the prompt with ``planner`` (``rule`` offline, ``llm``), unless
    one is given here or with ``comp.set_layout(layout)``. ``comp.remove()``, or the ``with`` form, undoes it::

        with apply_comp_attn(pipe, CompAttnConfig()) as comp:
            video = pipe(prompt="a red cat to the left of a blue dog", generator=g).frames[0]
            comp.last_result.lam_log  # what LAM did
    """
    return CompAttn(
        pipe, config, layout=layout, subjects=subjects, planner=planner, planner_kwargs=planner_kwargs
    )
