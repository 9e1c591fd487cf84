"""Defaults that never give garbage: a model's own sampling settings (CLI and Python), the memory estimate.

``vidlab generate --model toyworld`` samples with the settings the model records (``toyworld.json``), not the
tiny preset's 17 frames and 4 steps; a loaded pipeline carries them, so a plain ``pipe(prompt=...)`` works; a
request too large for the machine is refused in one line before anything loads.
"""

from __future__ import annotations

import json
import warnings

import pytest
import yaml

from vidlab.generation.cli import generate_main
from vidlab.generation.pipeline import SHIPPED_MODELS, GenerateConfig, load_pipeline, model_settings

PROMPT = "a red circle to the left of a blue square"
RECORDED = json.loads((SHIPPED_MODELS["toyworld"] / "toyworld.json").read_text())["generate"]


@pytest.fixture
def resolved(monkeypatch):
    """Run ``generate_main`` up to the model load: returns (exit status, the resolved config, stdout)."""
    import vidlab.generation.cli as cli

    seen = {}

    def stop(cfg, *args, **kwargs):
        seen["cfg"] = cfg
        return 0

    monkeypatch.setattr(cli, "_run", stop)

    def run(capsys, *argv):
        rc = generate_main(list(argv))
        return rc, seen.get("cfg"), capsys.readouterr().out

    return run


