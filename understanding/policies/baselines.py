"""Scripted frame-selection baselines: pick K frames once, then ask an answering policy once (no tools).

- ``uniform-K``: frames at ``linspace(0, total-1, K)`` (the reference's initial-view rule with K frames).
- ``clip-K``: the K frames most similar to the question text among the CLIP agent's candidates over the
  whole video (``linspace`` candidates, K = 128 / 256 as in ``clip_sample``, or every indexed frame when the
  agent is not in parity mode), shown in temporal order. Like VideoAgent/BOLT-style retrieval baselines.

The answering prompt is the protocol's no-tools prompt (``tools=()``), so a baseline and the agent differ
only in how frames are chosen. Results are ``vidlab.understanding.env.Trajectory`` objects like the agent's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vidlab.understanding import protocol as P
from vidlab.understanding.agents import ClipAgent, _open, decode_frames, linspace_frames
from vidlab.understanding.env import EpisodeConfig, Trajectory
from vidlab.understanding.messages import Frame, Message, Policy

METHODS = ("uniform", "clip")


@dataclass(frozen=True)
class BaselineSpec:
    """``uniform:K`` or ``clip:K`` parsed."""

    method: str
    k: int

    @property
    def label(self) -> str:
        return f"{self.method}-{self.k}"

    @classmethod
    def parse(cls, spec: str) -> BaselineSpec:
        """``"uniform:32"`` / ``"uniform-32"`` / ``"clip:8"`` -> BaselineSpec; typed error otherwise."""
        text = str(spec).strip().lower().replace("-", ":")
        method, _, k = text.partition(":")
        if method not in METHODS or not k.isdigit() or int(k) < 1:
            raise ValueError(
                f"baseline spec {spec!r} must be uniform:K or clip:K with K >= 1 (e.g. uniform:32)"
            )
        return cls(method, int(k))


def uniform_indices(total_frames: int, k: int) -> list[int]:
    """``linspace(0, total-1, k)``, de-duplicated (fewer when the video has fewer frames)."""
    return linspace_frames(0, int(total_frames), int(k))


def clip_indices(agent: ClipAgent, question: str, k: int) -> list[int]:
    """Top-``k`` candidates over the whole video by similarity to ``question``, in temporal order."""
    frames, sims = agent.scores(0, agent.total_frames, question)
    order = np.argsort(-sims, kind="stable")[: int(k)]
    return sorted(int(i) for i in frames[order])


def answer_once(
    policy: Policy,
    reader: Any,
    frames: Sequence[Frame],
    question: str,
    options: Sequence[str] | None,
    config: EpisodeConfig | None = None,
    end_reason: str = "answered",
) -> Trajectory:
    """Show ``frames`` with the no-tools prompt, take one assistant turn, and score its format and letter."""
    cfg = config or EpisodeConfig()
    opts = [str(o) for o in options] if options else None
    total, fps = int(reader.num_frames), float(reader.fps)
    messages = P.build_initial_messages(question, list(frames), total, fps, opts, tools=())
    outs = policy.generate(
        messages, num_samples=1, temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens, seed=cfg.seed
    )
    text = outs[0] if outs else ""
    parsed = P.parse_assistant_turn(text)
    invalid = parsed.error
    if invalid is None and parsed.tool_call is not None:
        invalid = "tool call in a prompt that offers no tools"
    answer = parsed.answer if invalid is None else None
    predicted, why = None, "open-ended question"
    if opts:
        if answer is None:
            why = f"no answer ({invalid})" if invalid else "no answer"
        else:
            predicted, why = P.extract_choice(answer, P.option_letters(len(opts)), opts)
    indices = [f.index for f in frames]
    return Trajectory(
        messages=[*messages, Message("assistant", [text])],
        assistant_turns=[text],
        answer=answer,
        predicted=predicted,
        predicted_reason=why,
        tool_calls=[],
        frames_used=sorted(set(indices)),
        valid=invalid is None,
        invalid_reason=invalid,
        end_reason=end_reason if invalid is None else (invalid or ""),
        question=question,
        options=opts,
        total_frames=total,
        fps=fps,
        initial_frames=indices,
    )


def run_baseline(
    spec: str | BaselineSpec,
    policy: Policy,
    video: Any,
    question: str,
    options: Sequence[str] | None = None,
    *,
    clip_agent: ClipAgent | None = None,
    config: EpisodeConfig | None = None,
) -> Trajectory:
    """Run ``uniform:K`` or ``clip:K`` on one question; ``clip`` needs a ``ClipAgent`` over the same video."""
    bs = spec if isinstance(spec, BaselineSpec) else BaselineSpec.parse(spec)
    cfg = config or EpisodeConfig()
    if bs.method == "clip":
        if clip_agent is None:
            raise ValueError("the clip:K baseline needs a ClipAgent (a CLIP model over this video)")
        reader = clip_agent.reader
        indices = clip_indices(clip_agent, question, bs.k)
    else:
        reader = _open(video)
        indices = uniform_indices(int(reader.num_frames), bs.k)
    frames = decode_frames(reader, indices, cfg.max_size, cfg.frame_resize)
    return answer_once(policy, reader, frames, question, options, cfg, end_reason=f"answered ({bs.label})")
