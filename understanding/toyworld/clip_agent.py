"""``clip_sample`` over the fp16 frame-index cache, with fp32 rescoring of near-ties (so the cache never flips a pick).

The cache stores embeddings in fp16; two candidates whose cosines differ by less than the fp16 rounding error can
swap places. ``RescoringClipAgent`` scores all candidates from the cache, then re-embeds in fp32 (decode + the
CLIP image tower) every candidate whose cached score lies within ``margin`` of the k-th best, and ranks on those
exact scores. With ``margin`` far above fp16's error on unit vectors (~1e-3), its top-k equals a fresh fp32
re-embed of all candidates.
"""

from __future__ import annotations

import numpy as np

from vidlab.understanding.agents import ClipAgent, decode_frames


class RescoringClipAgent(ClipAgent):
    """A ``ClipAgent`` over a ``FrameIndex`` that rescores near-ties of the k-th score in fp32."""

    margin: float = 0.02

    def scores(self, start: int, end: int, prompt: str) -> tuple[np.ndarray, np.ndarray]:
        frames, sims = super().scores(start, end, prompt)
        if self.index is None or sims.size <= self.num_frames:
            return frames, sims
        kth = np.sort(sims)[::-1][self.num_frames - 1]
        near = np.flatnonzero(sims >= kth - self.margin)
        pix = np.stack(
            [f.image for f in decode_frames(self.reader, frames[near].tolist(), self.max_size, self.resize)]
        )
        emb = np.asarray(self.model.embed_images(pix, progress=False), dtype=np.float32)
        text = np.asarray(self.model.embed_texts([prompt.strip()]), dtype=np.float32)[0]
        sims = sims.astype(np.float32).copy()
        sims[near] = emb @ text
        # everything outside the margin stays strictly below every rescored one
        return frames, sims
