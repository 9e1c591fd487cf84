"""benchmarks/gpu_overhead.py: refuses without a GPU (one line, exit 2); its configs and step runner work at
tiny scale on the CPU (the GPU run itself is not part of the tests)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root holds benchmarks/
from benchmarks import gpu_overhead as G  # noqa: E402


def test_refuses_without_a_gpu_in_one_line(capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert G.main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpu_overhead: no CUDA GPU here")
    assert G.main(["--device", "cpu"]) == 2
    assert "use --device cuda" in capsys.readouterr().err


def test_configs_are_wan21_1_3b_and_14b():
    small, big = G.transformer_config("1.3b"), G.transformer_config("14b")
    assert (small["num_layers"], small["num_attention_heads"], small["ffn_dim"]) == (30, 12, 8960)
    assert (big["num_layers"], big["num_attention_heads"], big["ffn_dim"]) == (40, 40, 13824)
    for c in (small, big):
        assert c["attention_head_dim"] == 128 and c["text_dim"] == 4096 and c["patch_size"] == (1, 2, 2)
    shrunk = G.transformer_config("14b", layers=1, heads=2)
    assert shrunk["num_layers"] == 1 and shrunk["num_attention_heads"] == 2
    assert shrunk["ffn_dim"] == round(13824 / (40 * 128) * 2 * 128)  # same ffn / hidden ratio


@pytest.mark.parametrize("model", ["1.3b", "14b"])
def test_tiny_build_and_step_with_lam_on_cpu(model):
    """The real code path at tiny scale: bf16 weights on the device, Comp-Attn off / LAM active / outside the
    window, the paired figures and the LAM check."""
    import torch

    args = G.parse_args(
        ["--device", "cpu", "--layers", "1", "--heads", "1", "--height", "64", "--width", "64", "--frames", "5",
         "--text-len", "16", "--rounds", "1", "--models", model]
    )  # fmt: skip
    cfg = G.transformer_config(model, 1, 1)
    tr = G.build_transformer(cfg, "cpu", torch.bfloat16)
    keep = tuple(tr._keep_in_fp32_modules)
    dtypes = {n: p.dtype for n, p in tr.named_parameters()}
    assert {d for n, d in dtypes.items() if not any(k in n.split(".") for k in keep)} == {torch.bfloat16}
    assert {d for n, d in dtypes.items() if any(k in n.split(".") for k in keep)} == {torch.float32}
    assert tr.config.num_layers == 1 and tr.config.ffn_dim == cfg["ffn_dim"]
    row = G.measure(model, "native", args)
    assert "error" not in row, row
    assert row["video_tokens"] == 2 * 4 * 4  # (5-1)/4+1 latent frames x (64/8/2)^2
    assert row["step_off_s"] > 0 and row["step_lam_s"] > 0
    lo, hi = row["lam_overhead_range"]
    assert lo <= row["lam_overhead_paired"] <= hi
