"""Training-free frame selectors over a query-frame similarity curve: top-k with temporal suppression, AKS and BOLT.

Each selector takes the candidate frames of a video (``frames``, sorted frame indices) and their similarity to
the question (``sims``, e.g. CLIP cosines served from the shared ``vidlab.clip.FrameIndex`` by
``ClipAgent.scores``) and returns at most ``k`` frame indices in temporal order. They are pure numpy: no model,
no decoding; a strategy that uses one decodes only the frames it finally shows.

- ``topk``: the ``k`` most similar candidates, greedily, with no two picks closer than ``suppress`` times the
  uniform stride ``span / k`` (non-maximum suppression in time; ``suppress=0`` is plain top-k). When suppression
  leaves fewer than ``k``, the best of the suppressed ones fill the rest, so it always shows ``k`` frames.
- ``bolt``: BOLT's inverse transform sampling (Liu et al., CVPR 2025, arXiv 2503.21483; code ``sming256/BOLT``
  commit ``caa3349``, ``select_frames.py`` ``inverse_transform_sampling``): min-max normalise the curve, raise
  it to the power ``alpha``, take its CDF and read it at ``linspace(1/k, 1 - 1/k, k)``. ``alpha = 3`` is the
  published value for Video-MME and MLVU (``scripts/frame_selection.sh``; 2.5 for LongVideoBench).
  Peaks draw frames in proportion to their sharpened mass; frames drawn twice are shown once, so a very peaked
  curve can show fewer than ``k`` distinct frames (as in the published code, which repeats them).
- ``aks``: Adaptive Keyframe Sampling (Tang et al., CVPR 2025, arXiv 2502.21271; code ``ncTimTang/AKS`` commit
  ``4667501``, ``frame_select.py`` ``meanstd`` and ``main``): min-max normalise; judge each segment, starting
  from the whole video: if the mean of its top-``k`` scores exceeds its mean by more than ``t1`` (and its
  standard deviation exceeds ``t2``) relevance wins and the segment is kept, else it is split into halves, down
  to depth ``max_depth``; a kept segment at depth ``d`` contributes its top ``k / 2**d`` frames (coverage).
  Published defaults: ``t1 = 0.8``, ``t2 = -100`` (never binding), ``max_depth = 5``; videos with fewer than
  ``k`` candidates keep them all.

Choices that are ours (configurable, documented in ``docs/guides/videobrain-qa.md``):

- ``aks.cap_depth`` (default true): the split depth is capped at ``floor(log2 k)``. The published code at depth 5
  gives each leaf ``k // 32`` frames, which is 0 for ``k < 32`` (it was run at 32 and 64 frames), so a 16-frame
  AKS would show only the frames of segments kept early. With the cap every leaf gets at least one frame;
  ``cap_depth=false`` is the literal code.
- ``aks.allot`` (default ``largest_remainder``): a segment's share ``k / 2**d`` is rounded so that the shares add
  up to ``k`` (largest remainders first). Within the depth cap this equals the published ``int(k / 2**d)`` whenever
  ``k`` is a power of two (16, 32, 64: every run of the paper); for another ``k`` (the agent's mean, e.g. 26) the
  published flooring shows fewer frames (16 of 26), ``allot=floor`` restores it.
- ``topk.suppress`` (default 0.5): the suppression radius in uniform strides (no paper fixes one).
- A constant curve (no signal) normalises to zeros in the published code (a division by zero); here BOLT then
  samples uniformly and AKS splits to its depth and takes each leaf's first frames.
- ``bolt`` with ``k = 1`` reads the CDF at 0.5 (the median draw); the published ``linspace(1, 0, 1)`` reads it at
  1.0, the last frame with any weight.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

ALLOT = ("largest_remainder", "floor")


class SelectorError(ValueError):
    """A selector or one of its parameters that does not exist, or a value out of its range."""


@dataclass(frozen=True)
class TopKConfig:
    """Top-k with temporal non-maximum suppression; ``suppress``: the radius in uniform strides (span / k)."""

    suppress: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= float(self.suppress) <= 4.0:
            raise SelectorError(f"topk: suppress must lie in [0, 4] uniform strides, got {self.suppress}")


@dataclass(frozen=True)
class BoltConfig:
    """BOLT's inverse transform sampling; ``alpha``: the power that sharpens the normalised curve."""

    alpha: float = 3.0

    def __post_init__(self) -> None:
        if not 0.0 < float(self.alpha) <= 100.0:
            raise SelectorError(f"bolt: alpha must lie in (0, 100], got {self.alpha}")


