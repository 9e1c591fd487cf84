"""Scripted frame-selection baselines: pick K frames once, then ask an answering policy once (no tools).

- ``uniform-K``: frames at ``linspace(0, total-1, K)`` (the reference's initial-view rule with K frames).
- ``clip-K``: the K frames most similar to the question text among the CLIP agent's candidates over the
  whole video (``linspace`` candidates, K = 128 / 256 as in ``clip_sample``, or every indexed frame when the
  agent is not in parity mode), shown in temporal order. Like VideoAgent/BOLT-style retrieval baselines.
- ``topk-K``, ``aks-K``, ``bolt-K``: the training-free selectors of ``vidlab.understanding.selectors`` (top-k with
  temporal suppression, AKS's judge-and-split, BOLT's inverse transform sampling) over the same similarity curve
  as ``clip-K`` (``ClipAgent.scores`` over the whole video, served from the frame index); only the chosen frames
  are decoded. Parameters follow a second colon: ``bolt:16:alpha=2.5``, ``aks:32:t1=0.6,max_depth=4`` (``,`` or ``;``
  between them).

The answering prompt is the protocol's no-tools prompt (``tools=()``), so a baseline and the agent differ
only in how frames are chosen. Results are ``vidlab.understanding.env.Trajectory`` objects like the agent's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vidlab.understanding import protocol as P
from vidlab.understanding.agents import ClipAgent, _open, decode_frames, linspace_frames
from vidlab.understanding.env import EpisodeConfig, Trajectory
from vidlab.understanding.messages import Frame, Message, Policy

SELECTORS = ("topk", "aks", "bolt")  # vidlab.understanding.selectors, over the CLIP similarity curve
METHODS = ("uniform", "clip", *SELECTORS)
_SPEC = re.compile(r"^([a-z]+)[:-](\d+)(?::(.*))?$")


@dataclass(frozen=True)
class BaselineSpec:
    """``uniform:K``, ``clip:K``, ``topk:K``, ``aks:K`` or ``bolt:K`` parsed; a selector may carry parameters
    (``bolt:16:alpha=2.5``), kept as sorted ``(name, text)`` pairs."""

    method: str
    k: int
    params: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        """``bolt-16``; with parameters ``bolt-16_alpha=2.5`` (a folder and legend name)."""
        extra = "".join(f"_{key}={value}" for key, value in self.params)
        return f"{self.method}-{self.k}{extra}"

    @property
    def needs_clip(self) -> bool:
        """Every method but ``uniform`` scores frames with a CLIP model."""
        return self.method != "uniform"

    def selector_config(self) -> Any:
        """The selector's config (``vidlab.understanding.selectors``) with this spec's parameters."""
        from vidlab.understanding.selectors import selector_config

        return selector_config(self.method, dict(self.params))

    @classmethod
    def parse(cls, spec: str) -> BaselineSpec:
        """``"uniform:32"`` / ``"uniform-32"`` / ``"clip:8"`` / ``"bolt:16:alpha=2.5"`` -> BaselineSpec; a typed
        error naming the spec otherwise."""
        from vidlab.understanding.selectors import SelectorError

        usage = (
            f"baseline spec {spec!r} must be uniform:K or clip:K, or a CLIP frame selector topk:K, aks:K or "
            "bolt:K, with K >= 1 and optional selector parameters after a colon (e.g. uniform:32, bolt:16, "
            "bolt:16:alpha=2.5)"
        )
        m = _SPEC.match(str(spec).strip().lower())
        if m is None or m.group(1) not in METHODS or int(m.group(2)) < 1:
            raise ValueError(usage)
        method, k, rest = m.group(1), int(m.group(2)), m.group(3)
        params: dict[str, str] = {}
        if rest is not None:
            if method not in SELECTORS:
                raise ValueError(f"{usage}; {method}:K takes no parameters")
            for item in re.split(r"[,;]", rest):  # ";" where commas separate other things (lmms-eval)
                key, eq, value = item.partition("=")
                if not eq or not key.strip() or not value.strip():
                    raise ValueError(f"{usage}; parameter {item!r} is not name=value")
                params[key.strip()] = value.strip()
        out = cls(method, k, tuple(sorted(params.items())))
        if method in SELECTORS:
            try:
                out.selector_config()  # unknown names and out-of-range values fail here, before any model loads
            except SelectorError as e:
                raise ValueError(f"baseline spec {spec!r}: {e}") from None
        return out


def uniform_indices(total_frames: int, k: int) -> list[int]:
    """``linspace(0, total-1, k)``, de-duplicated (fewer when the video has fewer frames)."""
    return linspace_frames(0, int(total_frames), int(k))


def clip_indices(agent: ClipAgent, question: str, k: int) -> list[int]:
    """Top-``k`` candidates over the whole video by similarity to ``question``, in temporal order."""
    frames, sims = agent.scores(0, agent.total_frames, question)
    order = np.argsort(-sims, kind="stable")[: int(k)]
    return sorted(int(i) for i in frames[order])


def selector_indices(agent: ClipAgent, question: str, spec: BaselineSpec) -> list[int]:
    """The frames selector ``spec`` (topk / aks / bolt) picks from the similarity curve of ``question`` over the
    whole video (the same candidates and scores as :func:`clip_indices`), in temporal order."""
    from vidlab.understanding.selectors import select

    frames, sims = agent.scores(0, agent.total_frames, question)
    return select(spec.method, frames, sims, spec.k, dict(spec.params))


def baseline_indices(
    spec: str | BaselineSpec, reader: Any, question: str, clip_agent: ClipAgent | None = None
) -> list[int]:
    """The frames a baseline shows for ``question`` (nothing decoded); all but ``uniform`` need ``clip_agent``."""
    bs = spec if isinstance(spec, BaselineSpec) else BaselineSpec.parse(spec)
    if not bs.needs_clip:
        return uniform_indices(int(reader.num_frames), bs.k)
    if clip_agent is None:
        raise ValueError(f"the {bs.method}:K baseline needs a ClipAgent (a CLIP model over this video)")
    if bs.method == "clip":
        return clip_indices(clip_agent, question, bs.k)
    return selector_indices(clip_agent, question, bs)


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
    """Run a baseline (``uniform:K``, ``clip:K``, ``topk:K``, ``aks:K``, ``bolt:K``) on one question; all but
    ``uniform`` need a ``ClipAgent`` over the same video."""
    bs = spec if isinstance(spec, BaselineSpec) else BaselineSpec.parse(spec)
    cfg = config or EpisodeConfig()
    reader = clip_agent.reader if bs.needs_clip and clip_agent is not None else _open(video)
    indices = baseline_indices(bs, reader, question, clip_agent)
    frames = decode_frames(reader, indices, cfg.max_size, cfg.frame_resize)
    return answer_once(policy, reader, frames, question, options, cfg, end_reason=f"answered ({bs.label})")
