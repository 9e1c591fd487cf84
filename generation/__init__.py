"""Comp-Attn for Wan text-to-video: subjects, layouts and planners, SCI, LAM, the attn2 processor.

Public names are imported lazily so ``import generation`` stays cheap (no torch, no diffusers).
"""

from __future__ import annotations

from importlib import import_module

_LAZY = {
    "plan_layout": "generation.planners",
    "Layout": "generation.layout",
    "SubjectLayout": "generation.layout",
    "LayoutError": "generation.layout",
    "Relation": "generation.layout",
    "find_phrase_span": "generation.subjects",
    "build_tiny_tokenizer": "generation.tiny_tokenizer",
    "subject_token_indices": "generation.subjects",
    "SubjectNotFoundError": "generation.subjects",
    "CompAttnConfig": "generation.config",
    "SCIConfig": "generation.config",
    "LAMConfig": "generation.config",
    "GenerateConfig": "generation.pipeline",
    "load_pipeline": "generation.pipeline",
    "generate_video": "generation.pipeline",
    "apply_comp_attn": "generation.comp_attn",
    "prepare_inputs": "generation.comp_attn",
    "layout_faithfulness": "generation.attention_measure",
    "placebo_layout": "generation.attention_measure",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'generation' has no attribute {name!r}")
