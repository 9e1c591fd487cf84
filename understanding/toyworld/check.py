"""Is a world built as claimed? What each one-call strategy shows, per question kind, and why it falls short.

``view_check(specs)`` needs no model and no video: from each video's ground truth it computes the frames a
strategy shows and whether they hold the answer (``world.evidence_in_view``), and if not, why (``reason``):

- ``uniform-16`` / ``uniform-56``: frames at ``linspace(0, n-1, k)``;
- ``one uniform call``: the 16 initial frames + ``uniform_sample`` over the question's interval (else the video);
- ``one clip call``: the 16 initial frames + ``clip_sample(0, n, <noun>)``'s top 4 of its 128 candidates under an
  **ideal retriever** (a frame showing the noun's shape ranks first, grey or lit; then a look-alike: the cross for
  "plus"; ties by time) -- for the subject, and for the anchor ("star") where there is one;
- ``clip top-16``: 16 of the 128 candidates under the same ideal ranking (subject, then anchor, then look-alike);
- ``two looks``: the action templates of ``where.py`` with the ideal retriever: a coarse call and the zoom it
  leads to (needle / distractor: ``clip_subject`` then ``zoom_around``; twolook: ``clip_anchor`` then
  ``zoom_before``; count: the two halves of the interval; static: no call);
- ``four quarters`` (count only): the 16 initial frames + ``uniform_sample`` over each quarter of the interval
  (``where.py``'s ``uniform_quarter``), 4x denser than one call: it catches circles shorter than the halves' stride.

A real CLIP can only do worse than the ideal one at retrieval; ``clip_check`` measures the trained toy CLIP on the
same calls (region found, lit frame / plus found, share of foil frames in the top 4).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from vidlab.understanding.toyworld.world import VideoSpec, evidence_in_view

LOOKALIKE = {"plus": "cross"}
SUBJECT = {
    "static": "border",
    "needle": "triangle",
    "count": "circle",
    "distractor": "plus",
    "twolook": "square",
}
ANCHOR = {"twolook": "star"}
STRATEGIES = (
    "uniform-16",
    "uniform-56",
    "one uniform call",
    "one clip call",
    "clip top-16",
    "two looks",
    "four quarters",
)
ONLY = {"four quarters": ("count",)}  # strategies that apply to some kinds only


def _linspace(lo: int, hi: int, k: int) -> list[int]:
    from vidlab.understanding.agents import linspace_frames

    return linspace_frames(lo, hi, k)


def ideal_rank(spec: VideoSpec, frames: Sequence[int], shapes: Sequence[str]) -> list[int]:
    """``frames`` ordered by an ideal retriever for these shapes (the first shape best), ties by time."""

    def score(t: int) -> int:
        ev = spec.event_at(int(t))
        if ev is None:
            return 0
        for i, sh in enumerate(shapes):
            if ev.shape == sh:
                return len(shapes) - i
        return 0

    return sorted(frames, key=lambda t: (-score(t), t))


def ideal_clip(spec: VideoSpec, start: int, end: int, shapes: Sequence[str], k: int = 4) -> list[int]:
    """``clip_sample(start, end, ...)``'s frames under the ideal retriever (candidates as the real agent's)."""
    from vidlab.understanding.agents import clip_candidate_count

    cands = _linspace(start, end, clip_candidate_count(start, end))
    return sorted(ideal_rank(spec, cands, shapes)[:k])


def _subject_shapes(kind: str) -> list[str]:
    s = SUBJECT[kind]
    return [s, LOOKALIKE[s]] if s in LOOKALIKE else [s]


def strategy_frames(spec: VideoSpec, kind: str, strategy: str, prompt: str = "subject") -> list[int]:
    """The frames ``strategy`` shows for a question of this kind (see the module docstring)."""
    from vidlab.understanding.toyworld.where import window_around, window_before

    n = spec.num_frames
    init = _linspace(0, n, 16)
    lo, hi = spec.count_interval if kind == "count" else (0, n)
    if strategy in ("uniform-16", "uniform-56"):
        return _linspace(0, n, int(strategy.split("-")[1]))
    if strategy == "one uniform call":
        return sorted(set(init) | set(_linspace(lo, hi, 8)))
    if strategy == "one clip call":
        shapes = [ANCHOR[kind]] if prompt == "anchor" else _subject_shapes(kind)
        return sorted(set(init) | set(ideal_clip(spec, 0, n, shapes)))
    if strategy == "clip top-16":
        shapes = [*_subject_shapes(kind), *([ANCHOR[kind]] if kind in ANCHOR else [])]
        return sorted(ideal_clip(spec, 0, n, shapes, k=16))
    if strategy == "four quarters":
        if kind != "count":
            raise ValueError(f"the four quarters strategy is for count questions, got {kind!r}")
        q = [lo + (hi - lo) * p // 4 for p in range(5)]
        return sorted(set(init).union(*(_linspace(q[p], q[p + 1], 8) for p in range(4))))
    if strategy == "two looks":
        step = n / 128
        if kind in ("needle", "distractor"):
            got = ideal_clip(spec, 0, n, _subject_shapes(kind))
            focus = ideal_rank(spec, got, _subject_shapes(kind))[0]
            w = window_around(focus, step, n)
            return sorted(set(init) | set(got) | set(_linspace(w[0], w[1], 8) if w else []))
        if kind == "twolook":
            got = ideal_clip(spec, 0, n, [ANCHOR[kind]])
            stars = [t for t in got if (ev := spec.event_at(t)) is not None and ev.shape == ANCHOR[kind]]
            w = window_before(stars[0] if stars else got[0], step, n)
            return sorted(set(init) | set(got) | set(_linspace(w[0], w[1], 8) if w else []))
        if kind == "count":
            mid = lo + (hi - lo) // 2
            return sorted(set(init) | set(_linspace(lo, mid, 8)) | set(_linspace(mid, hi, 8)))
        return init
    raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")


def reason(spec: VideoSpec, kind: str, frames: Sequence[int]) -> str:
    """Why these frames do (not) answer a question of this kind (a short fixed phrase, for tallying)."""
    if evidence_in_view(spec, kind, frames):
        return "answer in view"

    def shown(role: str) -> bool:
        return any((ev := spec.event_at(int(t))) is not None and ev.role == role for t in frames)

    if kind == "needle":
        return "grey region only (flash missed)" if shown("needle-context") else "triangle missed"
    if kind == "distractor":
        return "foils only (misleading colour)" if shown("distractor-foil") else "plus and foils missed"
    if kind == "twolook":
        if shown("twolook-anchor"):
            return "star without the square just before it"
        if shown("twolook-target"):
            return "square without the star after it"
        return "square and star missed"
    if kind == "count":
        a, b = spec.count_interval
        inside = [t for t in frames if a <= t < b]
        if len(inside) < 4:
            return "interval not covered (< 4 frames inside)"
        seen = {id(spec.event_at(t)) for t in inside}
        if any(id(e) not in seen for e in spec.events if e.role == "count"):
            return "a circle shorter than the frames' stride missed"
        return "two circles merged (no frame between them)"
    return "answer not in view"


def view_check(specs: Sequence[VideoSpec], kinds: Sequence[str]) -> dict[str, Any]:
    """{strategy: {kind: {"in_view": share, "reasons": {reason: count}, "frames": mean}}} over ``specs``; the
    ``one clip call`` strategy is reported for the subject prompt and, where there is one, the anchor prompt."""
    out: dict[str, Any] = {}
    runs = [(s, "subject") for s in STRATEGIES] + [("one clip call", "anchor")]
    for strategy, prompt in runs:
        name = strategy if prompt == "subject" else f"{strategy} (anchor)"
        per: dict[str, Any] = {}
        for kind in kinds:
            if (prompt == "anchor" and kind not in ANCHOR) or kind not in ONLY.get(strategy, (kind,)):
                continue
            reasons: dict[str, int] = {}
            hits, frames = [], []
            for spec in specs:
                f = strategy_frames(spec, kind, strategy, prompt)
                r = reason(spec, kind, f)
                reasons[r] = reasons.get(r, 0) + 1
                hits.append(r == "answer in view")
                frames.append(len(f))
            per[kind] = {
                "in_view": round(float(np.mean(hits)), 4),
                "reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
                "frames": round(float(np.mean(frames)), 1),
            }
        out[name] = per
    return out


def clip_check(world: Any, clip: Any, cache_dir: Any, split: str = "test") -> dict[str, Any]:
    """The trained toy CLIP on the one-call retrievals (``clip_sample(0, n, noun)``'s top 4 over the cached index):
    per kind, how often the region is found (a frame of the needle's triangle, grey or lit; of the plus or a
    foil; of the star), how often the answer itself is in the top 4 (the lit frame, the plus, the square), and
    the share of the top-4 frames that are foils (crosses for "plus", other squares for "square")."""
    from vidlab.understanding.toyworld.world import seed_of, video_spec

    stats: dict[str, dict[str, list[float]]] = {}
    seen: set[int] = set()
    for row in world.splits[split].rows:
        seed = seed_of(row)
        if seed in seen:
            continue
        seen.add(seed)
        spec = video_spec(seed, world.cfg.world)
        agent = world.agents(world.video_path(split, row), clip, cache_dir)["clip_sample"]
        n = spec.num_frames

        def roles(frames: list[int], spec: VideoSpec = spec) -> list[str]:
            return [(ev.role if (ev := spec.event_at(int(t))) is not None else "none") for t in frames]

        calls = {
            "needle": ("triangle", {"needle", "needle-context"}, {"needle"}, set()),
            "distractor": (
                "plus",
                {"distractor-target", "distractor-foil"},
                {"distractor-target"},
                {"distractor-foil"},
            ),
            "twolook (star)": ("star", {"twolook-anchor"}, set(), set()),
            "twolook (square)": ("square", {"twolook-target"}, {"twolook-target"}, {"filler"}),
        }
        for name, (prompt, region, answer, foil) in calls.items():
            got = roles(agent.indices(0, n, prompt))
            d = stats.setdefault(name, {"region": [], "answer": [], "foil_share": []})
            d["region"].append(float(any(r in region for r in got)))
            if answer:
                d["answer"].append(float(any(r in answer for r in got)))
            if foil:
                d["foil_share"].append(float(np.mean([r in foil for r in got])))
    return {
        name: {k: round(float(np.mean(v)), 4) for k, v in d.items() if v} | {"videos": len(d["region"])}
        for name, d in stats.items()
    }
