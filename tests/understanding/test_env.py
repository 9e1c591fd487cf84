"""The episode environment: turns, calls, frames used, dedup rules, end conditions, one loop for every use."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vidlab.understanding import protocol as P
from vidlab.understanding.env import Episode, EpisodeConfig, run_episode
from vidlab.understanding.policies.replay import ReplayPolicy
from vidlab.understanding.reward import compute_score

TOTAL, FPS = 200, 10.0
OPTIONS = ["red", "green", "blue", "white"]


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    from vidlab.video.synth import render_synthetic

    return str(
        render_synthetic(
            tmp_path_factory.mktemp("v") / "ep.mp4", TOTAL, fps=FPS, width=320, height=240, seed=5
        )
    )


def uni(s, e, thought="look closer"):
    args = {"start_frame": s, "end_frame": e}
    return f"<thinking>{thought}</thinking><tool_call>{json.dumps({'name': 'uniform_sample', 'arguments': args})}</tool_call>"


def clip(s, e, prompt):
    args = {"start_frame": s, "end_frame": e, "prompt": prompt}
    return f"<thinking>search</thinking><tool_call>{json.dumps({'name': 'clip_sample', 'arguments': args})}</tool_call>"


def ans(a="B"):
    return f"<thinking>I can tell now</thinking><answer>{a}</answer>"


def ref(s, e, n):
    return sorted(set(np.linspace(s, e - 1, n, dtype=int).tolist()))


def test_direct_answer(video):
    t = run_episode(ReplayPolicy([ans("B")]), video, "Which colour?", OPTIONS)
    assert t.valid and t.answer == "B" and t.predicted == "B" and t.end_reason == "answered"
    assert t.num_tool_calls == 0 and t.frames_used == ref(0, TOTAL, 16) and t.num_frames_used == 16
    assert [m.role for m in t.messages] == ["system", "user", "assistant"]
    assert len(t.messages[1].frames) == 16 and t.messages[1].frames[0].image.shape == (
        360,
        640,
        3,
    )  # reference resize
    assert t.total_frames == TOTAL and t.fps == pytest.approx(FPS)


def test_calls_observations_and_frames_used(video):
    pol = ReplayPolicy([uni(20, 60), uni(100, 140), ans("C")])
    t = run_episode(pol, video, "Which colour?", OPTIONS)
    assert t.valid and t.predicted == "C" and t.num_tool_calls == 2 and t.num_turns == 3
    assert [c["frames"] for c in t.tool_calls] == [ref(20, 60, 8), ref(100, 140, 8)]
    assert t.tool_calls[0]["timestamps"][0] == pytest.approx(2.0)
    assert t.frames_used == sorted(set(ref(0, TOTAL, 16)) | set(ref(20, 60, 8)) | set(ref(100, 140, 8)))
    obs = t.messages[3]
    assert obs.role == "user" and [f.index for f in obs.frames] == ref(20, 60, 8)
    assert obs.text.startswith(P.FORMAT_HINT) and "frame 20: " in obs.text
    # assistant_text is the reward's solution_str: same call count, exact frames via extra info
    r = compute_score(
        "toy",
        t.assistant_text,
        "C",
        {"classification": "active", "options": OPTIONS, **t.reward_extra_info()},
    )
    assert (
        r["score"] == pytest.approx(1.55)
        and r["num_tool_calls"] == 2
        and r["frames_used"] == t.num_frames_used
    )


def test_no_more_calls_after_five_and_sixth_call_ends(video):
    calls = [uni(10 * i, 10 * i + 50) for i in range(6)]
    pol = ReplayPolicy(calls)
    t = run_episode(pol, video, "Which colour?", OPTIONS)
    assert t.num_tool_calls == 5 and not t.valid and t.answer is None
    assert "after the call budget (5)" in t.invalid_reason and t.predicted is None
    finals = [m for m in t.messages if m.role == "user"][1:]
    assert [P.FORMAT_HINT_FINAL in m.text for m in finals] == [False] * 4 + [True]
    assert "called the tool 5 times" in finals[-1].text
    assert len(t.frames_used) <= 16 + 5 * 8
    # the 5-call trajectory that then answers is valid
    t2 = run_episode(ReplayPolicy(calls[:5] + [ans("A")]), video, "Which colour?", OPTIONS)
    assert t2.valid and t2.num_tool_calls == 5 and t2.predicted == "A"


def test_turn_limit_stops_a_model_that_never_stops_calling(video):
    endless = ReplayPolicy([uni(i, i + 20) for i in range(0, 180, 3)])
    cfg = EpisodeConfig(max_calls=100, max_turns=4)
    t = run_episode(endless, video, "q", OPTIONS, config=cfg)
    assert (
        not t.valid and "turn limit (4)" in t.invalid_reason and t.num_tool_calls == 3 and endless.calls == 4
    )


@pytest.mark.parametrize(
    "turns, reason",
    [
        ([uni(20, 60), uni(21, 59)], "repeated uniform_sample range"),
        (["I think it is B"], "missing <thinking>"),
        (['<thinking>x</thinking><tool_call>{"name": "uniform_sample", "arguments": {start: 1}}</tool_call>'], "not valid JSON"),
        ([uni(20, 27)], "7 frames, fewer than 8"),
        ([uni(195, 300)], "5 frames, fewer than 8"),  # end clipped to the video first
        ([uni(TOTAL, TOTAL + 50)], "outside the video"),
        ([uni(60, 20)], "must be < end_frame"),
        ([clip(0, 100, "red")], "clip_sample is not offered"),
    ],
)  # fmt: skip
def test_episode_end_conditions(video, turns, reason):
    t = run_episode(ReplayPolicy(turns), video, "q", OPTIONS)
    assert not t.valid and reason in t.invalid_reason and t.answer is None
    assert compute_score("x", t.assistant_text, "B", {"classification": "adaptive"})["score"] == 0.0


def test_duplicates_allowed_when_configured_but_reward_still_fails_them(video):
    cfg = EpisodeConfig(end_on_duplicate=False)
    t = run_episode(ReplayPolicy([uni(20, 60), uni(20, 60), ans("B")]), video, "q", OPTIONS, config=cfg)
    assert t.num_tool_calls == 2 and not t.valid and "repeated uniform_sample" in t.invalid_reason
    assert compute_score("x", t.assistant_text, "B", {})["score"] == 0.0


def test_answer_that_is_not_an_option_counts_as_wrong(video):
    t = run_episode(ReplayPolicy([ans("Probably the E one")]), video, "Which colour?", OPTIONS)
    assert t.valid and t.predicted is None and "not an option" in t.predicted_reason
    oe = run_episode(ReplayPolicy([ans("a red ball")]), video, "What is there?")
    assert (
        oe.valid
        and oe.predicted is None
        and oe.answer == "a red ball"
        and oe.predicted_reason == "open-ended question"
    )


def test_clip_agent_in_episode_and_prompt_dedup(video):
    from vidlab.clip import TINY_MODEL, load_model
    from vidlab.understanding.agents import ClipAgent, UniformAgent
    from vidlab.video import open_video

    reader = open_video(video)
    model = load_model(TINY_MODEL)
    agents = [UniformAgent(reader), ClipAgent(reader, model)]
    t = run_episode(
        ReplayPolicy([clip(0, 60, "red ball"), clip(0, 40, "blue cube"), ans("A")]),
        None,
        "q",
        OPTIONS,
        agents=agents,
    )
    assert t.valid and [c["name"] for c in t.tool_calls] == ["clip_sample", "clip_sample"]
    got = t.tool_calls[0]["frames"]
    assert len(got) == 4 and got == sorted(got) and set(got) <= set(ref(0, 60, 60))
    assert got == agents[1].indices(0, 60, "red ball")
    assert "clip_sample" in t.messages[0].text  # offered once an agent exists
    dup = run_episode(
        ReplayPolicy([clip(0, 30, "red ball"), clip(50, 150, "red ball")]),
        reader,
        "q",
        OPTIONS,
        agents=agents,
    )
    assert not dup.valid and "repeated clip_sample prompt" in dup.invalid_reason


def test_step_api_for_trainers(video):
    ep = Episode(video, "Which colour?", OPTIONS)
    msgs = ep.reset()
    assert len(msgs) == 2 and len(msgs[1].frames) == 16
    r = ep.step(uni(0, 80))
    assert not r.done and r.observation is not None and len(r.observation.frames) == 8
    r = ep.step(ans("D"))
    assert r.done and r.observation is None and r.reason == "answered"
    with pytest.raises(RuntimeError, match="already ended"):
        ep.step(ans("D"))
    t = ep.trajectory()
    assert t.valid and t.predicted == "D" and json.dumps(t.to_dict())
    ep.reset()  # restart: fresh state
    assert ep.trajectory().assistant_turns == [] and not ep.done


def test_bad_inputs(video, tmp_path):
    from vidlab.video import VideoReadError

    with pytest.raises(ValueError, match="options is an empty list"):
        Episode(video, "q", [])
    bad = tmp_path / "broken.mp4"
    bad.write_text("not a video")
    with pytest.raises(VideoReadError) as e:
        run_episode(ReplayPolicy([ans()]), str(bad), "q", OPTIONS)
    assert "broken.mp4" in str(e.value)
    with pytest.raises(ValueError, match="unknown agent"):
        Episode(video, "q", OPTIONS, agents={"zoom": object()})


_PIECES = [uni(0, 50), uni(10, 90), uni(199, 300), uni(20, 24), clip(0, 9, "x"), ans("A"), ans("Z"), "<thinking>", "</answer>",
           '<tool_call>{"name": "uniform_sample"}</tool_call>', "noise", ""]  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=30)), min_size=1, max_size=8))
def test_any_sequence_of_turns_ends_cleanly(video, turns):
    t = run_episode(ReplayPolicy(turns, cycle=True), video, "q", OPTIONS)
    assert t.end_reason and t.num_turns <= 6 and t.num_tool_calls <= 5
    assert t.valid == (t.invalid_reason is None)
    assert t.valid == (t.answer is not None)
    assert set(t.frames_used) >= set(t.initial_frames) and len(t.frames_used) <= 56
    r = compute_score("x", t.assistant_text, "A", {"classification": "adaptive", "options": OPTIONS})
    assert (r["format"] > 0) == t.valid
