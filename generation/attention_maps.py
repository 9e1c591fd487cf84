"""Captured cross-attention maps: per subject, per denoising step and block, per latent frame; PNG grids.

The processor hands over the head-averaged attention mass of each subject's tokens on the cond pass, for one
block at a time, and says whether LAM biased that call. ``map(step)`` averages the blocks of a step;
``entries()`` keeps them apart with their ``biased`` flag, so a measure can use only attention LAM did not
write (``vidlab.generation.attention_measure.layout_faithfulness``). ``inside_share`` over biased steps is the
circular figure (the share of the very probabilities LAM biased); it is kept for reference only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vidlab.io import atomic_open


@dataclass
class MapEntry:
    """One captured attention call: which step, block and expert, whether LAM biased it, the maps (G, T, H', W')."""

    step: int
    block: int
    transformer: str
    biased: bool
    maps: np.ndarray


class AttentionMapStore:
    """Accumulates subject maps (G groups) on a (T, H', W') latent token grid, keyed by step and block."""

    def __init__(
        self,
        names: Sequence[str],
        grid: tuple[int, int, int],
        masks: np.ndarray | None = None,
        placebo_masks: np.ndarray | None = None,
    ):
        self.names = list(names)
        self.grid = tuple(int(x) for x in grid)
        shape = (len(self.names), *self.grid)
        self.masks = None if masks is None else np.asarray(masks, dtype=bool).reshape(shape)
        # the same groups' masks for a placebo layout (boxes that contradict the prompt), for controls
        self.placebo_masks = (
            None if placebo_masks is None else np.asarray(placebo_masks, dtype=bool).reshape(shape)
        )
        self._sum: dict[tuple[int, int, str], torch.Tensor] = {}
        self._count: dict[tuple[int, int, str], int] = {}
        self._biased: dict[tuple[int, int, str], bool] = {}

    def add(
        self, step: int, maps: torch.Tensor, block: int = 0, biased: bool = False, transformer: str = ""
    ) -> None:
        """Add one block's maps (B, G, S) for ``step``; ``biased`` says whether LAM modulated that call."""
        m = maps.detach().float().mean(0).cpu()
        if m.shape != (len(self.names), int(np.prod(self.grid))):
            raise ValueError(
                f"map shape {tuple(m.shape)} does not fit {len(self.names)} subjects on {self.grid}"
            )
        key = (int(step), int(block), str(transformer))
        self._sum[key] = self._sum.get(key, torch.zeros_like(m)) + m
        self._count[key] = self._count.get(key, 0) + 1
        self._biased[key] = self._biased.get(key, False) or bool(biased)

    @property
    def steps(self) -> list[int]:
        """Steps with captured maps, ascending."""
        return sorted({k[0] for k in self._sum})

    @property
    def biased_steps(self) -> list[int]:
        """Steps where at least one captured block was biased by LAM."""
        return sorted({k[0] for k, b in self._biased.items() if b})

    def step_biased(self, step: int) -> bool:
        """Whether LAM biased any captured block at ``step``."""
        return step in self.biased_steps

    def entries(self) -> list[MapEntry]:
        """Every captured (step, block, expert) map with its ``biased`` flag, in step then block order."""
        out = []
        for key in sorted(self._sum):
            m = (self._sum[key] / self._count[key]).numpy().reshape(len(self.names), *self.grid)
            out.append(MapEntry(key[0], key[1], key[2], self._biased[key], m))
        return out

    def map(self, step: int) -> np.ndarray:
        """Block-averaged maps at ``step``: (G, T, H', W') float32."""
        keys = [k for k in self._sum if k[0] == step]
        if not keys:
            raise KeyError(f"no maps captured at step {step}; captured steps: {self.steps}")
        total = sum((self._sum[k] / self._count[k] for k in keys), torch.zeros_like(self._sum[keys[0]]))
        return (total / len(keys)).numpy().reshape(len(self.names), *self.grid)

    def inside_share(self, masks: np.ndarray | None = None) -> dict[int, list[float]]:
        """Per step, each subject's share of attention mass inside its mask (G, T, H', W').

        Circular on biased steps (it reads the probabilities LAM biased); see ``layout_faithfulness``.
        """
        masks = self.masks if masks is None else np.asarray(masks, dtype=bool)
        if masks is None:
            raise ValueError("inside_share needs layout masks")
        out: dict[int, list[float]] = {}
        for step in self.steps:
            m = self.map(step)
            out[step] = [
                float(m[g][masks[g]].sum() / max(float(m[g].sum()), 1e-30)) for g in range(len(self.names))
            ]
        return out

    def mean_inside_share(self, steps: Sequence[int] | None = None) -> list[float]:
        """Inside share per subject averaged over ``steps`` (default: every captured step)."""
        shares = self.inside_share()
        chosen = [s for s in (steps if steps is not None else shares) if s in shares]
        if not chosen:
            return [float("nan")] * len(self.names)
        return [float(np.mean([shares[s][g] for s in chosen])) for g in range(len(self.names))]

    def save_png(self, out_dir: str | Path, prefix: str = "attention") -> list[Path]:
        """One PNG grid per subject: rows are steps, columns latent frames; the layout mask's cells are
        outlined (:func:`mask_outline`)."""
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        steps = self.steps
        if not steps:
            return []
        t = self.grid[0]
        paths = []
        for g, name in enumerate(self.names):
            fig, axes = plt.subplots(
                len(steps), t, figsize=(1.6 * t, 1.6 * len(steps)), squeeze=False, constrained_layout=True
            )
            for r, step in enumerate(steps):
                m = self.map(step)[g]
                for f in range(t):
                    ax = axes[r][f]
                    ax.imshow(m[f], cmap="magma", interpolation="nearest")
                    if self.masks is not None and self.masks[g, f].any():
                        from matplotlib.collections import LineCollection

                        edges = LineCollection(mask_outline(self.masks[g, f]), colors="cyan", linewidths=1)
                        ax.add_collection(edges)  # the mask's own cells: a box reads as a rectangle
                    ax.set_xticks([])
                    ax.set_yticks([])
                    if r == 0:
                        ax.set_title(f"latent frame {f}", fontsize=7)
                    if f == 0:
                        tag = " (LAM)" if self.step_biased(step) else ""
                        ax.set_ylabel(f"step {step}{tag}", fontsize=7)
            fig.suptitle(f"cross-attention of {name!r} (box outlined; (LAM) = biased step)", fontsize=9)
            safe = "".join(c if c.isalnum() else "_" for c in name).strip("_") or f"subject{g}"
            path = out / f"{prefix}_{g:02d}_{safe}.png"
            with atomic_open(path, "wb") as fh:
                fig.savefig(fh, dpi=80, format="png")
            plt.close(fig)
            paths.append(path)
        return paths


def mask_outline(mask: np.ndarray) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """The boundary of a boolean (H', W') mask along its cells' edges, as segments in ``imshow`` coordinates
    (cell (i, j) spans x in [j - 0.5, j + 0.5], y in [i - 0.5, i + 0.5]). A box mask gives exactly its
    rectangle; a contour at level 0.5 would instead run through the cell centres and cut the corners."""
    m = np.pad(np.asarray(mask, dtype=bool), 1)
    segs: list[tuple[tuple[float, float], tuple[float, float]]] = []
    rows, cols = np.nonzero(m[1:-1, 1:-1])
    for i, j in zip(rows.tolist(), cols.tolist()):
        pi, pj = i + 1, j + 1
        x0, x1, y0, y1 = j - 0.5, j + 0.5, i - 0.5, i + 0.5
        if not m[pi - 1, pj]:
            segs.append(((x0, y0), (x1, y0)))
        if not m[pi + 1, pj]:
            segs.append(((x0, y1), (x1, y1)))
        if not m[pi, pj - 1]:
            segs.append(((x0, y0), (x0, y1)))
        if not m[pi, pj + 1]:
            segs.append(((x1, y0), (x1, y1)))
    return segs