@dataclass(frozen=True)
class AKSConfig:
    """AKS's judge-and-split: ``t1`` relevance margin, ``t2`` spread floor, ``max_depth`` split depth,
    ``cap_depth`` cap the depth at floor(log2 k) so every leaf shows a frame, ``allot`` how a segment's share
    ``k / 2**depth`` is rounded (``largest_remainder``: the shares add up to k; ``floor``: the published int())."""

    t1: float = 0.8
    t2: float = -100.0
    max_depth: int = 5
    cap_depth: bool = True
    allot: str = "largest_remainder"

    def __post_init__(self) -> None:
        if not 0 <= int(self.max_depth) <= 16 or int(self.max_depth) != self.max_depth:
            raise SelectorError(f"aks: max_depth must be an integer in [0, 16], got {self.max_depth}")
        if self.allot not in ALLOT:
            raise SelectorError(f"aks: allot must be one of {', '.join(ALLOT)}, got {self.allot!r}")


CONFIGS: dict[str, type] = {"topk": TopKConfig, "bolt": BoltConfig, "aks": AKSConfig}
SELECTORS = tuple(CONFIGS)


def selector_config(method: str, params: dict[str, Any] | None = None) -> Any:
    """The config of ``method`` with ``params`` (strings from a spec are converted to the field's type)."""
    if method not in CONFIGS:
        raise SelectorError(f"selector must be one of {', '.join(SELECTORS)}, got {method!r}")
    cls = CONFIGS[method]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key, raw in (params or {}).items():
        if key not in fields:
            raise SelectorError(f"{method}: no parameter {key!r} (it has {', '.join(fields)})")
        kind: Any = type(fields[key].default)
        try:
            if kind is bool and isinstance(raw, str):
                if raw.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(raw)
                values[key] = raw.lower() in ("true", "1")
            elif kind is int:
                if not float(raw).is_integer():
                    raise ValueError(raw)
                values[key] = int(float(raw))
            else:
                values[key] = kind(raw)
        except (TypeError, ValueError):
            what = {int: "an integer", float: "a number", bool: "true or false"}.get(kind, "text")
            raise SelectorError(f"{method}: {key} must be {what}, got {raw!r}") from None
    return cls(**values)