def test_toyworld_generates_with_its_own_settings_and_says_so(tmp_path, capsys):
    out = tmp_path / "gen"
    assert generate_main([PROMPT, "--model", "toyworld", "--out", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("settings: the model's own (") and "toyworld.json" in first, first
    assert "overridden" not in first
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    for key in ("height", "width", "frames", "steps", "guidance"):
        assert cfg[key] == RECORDED[key], key
    result = json.loads((out / "result.json").read_text())
    assert result["frames"] == RECORDED["frames"] and result["detector"]  # judged: a toy-world video


def test_user_settings_win_and_are_listed(tmp_path, capsys, resolved):
    rc, cfg, out = resolved(
        capsys, PROMPT, "--model", "toyworld", "--out", str(tmp_path / "o"), "--steps", "3"
    )
    assert (
        rc == 0
        and cfg.steps == 3
        and cfg.frames == RECORDED["frames"]
        and cfg.guidance == RECORDED["guidance"]
    )
    assert f"overridden: steps=3 (the model's: {RECORDED['steps']})" in out.splitlines()[0]
    # a key=value word and an explicit preset's keys count as the user's too; the default preset's do not
    preset = tmp_path / "mine.yaml"
    preset.write_text("model: toyworld\nframes: 9\n")
    rc, cfg, out = resolved(
        capsys, PROMPT, "--preset", str(preset), "--out", str(tmp_path / "o"), "guidance=2"
    )
    assert rc == 0 and (cfg.frames, cfg.guidance, cfg.steps) == (9, 2.0, RECORDED["steps"])
    assert "frames=9 (the model's: 5)" in out and "guidance=2.0 (the model's: 6.0)" in out


def test_tiny_says_its_weights_are_random(tmp_path, capsys, resolved):
    rc, cfg, out = resolved(capsys, "a red cat", "--out", str(tmp_path / "o"))
    lines = out.splitlines()
    assert rc == 0 and lines[0].startswith("settings: the model's own (built in)")
    assert lines[1].startswith("note: the tiny model has random weights"), lines
    rc, cfg, out = resolved(capsys, PROMPT, "--model", "toyworld", "--out", str(tmp_path / "o"))
    assert "random weights" not in out


def _saved_tiny(folder, generate=None):
    """A diffusers folder as a real Wan checkpoint is laid out (the tiny pipeline saved), optionally with the
    sampling settings a trainer records."""
    from vidlab.generation.tiny import build_tiny_pipeline

    build_tiny_pipeline().save_pretrained(folder)
    if generate is not None:
        (folder / "toyworld.json").write_text(json.dumps({"generate": generate}))
    return folder


def test_a_local_folder_that_records_settings_gets_them_in_the_cli_and_in_python(tmp_path, capsys, resolved):
    import numpy as np
    import torch

    own = {"height": 32, "width": 48, "frames": 9, "steps": 2, "guidance": 3.0}
    folder = _saved_tiny(tmp_path / "wan-like", own)
    capsys.readouterr()
    rc, cfg, out = resolved(capsys, "a red cat", "--model", str(folder), "--out", str(tmp_path / "o"))
    assert rc == 0 and {k: getattr(cfg, k) for k in own} == own and str(folder) in out.splitlines()[0]

    pipe = load_pipeline(GenerateConfig(model=str(folder), device="cpu"))
    plain = pipe(prompt="a red cat", generator=torch.Generator().manual_seed(3), output_type="np").frames
    assert plain.shape == (1, own["frames"], own["height"], own["width"], 3)
    explicit = load_pipeline(GenerateConfig(model=str(folder), device="cpu"))(
        prompt="a red cat",
        height=own["height"],
        width=own["width"],
        num_frames=own["frames"],
        num_inference_steps=own["steps"],
        guidance_scale=own["guidance"],
        generator=torch.Generator().manual_seed(3),
        output_type="np",
    ).frames
    np.testing.assert_array_equal(plain, explicit)  # the plain call is exactly the model's own settings
    # a keyword given to the call still wins
    assert pipe(prompt="a red cat", num_frames=5, output_type="np").frames.shape[1] == 5


def test_a_folder_that_records_nothing_keeps_diffusers_defaults_and_the_cli_says_whose(
    tmp_path, capsys, resolved
):
    from diffusers import WanPipeline

    folder = _saved_tiny(tmp_path / "plain-wan")
    capsys.readouterr()
    assert model_settings(str(folder)) is None
    pipe = load_pipeline(GenerateConfig(model=str(folder), device="cpu"))
    assert type(pipe) is WanPipeline and not hasattr(pipe, "vidlab_call_defaults")
    rc, cfg, out = resolved(capsys, "a red cat", "--model", str(folder), "--out", str(tmp_path / "o"))
    assert rc == 0 and "records no sampling settings" in out and "--preset wan2.1-t2v-1.3b" in out


def test_a_bad_recorded_setting_is_one_line(tmp_path, capsys):
    from vidlab.cli import main

    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "model_index.json").write_text("{}")
    (folder / "toyworld.json").write_text(json.dumps({"generate": {"steps": "many"}}))
    rc = main(["generate", "a red cat", "--model", str(folder), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "generate.steps: expected an int" in err, err
    assert not (tmp_path / "o").exists()


def test_python_plain_call_on_toyworld_gives_a_video_and_comp_attn_keeps_the_settings():
    import numpy as np
    import torch

    from vidlab.generation.comp_attn import apply_comp_attn
    from vidlab.generation.pipeline import generate_video

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # our from_pretrained calls use the current names
        pipe = load_pipeline(GenerateConfig(model="toyworld"))
    frames = pipe(prompt=PROMPT, generator=torch.Generator().manual_seed(0), output_type="np").frames
    assert frames.shape == (1, RECORDED["frames"], RECORDED["height"], RECORDED["width"], 3)
    assert np.isfinite(frames).all() and 0.0 <= frames.min() and frames.max() <= 1.0
    # the text rows the model was trained with, not diffusers' 512: a plain call is the call at 16 rows
    assert pipe.vidlab_call_defaults["max_sequence_length"] == pipe.tokenizer.model_max_length == 16
    at16 = pipe(
        prompt=PROMPT, generator=torch.Generator().manual_seed(0), output_type="np", max_sequence_length=16
    ).frames
    np.testing.assert_array_equal(frames, at16)
    with apply_comp_attn(pipe) as comp:  # a plain call with Comp-Attn installed uses them too
        pipe(prompt=PROMPT, output_type="np")
        assert comp.last_result.num_frames == RECORDED["frames"]
    cfg = GenerateConfig.for_model("toyworld", seed=4)
    assert (cfg.frames, cfg.steps, cfg.guidance, cfg.seed) == (5, RECORDED["steps"], RECORDED["guidance"], 4)
    assert generate_video(pipe, cfg, PROMPT).frames.shape == (5, 64, 64, 3)


# ---- memory -------------------------------------------------------------------------------------------------
def test_a_request_too_large_is_refused_in_one_line_before_anything_loads(tmp_path, capsys, monkeypatch):
    import vidlab.generation.cli as cli
    from vidlab.cli import main

    monkeypatch.setattr(cli, "load_pipeline", lambda cfg: pytest.fail("the pipeline must not load"))
    out = tmp_path / "out"
    rc = main(["generate", PROMPT, "--out", str(out), "--height", "100000", "--width", "100000"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert "height=100000 width=100000 frames=17 needs at least" in err and " TB " in err and "free" in err, (
        err
    )
    assert not out.exists()  # no config.yaml left behind


def test_the_estimate_is_compared_with_free_memory_and_scales_with_the_request(monkeypatch, tmp_path):
    import vidlab.generation.memory as mem

    cfg = GenerateConfig.for_model("toyworld", device="cpu")
    fits = mem.check_request_memory(cfg, "cpu")
    # the weights are counted from the safetensors headers
    assert fits is not None and fits.fits and fits.parts["weights"] > 0
    monkeypatch.setattr(mem, "available_memory", lambda device: fits.needed - 1)
    with pytest.raises(mem.RequestTooLargeError, match="height=64 width=64 frames=5 needs at least"):
        mem.check_request_memory(cfg, "cpu")
    dims = mem.model_dims("toyworld")
    big = mem.estimate_request(GenerateConfig.for_model("toyworld", height=128, width=128), dims, "cpu")
    assert big.parts["latents"] == 4 * fits.parts["latents"]
    assert (
        big.parts["transformer"] == 4 * fits.parts["transformer"]
        and big.parts["weights"] == fits.parts["weights"]
    )
    assert mem.estimate_request(cfg, dims, "cuda").parts["weights"] == fits.parts["weights"]
    offload = GenerateConfig.for_model("toyworld", cpu_offload="sequential")
    assert mem.estimate_request(offload, dims, "cuda").parts["weights"] == 0


def test_dims_read_from_files_match_the_loaded_pipeline(tmp_path):
    import vidlab.generation.memory as mem

    folder = _saved_tiny(tmp_path / "wan-like")
    pipe = load_pipeline(GenerateConfig(model=str(folder), device="cpu"))
    assert mem.model_dims(str(folder)) == mem.dims_from_pipe(pipe)
    tiny = mem.model_dims("tiny")
    assert tiny is not None and tiny.params == {}
    assert (tiny.dim, tiny.patch, tiny.spatial) == (mem.dims_from_pipe(pipe).dim, (1, 2, 2), 8)
