"""Comp-Attn for Wan text-to-video: subjects, layouts and planners, SCI, LAM, the attn2 processor.

Public names are imported lazily so ``import generation`` stays cheap (no torch, no diffusers).
"""

from __future__ import annotations

if (
    __name__ == "generation"
):  # the old top-level name, imported from a checkout: the alias (one warning) takes over
    from vidlab._areas import alias_old_name

    alias_old_name(__name__)

from importlib import import_module

_LAZY = {
    "plan_layout": "vidlab.generation.planners",
    "Layout": "vidlab.generation.layout",
    "SubjectLayout": "vidlab.generation.layout",
    "LayoutError": "vidlab.generation.layout",
    "Relation": "vidlab.generation.layout",
    "find_phrase_span": "vidlab.generation.subjects",
    "build_tiny_tokenizer": "vidlab.generation.tiny_tokenizer",
    "subject_token_indices": "vidlab.generation.subjects",
    "SubjectNotFoundError": "vidlab.generation.subjects",
    "CompAttnConfig": "vidlab.generation.config",
    "SCIConfig": "vidlab.generation.config",
    "LAMConfig": "vidlab.generation.config",
    "GenerateConfig": "vidlab.generation.pipeline",
    "load_pipeline": "vidlab.generation.pipeline",
    "generate_video": "vidlab.generation.pipeline",
    "apply_comp_attn": "vidlab.generation.comp_attn",
    "prepare_inputs": "vidlab.generation.comp_attn",
    "layout_faithfulness": "vidlab.generation.attention_measure",
    "placebo_layout": "vidlab.generation.attention_measure",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'generation' has no attribute {name!r}")
