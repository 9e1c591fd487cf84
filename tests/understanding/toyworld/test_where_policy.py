"""The where-to-look policy: its actions are tools with arguments, the arguments come from what the reader saw in
the latest observation, every turn goes through the real Episode and parser, and a short training run works."""

import json

import numpy as np
import pytest
import torch

from vidlab.understanding import protocol as P
from vidlab.understanding.toyworld.nets import new_net
from vidlab.understanding.toyworld.policy import Observation, PolicyNetConfig, ToyPolicy, observe
from vidlab.understanding.toyworld.where import (
    WHERE_ACTIONS,
    WhereNet,
    anchor_of,
    call_kind,
    call_stride,
    plan,
    quarter_ranges,
    split_ranges,
    window_around,
    window_before,
)
from vidlab.understanding.toyworld.world import world_config

A = {name: i for i, name in enumerate(WHERE_ACTIONS)}


def _obs(question, calls=(), total=1280, final=False, tools=(P.UNIFORM, P.CLIP)):
    return Observation(question, ["red", "blue", "green", "cyan"], total, tools, [], 4, list(calls), final)


def test_arguments_windows_and_masks():
    assert anchor_of("What colour was the square just before the star appeared?") == "star"
    assert anchor_of("What colour did the triangle flash?") is None
    clip = P.ToolCall(P.CLIP, {"start_frame": 0, "end_frame": 1280, "prompt": "triangle"})
    assert call_stride(clip) == 10.0  # 1280 / 128 candidates
    assert call_stride(P.ToolCall(P.UNIFORM, {"start_frame": 100, "end_frame": 115})) == 2.0
    assert window_around(500, 10.0, 1280) == (490, 511)  # one step either side, 8 frames -> 3x denser
    assert window_around(2, 10.0, 1280) == (0, 21) and window_around(1279, 3.0, 1280) == (
        1272,
        1280,
    )  # shifted inside
    assert window_before(500, 10.0, 1280) == (480, 500)  # two steps before the anchor, not the anchor
    assert window_before(12, 1.0, 1280) == (4, 12) and window_before(3, 1.0, 1280) is None
    assert split_ranges(0, 256, 1280)[:3] == [(0, 128), (128, 256), (0, 64)]
    # before any call: no zoom; the anchor search only when the question names an anchor
    needle = plan(_obs("What colour did the triangle flash?"), None, None)
    assert [c is not None for c in needle.calls] == [True, True, False, True, True, False, False, True]
    assert needle.calls[A["clip_subject"]] == (P.CLIP, (0, 1280, "triangle"))
    two = plan(_obs("What colour was the square just before the star appeared?", [clip]), 500, 700)
    assert two.calls[A["clip_anchor"]] == (P.CLIP, (0, 1280, "star"))
    assert two.calls[A["clip_subject"]] == (P.CLIP, (0, 1280, "square"))  # "triangle" was the earlier prompt
    assert two.calls[A["zoom_around"]] == (P.UNIFORM, (490, 511))
    assert two.calls[A["zoom_before"]] == (P.UNIFORM, (680, 700))
    count = _obs("How many circles appear between frame 300 and frame 556?")
    first = plan(count, None, None)
    assert first.calls[A["uniform_all"]] == (P.UNIFORM, (300, 556))
    assert first.calls[A["uniform_split"]] == (P.UNIFORM, (300, 428))
    half = P.ToolCall(P.UNIFORM, {"start_frame": 300, "end_frame": 428})
    assert plan(_obs(count.question, [half]), None, None).calls[A["uniform_split"]] == (P.UNIFORM, (428, 556))
    assert call_kind(half, count) == "uniform_split" and call_kind(clip, count) == "clip_subject"
    # no calls left / not offered: answer only
    done = plan(_obs(count.question, [half], final=True), 400, None)
    assert [c is not None for c in done.calls] == [True] + [False] * 7
    no_clip = plan(_obs("What colour did the triangle flash?", tools=(P.UNIFORM,)), None, None)
    assert no_clip.calls[A["clip_subject"]] is None and no_clip.calls[A["uniform_all"]] is not None


