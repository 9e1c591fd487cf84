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

TINY = [
    "size=32",
    "frames=5",
    "vae_steps=2",
    "vae_batch=1",
    "clips=4",
    "vae_dec_steps=2",
    "dit_steps=3",
    "dit_batch=2",
    "eval_every=0",
    "ckpt_every=1",
    "model.z_dim=4",
    "model.vae_base_dim=4",
    "model.vae_dim_mult=[1,1,1]",
    "model.text_dim=16",
    "model.text_heads=2",
    "model.heads=2",
    "model.head_dim=12",
    "model.layers=1",
    "model.ffn_dim=32",
    "model.freq_dim=32",
]
ROOT = Path(__file__).resolve().parents[3]


def _cfg(tmp: Path, *extra: str):
    from generation.toyworld.train import TrainConfig
    from vidlab.config import resolve

    return resolve(TrainConfig, None, [*TINY, f"ckpt_dir={tmp}", *extra])


def _safetensors(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(path)


@pytest.mark.slow
def test_training_changes_weights_and_the_folder_generates_with_vidlab_generate(tmp_path):
    from transformers import AutoTokenizer

    from generation.cli import generate_main
    from generation.toyworld.model import build_transformer
    from generation.toyworld.tokenizer import build_word_tokenizer
    from generation.toyworld.train import train

    cfg = _cfg(tmp_path / "ckpt")
    out = train(cfg, tmp_path / "pipe", progress=False)
    assert (out / "model_index.json").is_file()
    trained = _safetensors(out / "transformer" / "diffusion_pytorch_model.safetensors")
    torch.manual_seed(cfg.seed + 1)
    from generation.toyworld.model import build_text_encoder

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

    gen = tmp_path / "gen"
    argv = [prompt, "--model", str(out), "--out", str(gen), "--steps", "2", "--frames", "5"]
    assert generate_main([*argv, "--height", "32", "--width", "32", "--attention-maps"]) == 0
    res = json.loads((gen / "result.json").read_text())
    assert res["subjects"] == ["red circle", "blue square"]
    assert res["token_indices"] == [[1, 2], [8, 9]]
    assert (gen / "video.mp4").stat().st_size > 0


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_weights(tmp_path, capsys):
    """The kill is a real SIGKILL of a real ``python -m generation.toyworld.cli`` process; the runs after it
    call the same command in this process (its entry point with its error handling), which saves six
    interpreter start-ups of torch + diffusers."""

    def killed_run(out: Path, ckpt: Path, *extra: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "generation.toyworld.cli", "--out", str(out), "--no-progress"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        return subprocess.run(
            [*cmd, *TINY, f"ckpt_dir={ckpt}", *extra],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    def run(out: Path, ckpt: Path, *extra: str) -> subprocess.CompletedProcess:
        from generation.toyworld.cli import train_main
        from vidlab.errors import run_command

        capsys.readouterr()
        argv = ["--out", str(out), "--no-progress", *TINY, f"ckpt_dir={ckpt}", *extra]
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
