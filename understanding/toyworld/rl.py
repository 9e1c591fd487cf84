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

from vidlab.understanding.env import Episode, EpisodeConfig, Trajectory
from vidlab.understanding.reward import compute_score
from vidlab.understanding.toyworld.policy import Decision, Features, ToyPolicy, decision_logp

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


def guard_calls(score: float, num_calls: int, extra_call_cost: float, free_calls: int = 1) -> float:
    """The creep guard: every tool call after the first ``free_calls`` (default 1, as the behaviour reward's "used
    a tool" bit) costs ``extra_call_cost``; a further call must buy accuracy to pay for itself."""
    return float(score) - float(extra_call_cost) * max(0, int(num_calls) - int(free_calls))


def all_tied(rewards: Sequence[float]) -> bool:
    """A group whose rewards all tie gives every rollout a zero advantage: no learning signal."""
    return bool(np.ptp(np.asarray(rewards, dtype=np.float64)) < 1e-9) if len(rewards) else True


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
def _sft_loss(policy: ToyPolicy, examples: Sequence[tuple]) -> Any:
    """Cross-entropy on teacher decisions: the action token, and the letter token when it answers.

    Examples are ``(features, action, letter)``, ``(features, action, letter, letter_weight)`` or
    ``(features, action, letter, letter_weight, action_weight)``; the letter weight scales the letter token's loss
    (0 where the frames in view cannot show the answer: nothing to read there), the action weight the action
    token's (default 1). Features with a ``frame_target`` (``anchor_target``) add a binary cross-entropy on the
    reader's per-frame presence of the subject (the anchor).
    """
    import torch

    batch = Features.collate([e[0] for e in examples])
    actions = torch.tensor([e[1] for e in examples])
    letters = torch.tensor([e[2] for e in examples])
    weights = torch.tensor([float(e[3]) if len(e) > 3 else 1.0 for e in examples])
    act_w = torch.tensor([float(e[4]) if len(e) > 4 else 1.0 for e in examples])
    tok, mask, _ = decision_logp(policy.net, batch, actions, letters)
    w = mask * torch.stack([act_w, weights], 1)
    loss = -(tok * w).sum() / w.sum().clamp(min=1e-6)
    target = batch["frame_target"]
    known = target >= 0
    if bool(known.any()):  # the teacher's per-frame "shows the subject" (reading, not deciding)
        pres = policy.net.presence_logits(batch)
        loss = loss + torch.nn.functional.binary_cross_entropy_with_logits(pres[known], target[known])
    if "anchor_target" in batch and bool((batch["anchor_target"] >= 0).any()):
        t = batch["anchor_target"]
        pres = policy.net.presence_logits({**batch, "subj": batch["anchor"]})
        loss = loss + torch.nn.functional.binary_cross_entropy_with_logits(pres[t >= 0], t[t >= 0])
    return loss


@dataclass
class ReadingSet:
    """Per-frame reading examples from training videos (the teacher's ground truth): unit image embeddings ``x``
    [M, D], a subject index ``subj`` [M] into ``subjects``, the ``options`` text embeddings [M, K, D] of
    "<option> <subject>" with the ``target`` [M] option (-1: no option applies), and ``shows`` [M] (does the frame
    show the subject); ``texts``: [S, D] subject embeddings, ``none``: [D] "no shape"."""

    x: Any
    subj: Any
    texts: Any
    none: Any
    options: Any
    target: Any
    shows: Any

    def loss(self, net: Any, batch_size: int, generator: Any = None) -> Any:
        import torch

        i = torch.randint(0, self.x.shape[0], (batch_size,), generator=generator)
        logits, pres = net.read_one(
            self.x[i], self.texts[self.subj[i]], self.none.expand(len(i), -1), self.options[i]
        )
        t = self.target[i]
        known = t >= 0
        loss = torch.nn.functional.binary_cross_entropy_with_logits(pres, self.shows[i])
        if bool(known.any()):
            loss = loss + torch.nn.functional.cross_entropy(logits[known], t[known])
        return loss


def sft_step(
    policy: ToyPolicy,
    optimizer: Any,
    examples: Sequence[tuple],
    reading: ReadingSet | None = None,
    reading_batch: int = 256,
) -> float:
    """``_sft_loss`` on ``examples`` (+ the per-frame reading loss on ``reading``), one optimiser step."""
    policy.net.train()
    loss = _sft_loss(policy, examples)
    if reading is not None:
        loss = loss + reading.loss(policy.net, reading_batch)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    policy.net.eval()
    return float(loss.detach())


class TeacherDecide:
    """A teacher that takes ``plan`` once (one of the policy's actions: ``answer``, ``clip_sample`` or
    ``uniform_sample`` for the basic policy) and then answers the ground-truth letter, in the policy's own text.
    ``views`` records the frame labels in view at each decision.

    The cold start runs one teacher per action per question, so it teaches the format and the reading, not *when*
    to call: that is left to GRPO and the reward.
    """

    def __init__(self, policy: ToyPolicy, row: dict[str, Any], plan: str):
        actions = policy.actions
        if plan not in actions:
            raise ValueError(f"plan must be one of {actions}, got {plan!r}")
        self.policy, self.row, self.plan = policy, row, actions.index(plan)
        self.views: list[list[int]] = []

    def possible(self, messages: list) -> bool:
        """Can the plan be the first action on this conversation (e.g. a zoom needs a previous call)?"""
        from vidlab.understanding.toyworld.policy import observe

        return bool(self.policy.featurize(observe(messages)).action_mask[self.plan])

    def __call__(self, messages: list, generator: Any = None) -> Decision:
        from vidlab.understanding.toyworld.policy import observe

        obs = observe(messages)
        f = self.policy.featurize(obs)
        mask = f.action_mask.tolist()
        a = self.plan if (not obs.calls and mask[self.plan]) else 0
        letter = ord(self.row["answer"]) - 65 if a == 0 else -1
        self.views.append(sorted({lab for lab, _ in obs.frames}))
        return Decision(
            f, a, letter, 0.0, self.policy.render(obs, f, a, self.row["answer"] if a == 0 else None)
        )


def teacher_decide(policy: ToyPolicy, row: dict[str, Any], plan: str = "answer") -> TeacherDecide:
    """``TeacherDecide(policy, row, plan)``."""
    return TeacherDecide(policy, row, plan)
