"""The training-free frame selectors on constructed similarity curves whose right selection is known, and as
baselines over a real frame index (only the frames shown are decoded)."""

from __future__ import annotations

import numpy as np
import pytest

from vidlab.understanding.policies.baselines import BaselineSpec, clip_indices, run_baseline, selector_indices
from vidlab.understanding.selectors import (
    AKSConfig,
    BoltConfig,
    SelectorError,
    TopKConfig,
    aks_allotment,
    aks_segments,
    aks_select,
    bolt_positions,
    bolt_select,
    bolt_weights,
    select,
    selector_config,
    topk_select,
)

FRAMES = np.arange(0, 1280, 10)  # 128 candidates, like clip_sample's parity grid


def bump(center: float, width: float, height: float, n: int = 128) -> np.ndarray:
    x = np.arange(n, dtype=float)
    return height * np.exp(-0.5 * ((x - center) / width) ** 2)


# ---------------------------------------------------------------------------------------------------- BOLT
def test_bolt_draws_frames_in_proportion_to_the_sharpened_mass_of_each_peak():
    sims = 0.2 + bump(30, 4, 0.3) + bump(90, 4, 0.15)  # a tall and a lower peak over a floor
    k = 40
    w = bolt_weights(sims, alpha=3.0)
    normed = (sims - sims.min()) / (sims.max() - sims.min())
    assert np.allclose(w, normed**3 / (normed**3).sum())  # min-max, power alpha, normalised
    pos = bolt_positions(sims, k, alpha=3.0)
    assert pos.size == k and (np.diff(pos) >= 0).all()
    left, right = (pos < 60).sum(), (pos >= 60).sum()
    mass_left = w[:60].sum()
    assert abs(left - k * mass_left) <= 1.0 and left + right == k  # ITS: the expected count, to one draw
    # the published alpha is what sharpens: the lower peak draws ~ (0.5 ** 3) of the tall one's frames
    assert right / left == pytest.approx(w[60:].sum() / w[:60].sum(), abs=0.1)
    flatter = bolt_positions(sims, k, alpha=1.0)
    assert (flatter >= 60).sum() > right  # a smaller alpha spreads frames towards the lower peak


def test_bolt_reads_the_cdf_at_the_published_quantiles():
    sims = np.linspace(0.0, 1.0, 11)  # weights ~ x**3 on 11 points
    cdf = np.cumsum(bolt_weights(sims, 3.0))
    want = np.searchsorted(cdf, np.linspace(1 / 8, 1 - 1 / 8, 8))
    assert bolt_positions(sims, 8, 3.0).tolist() == want.tolist()
    assert BoltConfig().alpha == 3.0  # sming256/BOLT scripts/frame_selection.sh: --power 3 (Video-MME, MLVU)


def test_bolt_shows_a_repeated_draw_once_and_a_flat_curve_uniformly():
    sims = np.zeros(128)
    sims[64] = 1.0  # all the mass on one frame
    assert bolt_select(FRAMES, sims, 16) == [640]
    flat = bolt_select(FRAMES, np.full(128, 0.3), 16)
    assert len(flat) == 16 and np.ptp(np.diff(flat)) <= 10  # evenly spread


# ----------------------------------------------------------------------------------------------------- AKS
def test_aks_split_covers_a_second_peak_that_top_k_misses():
    # a broad tall peak holds more than k good frames; a short second event is slightly less similar
    sims = 0.1 + bump(25, 10, 0.5) + bump(100, 1.5, 0.4)
    k = 8
    second = set(FRAMES[97:104].tolist())
    top = clip_top(sims, k)
    assert not second & set(top)  # plain top-k spends every frame on the first peak
    got = aks_select(FRAMES, sims, k)
    assert len(got) == k and second & set(got)  # coverage: the half with the second peak gets its share
    segs = aks_segments(sims, k)
    assert all(d >= 1 for _, _, d in segs)  # the root was split: top-k alone did not stand out enough (t1)


def clip_top(sims: np.ndarray, k: int) -> list[int]:
    return sorted(int(i) for i in FRAMES[np.argsort(-sims, kind="stable")[:k]])


