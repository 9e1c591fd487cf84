"""Captured cross-attention maps: per subject, per denoising step, per latent frame; metrics and PNG grids.

The processor hands over the head-averaged attention mass of each subject's tokens (after any LAM bias) on
the cond pass; maps are averaged over the captured blocks and the batch. ``inside_share`` measures how much of
a subject's attention mass falls inside its layout box, the attention-level effect LAM is meant to have.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch


class AttentionMapStore:
    """Accumulates subject maps (G groups) on a (T, H', W') latent token grid, keyed by step."""

    def __init__(self, names: Sequence[str], grid: tuple[int, int, int], masks: np.ndarray | None = None):
        self.names = list(names)
        self.grid = tuple(int(x) for x in grid)
        self.masks = (
            None if masks is None else np.asarray(masks, dtype=bool).reshape(len(self.names), *self.grid)
        )
        self._sum: dict[int, torch.Tensor] = {}
        self._count: dict[int, int] = {}

    def add(self, step: int, maps: torch.Tensor) -> None:
        """Add one block's maps (B, G, S) for ``step``."""
        m = maps.detach().float().mean(0).cpu()
        if m.shape != (len(self.names), int(np.prod(self.grid))):
            raise ValueError(
                f"map shape {tuple(m.shape)} does not fit {len(self.names)} subjects on {self.grid}"
            )
        self._sum[step] = self._sum.get(step, torch.zeros_like(m)) + m
        self._count[step] = self._count.get(step, 0) + 1

    @property
    def steps(self) -> list[int]:
        """Steps with captured maps, ascending."""
        return sorted(self._sum)

    def map(self, step: int) -> np.ndarray:
        """Block-averaged maps at ``step``: (G, T, H', W') float32."""
        return (self._sum[step] / self._count[step]).numpy().reshape(len(self.names), *self.grid)

    def inside_share(self, masks: np.ndarray | None = None) -> dict[int, list[float]]:
        """Per step, each subject's share of attention mass inside its mask (G, T, H', W')."""
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
        """One PNG grid per subject: rows are steps, columns latent frames; the layout box is outlined."""
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
                        ax.contour(self.masks[g, f].astype(float), levels=[0.5], colors="cyan", linewidths=1)
                    ax.set_xticks([])
                    ax.set_yticks([])
                    if r == 0:
                        ax.set_title(f"latent frame {f}", fontsize=7)
                    if f == 0:
                        ax.set_ylabel(f"step {step}", fontsize=7)
            fig.suptitle(f"cross-attention of {name!r} (box outlined)", fontsize=9)
            safe = "".join(c if c.isalnum() else "_" for c in name).strip("_") or f"subject{g}"
            path = out / f"{prefix}_{g:02d}_{safe}.png"
            fig.savefig(path, dpi=80)
            plt.close(fig)
            paths.append(path)
        return paths
