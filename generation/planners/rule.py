"""The offline rule planner: a small lexicon and patterns find subjects, relations and motion; boxes follow.

"three cats" gives three subjects whose ``.phrase`` is "cats" (the noun phrase without its number, as it occurs
in the prompt; the copies share its character span and tokens) and ``count_index`` 0, 1, 2. Relations the
layout cannot satisfy are dropped and listed in ``meta["dropped_relations"]``.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from vidlab.generation.layout import Layout, Relation, SubjectLayout
from vidlab.generation.planners.geometry import GeometryConfig, arrange, cap_box
from vidlab.generation.planners.parse import parse
from vidlab.generation.subjects import find_phrase_spans

PLANNER_VERSION = "rule-1"


def plan_rule(prompt: str, subjects: list[str] | None = None, **kw: Any) -> Layout:
    """Plan a layout for ``prompt`` offline; ``subjects`` fixes the subject phrases; ``kw`` sets GeometryConfig."""
    names = {f.name for f in fields(GeometryConfig)}
    unknown = set(kw) - names
    if unknown:
        raise TypeError(f"rule planner: unknown options {sorted(unknown)}; known: {sorted(names)}")
    cfg = GeometryConfig(**kw)
    explicit = None
    if subjects is not None:
        spans = find_phrase_spans(prompt, list(subjects))  # SubjectNotFoundError names a missing one
        explicit = list(zip(subjects, spans))
    p = parse(prompt, explicit)
    groups = p.groups
    counts = [g.count if g.count is not None else 1 for g in groups]
    motions = [g.motion for g in groups]
    boxes = arrange(counts, motions, p.relations, cfg)
    if cfg.max_box < 1.0:  # relations are checked below on the capped boxes (centres do not move)
        boxes = [[[(t, cap_box(b, cfg.max_box)) for t, b in kfs] for kfs in per_copy] for per_copy in boxes]

    out: list[SubjectLayout] = []
    first_index: list[int] = []
    for g, count, per_copy in zip(groups, counts, boxes):
        first_index.append(len(out))
        counted = g.count is not None and g.count > 1 and len(per_copy) == count
        attrs = list(g.attributes)
        if g.count is not None and g.count > 1 and not counted:
            attrs.append(f"count={g.count}")
        for k, kfs in enumerate(per_copy):
            out.append(
                SubjectLayout(
                    phrase=g.phrase,
                    keyframes=kfs,
                    count_index=k if counted else None,
                    attributes=attrs,
                    span=g.span,
                )
            )
    layout = Layout(prompt=prompt, subjects=out, planner="rule", meta={"planner_version": PLANNER_VERSION})
    found = [Relation(first_index[a], rel, first_index[b]) for a, rel, b in p.relations]
    found += [Relation(first_index[i], f"moving {g.motion}", None) for i, g in enumerate(groups) if g.motion]
    rels = [r for r in found if layout.relation_holds(r)]
    dropped = [r.to_dict() for r in found if not layout.relation_holds(r)]
    layout.relations = rels
    layout.meta["geometry"] = asdict(cfg)
    if dropped:
        layout.meta["dropped_relations"] = dropped
    return layout
