"""Training the toy-world Wan: steps change the weights, the folder loads in `vidlab generate`, a kill resumes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

# the tiny config (conftest.py, fixture tiny_train) trained from scratch: its VAE too, and one more step
FROM_SCRATCH = ("vae_steps=2", "vae_batch=1", "vae_dec_steps=2", "dit_steps=3")
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def tiny(tiny_train):
    """``cfg(ckpt_dir, *overrides)`` and ``words`` of the tiny config trained from scratch."""
    from types import SimpleNamespace

    return SimpleNamespace(
        cfg=lambda ck, *extra: tiny_train.cfg(ck, *FROM_SCRATCH, *extra),
        words=(*tiny_train.words, *FROM_SCRATCH),
    )


def _safetensors(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(path)


@pytest.mark.slow
def test_training_changes_weights_and_the_folder_generates_with_vidlab_generate(tiny, tmp_path):
    from transformers import AutoTokenizer

    from vidlab.generation.cli import generate_main
    from vidlab.generation.toyworld.model import build_transformer
    from vidlab.generation.toyworld.tokenizer import build_word_tokenizer
    from vidlab.generation.toyworld.train import train

    cfg = tiny.cfg(tmp_path / "ckpt")
    out = train(cfg, tmp_path / "pipe", progress=False)
    assert (out / "model_index.json").is_file()
    trained = _safetensors(out / "transformer" / "diffusion_pytorch_model.safetensors")
    torch.manual_seed(cfg.seed + 1)
    from vidlab.generation.toyworld.model import build_text_encoder

    build_text_encoder(cfg.model, len(build_word_tokenizer()))
    init = build_transformer(cfg.model).state_dict()
    changed = [k for k in init if not torch.equal(init[k], trained[k])]
    assert len(changed) > len(init) // 2, f"only {len(changed)}/{len(init)} transformer tensors changed"
    vae_cfg = json.loads((out / "vae" / "config.json").read_text())
    assert len(vae_cfg["latents_mean"]) == 4 and all(s > 0 for s in vae_cfg["latents_std"])
    assert vae_cfg["scale_factor_spatial"] == 4 and vae_cfg["scale_factor_temporal"] == 4

    prompt = "a red circle to the left of a blue square"
    tok = AutoTokenizer.from_pretrained(out / "tokenizer")
    assert tok(prompt).input_ids == build_word_tokenizer()(prompt).input_ids
    # the prompt length it was trained with travels with it: vidlab encodes prompts at that length
    assert (
        tok.model_max_length == cfg.model.text_len == 16
    )  # the shipped model's (the other test trains at 12)

    gen = tmp_path / "gen"
    argv = [prompt, "--model", str(out), "--out", str(gen), "--steps", "2", "--frames", "5"]
    assert generate_main([*argv, "--height", "32", "--width", "32", "--attention-maps"]) == 0
    res = json.loads((gen / "result.json").read_text())
    assert res["subjects"] == ["red circle", "blue square"]
    assert res["token_indices"] == [[1, 2], [8, 9]]
    assert (gen / "video.mp4").stat().st_size > 0


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_weights(tiny, tmp_path, capsys):
    """The kill is a real SIGKILL of a real ``python -m vidlab.generation.toyworld.cli`` process; the runs after it
    call the same command in this process (its entry point with its error handling), which saves six
    interpreter start-ups of torch + diffusers."""

    def killed_run(out: Path, ckpt: Path, *extra: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "vidlab.generation.toyworld.cli", "--out", str(out), "--no-progress"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        return subprocess.run(
            [*cmd, *tiny.words, f"ckpt_dir={ckpt}", *extra],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    def run(out: Path, ckpt: Path, *extra: str) -> subprocess.CompletedProcess:
        from vidlab.errors import run_command
        from vidlab.generation.toyworld.cli import train_main

        capsys.readouterr()
        argv = ["--out", str(out), "--no-progress", *tiny.words, f"ckpt_dir={ckpt}", *extra]
        rc = run_command("vidlab train-gen-toyworld", train_main, argv)
        cap = capsys.readouterr()
        return subprocess.CompletedProcess(argv, rc, cap.out, cap.err)

    killed = killed_run(tmp_path / "a", tmp_path / "ca", "kill_after=dit:2")
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert not (tmp_path / "a").exists()
    from vidlab.io import load_checkpoint

    assert load_checkpoint(tmp_path / "ca" / "dit.safetensors")["step"] == 2
    resumed = run(tmp_path / "a", tmp_path / "ca")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    straight = run(tmp_path / "b", tmp_path / "cb")
    assert straight.returncode == 0, straight.stderr[-2000:]
    for part in (
        "transformer/diffusion_pytorch_model.safetensors",
        "vae/diffusion_pytorch_model.safetensors",
    ):
        a, b = _safetensors(tmp_path / "a" / part), _safetensors(tmp_path / "b" / part)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), part
    assert (tmp_path / "a-training.png").stat().st_size > 0
    # a longer run continues a shorter one exactly (constant learning rate): 3 steps, then 2 more == 5 steps
    longer = run(tmp_path / "d", tmp_path / "ca", "dit_steps=5")
    assert longer.returncode == 0, longer.stderr[-2000:]
    five = run(tmp_path / "e", tmp_path / "ce", "dit_steps=5")
    assert five.returncode == 0, five.stderr[-2000:]
    part = "transformer/diffusion_pytorch_model.safetensors"
    a, b = _safetensors(tmp_path / "d" / part), _safetensors(tmp_path / "e" / part)
    assert all(torch.equal(a[k], b[k]) for k in a)
    c = _safetensors(tmp_path / "a" / part)
    assert not all(torch.equal(a[k], c[k]) for k in a)  # and the extra steps did change the weights
    # a checkpoint folder of another config is refused with the setting that differs
    other = run(tmp_path / "c", tmp_path / "ca", "dit_lr=0.01")
    assert other.returncode != 0 and "dit_lr" in other.stderr
    # a checkpoint written by torch.save (pickle) is refused, never unpickled
    torch.save({"step": 1}, tmp_path / "cb" / "vae.safetensors")
    pickled = run(tmp_path / "f", tmp_path / "cb")
    assert pickled.returncode == 2 and "not a safetensors checkpoint" in pickled.stderr


def test_a_text_length_shorter_than_the_worlds_longest_caption_is_refused_in_one_line(tiny, tmp_path):
    from vidlab.errors import UserError
    from vidlab.generation.toyworld.tokenizer import build_word_tokenizer
    from vidlab.generation.toyworld.train import LONGEST_CAPTION_TOKENS, check_config
    from vidlab.generation.toyworld.world import KINDS, all_captions

    tok = build_word_tokenizer()
    longest = max(len(tok(c).input_ids) for k in KINDS for c in all_captions(k))
    assert longest == LONGEST_CAPTION_TOKENS
    check_config(tiny.cfg(tmp_path, f"model.text_len={longest}"))
    check_config(tiny.cfg(tmp_path, "model.text_len=512"))
    for bad in (10, 513):
        with pytest.raises(UserError, match=f"text_len={bad} must lie between") as e:
            check_config(tiny.cfg(tmp_path, f"model.text_len={bad}"))
        assert "\n" not in str(e.value)


@pytest.mark.slow
def test_a_frozen_text_encoder_stays_at_its_init_and_an_annealing_phase_resumes_only_at_its_own_rate(
    tiny,
    tmp_path,
):
    """The two transformer-stage options tried on the shape problem (docs/results/toyworld-wan-training.md):
    ``train_text_encoder=false`` keeps UMT5 at its seeded initialisation; ``dit_anneal_steps`` more steps at
    ``dit_anneal_lr`` after ``dit_steps``; the shorter text length travels with the folder."""
    from vidlab.generation.toyworld.model import build_text_encoder
    from vidlab.generation.toyworld.tokenizer import build_word_tokenizer
    from vidlab.generation.toyworld.train import TrainStateError, train

    extra = ("model.text_len=12", "train_text_encoder=false", "dit_steps=2", "dit_anneal_steps=1")
    out = train(tiny.cfg(tmp_path / "ck", *extra, "sample_guidance=6"), tmp_path / "pipe", progress=False)
    cfg = tiny.cfg(tmp_path / "ck", *extra)
    torch.manual_seed(cfg.seed + 1)
    init = build_text_encoder(cfg.model, len(build_word_tokenizer())).state_dict()
    saved = _safetensors(out / "text_encoder" / "model.safetensors")
    assert all(torch.equal(init[k], saved[k]) for k in saved), "the frozen text encoder changed"
    trained = _safetensors(out / "transformer" / "diffusion_pytorch_model.safetensors")
    assert trained  # the transformer did train (checked in detail above)
    meta = json.loads((out / "toyworld.json").read_text())
    assert len(meta["dit_losses"]) == 3 and "frozen" in meta["text_encoder"]
    # the sampling settings travel with the folder, and the benchmark (and the gates) sample at them
    from vidlab.generation.toyworld.evaluate import SamplingConfig

    assert meta["generate"] == {"height": 32, "width": 32, "frames": 5, "steps": 12, "guidance": 6.0}
    s = SamplingConfig.from_model(out)
    assert (s.guidance, s.steps, s.planner_max_box) == (6.0, 12, 1.0)  # no box cap: the planner's own boxes
    assert json.loads((out / "tokenizer" / "tokenizer_config.json").read_text())["model_max_length"] == 12
    from vidlab.io import load_checkpoint

    ck = load_checkpoint(tmp_path / "ck" / "dit.safetensors")
    assert ck["step"] == 3 and (int(ck["anneal_from"]), float(ck["anneal_lr"])) == (2, cfg.dit_anneal_lr)
    with pytest.raises(TrainStateError, match="another annealing phase"):
        train(tiny.cfg(tmp_path / "ck", *extra, "dit_anneal_lr=0.001"), tmp_path / "pipe2", progress=False)
    with pytest.raises(TrainStateError, match="another annealing phase"):  # the same steps at a constant rate
        train(tiny.cfg(tmp_path / "ck", *extra[:3], "dit_steps=3"), tmp_path / "pipe3", progress=False)


def test_shape_weights_cover_every_shape_on_the_latent_grid_and_nothing_far_from_one(tiny, tmp_path):
    """``dit_fg_weight``: the latent cells a shape covers (frame 0 alone, later frames pooled as the VAE pools
    them) get the weight, cells two or more latent pixels from every shape get 1; the weights follow the stored
    captions or refuse; a checkpoint trained at another weight does not resume."""
    from vidlab.generation.toyworld.train import TrainStateError, latent_fg_weights, train, training_scene

    cfg = tiny.cfg(tmp_path / "ck", "size=64", "model.vae_dim_mult=[1,2,2]", "dit_fg_weight=5", "clips=12")
    caps = [training_scene(cfg, i)[1] for i in range(cfg.clips)]
    w = latent_fg_weights(cfg, caps)
    assert w.shape == (12, 1, 2, 16, 16) and set(w.unique().tolist()) == {1.0, 5.0}
    for i in range(cfg.clips):
        scene = training_scene(cfg, i)[2]
        for lt, frames in ((0, [0]), (1, [1, 2, 3, 4])):
            near = torch.zeros(16, 16, dtype=torch.bool)
            for f in frames:
                for o in scene.objects:
                    x0, y0, x1, y1 = (v * 16 for v in o.box(f / 4, 64))
                    cx, cy = int((x0 + x1) / 2), int((y0 + y1) / 2)
                    assert w[i, 0, lt, cy, cx] == 5.0, (caps[i], lt, f)  # the shape's centre is weighted
                    near[max(0, int(y0) - 2) : int(y1) + 3, max(0, int(x0) - 2) : int(x1) + 3] = True
            assert (w[i, 0, lt][~near] == 1.0).all(), (caps[i], lt)  # nothing far from every shape is
    with pytest.raises(TrainStateError, match="training clip 1"):
        latent_fg_weights(cfg, [caps[0], "a red circle" if caps[1] != "a red circle" else "a blue star"])
    train(tiny.cfg(tmp_path / "ck2", "dit_fg_weight=5", "dit_steps=1"), tmp_path / "pipe", progress=False)
    with pytest.raises(TrainStateError, match="dit_fg_weight"):
        train(tiny.cfg(tmp_path / "ck2", "dit_steps=2"), tmp_path / "pipe2", progress=False)


def test_options_added_later_leave_older_checkpoints_identity_alone_until_set():
    """``LATER_OPTIONS`` at their defaults reproduce the older training, so they are not part of a checkpoint's
    identity (older checkpoints resume); set away from them, they are, in the stages they change."""
    from vidlab.generation.toyworld.train import LATER_OPTIONS, TrainConfig, stage_identity

    base = TrainConfig()
    assert all(getattr(base, k) == v for k, v in LATER_OPTIONS.items())
    for stage in ("vae", "latents", "vaedec", "dit"):
        assert not set(LATER_OPTIONS) & set(stage_identity(base, stage))
    grid = TrainConfig(world_grid=0.125)
    assert stage_identity(grid, "latents")["world_grid"] == 0.125 and "world_grid" in stage_identity(
        grid, "dit"
    )
    assert stage_identity(grid, "vae") == stage_identity(base, "vae")  # the VAE trains on the default world
    fg = TrainConfig(dit_fg_weight=5.0)
    assert stage_identity(fg, "latents") == stage_identity(
        base, "latents"
    ) and "dit_fg_weight" in stage_identity(fg, "dit")


@pytest.mark.parametrize(
    "bad, says",
    [
        ("world_grid=0.6", "world_grid=0.6"),
        ("world_radius=[0.2,0.1]", "world_radius"),
        ("world_radius=[0.3]", "low"),
        ("dit_captions=[a red squares]", "not training captions"),
        ("sample_guidance=0.5", "sample_guidance=0.5 must be >= 1"),
    ],
)
def test_an_impossible_training_world_is_refused_in_one_line_before_anything_is_built(
    tiny, tmp_path, bad, says
):
    from vidlab.errors import UserError
    from vidlab.generation.toyworld.train import check_config

    with pytest.raises(UserError, match=says):
        check_config(tiny.cfg(tmp_path, bad))


@pytest.mark.slow
def test_checkpoint_evaluation_reports_presence_per_shape_and_the_shape_swap_control(tiny, tmp_path):
    """The figures that show whether the shape word is used: presence per shape (their mean is the presence)
    and the level-0.7 shape-swap probe, recorded with every checkpoint evaluation."""
    from vidlab.generation.toyworld.train import SWAP_LEVEL, train

    cfg = tiny.cfg(tmp_path / "ck", "eval_every=3", "eval_steps=2", "model.text_len=16")
    train(cfg, tmp_path / "out", progress=False)
    ev = json.loads((tmp_path / "out" / "toyworld.json").read_text())["evals"]
    assert [e["step"] for e in ev] == [3]
    per = ev[0]["single_per_shape"]
    assert sorted(per) == ["circle", "square", "star", "triangle"]
    assert abs(sum(per.values()) / 4 - ev[0]["single_presence"]) < 1e-9  # 6 colours per shape: equal weights
    swap = ev[0][f"swap_{SWAP_LEVEL}"]
    assert sorted(swap) == ["other_drawn", "own_kept_told_other", "own_kept_told_own"]
    assert all(0.0 <= v <= 1.0 for v in swap.values())


def test_training_figure_draws_checkpoints_with_and_without_the_swap_control(tmp_path):
    """Older records have no swap figure: the PNG is drawn either way (the swap line from the entries that have it)."""
    from PIL import Image

    from vidlab.generation.toyworld.cli import plot_training

    evals = [
        {"step": 100, "single_presence": 0.2, "single_colour": 0.5},
        {"step": 200, "single_presence": 0.3, "swap_0.7": {"other_drawn": 0.4}},
    ]
    out = plot_training({"dit_losses": [1.0, 0.8, 0.5], "evals": evals}, tmp_path / "f" / "t.png")
    with Image.open(out) as im:
        assert im.format == "PNG" and im.size[0] > 500
    # a finished run: the recorded gate beside the checkpoints, and where an annealing phase began
    meta = {
        "dit_losses": [1.0, 0.8, 0.5],
        "evals": evals,
        "config": {"dit_steps": 150, "dit_anneal_steps": 50, "dit_anneal_lr": 1e-4},
        "gates": {
            "single_presence": {"presence": 0.7, "videos": 48, "how": "single_presence(..., guidance=6.0): "}
        },
    }
    with Image.open(plot_training(meta, tmp_path / "g.png")) as im:
        assert im.format == "PNG"


def test_a_caption_subset_keeps_exactly_its_clips_and_names_a_caption_without_clips():
    from vidlab.errors import UserError
    from vidlab.generation.toyworld.train import caption_subset

    caps = ["a red square", "a blue circle", "a red square", "two red squares"]
    assert caption_subset(caps, []).tolist() == [0, 1, 2, 3]
    assert caption_subset(caps, ["a red square"]).tolist() == [0, 2]
    assert caption_subset(caps, ["two red squares", "a blue circle"]).tolist() == [1, 3]
    with pytest.raises(UserError, match="a green star"):
        caption_subset(caps, ["a red square", "a green star"])


def test_the_caption_subset_option_leaves_older_checkpoints_identity_alone_until_set():
    from vidlab.generation.toyworld.train import TrainConfig, stage_identity

    assert "dit_captions" not in stage_identity(TrainConfig(), "dit")
    assert stage_identity(TrainConfig(dit_captions=["a red square"]), "dit")["dit_captions"] == [
        "a red square"
    ]
