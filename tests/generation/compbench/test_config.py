"""CompbenchConfig: presets resolve, mistakes are one-line ConfigErrors before anything loads."""

from __future__ import annotations

import pytest

from vidlab.config import ConfigError, resolve
from vidlab.generation.compbench.config import METHODS, CompbenchConfig, method_comp_attn
from vidlab.generation.config import CompAttnConfig


@pytest.mark.parametrize(
    "preset", ["compbench/tiny", "compbench/wan2.1-t2v-14b", "compbench/wan2.2-t2v-a14b"]
)
def test_presets_resolve(preset):
    cfg = resolve(CompbenchConfig, preset, []).check()
    assert cfg.methods == list(METHODS)
    if "wan" in preset:
        assert cfg.prompts_per_category is None and cfg.run.gpus_per_worker == 1 and cfg.generate.frames == 81


@pytest.mark.parametrize(
    "override,match",
    [
        ("methods=[baseline,magic]", "subset of"),
        ("seeds=[]", "at least one seed"),
        ("seeds=[1,1]", "must not repeat"),
        ("generate.seed=4", "seeds="),
        ("run.backend=slurm", r"run.backend: expected one of \['local', 'ray'\]"),
        ("prompts_per_category=0", ">= 1"),
    ],
)
def test_mistakes_are_config_errors(override, match):
    with pytest.raises(ConfigError, match=match):
        resolve(CompbenchConfig, "compbench/tiny", [override]).check()


def test_methods_switch_sci_and_lam_only():
    base = CompAttnConfig()
    base.lam.alpha_max = 2.5
    for m, (enabled, sci, lam) in METHODS.items():
        c = method_comp_attn(base, m)
        assert (c.enabled, c.sci.enabled, c.lam.enabled) == (enabled, sci, lam) and c.lam.alpha_max == 2.5
        assert c.lam.rule == ("ts_attn" if m == "ts_attn" else "comp_attn")
    inert = method_comp_attn(base, "baseline", capture=True)
    assert inert.enabled and not inert.sci.enabled and not inert.lam.enabled and inert.capture_attention
    assert base.lam.enabled and not base.capture_attention  # the preset's config is not changed


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_gpu_preset_without_a_gpu_is_one_line_before_planning_or_ray(tmp_path, capsys, monkeypatch):
    from vidlab.errors import run_command
    from vidlab.generation.compbench.cli import compbench_main

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    out = tmp_path / "run"
    argv = ["generate", "--preset", "compbench/wan2.1-t2v-14b", f"out={out}"]
    assert run_command("vidlab compbench", compbench_main, argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "run.gpus_per_worker=1" in err, err
    assert not out.exists()
    # the old key of a user's own preset still works, with one deprecation line
    from vidlab.config import from_dict

    with pytest.warns(Warning, match="num_workers"):
        cfg = from_dict(CompbenchConfig, {"run": {"num_workers": 2, "num_gpus_per_worker": 0}})
    assert (cfg.run.workers, cfg.run.gpus_per_worker, cfg.run.plan_threads) == (2, 0, 4)


def test_lam_mask_source_keeps_old_job_identities_unless_it_changes_the_videos():
    import dataclasses

    from vidlab.generation.compbench.jobs import identity

    suite = type("S", (), {"fingerprint": "f"})()
    base = resolve(CompbenchConfig, "compbench/tiny")
    ident = identity(base, suite)
    assert "mask_source" not in str(ident)  # "box" is what every earlier run did: same identity, it resumes
    fused = dataclasses.replace(base)
    fused.generate = dataclasses.replace(base.generate, comp_attn=CompAttnConfig())
    fused.generate.comp_attn.lam.mask_source = "fused"
    boxed = dataclasses.replace(base)
    boxed.generate = dataclasses.replace(base.generate, comp_attn=CompAttnConfig())
    assert identity(fused, suite) != identity(boxed, suite)


def test_ts_attn_settings_keep_old_job_identities_unless_they_change_the_videos():
    import dataclasses

    from vidlab.generation.compbench.jobs import identity

    suite = type("S", (), {"fingerprint": "f"})()
    base = resolve(CompbenchConfig, "compbench/tiny")
    lam = identity(base, suite)["config"]["generate"]["comp_attn"]["lam"]
    # at their defaults the TS-Attn settings are left out: earlier runs keep their identity and resume
    assert not {"rule", "ts_step_fraction", "ts_alpha_min", "ts_alpha_max", "ts_erode", "ts_blocks"} & set(
        lam
    )
    other = dataclasses.replace(base)
    other.generate = dataclasses.replace(base.generate, comp_attn=CompAttnConfig())
    same = dataclasses.replace(base)
    same.generate = dataclasses.replace(base.generate, comp_attn=CompAttnConfig())
    other.generate.comp_attn.lam.ts_alpha_max = 2.0
    assert identity(other, suite) != identity(same, suite)
