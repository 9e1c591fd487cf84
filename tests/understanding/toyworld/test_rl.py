"""GRPO's pieces: group advantages, the clipped objective, the KL term, observation tokens masked out."""

import numpy as np
import pytest
import torch

from vidlab.understanding.toyworld.rl import group_advantages, grpo_loss


def test_group_advantages_normalise_and_vanish_on_ties():
    a = group_advantages([1.55, 0.05, 0.05, 1.05, 0.0, 1.55, 0.25, 0.05])
    assert abs(a.mean()) < 1e-9 and abs(a.std() - 1) < 1e-4
    assert a[0] > a[3] > a[6] > a[1] > a[4]
    assert np.all(group_advantages([0.5] * 8) == 0)


def _loss(logp, old, ref, adv, mask, **kw):
    lp = logp.clone().requires_grad_(True)
    loss, stats = grpo_loss(lp, old, ref, adv, mask, **kw)
    loss.backward()
    return loss.item(), lp.grad, stats


def test_observation_tokens_are_masked_out_of_the_loss():
    g = torch.Generator().manual_seed(0)
    T = 12
    logp = -torch.rand(T, generator=g)
    old = logp + 0.05 * torch.randn(T, generator=g)
    ref = logp + 0.1 * torch.randn(T, generator=g)
    adv = torch.randn(T, generator=g)
    mask = torch.tensor([0, 0, 0, 1, 1, 0, 0, 1, 0, 0, 1, 1], dtype=torch.float32)
    base, grad, _ = _loss(logp, old, ref, adv, mask)
    assert torch.all(grad[mask == 0] == 0) and torch.all(grad[mask == 1] != 0)
    noisy = logp.clone()
    noisy[mask == 0] += torch.randn(int((mask == 0).sum()), generator=g)  # anything at observation positions
    again, _, _ = _loss(noisy, old, ref, adv, mask)
    assert again == pytest.approx(base, abs=1e-7)
    unmasked, _, _ = _loss(noisy, old, ref, adv, torch.ones(T))
    assert unmasked != pytest.approx(base, abs=1e-4)  # the mask is what makes them irrelevant


def test_clipped_objective_stops_the_gradient_beyond_the_clip():
    old = torch.zeros(2)
    ref = torch.zeros(2)
    mask = torch.ones(2)
    logp = torch.tensor([np.log(1.5), np.log(1.1)], dtype=torch.float32)  # ratios 1.5 (clipped) and 1.1
    _, grad, stats = _loss(logp, old, ref, torch.ones(2), mask, kl_coef=0.0)
    assert grad[0] == 0 and grad[1] < 0  # positive advantage: push up only inside the clip
    assert stats["clip_frac"] == pytest.approx(0.5)
    _, grad_neg, _ = _loss(logp, old, ref, -torch.ones(2), mask, kl_coef=0.0)
    assert grad_neg[0] > 0  # negative advantage, ratio above 1 + eps: min() keeps the unclipped term


def test_kl_to_the_reference_is_zero_at_the_reference_and_pulls_back():
    logp = torch.tensor([-1.0, -2.0])
    mask = torch.ones(2)
    zero = torch.zeros(2)
    _, _, st = _loss(logp, logp, logp, zero, mask)
    assert st["kl"] == pytest.approx(0.0, abs=1e-8)
    _, grad, st = _loss(logp, logp, logp - 0.5, zero, mask, kl_coef=1.0)
    assert st["kl"] > 0 and torch.all(grad > 0)  # minimising pushes logp down towards the reference


def test_the_creep_guard_charges_only_calls_after_the_first_and_ties_are_detected():
    from vidlab.understanding.toyworld.rl import all_tied, guard_calls

    assert guard_calls(1.55, 0, 0.1) == 1.55 and guard_calls(1.55, 1, 0.1) == 1.55
    assert guard_calls(1.55, 3, 0.1) == pytest.approx(1.35)
    assert all_tied([1.05] * 8) and not all_tied([1.05] * 7 + [0.05])
    assert np.all(group_advantages([guard_calls(1.05, 1, 0.1)] * 8) == 0)
    assert group_advantages([guard_calls(1.05, n, 0.1) for n in (1, 1, 2, 5)])[0] > 0  # creeping loses
