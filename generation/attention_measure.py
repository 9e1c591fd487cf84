"""A non-circular measure of how well cross-attention follows a layout, with a placebo beside it.

"Share of attention inside the box" read from the probabilities LAM biased, on the steps where it biased
them, measures the bias, not the model: any boxes (random corners too) "follow" it. ``layout_faithfulness``
therefore reads only attention LAM did **not** write: maps captured from blocks LAM does not modulate, or
from steps after its window (``AttentionMapStore`` records whether each captured call was biased). Beside
the share inside the layout's boxes it reports the same attention's share inside a **placebo layout** —
every box mirrored through the frame centre, so each left/right and above/below relation of the prompt is
contradicted — and the share uniform attention would have (the boxes' area). A layout effect shows as
``share`` above both ``placebo_share`` and ``chance``; the ``lift`` is ``share - placebo_share``.

Usage (the compbench metric)::

    comp = apply_comp_attn(pipe, CompAttnConfig(capture_attention=True))
    res = comp.generate(prompt, layout=layout, ...)
    f = layout_faithfulness(res.maps)          # unbiased maps only; placebo from res.maps.placebo_masks
    f.share, f.placebo_share, f.chance, f.lift, f.n_maps
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from vidlab.generation.errors import GenerationInputError


class NoUnbiasedMapsError(GenerationInputError):
    """Every captured map was biased by LAM (or none was captured): there is nothing non-circular to read."""


@dataclass
class Faithfulness:
    """How much of the subjects' cross-attention falls inside their boxes, next to a placebo and chance."""

    share: float  # mean over subjects of the attention mass inside the layout's box (used maps averaged)
    placebo_share: float | None  # the same attention's share inside the placebo layout's boxes
    chance: float  # mean box area fraction: the share of spatially uniform attention
    placebo_chance: float | None
    per_subject: list[float]
    per_subject_placebo: list[float] | None
    n_maps: int  # captured (step, block, expert) maps used
    steps: list[int]
    biased: bool  # any used map was biased by LAM (only with include_biased=True: then it is circular)

    @property
    def lift(self) -> float | None:
        """``share - placebo_share``: how much more attention the real boxes hold than contradicting ones."""
        return None if self.placebo_share is None else self.share - self.placebo_share

    def to_dict(self) -> dict[str, Any]:
        """Plain numbers for result files and benchmark tables."""
        d = asdict(self)
        d["lift"] = self.lift
        return d


def placebo_layout(layout: Any) -> Any:
    """The layout with every box mirrored through the frame centre (x -> 1-x, y -> 1-y, all keyframes).

    Each subject keeps its size and motion speed, but left/right and above/below swap, so every spatial
    relation of the prompt is contradicted; relations are dropped from the copy. (A box centred in the frame
    mirrors onto itself: report ``chance`` and the layout/placebo overlap beside the figure.)
    """
    from vidlab.generation.layout import Layout, SubjectLayout

    subs = [
        SubjectLayout(
            phrase=s.phrase,
            keyframes=[(t, (1.0 - b[2], 1.0 - b[3], 1.0 - b[0], 1.0 - b[1])) for t, b in s.keyframes],
            count_index=s.count_index,
            attributes=list(s.attributes),
            span=s.span,
        )
        for s in layout.subjects
    ]
    return Layout(layout.prompt, subs, [], planner="placebo", meta={"placebo_of": layout.planner})


def _shares(m: np.ndarray, masks: np.ndarray) -> list[float]:
    return [float(m[g][masks[g]].sum() / max(float(m[g].sum()), 1e-30)) for g in range(m.shape[0])]


def layout_faithfulness(
    maps: Any,
    masks: np.ndarray | None = None,
    placebo_masks: np.ndarray | None = None,
    *,
    include_biased: bool = False,
    steps: Sequence[int] | None = None,
    blocks: Sequence[int] | None = None,
) -> Faithfulness:
    """Share of each subject's attention inside its box, from maps LAM did not bias, beside a placebo.

    ``maps``: an ``AttentionMapStore`` (``CompAttnConfig(capture_attention=True)``; ``res.maps``).
    ``masks`` / ``placebo_masks``: (G, T, H', W') bool per subject group; default the store's own (the
    layout's and the mirrored layout's). ``include_biased=False`` (default) uses only unbiased maps;
    ``steps`` / ``blocks`` narrow the maps further. Raises ``NoUnbiasedMapsError`` when nothing is left.
    """
    masks = maps.masks if masks is None else np.asarray(masks, dtype=bool)
    if masks is None:
        raise GenerationInputError("layout_faithfulness needs layout masks (the store has none)")
    placebo = getattr(maps, "placebo_masks", None) if placebo_masks is None else placebo_masks
    placebo = None if placebo is None else np.asarray(placebo, dtype=bool)
    used = [
        e
        for e in maps.entries()
        if (include_biased or not e.biased)
        and (steps is None or e.step in steps)
        and (blocks is None or e.block in blocks)
    ]
    if not used:
        raise NoUnbiasedMapsError(
            "no captured attention map LAM did not bias: capture steps after lam.step_fraction, or blocks "
            "outside lam.blocks (capture_blocks), or pass include_biased=True for the circular figure"
        )
    per = np.mean([_shares(e.maps, masks) for e in used], axis=0)
    per_p = None if placebo is None else np.mean([_shares(e.maps, placebo) for e in used], axis=0)
    area = [float(masks[g].mean()) for g in range(masks.shape[0])]
    return Faithfulness(
        share=float(np.mean(per)),
        placebo_share=None if per_p is None else float(np.mean(per_p)),
        chance=float(np.mean(area)),
        placebo_chance=None
        if placebo is None
        else float(np.mean([placebo[g].mean() for g in range(len(area))])),
        per_subject=[float(x) for x in per],
        per_subject_placebo=None if per_p is None else [float(x) for x in per_p],
        n_maps=len(used),
        steps=sorted({e.step for e in used}),
        biased=any(e.biased for e in used),
    )
