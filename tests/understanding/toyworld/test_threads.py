"""The toy trainer's ``threads`` setting holds through every stage: training the toy CLIP keeps the caller's
torch thread count (it used to force 1, so ``threads=2`` silently ran single-threaded from the CLIP stage on)."""

import torch

from vidlab.understanding.toyworld.clip_train import ClipTrainConfig, train_clip
from vidlab.understanding.toyworld.world import WorldConfig, build_split, video_spec


def test_training_the_toy_clip_keeps_the_callers_thread_count(tmp_path):
    cfg = WorldConfig(min_frames=60, max_frames=80)
    split = build_split(tmp_path, "train", 1, cfg)
    videos = [(video_spec(s, cfg), split.root / f"videos/{s:06d}.mp4") for s in split.seeds]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        clip = train_clip(videos, ClipTrainConfig(steps=1, batch_size=8), progress=False)
        assert torch.get_num_threads() == 2
        assert clip.dim == 32
    finally:
        torch.set_num_threads(before)
