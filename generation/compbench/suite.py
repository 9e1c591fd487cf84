"""The T2V-CompBench suite: 7 categories x 100 prompts in the official order, with metadata where given.

``load_suite(root)`` reads ``../shared/data/t2v-compbench`` or any checkout of the official repository
(``prompts/`` or ``prompt/`` with ``N_<category>.txt``, one prompt a line, and optionally ``meta_data/*.json``,
one record per prompt in the same order). Every prompt gets a stable id, ``<category>-<index:04d>`` with a
1-based index (``consistent_attr-0001``), and the official video name ``<index:04d>.mp4``. Metadata that is
present must have one record per prompt whose ``prompt`` matches (whitespace and case aside), else
``SuiteError`` names the file and line.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vidlab.errors import UserError

DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "t2v-compbench"


@dataclass(frozen=True)
class Category:
    """One benchmark category: its key (the official video folder name), files and official metric."""

    key: str
    number: int
    prompt_file: str
    meta_file: str
    official_metric: str  # mllm | grounding | tracking

    @property
    def title(self) -> str:
        return self.key.replace("_", " ")


CATEGORIES: tuple[Category, ...] = (
    Category("consistent_attr", 1, "1_consistent_attr.txt", "consistent_attribute_binding.json", "mllm"),
    Category("dynamic_attr", 2, "2_dynamic_attr.txt", "dynamic_attribute_binding.json", "mllm"),
    Category(
        "spatial_relationship", 3, "3_spatial_relationship.txt", "spatial_relationships.json", "grounding"
    ),
    Category("motion_binding", 4, "4_motion_binding.txt", "motion_binding.json", "tracking"),
    Category("action_binding", 5, "5_action_binding.txt", "action_binding.json", "mllm"),
    Category("interaction", 6, "6_interaction.txt", "object_interactions.json", "mllm"),
    Category("numeracy", 7, "7_numeracy.txt", "generative_numeracy.json", "grounding"),
)
BY_KEY = {c.key: c for c in CATEGORIES}
PROMPTS_PER_CATEGORY = 100


class SuiteError(UserError):
    """The benchmark folder is missing, incomplete or inconsistent (the message names the file)."""


@dataclass(frozen=True)
class Prompt:
    """One benchmark prompt with its stable id and the metadata record the official files give for it."""

    category: str
    index: int  # 1-based position in the official prompt file
    text: str
    meta: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @property
    def id(self) -> str:
        return f"{self.category}-{self.index:04d}"

    @property
    def video_name(self) -> str:
        """File name the official evaluators expect (they sort names; this order is the prompt order)."""
        return f"{self.index:04d}.mp4"


@dataclass
class Suite:
    """The loaded prompts (official order) and where they came from."""

    root: Path
    prompts: list[Prompt]
    fingerprint: str  # sha256 over every prompt and metadata file read
    has_meta: dict[str, bool]

    def by_category(self, key: str) -> list[Prompt]:
        return [p for p in self.prompts if p.category == key]

    def get(self, prompt_id: str) -> Prompt:
        for p in self.prompts:
            if p.id == prompt_id:
                return p
        raise SuiteError(
            f"no prompt with id {prompt_id!r} in {self.root} (ids look like consistent_attr-0001)"
        )

    def select(
        self,
        categories: list[str] | None = None,
        per_category: int | None = None,
        ids: list[str] | None = None,
    ) -> list[Prompt]:
        """Prompts of ``categories`` (all if None), the first ``per_category`` of each, or exactly ``ids``."""
        if ids:
            return [self.get(i) for i in ids]
        keys = check_categories(categories)
        out: list[Prompt] = []
        for key in keys:
            ps = self.by_category(key)
            out += ps[:per_category] if per_category is not None else ps
        return out


def check_categories(categories: list[str] | None) -> list[str]:
    """Validate category keys (also accepts the numbered file stem, ``3_spatial_relationship``)."""
    if categories is None:
        return [c.key for c in CATEGORIES]
    keys = []
    for c in categories:
        key = str(c).split("_", 1)[1] if str(c)[:1].isdigit() and "_" in str(c) else str(c)
        if key not in BY_KEY:
            raise SuiteError(f"unknown category {c!r}; choose from {', '.join(BY_KEY)}")
        keys.append(key)
    return keys


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".")


def _prompt_dir(root: Path) -> Path:
    for name in ("prompts", "prompt"):
        if (root / name).is_dir():
            return root / name
    raise SuiteError(
        f"{root} has no prompts/ folder: point `data=` at ../shared/data/t2v-compbench or a checkout of "
        "https://github.com/KaiyueSun98/T2V-CompBench"
    )


def load_suite(root: str | os.PathLike | None = None, strict_count: bool = True) -> Suite:
    """Read every category's prompts (and metadata where present) from ``root`` (see module docstring)."""
    base = Path(root).expanduser() if root else DEFAULT_DATA
    if not base.is_dir() and not root:  # an install has no ../shared beside it: say what to pass
        raise SuiteError(
            f"no T2V-CompBench folder: pass data=PATH, a checkout of https://github.com/KaiyueSun98/T2V-CompBench "
            f"(the default, {str(base)!r}, is the benchmark's copy beside a vidlab checkout, and it is not there)"
        )
    if not base.is_dir():
        raise SuiteError(f"T2V-CompBench folder {str(base)!r} does not exist")
    pdir = _prompt_dir(base)
    h = hashlib.sha256()
    prompts: list[Prompt] = []
    has_meta: dict[str, bool] = {}
    for cat in CATEGORIES:
        pfile = pdir / cat.prompt_file
        if not pfile.is_file():
            raise SuiteError(f"missing prompt file {pfile}")
        raw = pfile.read_bytes()
        h.update(cat.prompt_file.encode() + b"\0" + raw)
        lines = [ln.strip() for ln in raw.decode("utf-8").splitlines()]
        texts = [ln for ln in lines if ln]
        if strict_count and len(texts) != PROMPTS_PER_CATEGORY:
            raise SuiteError(f"{pfile} holds {len(texts)} prompts, expected {PROMPTS_PER_CATEGORY}")
        metas: list[dict[str, Any]] = [{} for _ in texts]
        mfile = base / "meta_data" / cat.meta_file
        has_meta[cat.key] = mfile.is_file()
        if mfile.is_file():
            mraw = mfile.read_bytes()
            h.update(cat.meta_file.encode() + b"\0" + mraw)
            try:
                records = json.loads(mraw)
            except json.JSONDecodeError as e:
                raise SuiteError(f"{mfile} is not valid JSON (line {e.lineno}): {e.msg}") from e
            if not isinstance(records, list) or len(records) != len(texts):
                n = len(records) if isinstance(records, list) else type(records).__name__
                raise SuiteError(f"{mfile} has {n} records, expected one per prompt ({len(texts)})")
            for i, (rec, text) in enumerate(zip(records, texts, strict=True)):
                if not isinstance(rec, dict):
                    raise SuiteError(f"{mfile} record {i + 1} is not an object")
                if "prompt" in rec and _norm(str(rec["prompt"])) != _norm(text):
                    raise SuiteError(
                        f"{mfile} record {i + 1} is for {rec['prompt']!r}, but {pfile.name} line {i + 1} is {text!r}"
                    )
                metas[i] = rec
        prompts += [Prompt(cat.key, i + 1, t, m) for i, (t, m) in enumerate(zip(texts, metas, strict=True))]
    return Suite(base, prompts, h.hexdigest(), has_meta)


def subject_phrases(prompt: Prompt) -> list[str]:
    """Subject phrases from the benchmark's own metadata where it gives them (not from our planner), else []."""
    m = prompt.meta
    if prompt.category == "consistent_attr" and isinstance(m.get("phrases"), str):
        return [p.strip() for p in m["phrases"].split(";") if p.strip()]
    if prompt.category == "action_binding" and m.get("phrase_0"):
        return [str(m[k][0]).rstrip("?").strip() for k in ("phrase_0", "phrase_1") if m.get(k)]
    if prompt.category == "numeracy" and isinstance(m.get("objects"), str):
        return [o.strip() for o in m["objects"].split(",") if o.strip()]
    if prompt.category == "dynamic_attr" and m.get("state 0"):
        return [str(m["state 0"]).strip()]
    if prompt.category in ("spatial_relationship", "motion_binding"):
        return [str(m[k]).strip() for k in ("object_1", "object_2") if m.get(k)]
    return []
