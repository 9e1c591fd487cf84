"""The Hugging Face VLM policy with tiny random Qwen2.5-VL / Qwen3-VL models and processors built offline."""

from __future__ import annotations

import numpy as np
import pytest

from vidlab.understanding.messages import Frame, Message
from vidlab.understanding.policies import PolicyError, load_policy
from vidlab.understanding.policies.hf import HFPolicy, to_hf_messages
from vidlab.understanding.policies.tiny_qwen import KINDS, build_tiny_qwen_vl, save_tiny_qwen_vl

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny matmuls on a shared 2-core box are 10x faster without intra-op threads fighting each other."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module", params=KINDS)
def policy(request) -> HFPolicy:
    model, processor = build_tiny_qwen_vl(request.param, seed=0)
    return HFPolicy(model, processor, name=request.param)


def img(seed: int, h: int = 48, w: int = 80) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def conversation(seed: int = 0) -> list[Message]:
    return [
        Message("system", ["You answer questions about videos."]),
        Message(
            "user",
            [
                "Question: which?\n",
                "\nframe 0: ",
                Frame(img(seed), 0, 0.0),
                "\nframe 9: ",
                Frame(img(seed + 1, 360, 640), 9, 0.375),
            ],
        ),
    ]


def test_prompt_interleaves_frame_labels_and_image_tokens(policy):
    text = policy.prompt_text(conversation())
    assert "frame 0: <|vision_start|><|image_pad|><|vision_end|>" in text
    assert "frame 9: <|vision_start|><|image_pad|><|vision_end|>" in text
    assert text.index("frame 0:") < text.index("frame 9:") and text.endswith("<|im_start|>assistant\n")
    hf, images = to_hf_messages(conversation())
    assert [p["type"] for p in hf[1]["content"]] == ["text", "text", "image", "text", "image"]
    assert [im.size for im in images] == [(80, 48), (640, 360)]  # PIL size is (w, h), order kept


def test_processor_expands_one_placeholder_per_frame(policy):
    inputs = policy.encode(conversation())
    grid = inputs["image_grid_thw"]
    assert grid.shape == (2, 3)
    image_id = policy.processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    merge = policy.processor.image_processor.merge_size
    assert int((inputs["input_ids"] == image_id).sum()) == int(grid.prod(-1).sum()) // merge**2


def test_generate_greedy_is_deterministic_and_samples_are_seeded(policy):
    a = policy.generate(conversation(), max_new_tokens=6)
    b = policy.generate(conversation(), max_new_tokens=6)
    assert a == b and len(a) == 1 and isinstance(a[0], str)
    s1 = policy.generate(conversation(), num_samples=3, temperature=1.0, max_new_tokens=6, seed=11)
    s2 = policy.generate(conversation(), num_samples=3, temperature=1.0, max_new_tokens=6, seed=11)
    s3 = policy.generate(conversation(), num_samples=3, temperature=1.0, max_new_tokens=6, seed=12)
    assert s1 == s2 and len(s1) == 3
    assert s1 != s3  # a 270-token vocabulary at temperature 1: different seeds draw different text
    torch.manual_seed(0)
    policy.generate(conversation(), temperature=1.0, max_new_tokens=2, seed=3)
    after = torch.rand(1)
    torch.manual_seed(0)
    assert torch.rand(1) == after  # the caller's RNG stream is left alone by a seeded call


def test_pixels_reach_the_model(policy):
    """Different frames give different next-token logits: the images are really fed, not just the text."""
    logits = []
    for seed in (0, 5):
        inputs = policy.encode(conversation(seed))
        with torch.inference_mode():
            logits.append(policy.model(**inputs).logits[0, -1])
    assert not torch.allclose(logits[0], logits[1])


def test_greedy_multiple_samples_are_copies(policy):
    out = policy.generate(conversation(), num_samples=3, temperature=0.0, max_new_tokens=4)
    assert len(out) == 3 and len(set(out)) == 1


def test_saved_checkpoint_loads_through_auto_classes(tmp_path):
    for kind in KINDS:
        d = save_tiny_qwen_vl(tmp_path / kind, kind, seed=0)
        loaded = load_policy(f"hf:{d}", dtype="float32")
        model, processor = build_tiny_qwen_vl(kind, seed=0)
        fresh = HFPolicy(model, processor)
        assert type(loaded.model).__name__ == type(model).__name__
        assert loaded.generate(conversation(), max_new_tokens=5) == fresh.generate(
            conversation(), max_new_tokens=5
        )


def test_pixel_budget_override(tmp_path):
    d = save_tiny_qwen_vl(tmp_path / "m", "qwen2_5_vl")
    small = load_policy(f"hf:{d}")
    big = load_policy(f"hf:{d}", max_pixels=28 * 28 * 64)
    n_small = int(small.encode(conversation())["image_grid_thw"].prod(-1).sum())
    n_big = int(big.encode(conversation())["image_grid_thw"].prod(-1).sum())
    assert n_big > n_small


def test_bad_inputs_are_typed_errors(tmp_path, policy):
    with pytest.raises(PolicyError, match="is not a folder"):  # checked before transformers is touched
        load_policy(f"hf:{tmp_path / 'nothing-here'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PolicyError, match="cannot load"):
        load_policy(f"hf:{tmp_path / 'empty'}")
    bad = [Message("user", ["x", Frame(np.zeros((4, 4), np.uint8), 0, 0.0)])]
    with pytest.raises(ValueError, match="uint8"):
        policy.generate(bad)
    with pytest.raises(ValueError, match="num_samples"):
        policy.generate(conversation(), num_samples=0)


def test_runs_an_episode_to_its_end(tmp_path):
    """A random model emits junk: the episode ends after one turn as invalid, with the reason kept."""
    from vidlab.understanding.env import EpisodeConfig, run_episode
    from vidlab.video.synth import render_synthetic

    video = render_synthetic(tmp_path / "v.mp4", 32, fps=8, width=64, height=48, seed=0)
    pol = load_policy("hf-tiny:qwen3_vl")
    traj = run_episode(pol, video, "Which?", ["a", "b"], EpisodeConfig(max_new_tokens=8))
    assert traj.num_turns == 1 and not traj.valid and traj.invalid_reason
    assert traj.predicted is None and len(traj.frames_used) == 16