def test_the_reader_reads_the_square_the_star_follows():
    torch.manual_seed(0)
    net = WhereNet(PolicyNetConfig(embed_dim=8, actions="where"))
    g = torch.Generator().manual_seed(3)
    unit = [torch.nn.functional.normalize(torch.randn(8, generator=g), dim=0) for _ in range(7)]
    subj, anchor, none, red, blue, green, cyan = unit
    frames = torch.stack([subj + red, anchor, subj + blue, none])  # a red square then the star; a blue square
    frames = torch.nn.functional.normalize(frames, dim=-1)
    batch = {
        "img": frames[None],
        "pos": torch.zeros(1, 4, 2),
        "lengths": torch.tensor([4]),
        "subj": subj[None],
        "none": none[None],
        "anchor": anchor[None],
        "opts": torch.stack([red, blue, green, cyan])[None],
        "opt_val": torch.full((1, 4), -1.0),
        "opt_mask": torch.ones(1, 4, dtype=torch.bool),
        "is_count": torch.zeros(1),
        "latest": torch.ones(1, 4),
    }
    with_anchor, _ = net.read_frames({**batch, "has_anchor": torch.ones(1)})
    without, _ = net.read_frames({**batch, "has_anchor": torch.zeros(1)})
    assert int(with_anchor.argmax()) == 0  # red: the square just before the star
    gap = float((with_anchor[0, 0] - with_anchor[0, 1]).detach())
    assert gap > float((without[0, 0] - without[0, 1]).detach()) + 0.5


@pytest.fixture(scope="module")
def where_video(tmp_path_factory):
    from vidlab.understanding.toyworld.clip_train import new_model
    from vidlab.understanding.toyworld.train import ToyTrainConfig, World

    root = tmp_path_factory.mktemp("where")
    cfg = ToyTrainConfig(
        out=str(root),
        train_videos=1,
        val_videos=0,
        test_videos=0,
        world=world_config("where", max_frames=700),
        progress=False,
    )
    clip = new_model(0)
    w = World(root / "data", cfg)
    rows = {r["category"]: r for r in w.splits["train"].rows}
    agents = w.agents(w.video_path("train", rows["needle"]), clip, root / "cache")
    torch.manual_seed(0)
    policy = ToyPolicy(new_net(PolicyNetConfig(embed_dim=clip.dim, actions="where")), clip)
    return policy, rows, agents


def test_a_coarse_call_then_a_zoom_on_what_it_showed_through_the_real_episode(where_video):
    from vidlab.understanding.env import Episode
    from vidlab.understanding.toyworld.rl import TOY_EPISODE

    policy, rows, agents = where_video
    row = rows["needle"]
    ep = Episode(None, row["question"], row["options"], TOY_EPISODE, agents)
    msgs = ep.reset()
    f0 = policy.featurize(observe(msgs))
    assert not f0.action_mask[A["zoom_around"]] and f0.action_mask[A["clip_subject"]]
    ep.step(policy.render(observe(msgs), f0, A["clip_subject"], None))
    obs = observe(ep.messages)
    got = ep.call_records[-1]["frames"]
    assert obs.last_frames == len(got) == 4
    f1 = policy.featurize(obs)
    assert f1.latest.sum() == 4 and f1.plan.focus in got  # the focus is a frame the last call showed
    s, e = f1.plan.calls[A["zoom_around"]][1]
    step = ep.total_frames / 128
    assert s <= f1.plan.focus < e and e - s <= 2 * step + 2
    text = policy.render(obs, f1, A["zoom_around"], None)
    assert (
        f"frame {f1.plan.focus}" in text and P.parse_assistant_turn(text).tool_call.args["start_frame"] == s
    )
    ep.step(text)
    zoom = ep.call_records[-1]["frames"]
    assert len(zoom) == 8 and all(s <= t < e for t in zoom)
    assert max(np.diff(zoom)) < step  # denser than the coarse call's candidates
    f2 = policy.featurize(observe(ep.messages))
    assert set(np.asarray(f2.labels)[f2.latest.numpy() > 0]) == set(
        zoom
    )  # the observation is the zoom's frames
    ep.step(f"<thinking>done</thinking><answer>{row['answer']}</answer>")
    t = ep.trajectory()
    assert t.valid and t.num_tool_calls == 2 and P.check_format(t.assistant_text).valid
    assert json.loads(json.dumps(t.to_dict()))["tool_calls"][1]["arguments"] == {
        "start_frame": s,
        "end_frame": e,
    }


