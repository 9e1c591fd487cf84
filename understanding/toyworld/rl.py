"""Cold-start SFT and GRPO for the toy policy, through the real ``Episode``, parser and ``compute_score``.

GRPO, as in the reference settings where they apply (group 8, clip 0.2, KL coefficient 0.001 with the
low-variance k3 estimator, entropy coefficient 0.001):

- ``group_advantages``: each question's 8 rollouts get ``(r - mean) / (std + eps)`` (zero when all tie);
- ``token_layout``: a rollout is the token stream [observation frames of turn 1, action token, (letter token),
  observation frames of turn 2, ...]; only the policy's own tokens have ``loss_mask = 1``;
- ``grpo_loss``: the clipped surrogate ``min(rho A, clip(rho, 1-eps, 1+eps) A)`` minus ``beta KL(pi || pi_ref)``
  averaged over unmasked tokens, minus the entropy bonus.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from understanding.env import Episode, EpisodeConfig, Trajectory
from understanding.reward import compute_score
from understanding.toyworld.policy import ACTIONS, Decision, Features, ToyPolicy, decision_logp

# Toy frames are shown at their native 32x32 ("fit"); the reference stretches every frame to 640x360.
TOY_EPISODE = EpisodeConfig(frame_resize="fit")
ZERO_SCORE = {"score": 0.0, "format": 0.0, "acc": 0.0, "bonus": 0.0}


@dataclass
class Rollout:
    row: dict[str, Any]
    decisions: list[Decision]
    trajectory: Trajectory
    reward: dict[str, Any]

    @property
    def correct(self) -> bool:
        return self.trajectory.valid and self.trajectory.predicted == self.row["answer"]


def score(traj: Trajectory, row: dict[str, Any], classification: str | None) -> dict[str, Any]:
    """The real reward: ``compute_score`` on the assistant text (an episode the env ended as invalid scores 0)."""
    if not traj.valid:
        return {**ZERO_SCORE, "num_tool_calls": traj.num_tool_calls, "frames_used": traj.num_frames_used}
    extra = {"question_type": "mc", "options": traj.options, **traj.reward_extra_info()}
    if classification:
        extra["classification"] = classification
    out = compute_score("toyworld", traj.assistant_text, row["answer"], extra)
    return dict(out) if isinstance(out, dict) else {"score": float(out)}


def rollout(
    policy: ToyPolicy,
    row: dict[str, Any],
    agents: dict[str, Any],
    *,
    temperature: float = 1.0,
    generator: Any = None,
    classification: str | None = None,
    config: EpisodeConfig | None = None,
    decide: Callable[[list, Any], Decision] | None = None,
) -> Rollout:
    """One episode: the policy (or ``decide``, e.g. a teacher) acts on the Episode's messages until it ends."""
    ep = Episode(None, row["question"], row["options"], config or TOY_EPISODE, agents)
    messages = ep.reset()
    decisions: list[Decision] = []
    while not ep.done:
        d = decide(messages, generator) if decide else policy.act(messages, temperature, generator)
        decisions.append(d)
        ep.step(d.text)
        messages = ep.messages
    traj = ep.trajectory()
    return Rollout(row, decisions, traj, score(traj, row, classification))


def group_advantages(rewards: Sequence[float], eps: float = 1e-6) -> np.ndarray:
    """GRPO's group-normalised advantages: (r - mean) / (std + eps); all zeros when the group ties."""
    r = np.asarray(rewards, dtype=np.float64)
    sd = r.std()
    if sd < 1e-9:
        return np.zeros_like(r)
    return (r - r.mean()) / (sd + eps)


@dataclass
class TokenLayout:
    """The flattened token stream of a batch of rollouts: which step/slot each policy token comes from."""

    step: Any  # [T] long: index into the batch of decisions (-1 for observation tokens)
    slot: Any  # [T] long: 0 = action token, 1 = answer-letter token
    loss_mask: Any  # [T] float: 1 for the policy's own tokens, 0 for observation tokens
    traj: Any  # [T] long: which rollout the token belongs to
    decisions: list[Decision] = field(default_factory=list)


def token_layout(rollouts: Sequence[Rollout]) -> TokenLayout:
    """Lay out each rollout as [obs tokens..., action, (letter)] per turn; observation tokens get mask 0."""
    import torch

    step, slot, mask, traj = [], [], [], []
    decisions: list[Decision] = []
    for r_i, r in enumerate(rollouts):
        for d in r.decisions:
            k = len(decisions)
            decisions.append(d)
            n_obs = d.features.n_obs
            step += [-1] * n_obs
            slot += [0] * n_obs
            mask += [0.0] * n_obs
            traj += [r_i] * n_obs
            step.append(k)
            slot.append(0)
            mask.append(1.0)
            traj.append(r_i)
            if d.letter >= 0:
                step.append(k)
                slot.append(1)
                mask.append(1.0)
                traj.append(r_i)
    return TokenLayout(
        torch.tensor(step), torch.tensor(slot), torch.tensor(mask), torch.tensor(traj), decisions
    )


