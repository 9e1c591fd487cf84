"""The "file" planner: a user's own layout from a JSON/YAML file (validated like any other layout)."""

from __future__ import annotations

from pathlib import Path

from vidlab.generation.layout import Layout, LayoutError
from vidlab.generation.subjects import find_phrase_spans


def plan_file(prompt: str, path: str | Path | None = None, subjects: list[str] | None = None) -> Layout:
    """Load the layout at ``path`` for ``prompt``; its subjects must occur in the prompt."""
    if path is None:
        raise LayoutError("planner 'file' needs path=<layout .json/.yaml>")
    layout = Layout.load(path)
    if layout.prompt and " ".join(layout.prompt.split()) != " ".join(prompt.split()):
        layout.meta.setdefault("file_prompt", layout.prompt)
    layout.prompt = prompt
    for s in layout.subjects:
        if s.span is not None and prompt[s.span[0] : s.span[1]].lower() != s.phrase.lower():
            s.span = None  # the span was for another prompt text: find the phrase again
    find_phrase_spans(prompt, layout.subjects)  # SubjectNotFoundError for a phrase not in this prompt
    if subjects is not None:
        have = {" ".join(s.phrase.lower().split()) for s in layout.subjects}
        missing = [p for p in subjects if " ".join(p.lower().split()) not in have]
        if missing:
            raise LayoutError(f"layout file {path} has no boxes for subjects {missing}")
    layout.planner = "file"
    layout.meta["source"] = str(path)
    return layout
