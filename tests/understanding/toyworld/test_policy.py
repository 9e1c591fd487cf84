"""The toy policy plays the real protocol, reads only pixels + text, and SFT/GRPO change what it does."""

import numpy as np
import pytest
import torch

from vidlab.understanding import protocol as P
from vidlab.understanding.messages import Frame, Message
from vidlab.understanding.toyworld.clip_train import new_model
from vidlab.understanding.toyworld.policy import (
    ACTIONS,
    PolicyNetConfig,
    ToyPolicy,
    ToyPolicyNet,
    observe,
    subject,
    uniform_ranges,
)
from vidlab.understanding.toyworld.rl import (
    group_advantages,
    grpo_update,
    rollout,
    sft_step,
    teacher_decide,
    token_layout,
)
from vidlab.understanding.toyworld.world import WorldConfig

SMALL = WorldConfig(min_frames=150, max_frames=260)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from vidlab.understanding.toyworld.train import ToyTrainConfig, World

    root = tmp_path_factory.mktemp("toy")
    cfg = ToyTrainConfig(
        out=str(root), train_videos=1, val_videos=1, test_videos=1, world=SMALL, progress=False
    )
    clip = new_model(0)
    w = World(root / "data", cfg)
    return w, clip, root


def _policy(clip, seed=0):
    torch.manual_seed(seed)
    return ToyPolicy(ToyPolicyNet(PolicyNetConfig(embed_dim=clip.dim)), clip)


def _agents(world):
    w, clip, root = world
    row = w.splits["train"].rows[1]
    return row, w.agents(w.video_path("train", row), clip, root / "cache")


def test_question_rules():
    assert subject("What colour was the triangle?") == "triangle"
    assert subject("How many circles appear between frame 3 and frame 90?") == "circle"
    assert subject("What colour was the plus?") == "plus"
    r = uniform_ranges(100, 228, 1000)
    assert r[0] == (100, 228) and r[1] == (100, 164) and all(e - s >= 8 for s, e in r)


@pytest.mark.slow
def test_every_turn_goes_through_the_real_parser_and_reward(world):
    row, agents = _agents(world)
    pol = _policy(world[1])
    gen = torch.Generator().manual_seed(1)
    for _ in range(6):
        r = rollout(pol, row, agents, temperature=1.0, generator=gen, classification="active")
        assert r.trajectory.valid, r.trajectory.invalid_reason
        assert P.check_format(r.trajectory.assistant_text).valid
        for d, text in zip(r.decisions, r.trajectory.assistant_turns):
            parsed = P.parse_assistant_turn(text)
            assert parsed.error is None
            assert (parsed.answer is not None) == (ACTIONS[d.action] == "answer")
        assert r.reward["format"] == pytest.approx(0.05)
        assert r.reward["score"] == pytest.approx(0.05 + r.reward["acc"] + r.reward["bonus"])


@pytest.mark.slow
def test_policy_never_reads_frame_metadata_only_pixels(world):
    row, agents = _agents(world)
    pol = _policy(world[1])
    from vidlab.understanding.env import Episode
    from vidlab.understanding.toyworld.rl import TOY_EPISODE

    ep = Episode(None, row["question"], row["options"], TOY_EPISODE, agents)
    msgs = ep.reset()
    forged = [
        Message(m.role, [Frame(p.image, -7, -1.0) if isinstance(p, Frame) else p for p in m.content])
        for m in msgs
    ]
    seeds = range(5)
    assert [pol.generate(msgs, temperature=1.0, seed=s) for s in seeds] == [
        pol.generate(forged, temperature=1.0, seed=s) for s in seeds
    ]
    blank = [
        Message(
            m.role,
            [
                Frame(np.zeros_like(p.image), p.index, p.timestamp) if isinstance(p, Frame) else p
                for p in m.content
            ],
        )
        for m in msgs
    ]
    f1 = pol.act(msgs, 0.0)
    f2 = pol.act(blank, 0.0)
    assert not torch.allclose(f1.features.img, f2.features.img)  # it does look at the pixels
    obs = observe(msgs)
    assert obs.question == row["question"] and obs.options == row["options"]
    assert not hasattr(obs, "answer") and "answer" not in vars(obs)


@pytest.mark.slow
def test_sft_then_grpo_change_the_parameters(world):
    row, agents = _agents(world)
    w = world[0]
    pol = _policy(world[1])
    before = {k: v.clone() for k, v in pol.net.state_dict().items()}
    examples = []
    for r_ in w.splits["train"].rows:
        ag = w.agents(w.video_path("train", r_), world[1], world[2] / "cache")
        for plan in ACTIONS:  # one teacher per first action: the cold start does not choose when to call
            ro = rollout(pol, r_, ag, decide=teacher_decide(pol, r_, plan))
            assert (
                ACTIONS[ro.decisions[0].action] == plan and ro.decisions[-1].letter == ord(r_["answer"]) - 65
            )
            examples += [(d.features, d.action, d.letter) for d in ro.decisions]
    assert {ACTIONS[a] for _, a, _ in examples} >= {"answer", "clip_sample", "uniform_sample"}
    opt = torch.optim.Adam(pol.net.parameters(), lr=3e-3)
    losses = [sft_step(pol, opt, examples) for _ in range(15)]
    assert losses[-1] < losses[0]
    after_sft = {k: v.clone() for k, v in pol.net.state_dict().items()}
    assert any(not torch.equal(before[k], after_sft[k]) for k in before)
    ref = _policy(world[1]).net
    ref.load_state_dict(after_sft)
    gen = torch.Generator().manual_seed(0)
    rollouts = [
        rollout(pol, row, agents, temperature=1.0, generator=gen, classification="active") for _ in range(8)
    ]
    rewards = [r.reward["score"] for r in rollouts]
    layout = token_layout(rollouts)
    n_obs = sum(d.features.n_obs for r in rollouts for d in r.decisions)
    assert int((layout.loss_mask == 0).sum()) == n_obs > 0
    assert int(layout.loss_mask.sum()) == sum(1 + (d.letter >= 0) for r in rollouts for d in r.decisions)
    adv = group_advantages(rewards)
    if np.all(adv == 0):  # a tie: force a signal so the update has something to follow
        adv = np.linspace(-1, 1, 8)
    opt = torch.optim.Adam(pol.net.parameters(), lr=1e-3)
    stats = grpo_update(pol, ref, opt, rollouts, adv, epochs=2)
    assert stats["kl"] > 0
    after = pol.net.state_dict()
    assert any(not torch.equal(after_sft[k], after[k]) for k in after)