def test_aks_keeps_the_whole_video_when_relevance_dominates():
    sims = np.zeros(128)
    sims[[10, 11, 12, 13, 70, 71, 72, 73]] = 1.0  # top-8 mean - mean = 1 - 1/16 > t1 = 0.8
    assert aks_segments(sims, 8) == [(0, 128, 0)]
    assert aks_select(FRAMES, sims, 8) == clip_top(sims, 8)


def test_aks_published_defaults_and_the_depth_cap():
    cfg = AKSConfig()
    assert (cfg.t1, cfg.t2, cfg.max_depth) == (0.8, -100.0, 5)  # ncTimTang/AKS frame_select.py defaults
    noise = np.random.default_rng(0).random(128)
    # the literal published code at k=16: every leaf at depth 5 gets int(16 / 32) = 0 frames
    literal = AKSConfig(cap_depth=False, allot="floor")
    assert aks_select(FRAMES, noise, 16, literal) == []
    assert len(aks_select(FRAMES, noise, 32, literal)) == 32  # at 32 frames (the paper's) it shows 32
    assert len(aks_select(FRAMES, noise, 16)) == 16  # capped at depth 4: 16 leaves, one frame each
    assert aks_select(FRAMES, noise, 32) == aks_select(FRAMES, noise, 32, literal)  # same at a power of two


def test_aks_allotment_adds_up_to_k():
    assert aks_allotment([4] * 16, 26, "floor") == [1] * 16
    got = aks_allotment([4] * 16, 26)
    assert sum(got) == 26 and set(got) == {1, 2}
    assert aks_allotment([1, 2, 2], 16) == [8, 4, 4]
    assert len(aks_select(FRAMES, np.random.default_rng(1).random(128), 26)) == 26


def test_aks_with_fewer_candidates_than_k_keeps_them_all():
    assert aks_select([3, 7, 9], [0.1, 0.5, 0.2], 8) == [3, 7, 9]


# --------------------------------------------------------------------------------------------------- top-k
def test_topk_suppression_spreads_picks_and_zero_is_plain_top_k():
    sims = 0.1 + bump(25, 10, 0.5) + bump(100, 1.5, 0.4)
    assert topk_select(FRAMES, sims, 8, TopKConfig(suppress=0.0)) == clip_top(sims, 8)
    got = topk_select(FRAMES, sims, 8)
    radius = 0.5 * 1280 / 8
    assert len(got) == 8 and min(np.diff(got)) >= radius
    assert any(970 <= f <= 1030 for f in got)  # the second peak's best frame survives suppression
    assert got[0] < 600  # and the first peak keeps its best
    # too strong a suppression for k: the best suppressed frames fill up to k
    assert len(topk_select(FRAMES, sims, 8, TopKConfig(suppress=4.0))) == 8


# ------------------------------------------------------------------------------------------------ contract
def test_bad_inputs_are_typed_errors_naming_the_input():
    with pytest.raises(SelectorError, match="same length"):
        select("bolt", [1, 2], [0.1], 1)
    with pytest.raises(SelectorError, match="no candidate"):
        select("aks", [], [], 4)
    with pytest.raises(SelectorError, match="temporal order"):
        select("topk", [5, 3], [0.1, 0.2], 1)
    with pytest.raises(SelectorError, match="finite"):
        select("bolt", [1, 2], [0.1, np.nan], 1)
    with pytest.raises(SelectorError, match="no parameter 'beta'"):
        selector_config("bolt", {"beta": "1"})
    with pytest.raises(SelectorError, match="alpha must lie"):
        selector_config("bolt", {"alpha": "0"})
    with pytest.raises(SelectorError, match="max_depth must be an integer"):
        selector_config("aks", {"max_depth": "2.5"})
    with pytest.raises(SelectorError, match="allot must be one of"):
        selector_config("aks", {"allot": "ceil"})
    assert selector_config("aks", {"cap_depth": "false", "t1": "0.6"}) == AKSConfig(t1=0.6, cap_depth=False)


