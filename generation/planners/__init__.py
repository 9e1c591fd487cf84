"""Layout planners: ``rule`` (offline, default), ``llm`` (OpenAI-compatible endpoint), ``file`` (a user layout).

``plan_layout(prompt, planner="rule", **kw)`` is the one entry point. ``subjects=[...]`` fixes the subject
phrases (each must occur in the prompt, else SubjectNotFoundError).
"""

from __future__ import annotations

from typing import Any

from vidlab.generation.layout import Layout
from vidlab.generation.subjects import find_phrase_spans

PLANNERS = ("rule", "llm", "file")


def plan_layout(prompt: str, planner: str = "rule", **kw: Any) -> Layout:
    """Plan a layout for ``prompt`` with the named planner (see the module docstring for options)."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"prompt must be a non-empty string, got {prompt!r}")
    subjects = kw.get("subjects")
    if subjects is not None:
        if isinstance(subjects, str) or not all(isinstance(s, str) and s.strip() for s in subjects):
            raise ValueError(f"subjects must be a list of non-empty phrases, got {subjects!r}")
        find_phrase_spans(prompt, list(subjects))
    if planner == "rule":
        from vidlab.generation.planners.rule import plan_rule

        return plan_rule(prompt, **kw)
    if planner == "llm":
        from vidlab.generation.planners.llm import plan_llm

        return plan_llm(prompt, **kw)
    if planner == "file":
        from vidlab.generation.planners.file import plan_file

        return plan_file(prompt, **kw)
    raise ValueError(f"unknown planner {planner!r}; choose one of {', '.join(PLANNERS)}")


__all__ = ["PLANNERS", "plan_layout"]
