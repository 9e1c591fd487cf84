"""CLIP metrics (offline, any ``vidlab.clip`` model): text-video alignment and per-subject presence.

``clip_alignment``: mean over the 16 sampled frames of cos(frame, prompt). Its control,
``control_mismatched``, is the same video against the *next* prompt of its category (a prompt it was not
made from): an alignment effect that the control shows too is not about the prompt.

``clip_presence``: for each subject phrase (from the benchmark's own metadata where it has them, else the
planned layout's phrases, marked ``phrases_from``), the best frame's cos(frame, phrase). A subject counts as
present when that is at least ``score.presence_threshold``; with no threshold given it is calibrated on the
run (``finalize``): the value that best separates own phrases from the next prompt's phrases on the same
videos (max TPR - FPR). The per-video score is the fraction of subjects present.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vidlab.generation.compbench.metrics import VideoContext
from vidlab.generation.compbench.suite import Prompt, Suite, subject_phrases


class _ClipMetric:
    name = "clip"
    description = ""

    def __init__(self, cfg: Any, suite: Suite) -> None:
        from vidlab.clip.models import load_model

        self.cfg, self.suite = cfg, suite
        self.model = load_model(cfg.clip_model, device=cfg.device)
        self._text_cache: dict[str, np.ndarray] = {}

    def texts(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self._text_cache]
        if todo:
            for t, e in zip(todo, self.model.embed_texts(todo, progress=False), strict=True):
                self._text_cache[t] = e
        return np.stack([self._text_cache[t] for t in texts]) if texts else np.zeros((0, self.model.dim))

    def frame_embeddings(self, ctx: VideoContext) -> np.ndarray:
        return self.model.embed_images(ctx.frames(), progress=False)

    def neighbour(self, p: Prompt) -> Prompt:
        """The next prompt of the same category (wrapping): the control's mismatched prompt."""
        same = self.suite.by_category(p.category)
        return same[p.index % len(same)]


class ClipAlignment(_ClipMetric):
    description = "mean frame-prompt CLIP similarity (control: the next prompt of the category)"

    def score(self, ctx: VideoContext) -> dict[str, Any]:
        f = self.frame_embeddings(ctx)
        other = self.neighbour(ctx.prompt)
        t = self.texts([ctx.prompt.text, other.text])
        sims = f @ t.T
        return {
            "score": float(sims[:, 0].mean()),
            "control_mismatched": float(sims[:, 1].mean()),
            "frames": int(f.shape[0]),
            "model": self.model.tag,
        }


def phrases_for(p: Prompt, layout: Any | None) -> tuple[list[str], str]:
    own = subject_phrases(p)
    if own:
        return own, "metadata"
    if layout is not None:
        return list(dict.fromkeys(layout.phrases)), "layout"  # a property: every subject's phrase
    return [], "none"


class ClipPresence(_ClipMetric):
    description = "fraction of subject phrases whose best-frame CLIP similarity passes a threshold"

    def score(self, ctx: VideoContext) -> dict[str, Any]:
        phrases, source = phrases_for(ctx.prompt, ctx.layout())
        if not phrases:
            return {"score": None, "reason": "no subject phrases (no metadata and no layout)"}
        other = self.neighbour(ctx.prompt)
        foreign, _ = phrases_for(other, None)
        foreign = [f for f in foreign if f not in phrases]
        f = self.frame_embeddings(ctx)
        best = (f @ self.texts(phrases).T).max(axis=0)
        fbest = (f @ self.texts(foreign).T).max(axis=0) if foreign else np.zeros(0)
        return {
            "score": None,  # set by finalize once the threshold is known
            "phrases": phrases,
            "phrases_from": source,
            "best_sim": [float(x) for x in best],
            "foreign_best_sim": [float(x) for x in fbest],
            "model": self.model.tag,
        }

    @classmethod
    def finalize(cls, cfg: Any, results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        own = [s for r in results.values() for s in r.get("best_sim", [])]
        foreign = [s for r in results.values() for s in r.get("foreign_best_sim", [])]
        if cfg.presence_threshold is not None:
            thr, how = float(cfg.presence_threshold), "config"
        else:
            thr, how = calibrate_threshold(own, foreign), "calibrated"
        out = {}
        for rid, r in results.items():
            r = dict(r)
            if r.get("best_sim"):
                present = [s >= thr for s in r["best_sim"]]
                r["present"] = present
                r["score"] = float(np.mean(present))
                r["control_foreign_present"] = (
                    float(np.mean([s >= thr for s in r["foreign_best_sim"]]))
                    if r["foreign_best_sim"]
                    else None
                )
            r["threshold"] = thr
            r["threshold_from"] = how
            out[rid] = r
        return out


def calibrate_threshold(own: list[float], foreign: list[float]) -> float:
    """The similarity that maximises TPR - FPR between own-phrase and foreign-phrase best similarities
    (midpoint between neighbouring values; ties broken toward the higher threshold)."""
    if not own:
        return 0.0
    if not foreign:
        return float(min(own))
    vals = np.unique(np.concatenate([own, foreign]))
    cands = np.concatenate([[vals[0] - 1e-6], (vals[:-1] + vals[1:]) / 2, [vals[-1] + 1e-6]])
    o, f = np.asarray(own)[None, :], np.asarray(foreign)[None, :]
    j = (o >= cands[:, None]).mean(axis=1) - (f >= cands[:, None]).mean(axis=1)
    best = np.flatnonzero(j == j.max())[-1]
    return float(cands[best])
