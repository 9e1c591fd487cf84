"""Ingest the official scripts' CSV outputs into the report.

The official scripts write one CSV per category and model: a header, one row per video (a name column:
``name`` / ``id`` / ``video_name``; the video's score in the last column, ``Score`` / ``Score_1``), and
the category score on the last line (``score: ,0.7665``). ``ingest_dir(root)`` finds them as
``<root>/<method>/<anything naming the category>.csv`` (e.g. ``both/wan_consistent_attr_score.csv``,
``both/numeracy.csv``). The category score is taken from the last line as the official number; the
per-video scores are normalised the way the official category mean does (consistent_attr ``(s-1)/4``,
action_binding and interaction ``s/5``, motion binding ``0 if s < 0 else 0.2 + 0.8 s``; detection
CSVs are already in [0, 1]); for other categories they are kept raw and only the category score is used.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

from vidlab.errors import UserError
from vidlab.generation.compbench.suite import BY_KEY

ALIASES = {  # filename fragment -> category (longest first when matching)
    "consistent_attr": "consistent_attr",
    "consistent_attribute": "consistent_attr",
    "dynamic_attr": "dynamic_attr",
    "dynamic_attribute": "dynamic_attr",
    "spatial_relationship": "spatial_relationship",
    "spatial": "spatial_relationship",
    "3dvideo": "spatial_relationship",
    "2dvideo": "spatial_relationship",
    "motion_binding": "motion_binding",
    "motion": "motion_binding",
    "action_binding": "action_binding",
    "action": "action_binding",
    "interaction": "interaction",
    "numeracy": "numeracy",
}
NORMALISE = {
    "consistent_attr": lambda s: (s - 1) / 4,
    "action_binding": lambda s: s / 5,
    "interaction": lambda s: s / 5,
    "motion_binding": lambda s: 0.0 if s < 0 else 0.2 + 0.8 * s,
    "numeracy": lambda s: s,
    "spatial_relationship": lambda s: s,
}
NAME_COLUMNS = ("name", "id", "video_name")


class IngestError(UserError):
    """A CSV that is not in the official format (the message names the file and line)."""


def category_of(path: Path) -> str | None:
    stem = path.stem.lower()
    for frag in sorted(ALIASES, key=len, reverse=True):
        if frag in stem:
            return ALIASES[frag]
    return None


def read_official_csv(path: str | Path, category: str) -> dict[str, Any]:
    """``{"category_score": float|None, "videos": {index: score}, "raw": {index: raw}}`` from one CSV."""
    p = Path(path)
    with open(p, newline="", encoding="utf-8") as f:
        lines = [row for row in csv.reader(f) if row]
    if len(lines) < 2:
        raise IngestError(f"{p}: fewer than two lines; not an official score CSV")
    header = [h.strip().lower() for h in lines[0]]
    name_col = next((header.index(c) for c in NAME_COLUMNS if c in header), 0)
    category_score = None
    body = lines[1:]
    if body and body[-1][0].strip().lower().startswith("score"):
        try:
            category_score = float(body[-1][1])
        except (IndexError, ValueError) as e:
            raise IngestError(f"{p} line {len(lines)}: category score {body[-1]!r} is not a number") from e
        body = body[:-1]
    norm = NORMALISE.get(category)
    parsed: list[tuple[int, float]] = []
    for i, row in enumerate(body, start=2):
        m = re.search(r"(\d+)", row[name_col]) if len(row) > name_col else None
        if not m:
            raise IngestError(f"{p} line {i}: no video number in {row[name_col : name_col + 1]!r}")
        try:
            value = float(row[-1])
        except ValueError:
            continue  # the official "bad reply": skipped as the official mean skips it
        parsed.append((int(m.group(1)), value))
    shift = 1 if parsed and min(n for n, _ in parsed) == 0 else 0  # 0-based names ("0.mp4") -> index 1
    raw = {n + shift: v for n, v in parsed}
    videos = {n: float(norm(v)) for n, v in raw.items()} if norm is not None else {}
    return {"category_score": category_score, "videos": videos, "raw": raw, "file": str(p)}


def ingest_dir(root: str | Path, methods: list[str] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """``{method: {category: read_official_csv(...)}}`` for every recognised CSV under ``root/<method>/``."""
    base = Path(root)
    if not base.is_dir():
        raise IngestError(f"ingest folder {base} does not exist")
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for method_dir in sorted(d for d in base.iterdir() if d.is_dir()):
        if methods is not None and method_dir.name not in methods:
            continue
        for csv_path in sorted(method_dir.rglob("*.csv")):
            cat = category_of(csv_path)
            if cat is None or cat not in BY_KEY:
                continue
            if "frame" in csv_path.stem.lower() or "back_fore" in csv_path.stem.lower():
                continue  # per-frame / intermediate files of the detection and tracking scripts
            got = read_official_csv(csv_path, cat)
            have = out.setdefault(method_dir.name, {}).get(cat)
            if have is not None:  # spatial: the 2D and the 3D CSV together make the category
                have["videos"].update(got["videos"])
                have["raw"].update(got["raw"])
                have["category_score"] = (
                    got["category_score"] if got["category_score"] is not None else have["category_score"]
                )
                have["file"] += f", {got['file']}"
            else:
                out[method_dir.name][cat] = got
    if not out:
        raise IngestError(
            f"no official score CSVs found under {base}/<method>/ (e.g. both/consistent_attr.csv)"
        )
    return out