def test_zoom_before_ends_at_the_anchor_frame_and_sampled_rollouts_are_valid(where_video):
    from vidlab.understanding.env import Episode
    from vidlab.understanding.toyworld.rl import TOY_EPISODE, rollout

    policy, rows, agents = where_video
    row = rows["twolook"]
    ep = Episode(None, row["question"], row["options"], TOY_EPISODE, agents)
    msgs = ep.reset()
    ep.step(policy.render(observe(msgs), policy.featurize(observe(msgs)), A["clip_anchor"], None))
    assert ep.call_records[-1]["arguments"]["prompt"] == "star"
    f = policy.featurize(observe(ep.messages))
    assert f.plan.anchor_frame in ep.call_records[-1]["frames"]
    s, e = f.plan.calls[A["zoom_before"]][1]
    assert e == f.plan.anchor_frame and e - s >= 8
    ep.step(policy.render(observe(ep.messages), f, A["zoom_before"], None))
    assert all(s <= t < e for t in ep.call_records[-1]["frames"])
    gen = torch.Generator().manual_seed(0)
    for _ in range(8):
        r = rollout(policy, row, agents, temperature=1.0, generator=gen, classification="active")
        assert r.trajectory.valid, r.trajectory.invalid_reason
        assert r.reward["score"] == pytest.approx(0.05 + r.reward["acc"] + r.reward["bonus"])
        for d, call in zip(r.decisions, r.trajectory.tool_calls):
            if WHERE_ACTIONS[d.action] == "zoom_before":
                assert call["arguments"]["end_frame"] == d.features.plan.anchor_frame


