"""Export in the official evaluators' layout: ``<root>/<method>/<category>/0001.mp4 ...`` in prompt order.

The official MLLM, detection and tracking scripts list a category folder, sort the names and pair the
i-th video with the i-th prompt/metadata record, so a full export must hold every prompt of a category
(``0001`` .. ``0100``). Files are hard links to the generated videos where the file system allows (no
copy of the bytes), else copies, each put in place atomically. One seed per export (``export_seed``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from vidlab.errors import UserError
from vidlab.generation.compbench.config import CompbenchConfig


class ExportError(UserError):
    """Items the export needs are not generated (yet), or the seed is not part of the run."""


def export_official(
    cfg: CompbenchConfig, root: str | os.PathLike | None = None, allow_missing: bool = False
) -> dict[str, Any]:
    """Link/copy the chosen seed's videos into the official layout; returns counts and the root."""
    from vidlab.generation.compbench.jobs import read_manifest
    from vidlab.io import atomic_tmp_path, commit_tmp

    out = Path(cfg.out)
    rows = read_manifest(out)
    seed = cfg.export_seed if cfg.export_seed is not None else cfg.seeds[0]
    if seed not in {r["seed"] for r in rows}:
        raise ExportError(
            f"export_seed={seed} is not among the generated seeds {sorted({r['seed'] for r in rows})}"
        )
    rows = [r for r in rows if r["seed"] == seed and r["method"] in cfg.methods]
    missing = [r["id"] for r in rows if r["status"] != "ok"]
    if missing and not allow_missing:
        raise ExportError(
            f"{len(missing)} item(s) are not generated yet (first: {', '.join(missing[:3])}); rerun "
            "`vidlab compbench generate` with this config, or pass --allow-missing"
        )
    dest = Path(root or cfg.export_root or out / "official")
    linked = copied = 0
    for r in sorted(rows, key=lambda r: (r["method"], r["category"], r["index"])):
        if r["status"] != "ok":
            continue
        src = out / r["video"]
        target = dest / r["method"] / r["category"] / Path(r["video"]).name
        tmp = atomic_tmp_path(target)
        try:
            os.link(src, tmp)
            linked += 1
        except OSError:
            shutil.copyfile(src, tmp)
            copied += 1
        commit_tmp(tmp, target)
    return {"root": str(dest), "seed": seed, "linked": linked, "copied": copied, "missing": missing}
