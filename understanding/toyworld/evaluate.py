"""Evaluation of the toy world on its held-out test split: baselines, SFT/GRPO agents, CLIP recall and cache parity.

Every method answers through the real protocol: the agents via ``Episode`` (greedy), the baselines via
``vidlab.understanding.policies.baselines.run_baseline`` with the given answering policy (no tools). Accuracy counts a
question right only when the episode is valid and its parsed letter is the answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vidlab.understanding.toyworld.world import WHERE_KINDS

MAX_CALLS = 5


def _summary(trajs: list[tuple[dict, Any]]) -> dict[str, Any]:
    """Accuracy, frames, calls, invalid share; per kind: accuracy, call rate (share with a call), mean calls,
    frames and the call-count distribution (``calls_hist_<kind>``: how many questions made 0, 1, ... 5 calls)."""
    correct = [bool(t.valid and t.predicted == r["answer"]) for r, t in trajs]
    out: dict[str, Any] = {
        "n": len(trajs),
        "accuracy": float(np.mean(correct)) if trajs else float("nan"),
        "frames": float(np.mean([t.num_frames_used for _, t in trajs])) if trajs else float("nan"),
        "calls": float(np.mean([t.num_tool_calls for _, t in trajs])) if trajs else float("nan"),
        "invalid": float(np.mean([not t.valid for _, t in trajs])) if trajs else float("nan"),
    }
    for kind in WHERE_KINDS:
        sel = [(r, t, c) for (r, t), c in zip(trajs, correct) if r["category"] == kind]
        if sel:
            out[f"accuracy_{kind}"] = float(np.mean([c for _, _, c in sel]))
            out[f"call_rate_{kind}"] = float(np.mean([t.num_tool_calls > 0 for _, t, _ in sel]))
            out[f"calls_{kind}"] = float(np.mean([t.num_tool_calls for _, t, _ in sel]))
            out[f"frames_{kind}"] = float(np.mean([t.num_frames_used for _, t, _ in sel]))
            hist = np.bincount([min(t.num_tool_calls, MAX_CALLS) for _, t, _ in sel], minlength=MAX_CALLS + 1)
            out[f"calls_hist_{kind}"] = [int(x) for x in hist]
    return out


def evaluate_methods(
    world: Any,
    clip: Any,
    policies: dict[str, Any],
    answerer: Any,
    cache_dir: Path,
    baselines: Sequence[str] = ("uniform:16", "uniform:56", "clip:16"),
    split: str = "test",
    records: bool = False,
) -> dict[str, dict[str, Any]]:
    """{method: summary} over ``split``; baseline labels: ``uniform-16``, ``uniform-56``, ``clip-topk``.
    ``records``: each summary also lists its questions (``records``: video, kind, right, calls, frames)."""
    from vidlab.understanding.env import run_episode
    from vidlab.understanding.policies.baselines import run_baseline
    from vidlab.understanding.toyworld.rl import TOY_EPISODE

    greedy = dataclasses.replace(TOY_EPISODE, temperature=0.0)
    rows = world.splits[split].rows
    results: dict[str, list] = {}
    for row in rows:
        path = world.video_path(split, row)
        agents = world.agents(path, clip, cache_dir)
        for spec in baselines:
            label = "clip-topk" if spec.startswith("clip") else spec.replace(":", "-")
            t = run_baseline(
                spec,
                answerer,
                agents["uniform_sample"].reader,
                row["question"],
                row["options"],
                clip_agent=agents["clip_sample"],
                config=greedy,
            )
            results.setdefault(label, []).append((row, t))
        for name, pol in policies.items():
            t = run_episode(pol, None, row["question"], row["options"], config=greedy, agents=agents)
            results.setdefault(name, []).append((row, t))
    out = {k: _summary(v) for k, v in results.items()}
    if records:
        for k, v in results.items():
            out[k]["records"] = [
                {
                    "video": r["video"],
                    "category": r["category"],
                    "right": bool(t.valid and t.predicted == r["answer"]),
                    "calls": int(t.num_tool_calls),
                    "frames": int(t.num_frames_used),
                }
                for r, t in v
            ]
    return out


def cache_parity(
    world: Any, clip: Any, cache_dir: Path, split: str = "test", seed: int = 0
) -> dict[str, Any]:
    """Cached ``clip_sample`` top-4 (fp16 FrameIndex) vs a fresh fp32 decode + re-embed of the same candidates.

    Calls: per test video, 8 prompts (the policy's subjects and colour-qualified ones) over the whole video and over
    a random sub-range. Returns the share of calls whose top-4 sets agree exactly.
    """
    from vidlab.understanding.agents import ClipAgent

    rng = np.random.default_rng(seed)
    prompts = ["triangle", "plus", "circle", "border", "square", "a red triangle", "a blue plus", "no shape"]
    same, plain_same, total = 0, 0, 0
    for s in world.splits[split].seeds:
        path = world.splits[split].root / f"videos/{s:06d}.mp4"
        cached = world.agents(path, clip, cache_dir)[
            "clip_sample"
        ]  # fp16 cache + fp32 rescoring of near-ties
        plain = ClipAgent(
            cached.index, clip, parity=True, reader=cached.reader, resize="fit"
        )  # fp16 cache only
        fresh = ClipAgent(cached.reader, clip, parity=True, resize="fit")  # decode + fp32 embed on every call
        n = cached.total_frames
        for p in prompts:
            a = int(rng.integers(0, max(1, n - 64)))
            b = int(rng.integers(a + 32, n + 1))
            for lo, hi in ((0, n), (a, b)):
                total += 1
                ref = fresh.indices(lo, hi, p)
                same += int(cached.indices(lo, hi, p) == ref)
                plain_same += int(plain.indices(lo, hi, p) == ref)
    return {
        "calls": total,
        "top4_agree": same / max(1, total),
        "top4_agree_fp16_only": plain_same / max(1, total),
    }


def oracle_table(world: Any, policy: Any, split: str = "test") -> dict[str, dict[str, float]]:
    """The reader's gate: accuracy per question kind when the policy answers (greedy, no tools) given
    (a) ``evidence``: only the ground-truth frames (``world.evidence_frames``), and
    (b) ``initial+evidence``: the 16 initial frames plus the ground-truth frames;
    with (c) ``initial``: the 16 initial frames alone, and (d) ``blank``: view (b) with every frame's pixels
    zeroed, as controls (a reader that reads must drop to chance on (d) for the shape questions)."""
    from vidlab.understanding import protocol as P
    from vidlab.understanding.agents import decode_frames, linspace_frames
    from vidlab.understanding.messages import Frame
    from vidlab.understanding.toyworld.world import evidence_frames, seed_of, video_spec

    hits: dict[str, dict[str, list[int]]] = {}
    for row in world.splits[split].rows:
        spec = video_spec(seed_of(row), world.cfg.world)
        reader = world.reader(world.video_path(split, row))
        n = reader.num_frames
        ev = evidence_frames(spec, row["category"])
        init = linspace_frames(0, n, 16)
        views = {"evidence": ev, "initial+evidence": sorted(set(init) | set(ev)), "initial": init}
        for name, idx in [*views.items(), ("blank", views["initial+evidence"])]:
            frames = decode_frames(reader, idx, resize="fit")
            if name == "blank":
                frames = [Frame(np.zeros_like(f.image), f.index, f.timestamp) for f in frames]
            msgs = P.build_initial_messages(row["question"], frames, n, reader.fps, row["options"], tools=())
            text = policy.generate(msgs, temperature=0.0)[0]
            parsed = P.parse_assistant_turn(text)
            ok = parsed.answer is not None and parsed.answer.strip() == row["answer"]
            hits.setdefault(name, {}).setdefault(row["category"], []).append(int(ok))
    return {
        view: {k: round(float(np.mean(v)), 4) for k, v in sorted(per.items())} for view, per in hits.items()
    }