@pytest.mark.slow
def test_short_where_training_runs_end_to_end_and_resumes(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from benchmarks.toyworld_rl import quick_config
    from vidlab.understanding.policies import load_policy
    from vidlab.understanding.toyworld.train import run

    cfg = quick_config(str(tmp_path / "run"), 0, "where")
    res = run(cfg, stages=("grpo",))
    labels = res["labels"]
    assert {r["category"] for r in labels} == set(world_config("where").kinds)
    assert all("acc_two_looks" in r["classification_info"] for r in labels)
    timing = json.loads((tmp_path / "run" / "timing.json").read_text())
    assert {"world", "clip", "sft", "classify", "grpo"} <= set(timing)
    before = (tmp_path / "run" / "grpo" / "policy.safetensors").stat().st_mtime_ns
    run(cfg, stages=("grpo",))  # every stage cached: nothing retrained
    assert (tmp_path / "run" / "grpo" / "policy.safetensors").stat().st_mtime_ns == before
    pol = load_policy(f"toy:{tmp_path / 'run' / 'grpo'}")
    assert isinstance(pol.net, WhereNet) and pol.actions == WHERE_ACTIONS


def test_the_where_presets_guard_lets_a_coarse_call_and_a_zoom_go_free():
    from vidlab.config import resolve
    from vidlab.understanding.toyworld.rl import guard_calls
    from vidlab.understanding.toyworld.train import ToyTrainConfig

    cfg = resolve(ToyTrainConfig, "train-agent/toyworld-where", [])
    assert cfg.actions == "where" and cfg.world == world_config("where") and cfg.grpo.free_calls == 2
    assert guard_calls(1.55, 2, 0.1, cfg.grpo.free_calls) == 1.55
    assert guard_calls(1.55, 4, 0.1, cfg.grpo.free_calls) == pytest.approx(1.35)
    assert guard_calls(1.55, 2, 0.1) == pytest.approx(1.45)  # the default guard: only the first call is free


def test_count_questions_can_have_their_own_guard_and_share_of_each_grpo_step():
    from vidlab.understanding.toyworld.train import GRPOConfig, _grpo_batch, _guard_of

    rows = [{"id": i, "category": "count" if i % 10 == 0 else "needle"} for i in range(100)]
    plain = GRPOConfig(questions_per_step=8, extra_call_cost=0.1, free_calls=2)
    assert _guard_of(plain, rows[0]) == _guard_of(plain, rows[1]) == (0.1, 2)
    own = GRPOConfig(
        questions_per_step=8, free_calls=2, count_call_cost=0.05, count_free_calls=3, count_share=0.5
    )
    assert _guard_of(own, rows[0]) == (0.05, 3) and _guard_of(own, rows[1]) == (0.1, 2)
    # the default draw is unchanged (the same questions as before the share existed)
    rng, ref = np.random.default_rng([0, 1, 17]), np.random.default_rng([0, 1, 17])
    assert _grpo_batch(rows, plain, rng) == [rows[i] for i in ref.choice(100, 8, replace=False)]
    for step in range(20):
        batch = _grpo_batch(rows, own, np.random.default_rng([0, step, 17]))
        assert len(batch) == 8 and len({r["id"] for r in batch}) == 8
        assert sum(r["category"] == "count" for r in batch) == 4
    few = [r for r in rows if r["category"] == "needle"][:6] + rows[:20:10]  # 2 count questions only
    batch = _grpo_batch(few, own, np.random.default_rng(0))
    assert len(batch) == 8 and sum(r["category"] == "count" for r in batch) == 2


@pytest.mark.slow
def test_the_shipped_where_policy_looks_coarse_then_zooms_and_answers(tmp_path):
    from vidlab.clip import FrameIndex, Sampling
    from vidlab.understanding.agents import UniformAgent
    from vidlab.understanding.env import run_episode
    from vidlab.understanding.policies import load_policy
    from vidlab.understanding.toyworld.clip_agent import RescoringClipAgent
    from vidlab.understanding.toyworld.rl import TOY_EPISODE
    from vidlab.understanding.toyworld.world import MemoryReader, build_split

    pol = load_policy("toy:where")
    assert isinstance(pol.net, WhereNet)
    split = build_split(tmp_path, "test", 2, world_config("where", max_frames=1200), base_seed=77)
    right, calls = 0, {}
    for row in split.rows:
        path = split.root / row["video"]
        reader = MemoryReader(path)
        idx = FrameIndex.build(
            path, pol.clip, Sampling.fps(1.0), cache_dir=tmp_path / "cache", progress=False
        )
        agents = [
            UniformAgent(reader, resize="fit"),
            RescoringClipAgent(idx, pol.clip, reader=reader, resize="fit"),
        ]
        t = run_episode(pol, None, row["question"], row["options"], config=TOY_EPISODE, agents=agents)
        assert t.valid, t.invalid_reason
        right += t.predicted == row["answer"]
        calls.setdefault(row["category"], []).append(t.num_tool_calls)
    assert calls["static"] == [0, 0] and all(n >= 2 for k in ("needle", "twolook") for n in calls[k])
    assert right >= 8  # of 10 questions on videos no split used


def test_uniform_quarter_looks_at_each_quarter_once_four_calls_within_the_budget():
    assert quarter_ranges(300, 556, 1280) == [(300, 364), (364, 428), (428, 492), (492, 556)]
    assert quarter_ranges(0, 20, 1280) == []  # quarters shorter than 8 frames: none
    count = _obs("How many circles appear between frame 300 and frame 556?")
    done: list = []
    for lo, hi in quarter_ranges(300, 556, 1280):
        p = plan(_obs(count.question, done), None, None)
        assert p.calls[A["uniform_quarter"]] == (P.UNIFORM, (lo, hi))
        done.append(P.ToolCall(P.UNIFORM, {"start_frame": lo, "end_frame": hi}))
        assert call_kind(done[-1], count) == "uniform_split"  # a quarter is a split range
    assert plan(_obs(count.question, done), None, None).calls[A["uniform_quarter"]] is None  # all four seen
    # after a half, the quarters inside it are still offered: a half, then four quarters = 5 calls
    half = P.ToolCall(P.UNIFORM, {"start_frame": 300, "end_frame": 428})
    assert plan(_obs(count.question, [half]), None, None).calls[A["uniform_quarter"]] == (
        P.UNIFORM,
        (300, 364),
    )
    assert WHERE_ACTIONS[-1] == "uniform_quarter"  # appended: the first seven keep their indices


def test_a_network_saved_with_seven_actions_loads_and_acts_as_before():
    """Weights saved before ``uniform_quarter`` and the run-length evidence (the first shipped toy:where) load
    into the eight-action network: the old actions' logits are unchanged and the new one is never chosen."""
    torch.manual_seed(0)
    cfg = PolicyNetConfig(embed_dim=8, actions="where")
    new = WhereNet(cfg)
    old = {k: v.clone() for k, v in new.state_dict().items()}
    old["action_head.0.weight"] = old["action_head.0.weight"][:, :-1].clone()  # 8 evidence features
    old["action_head.2.weight"] = old["action_head.2.weight"][:-1].clone()  # 7 actions
    old["action_head.2.bias"] = old["action_head.2.bias"][:-1].clone()
    loaded = WhereNet(cfg)
    loaded.load_state_dict(old)
    z = torch.randn(5, loaded.action_head[0].in_features)
    logits = loaded.action_head(z)
    z_old = z[:, :-1]
    ref = torch.nn.functional.linear(
        torch.tanh(torch.nn.functional.linear(z_old, old["action_head.0.weight"], new.action_head[0].bias)),
        old["action_head.2.weight"],
        old["action_head.2.bias"],
    )
    assert torch.allclose(logits[:, :7], ref, atol=1e-6)
    assert (logits[:, 7] < logits[:, :7].min(1).values - 20).all()
