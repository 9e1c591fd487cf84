"""Reference-parity mode for the authors' checkpoints: frames at exactly 640x360, and the last tool call of a bad turn."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vidlab.config import ConfigError, resolve
from vidlab.understanding.agents import UniformAgent, decode_frames, frame_size
from vidlab.understanding.env import EpisodeConfig, run_episode
from vidlab.understanding.policies.replay import ReplayPolicy
from vidlab.understanding.reward import compute_score

TOTAL, FPS = 120, 10.0


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    from vidlab.video.synth import render_synthetic

    d = tmp_path_factory.mktemp("v")
    return {
        "small": str(render_synthetic(d / "small.mp4", TOTAL, fps=FPS, width=320, height=240, seed=7)),
        "wide": str(render_synthetic(d / "wide.mp4", 24, fps=FPS, width=960, height=256, seed=8)),
    }


def test_reference_resize_is_exactly_640x360_stretching_and_upscaling(videos):
    """The authors resize every frame to 640x360: a 320x240 video is upscaled and stretched to 16:9."""
    from PIL import Image

    from vidlab.video import open_video

    for name, native in (("small", (320, 240)), ("wide", (960, 256))):
        reader = open_video(videos[name])
        ref = decode_frames(reader, [3, 9])
        assert [f.image.shape for f in ref] == [(360, 640, 3)] * 2
        full = reader.get_frames([3, 9])
        assert full.shape[1:3] == native[::-1]
        expected = np.asarray(
            Image.fromarray(full[0]).resize((640, 360))
        )  # the authors' call, PIL's default filter
        assert np.array_equal(ref[0].image, expected)
        fit = decode_frames(reader, [3], resize="fit")[0].image
        assert fit.shape[:2] == frame_size(*native, resize="fit")[::-1]
    assert frame_size(320, 240, resize="fit") == (320, 240)  # fit never upscales
    assert frame_size(960, 256, resize="fit") == (640, 171)  # ... and keeps aspect


def test_episode_default_is_reference_and_fit_is_a_setting(videos):
    policy = ReplayPolicy(["<thinking>seen</thinking><answer>A</answer>"])
    t = run_episode(policy, videos["small"], "Q?", ["x", "y"])
    assert t.messages[1].frames[0].image.shape == (360, 640, 3)
    cfg = resolve(EpisodeConfig, None, ["frame_resize=fit"])
    t = run_episode(
        ReplayPolicy(["<thinking>seen</thinking><answer>A</answer>"]), videos["small"], "Q?", ["x", "y"], cfg
    )
    assert t.messages[1].frames[0].image.shape == (240, 320, 3)
    with pytest.raises(
        ConfigError, match="frame_resize: expected one of \\['reference', 'fit'\\], got 'stretch'"
    ):
        resolve(EpisodeConfig, None, ["frame_resize=stretch"])


def _call(s, e):
    return json.dumps({"name": "uniform_sample", "arguments": {"start_frame": s, "end_frame": e}})


BAD_TURNS = [
    # two tool calls in one turn: the last one is the one the authors' loop runs
    f"<thinking>try twice</thinking><tool_call>{_call(0, 40)}</tool_call><tool_call>{_call(40, 100)}</tool_call>",
    # no <thinking> at all
    f"<tool_call>{_call(10, 90)}</tool_call>",
]


@pytest.mark.parametrize("bad", BAD_TURNS)
def test_bad_turn_ends_by_default(videos, bad):
    t = run_episode(
        ReplayPolicy([bad, "<thinking>ok</thinking><answer>B</answer>"]), videos["small"], "Q?", ["x", "y"]
    )
    assert t.num_tool_calls == 0 and t.answer is None and not t.valid and t.end_reason.startswith("turn 1:")


@pytest.mark.parametrize("bad", BAD_TURNS)
def test_last_tool_call_option_executes_it(videos, bad):
    cfg = EpisodeConfig(on_bad_turn="last_tool_call")
    t = run_episode(
        ReplayPolicy([bad, "<thinking>ok</thinking><answer>B</answer>"]),
        videos["small"],
        "Q?",
        ["x", "y"],
        cfg,
    )
    last = json.loads(bad.rsplit("<tool_call>", 1)[1].split("</tool_call>")[0])["arguments"]
    assert t.num_tool_calls == 1 and t.tool_calls[0]["arguments"] == last
    assert t.answer == "B" and t.predicted == "B" and t.end_reason == "answered"
    assert not t.valid and "its last <tool_call> was executed" in t.invalid_reason
    # the reward still scores a trajectory that broke the format 0
    assert compute_score("x", t.assistant_text, "B", {"options": ["x", "y"]})["score"] == 0.0


def test_last_tool_call_needs_a_valid_call(videos):
    """A bad turn whose last <tool_call> is itself invalid still ends the episode."""
    cfg = EpisodeConfig(on_bad_turn="last_tool_call")
    bad = f"<thinking>a</thinking><tool_call>{_call(0, 40)}</tool_call><tool_call>not json</tool_call>"
    t = run_episode(
        ReplayPolicy([bad, "<thinking>ok</thinking><answer>B</answer>"]),
        videos["small"],
        "Q?",
        ["x", "y"],
        cfg,
    )
    assert t.num_tool_calls == 0 and t.answer is None


def test_uniform_agent_resize_setting(videos):
    from vidlab.video import open_video

    r = open_video(videos["wide"])
    assert UniformAgent(r).sample(0, 24)[0].image.shape == (360, 640, 3)
    assert UniformAgent(r, resize="fit").sample(0, 24)[0].image.shape == (171, 640, 3)
