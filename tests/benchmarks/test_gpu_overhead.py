"""benchmarks/gpu_overhead.py, the prepared GPU suite: it refuses without a GPU (one line, exit 2), and its
``--dry-run`` runs every section on the CPU at tiny size (the GPU run itself is not part of the tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the repo root holds benchmarks/
from benchmarks import gpu_overhead as G  # noqa: E402


def test_refuses_without_a_gpu_in_one_line(capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert G.main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpu_overhead: no CUDA GPU here")
    assert G.main(["--device", "cpu"]) == 2
    assert "use --device cuda" in capsys.readouterr().err
    assert G.main(["--quick"]) == 0  # `vidlab bench --quick`: skipped, said in one line
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "no CUDA GPU here" in json.loads(last)["skipped"]


def test_configs_sizes_and_the_time_guard_estimate():
    small, big = G.transformer_config("1.3b"), G.transformer_config("14b")
    assert (small["num_layers"], small["num_attention_heads"], small["ffn_dim"]) == (30, 12, 8960)
    assert (big["num_layers"], big["num_attention_heads"], big["ffn_dim"]) == (40, 40, 13824)
    for c in (small, big):
        assert c["attention_head_dim"] == 128 and c["text_dim"] == 4096 and c["patch_size"] == (1, 2, 2)
    shrunk = G.transformer_config("14b", layers=1, heads=2)
    assert shrunk["num_layers"] == 1 and shrunk["num_attention_heads"] == 2
    assert shrunk["ffn_dim"] == round(13824 / (40 * 128) * 2 * 128)  # same ffn / hidden ratio
    assert G.video_tokens(small, 480, 832, 81) == 32_760  # 21 x 30 x 52
    f_small, f_big = (G.step_flops(c, 32_760, 512) for c in (small, big))
    assert 5e14 < f_small < 7e14 and 5 < f_big / f_small < 7  # ~0.57 and ~3.4 PFLOP a step
    args = G.parse_args(["--budget", "440"])
    guard = G.Guard(args.budget, gpu=True)
    assert guard.need("1.3b/native", args) < 30 < guard.need("14b/native", args) < 120
    assert guard.need("1.3b/compile", args) > guard.need("1.3b/native", args) + 30
    guard.observe(f_small, 1.0)  # a measured step resizes every later estimate
    assert guard.need("14b/native", args) > 6 * f_big / f_small
    # the plan: all sections in PLAN order; a subset keeps that order
    assert G.plan(args) == list(G.PLAN)
    sub = G.parse_args(["--models", "14b", "--sections", "compile", "native"])
    assert G.plan(sub) == ["14b/native", "14b/compile"]


def test_the_gpu_index_command_is_one_longvideo_accepts():
    """The index section's GPU command line, parsed by longvideo.py's own parser (a flag it lost fails here)."""
    from benchmarks import longvideo

    cmd = G.index_command(G.parse_args(["--out", "x.json"]), "/tmp/work")
    assert cmd[1].endswith("benchmarks/longvideo.py")
    a = longvideo.parse(cmd[2:])
    assert (a.device, a.lengths, a.sizes, a.gops, a.workdir) == (
        "cuda",
        ["10min", "60min"],
        ["720p"],
        [250],
        "/tmp/work",
    )
    assert a.maker in ("ffmpeg", "pyav") and a.workers >= 2 and a.ask and not a.quick
    dry = longvideo.parse(G.index_command(G.parse_args(["--dry-run"]), "/tmp/work")[2:])
    assert dry.quick and dry.device == "cpu" and not dry.ask


def test_tiny_build_is_bf16_except_the_fp32_modules():
    import torch

    cfg = G.transformer_config("14b", 1, 1)
    tr = G.build_transformer(cfg, "cpu", torch.bfloat16)
    keep = tuple(tr._keep_in_fp32_modules)
    dtypes = {n: p.dtype for n, p in tr.named_parameters()}
    assert {d for n, d in dtypes.items() if not any(k in n.split(".") for k in keep)} == {torch.bfloat16}
    assert {d for n, d in dtypes.items() if any(k in n.split(".") for k in keep)} == {torch.float32}
    assert tr.config.num_layers == 1 and tr.config.ffn_dim == cfg["ffn_dim"]


def test_dry_run_attention_sections_write_their_json_and_skip_missing_kernels(tmp_path, capsys, monkeypatch):
    """The Comp-Attn sections at tiny size on the CPU: SDPA and regional torch.compile measured (one graph per
    mode), flash/sage skipped naming their package, a failing section reported while the suite goes on, and
    the JSON rewritten after every section."""
    out = tmp_path / "dry.json"
    written = []
    import vidlab.io

    real_atomic = vidlab.io.atomic_write_json

    def spy(path, obj, *a, **k):
        written.append(len(obj.get("sections", [])))
        return real_atomic(path, obj, *a, **k)

    monkeypatch.setattr(vidlab.io, "atomic_write_json", spy)
    real_measure = G.measure

    def measure(model, variant, *a, **k):
        if model == "14b" and variant == "native":
            raise RuntimeError("CUDA out of memory (stand-in)")
        return real_measure(model, variant, *a, **k)

    monkeypatch.setattr(G, "measure", measure)
    argv = ["--dry-run", "--sections", "native", "flash", "sage", "compile", "--out", str(out)]
    assert G.main(argv) == 0
    record = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == record  # the last line is the file
    rows = {r["section"]: r for r in record["sections"]}
    assert list(rows) == [s for s in G.PLAN if s != "index"]
    assert written[:-1] == list(range(1, len(rows) + 1))  # after every section, then once more at the end
    for name in ("1.3b/native", "1.3b/compile", "14b/compile"):
        row = rows[name]
        assert row["status"] == "ok" and row["rounds"] == 1 and row["video_tokens"] == 2 * 2 * 2
        assert row["step_off_s"] > 0 and row["step_lam_s"] > 0 and row["step_inactive_s"] > 0
        lo, hi = row["lam_overhead_range"]
        assert lo <= row["lam_overhead_paired"] <= hi
    for name in ("1.3b/compile", "14b/compile"):  # off, Comp-Attn pass-through, LAM: one graph each, no break
        assert rows[name]["graphs"] == 3 and rows[name]["graph_breaks"] == 0
        assert rows[name]["compile_backend"] == "eager"
    assert rows["14b/native"]["status"] == "error" and "out of memory" in rows["14b/native"]["reason"]
    for name in ("1.3b/flash", "14b/flash"):
        assert rows[name]["status"] == "skipped" and "flash-attn" in rows[name]["reason"]
    for name in ("1.3b/sage", "14b/sage"):
        assert rows[name]["status"] == "skipped" and "sageattention" in rows[name]["reason"]
    assert record["dry_run"] is True and record["paper_overhead"] == 0.05


@pytest.mark.slow
def test_dry_run_command_runs_every_section_including_the_index_pipeline(tmp_path):
    """The suite's own command line, as a future GPU run would type it, with --dry-run: every section ends ok
    or skipped with a reason (flash-attn and sageattention are not installed here)."""
    out = tmp_path / "dry.json"
    proc = subprocess.run(
        [sys.executable, "benchmarks/gpu_overhead.py", "--dry-run", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(out.read_text())
    rows = {r["section"]: r for r in record["sections"]}
    assert list(rows) == list(G.PLAN)
    assert all(r["status"] in ("ok", "skipped") for r in rows.values()), rows
    assert all(r.get("reason") for r in rows.values() if r["status"] == "skipped")
    index = rows["index"]
    assert index["status"] == "ok" and index["command"].startswith("benchmarks/longvideo.py")
    assert all(c["decoded_once"] for c in index["cells"]) and index["ideal_ratio"] > 0