def test_spec_parsing_of_selectors_and_their_parameters():
    assert BaselineSpec.parse("bolt:16") == BaselineSpec("bolt", 16)
    assert BaselineSpec.parse("AKS-32").label == "aks-32"
    spec = BaselineSpec.parse("aks:32:t1=0.6;max_depth=4")
    assert spec.params == (("max_depth", "4"), ("t1", "0.6")) and spec.label == "aks-32_max_depth=4_t1=0.6"
    assert spec.selector_config() == AKSConfig(t1=0.6, max_depth=4)
    assert BaselineSpec.parse("bolt:8:alpha=2.5").selector_config() == BoltConfig(alpha=2.5)
    assert BaselineSpec.parse("topk:4").needs_clip and not BaselineSpec.parse("uniform:4").needs_clip
    for bad, why in [
        ("bolt:16:beta=1", "no parameter"),
        ("uniform:4:x=1", "takes no parameters"),
        ("bolt:16:alpha", "not name=value"),
        ("aks:0", "K >= 1"),
        ("random:4", "topk:K, aks:K or bolt:K"),
    ]:
        with pytest.raises(ValueError, match=why):
            BaselineSpec.parse(bad)


# --------------------------------------------------------------------------------- over a real frame index
class Recorder:
    name = "recorder"

    def __init__(self):
        self.seen = []

    def generate(self, messages, *, num_samples=1, temperature=0.0, max_new_tokens=512, seed=None):
        self.seen.append(messages)
        return ["<thinking>x</thinking><answer>B</answer>"] * num_samples


class CountingReader:
    """A real reader that records which frames were decoded."""

    def __init__(self, reader):
        self._r = reader
        self.decoded: list[int] = []

    def __getattr__(self, name):
        return getattr(self._r, name)

    def get_frames(self, indices, size=None):
        self.decoded.extend(int(i) for i in indices)
        return self._r.get_frames(indices, size=size)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from vidlab.clip import TINY_MODEL, FrameIndex, load_model
    from vidlab.video import open_video
    from vidlab.video.synth import Event, render_synthetic

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    d = tmp_path_factory.mktemp("sel")
    events = [
        Event(30, 40, "square", "red", (0.5, 0.5), 0.6),
        Event(150, 160, "circle", "blue", (0.3, 0.3), 0.5),
    ]
    video = render_synthetic(d / "v.mp4", 200, fps=10, width=64, height=48, seed=3, events=events)
    model = load_model(TINY_MODEL)
    index = FrameIndex.build(video, model, "every=1", cache_dir=d / "cache", progress=False)
    yield video, model, index, open_video
    torch.set_num_threads(n)


@pytest.mark.parametrize("spec", ["topk:6", "aks:6", "bolt:6", "bolt:6:alpha=2.5", "aks:8:cap_depth=false"])
def test_selectors_run_as_baselines_and_decode_only_the_frames_they_show(indexed, spec):
    from vidlab.understanding.agents import ClipAgent

    video, model, index, open_video = indexed
    reader = CountingReader(open_video(video))
    agent = ClipAgent(index, model, parity=True, reader=reader)
    question = "What colour is the circle?"
    bs = BaselineSpec.parse(spec)
    frames, sims = agent.scores(0, agent.total_frames, question)
    want = select(bs.method, frames, sims, bs.k, dict(bs.params))
    assert selector_indices(agent, question, bs) == want and want == sorted(want)
    assert reader.decoded == []  # the curve comes from the index: nothing decoded to score
    pol = Recorder()
    traj = run_baseline(spec, pol, video, question, ["red", "blue"], clip_agent=agent)
    assert traj.frames_used == want and traj.num_tool_calls == 0 and traj.valid and traj.predicted == "B"
    assert [f.index for f in pol.seen[0][1].frames] == want
    assert sorted(reader.decoded) == want  # exactly the frames shown were decoded, once
    assert traj.end_reason == f"answered ({bs.label})"
    with pytest.raises(ValueError, match="needs a ClipAgent"):
        run_baseline(spec, pol, video, question, ["red", "blue"])


def test_topk_without_suppression_is_the_clip_baseline(indexed):
    from vidlab.understanding.agents import ClipAgent

    video, model, index, _ = indexed
    agent = ClipAgent(index, model, parity=True)
    q = "Where is the red square?"
    assert selector_indices(agent, q, BaselineSpec.parse("topk:5:suppress=0")) == clip_indices(agent, q, 5)