def _check(frames: Any, sims: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
    f = np.asarray(frames, dtype=np.int64).reshape(-1)
    s = np.asarray(sims, dtype=np.float64).reshape(-1)
    if f.size != s.size:
        raise SelectorError(f"frames ({f.size}) and sims ({s.size}) must have the same length")
    if f.size == 0:
        raise SelectorError("no candidate frames to select from")
    if not np.isfinite(s).all():
        raise SelectorError("sims must be finite")
    if int(k) < 1:
        raise SelectorError(f"k must be >= 1, got {k}")
    if f.size > 1 and (np.diff(f) <= 0).any():
        raise SelectorError("frames must be strictly increasing (candidates in temporal order)")
    return f, s


def _minmax(s: np.ndarray) -> np.ndarray:
    """(s - min) / (max - min); a constant curve gives zeros."""
    lo, hi = float(s.min()), float(s.max())
    return (s - lo) / (hi - lo) if hi > lo else np.zeros_like(s)


def _top(s: np.ndarray, n: int) -> np.ndarray:
    """Positions of the ``n`` largest values, the earlier first among equals (``heapq.nlargest``'s order)."""
    return np.argsort(-s, kind="stable")[: max(0, int(n))]


def topk_select(frames: Any, sims: Any, k: int, config: TopKConfig | None = None) -> list[int]:
    """The ``k`` most similar candidates, no two within ``suppress * span / k`` frames (filled if too few)."""
    cfg = config or TopKConfig()
    f, s = _check(frames, sims, k)
    k = min(int(k), f.size)
    span = float(f[-1] - f[0] + 1)
    radius = float(cfg.suppress) * span / k
    chosen: list[int] = []
    skipped: list[int] = []
    for pos in _top(s, f.size):
        if len(chosen) == k:
            break
        if radius > 0 and any(abs(int(f[pos]) - int(f[c])) < radius for c in chosen):
            skipped.append(int(pos))
        else:
            chosen.append(int(pos))
    chosen.extend(skipped[: k - len(chosen)])  # skipped are in descending similarity already
    return sorted(int(f[p]) for p in chosen)


def bolt_weights(sims: Any, alpha: float = 3.0) -> np.ndarray:
    """BOLT's sampling distribution: the min-max normalised curve to the power ``alpha``, summing to 1
    (uniform for a constant curve)."""
    s = _minmax(np.asarray(sims, dtype=np.float64).reshape(-1)) ** float(alpha)
    total = float(s.sum())
    return s / total if total > 0 else np.full(s.size, 1.0 / s.size)


def bolt_positions(sims: Any, k: int, alpha: float = 3.0) -> np.ndarray:
    """The ``k`` draws of inverse transform sampling (positions in the curve, repeats kept)."""
    cdf = np.cumsum(bolt_weights(sims, alpha))
    k = int(k)
    u = np.linspace(1.0 / k, 1.0 - 1.0 / k, k) if k > 1 else np.array([0.5])
    return np.minimum(np.searchsorted(cdf, u), cdf.size - 1)


def bolt_select(frames: Any, sims: Any, k: int, config: BoltConfig | None = None) -> list[int]:
    """BOLT: frames drawn by inverse transform sampling of the sharpened curve; repeats shown once."""
    cfg = config or BoltConfig()
    f, s = _check(frames, sims, k)
    return sorted({int(f[p]) for p in bolt_positions(s, k, cfg.alpha)})


def aks_segments(sims: Any, k: int, config: AKSConfig | None = None) -> list[tuple[int, int, int]]:
    """AKS's judge-and-split over the normalised curve: the kept segments as ``(start, end, depth)`` positions,
    in the order the published recursion returns them (kept at each level first, then deeper ones)."""
    cfg = config or AKSConfig()
    s = _minmax(np.asarray(sims, dtype=np.float64).reshape(-1))
    depth_limit = int(cfg.max_depth)
    if cfg.cap_depth:
        depth_limit = min(depth_limit, int(math.floor(math.log2(max(1, int(k))))))
    kept: list[tuple[int, int, int]] = []
    level = [(0, s.size, 0)]
    while level:
        deeper: list[tuple[int, int, int]] = []
        for a, b, d in level:
            if b <= a:  # an empty half (only below the cap: more depth than candidates)
                continue
            seg = s[a:b]
            top = seg[_top(seg, k)]
            diff = float(top.mean() - seg.mean())
            if diff > cfg.t1 and float(seg.std()) > cfg.t2:
                kept.append((a, b, d))
            elif d < depth_limit:
                mid = a + (b - a) // 2
                deeper += [(a, mid, d + 1), (mid, b, d + 1)]
            else:
                kept.append((a, b, d))
        level = deeper
    return kept


def aks_allotment(depths: list[int], k: int, allot: str = "largest_remainder") -> list[int]:
    """Frames per kept segment: ``k / 2**depth`` rounded (``floor``: the published ``int()``; ``largest_remainder``:
    floored, then the segments with the largest remainders get one more until the shares add up to ``k``)."""
    share = [k / 2**d for d in depths]
    base = [int(x) for x in share]
    if allot == "floor":
        return base
    rest = int(round(sum(share))) - sum(base)
    order = sorted(range(len(share)), key=lambda i: (-(share[i] - base[i]), i))
    for i in order[: max(0, rest)]:
        base[i] += 1
    return base


def aks_select(frames: Any, sims: Any, k: int, config: AKSConfig | None = None) -> list[int]:
    """AKS: each kept segment at depth ``d`` gives its top ``k / 2**d`` frames (rounded by ``allot``); all
    candidates when fewer than ``k``."""
    cfg = config or AKSConfig()
    f, s = _check(frames, sims, k)
    k = int(k)
    if f.size < k:
        return f.tolist()
    norm = _minmax(s)
    segments = aks_segments(s, k, cfg)
    out: list[int] = []
    for (a, b, _), n in zip(segments, aks_allotment([d for _, _, d in segments], k, cfg.allot)):
        out.extend(int(f[a + p]) for p in _top(norm[a:b], n))
    return sorted(set(out))


_FUNCS: dict[str, Callable[..., list[int]]] = {"topk": topk_select, "bolt": bolt_select, "aks": aks_select}


def select(method: str, frames: Any, sims: Any, k: int, params: dict[str, Any] | None = None) -> list[int]:
    """Run selector ``method`` (``topk`` / ``bolt`` / ``aks``) with ``params`` on one similarity curve."""
    cfg = selector_config(method, params)
    return _FUNCS[method](frames, sims, k, cfg)
