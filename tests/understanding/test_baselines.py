"""Scripted baselines: uniform-K and CLIP top-K pick frames once and ask the answering policy once."""

from __future__ import annotations

import numpy as np
import pytest

from vidlab.understanding import protocol as P
from vidlab.understanding.agents import ClipAgent
from vidlab.understanding.messages import Message
from vidlab.understanding.policies.baselines import BaselineSpec, clip_indices, run_baseline, uniform_indices
from vidlab.understanding.policies.replay import ReplayPolicy


class Recorder:
    """A real policy that answers a fixed text and keeps the conversations it was shown."""

    name = "recorder"

    def __init__(self, reply: str = "<thinking>looks like B</thinking><answer>B</answer>"):
        self.reply = reply
        self.seen: list[list[Message]] = []

    def generate(self, messages, *, num_samples=1, temperature=0.0, max_new_tokens=512, seed=None):
        self.seen.append(messages)
        return [self.reply] * num_samples


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    from vidlab.video.synth import Event, render_synthetic

    events = [Event(60, 80, "square", "red", (0.5, 0.5), 0.6)]
    return render_synthetic(
        tmp_path_factory.mktemp("b") / "v.mp4", 100, fps=10, width=96, height=64, seed=2, events=events
    )


def test_spec_parsing():
    assert BaselineSpec.parse("uniform:32") == BaselineSpec("uniform", 32)
    assert BaselineSpec.parse("clip-8").label == "clip-8"
    for bad in ("uniform", "uniform:0", "random:4", "clip:x"):
        with pytest.raises(ValueError, match="uniform:K or clip:K"):
            BaselineSpec.parse(bad)


def test_uniform_k_shows_exactly_k_linspace_frames_without_tools(video):
    pol = Recorder()
    traj = run_baseline("uniform:8", pol, video, "What colour is the square?", ["blue", "red"])
    want = sorted({int(i) for i in np.linspace(0, 99, 8)})
    assert uniform_indices(100, 8) == want
    assert traj.frames_used == want and traj.num_tool_calls == 0 and traj.num_turns == 1
    assert traj.valid and traj.predicted == "B" and traj.predicted_reason
    (msgs,) = pol.seen
    system, user = msgs
    assert "<tools>" not in system.text and "uniform_sample" not in system.text
    assert [f.index for f in user.frames] == want
    labels = [p for p in user.content if isinstance(p, str) and p.startswith("\nframe ")]
    assert labels == [f"\nframe {i}: " for i in want]  # each label sits right before its frame
    assert "B. red" in user.text and P.FORMAT_HINT_FINAL in user.text
    assert all(max(f.image.shape[:2]) <= 640 for f in user.frames)


def test_uniform_k_larger_than_video_deduplicates(tmp_path):
    from vidlab.video.synth import render_synthetic

    v = render_synthetic(tmp_path / "short.mp4", 5, fps=5, width=32, height=32)
    traj = run_baseline("uniform:16", Recorder(), v, "Q?", ["a", "b"])
    assert traj.frames_used == [0, 1, 2, 3, 4]


def test_a_tool_call_or_a_non_letter_answer_is_wrong_with_a_reason(video):
    call = '<thinking>x</thinking><tool_call>{"name": "uniform_sample", "arguments": {"start_frame": 0, "end_frame": 50}}</tool_call>'
    traj = run_baseline("uniform:4", ReplayPolicy([call]), video, "Q?", ["a", "b"])
    assert not traj.valid and "offers no tools" in traj.invalid_reason and traj.predicted is None
    traj = run_baseline(
        "uniform:4", Recorder("<thinking>hm</thinking><answer>Dancing</answer>"), video, "Q?", ["a", "b"]
    )
    assert traj.valid and traj.predicted is None and "no option letter" in traj.predicted_reason
    traj = run_baseline(
        "uniform:4", Recorder("<thinking>hm</thinking><answer>E</answer>"), video, "Q?", ["a", "b"]
    )
    assert traj.predicted is None and "not an option" in traj.predicted_reason


@pytest.fixture
def one_thread():
    torch = pytest.importorskip("torch")
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny CLIP matmuls on a shared 2-core box
    yield
    torch.set_num_threads(n)


def test_clip_top_k_uses_the_question_as_the_query(video, tmp_path, one_thread):
    from vidlab.clip import TINY_MODEL, FrameIndex, load_model

    model = load_model(TINY_MODEL)
    index = FrameIndex.build(video, model, "every=1", cache_dir=tmp_path / "cache", progress=False)
    agent = ClipAgent(index, model, parity=True)
    question = "Where is the red square?"
    got = clip_indices(agent, question, 5)
    # the same ranking computed here from the cached embeddings and the question's text embedding
    frames = np.asarray(index.frame_indices)
    sims = np.asarray(index.embeddings, np.float32) @ np.asarray(model.embed_texts([question]), np.float32)[0]
    want = sorted(int(i) for i in frames[np.argsort(-sims, kind="stable")[:5]])
    assert got == want and got == sorted(got) and len(got) == 5
    pol = Recorder()
    traj = run_baseline("clip:5", pol, video, question, ["blue", "red"], clip_agent=agent)
    assert traj.frames_used == want and [f.index for f in pol.seen[0][1].frames] == want
    with pytest.raises(ValueError, match="needs a ClipAgent"):
        run_baseline("clip:5", pol, video, question, ["blue", "red"])