def sequence_logp(tok_logp: Any, layout: TokenLayout) -> Any:
    """Per-token log-probs [T] of the stream; observation positions hold 0 (they are masked anyway)."""
    import torch

    idx = layout.step.clamp(min=0)
    vals = tok_logp[idx, layout.slot]
    return torch.where(layout.step >= 0, vals, torch.zeros_like(vals))


def grpo_loss(
    logp: Any,
    old_logp: Any,
    ref_logp: Any,
    advantages: Any,
    loss_mask: Any,
    clip_eps: float = 0.2,
    kl_coef: float = 0.001,
    entropy: Any = None,
    entropy_coef: float = 0.001,
) -> tuple[Any, dict[str, float]]:
    """GRPO's token-level loss (all tensors [T]); masked tokens contribute nothing, not even through the KL."""
    import torch

    ratio = torch.exp(logp - old_logp)
    surr = torch.minimum(ratio * advantages, ratio.clamp(1 - clip_eps, 1 + clip_eps) * advantages)
    d = ref_logp - logp
    kl = torch.exp(d) - d - 1  # k3 ("low_var_kl"), >= 0
    per_tok = surr - kl_coef * kl
    denom = loss_mask.sum().clamp(min=1)
    loss = -(per_tok * loss_mask).sum() / denom
    if entropy is not None:
        loss = loss - entropy_coef * entropy.mean()
    with torch.no_grad():
        clipped = ((ratio - 1).abs() > clip_eps).float()
        stats = {
            "kl": float((kl * loss_mask).sum() / denom),
            "clip_frac": float((clipped * loss_mask).sum() / denom),
        }
    return loss, stats


def grpo_update(
    policy: ToyPolicy,
    ref_net: Any,
    optimizer: Any,
    rollouts: Sequence[Rollout],
    advantages: Sequence[float],
    *,
    epochs: int = 2,
    clip_eps: float = 0.2,
    kl_coef: float = 0.001,
    entropy_coef: float = 0.001,
) -> dict[str, float]:
    """``epochs`` gradient steps on one batch of groups (the first is on-policy; later ones exercise the clip)."""
    import torch

    layout = token_layout(rollouts)
    if not layout.decisions:
        return {}
    batch = Features.collate([d.features for d in layout.decisions])
    actions = torch.tensor([d.action for d in layout.decisions])
    letters = torch.tensor([d.letter for d in layout.decisions])
    adv_tok = torch.tensor(np.asarray(advantages, np.float32))[layout.traj]
    with torch.no_grad():
        ref_tok, _, _ = decision_logp(ref_net, batch, actions, letters)
        old_tok, _, _ = decision_logp(policy.net, batch, actions, letters)
    ref_seq = sequence_logp(ref_tok, layout)
    old_seq = sequence_logp(old_tok, layout)
    stats: dict[str, float] = {}
    policy.net.train()
    for _ in range(epochs):
        tok, _, ent = decision_logp(policy.net, batch, actions, letters)
        loss, st = grpo_loss(
            sequence_logp(tok, layout),
            old_seq,
            ref_seq,
            adv_tok,
            layout.loss_mask,
            clip_eps,
            kl_coef,
            ent,
            entropy_coef,
        )
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.net.parameters(), 1.0)
        optimizer.step()
        stats = {"loss": float(loss.detach()), **st}
    policy.net.eval()
    return stats


# ------------------------------------------------------------------------------------------------- SFT
def sft_step(policy: ToyPolicy, optimizer: Any, examples: Sequence[tuple[Features, int, int]]) -> float:
    """One cross-entropy step on teacher decisions (action token, and the letter token when it answers)."""
    import torch

    batch = Features.collate([f for f, _, _ in examples])
    actions = torch.tensor([a for _, a, _ in examples])
    letters = torch.tensor([b for _, _, b in examples])
    policy.net.train()
    tok, mask, _ = decision_logp(policy.net, batch, actions, letters)
    loss = -(tok * mask).sum() / mask.sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    policy.net.eval()
    return float(loss.detach())


def teacher_plan(row: dict[str, Any]) -> str:
    """The teacher's strategy by question kind (the teacher reads ground truth; the policy never does)."""
    return {
        "static": "answer",
        "needle": "clip_sample",
        "distractor": "clip_sample",
        "count": "uniform_sample",
    }[row["category"]]


def teacher_decide(policy: ToyPolicy, row: dict[str, Any]) -> Callable[[list, Any], Decision]:
    """A teacher that follows ``teacher_plan`` once, then answers the ground-truth letter, in the policy's text."""
    from understanding.toyworld.policy import featurize, observe, render

    plan = ACTIONS.index(teacher_plan(row))

    def decide(messages: list, generator: Any = None) -> Decision:
        obs = observe(messages)
        f = featurize(obs, policy.embedder, policy.max_calls)
        mask = f.action_mask.tolist()
        a = plan if (not obs.calls and mask[plan]) else 0
        letter = ord(row["answer"]) - 65 if a == 0 else -1
        return Decision(f, a, letter, 0.0, render(obs, a, row["answer"] if a == 0 else None))

    return decide
