"""The planning stage: every prompt's layout is planned and written BEFORE any video is generated.

``plan_all(prompts, out, planner)`` writes ``<out>/layouts/<prompt id>.json`` (atomically) for each prompt
that has no valid layout yet, reusing the LLM planner's own disk cache, so generation workers only read
files and never wait on an LLM. Baseline and every method then use the very same layout file (and seed).
Prompts whose planning fails are listed with the reason in ``<out>/layouts/failed.json``; a rerun tries
them again.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vidlab.generation.compbench.suite import Prompt


@dataclass
class PlanSummary:
    planned: int = 0
    reused: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # prompt id -> "Type: message"


def layout_path(out: str | os.PathLike, prompt_id: str) -> Path:
    return Path(out) / "layouts" / f"{prompt_id}.json"


def load_layout(path: Path) -> Any | None:
    """The layout in ``path``, or None if it is missing or unreadable (it is then planned again)."""
    from vidlab.generation.layout import Layout

    try:
        return Layout.load(path)
    except Exception:  # noqa: BLE001 - a damaged/partial file is simply replanned
        return None


def plan_all(
    prompts: list[Prompt],
    out: str | os.PathLike,
    planner: str = "rule",
    threads: int = 4,
    progress: bool = True,
    planner_kwargs: dict[str, Any] | None = None,
) -> PlanSummary:
    """Plan (or reuse) the layout of every prompt; see the module docstring."""
    from tqdm.auto import tqdm

    from vidlab.generation.planners import plan_layout
    from vidlab.io import atomic_write_json, atomic_write_text, sweep_stale

    folder = Path(out) / "layouts"
    folder.mkdir(parents=True, exist_ok=True)
    sweep_stale(folder)
    summary = PlanSummary()
    todo = []
    for p in prompts:
        if load_layout(layout_path(out, p.id)) is not None:
            summary.reused += 1
        else:
            todo.append(p)

    def one(p: Prompt) -> tuple[Prompt, str | None]:
        try:
            lay = plan_layout(p.text, planner=planner, **(planner_kwargs or {}))
            atomic_write_text(layout_path(out, p.id), lay.to_json())
            return p, None
        except Exception as e:  # noqa: BLE001 - recorded per prompt, retried on rerun
            return p, f"{type(e).__name__}: {e}"

    with tqdm(total=len(todo), desc=f"plan ({planner})", unit="prompt", disable=not progress) as bar:
        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            for p, err in pool.map(one, todo):
                if err is None:
                    summary.planned += 1
                else:
                    summary.failed[p.id] = err
                bar.update(1)
    atomic_write_json(folder / "failed.json", summary.failed)
    return summary
