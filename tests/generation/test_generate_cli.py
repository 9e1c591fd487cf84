"""`vidlab generate` end to end on the tiny preset, its help, presets and config handling."""

import json

import pytest
import yaml

from vidlab.config import ConfigError, resolve
from vidlab.generation.cli import generate_main
from vidlab.generation.pipeline import GenerateConfig

SMALL = ["--height", "32", "--width", "32", "--frames", "9", "--steps", "2"]


def test_help_teaches_with_examples(capsys):
    with pytest.raises(SystemExit) as exc:
        generate_main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for word in ("--layout", "--planner", "--no-lam", "--attention-maps", "examples:", "lam.step_fraction"):
        assert word in out


def test_generate_writes_video_layout_maps_config_and_result(tmp_path):
    from vidlab.video import open_video

    out = tmp_path / "gen"
    rc = generate_main(
        [
            "a red cat on the left of a blue dog",
            "--out",
            str(out),
            "--attention-maps",
            *SMALL,
            "sci.strength=0.7",
        ]
    )
    assert rc == 0
    with open_video(out / "video.mp4") as reader:
        assert reader.num_frames == 9 and (reader.width, reader.height) == (32, 32)
    assert json.loads((out / "layout.json").read_text())["subjects"]
    assert list((out / "layout").glob("*.png"))
    assert len(list((out / "attention").glob("*.png"))) == 2
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["comp_attn"]["sci"]["strength"] == 0.7 and cfg["steps"] == 2 and cfg["model"] == "tiny"
    result = json.loads((out / "result.json").read_text())
    assert result["subjects"] == ["red cat", "blue dog"]
    assert result["lam_log"] and result["attention_inside_share"]


def test_no_sci_no_lam_and_a_user_layout(tmp_path):
    from vidlab.generation.layout import Layout, SubjectLayout

    prompt = "a bird above a boat"
    lay = Layout(
        prompt,
        [
            SubjectLayout("bird", [(0.0, (0.3, 0.0, 0.7, 0.4))]),
            SubjectLayout("boat", [(0.0, (0.2, 0.6, 0.8, 1.0))]),
        ],
    )
    path = lay.save(tmp_path / "layout.yaml")
    out = tmp_path / "plain"
    assert (
        generate_main([prompt, "--out", str(out), "--layout", str(path), "--no-sci", "--no-lam", *SMALL]) == 0
    )
    result = json.loads((out / "result.json").read_text())
    assert result["lam_log"] == [] and result["sci"] is None and result["subjects"] == ["bird", "boat"]
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["comp_attn"]["sci"]["enabled"] is False and cfg["comp_attn"]["lam"]["enabled"] is False


@pytest.mark.parametrize("preset", ["tiny", "wan2.1-t2v-1.3b", "wan2.1-t2v-14b", "wan2.2-t2v-a14b"])
def test_presets_resolve(preset):
    cfg = resolve(GenerateConfig, preset)
    assert (cfg.frames - 1) % 4 == 0 and cfg.height % 16 == 0 and cfg.width % 16 == 0
    if preset != "tiny":
        assert (
            cfg.model.startswith("Wan-AI/") and cfg.model.endswith("-Diffusers") and cfg.dtype == "bfloat16"
        )
    assert 0 < cfg.comp_attn.lam.step_fraction <= 1


def test_bad_override_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="alpha_maxx"):
        generate_main(["a cat", "--out", str(tmp_path), "lam.alpha_maxx=2"])


# ---- one line per mistake, exit 2, nothing written, nothing loaded ------------------------------------
def _run(capsys, *argv):
    from vidlab.cli import main

    rc = main(["generate", *argv])
    err = capsys.readouterr().err.strip()
    return rc, err


def _empty_layout(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"prompt": "a quiet night", "subjects": []}))
    return path


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["a red cat", "model=tinyy"], "unknown model 'tinyy'.*did you mean tiny"),
        (["a red cat", "stepz=3"], r"unknown config key\(s\) \['stepz'\]; valid keys here: \[.*'steps'"),
        (["a red cat", "--set", "steps=two"], "steps: expected an int >= 1, got 'two'"),
        (["a red cat", "steps=-3"], "steps: expected an int >= 1, got -3"),
        (["a red cat", "frames=10"], r"frames: expected 4k\+1"),
        (["a red cat", "planner_max_box=2"], r"planner_max_box: expected a number in \[0\.05, 1\.0\], got 2"),
        (["a red cat", "lam.alpha_min=2"], "comp_attn.lam: alpha_min=2.0 must be <= alpha_max=1.0"),
        (["a red cat", "--layout", "MISSING"], "layout file .*missing.json: no such file"),
        (
            ["a red cat", "--layout", "BAD"],
            "layout file .*bad.json: subject 'red cat'.*x0=0.5 must be < x1=0.2",
        ),
        (["a red cat", "--subjects", "green frog"], "subject 'green frog' not found in prompt 'a red cat'"),
        (["   "], "the prompt is empty"),
        (
            ["a quiet night", "--layout", "EMPTY", "--lam"],
            "LAM was asked for, but the layout has no subjects",
        ),
    ],
)
def test_user_mistakes_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, argv, expected):
    import re

    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "prompt": "a red cat",
                "subjects": [{"phrase": "red cat", "keyframes": [{"t": 0, "box": [0.5, 0, 0.2, 1]}]}],
            }
        )
    )
    subs = {"MISSING": str(tmp_path / "missing.json"), "BAD": str(bad), "EMPTY": str(_empty_layout(tmp_path))}
    out = tmp_path / "out"
    rc, err = _run(capsys, *[subs.get(a, a) for a in argv], "--out", str(out))
    assert rc == 2 and len(err.splitlines()) == 1 and err.startswith("vidlab generate: error: "), err
    assert re.search(expected, err), err
    assert not out.exists()  # nothing written to --out before validation


def test_unwritable_out_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc, err = _run(capsys, "a red cat", "--out", str(blocker / "out"))
    assert (
        rc == 2
        and err
        == f"vidlab generate: error: --out {blocker / 'out'}: cannot create it, {blocker} is a file, not a folder"
    )
    rc, err = _run(capsys, "a red cat", "--out", str(blocker))
    assert rc == 2 and err.endswith("exists and is not a folder")


def test_a_wrong_subject_fails_before_an_expensive_model_loads(tmp_path, capsys):
    # A "model" folder that passes the name check but would fail (or take long) to load: the subject
    # check must come first, so the user sees the subject error and no load happens.
    model = tmp_path / "wan-14b"
    model.mkdir()
    (model / "model_index.json").write_text(json.dumps({"_class_name": "WanPipeline"}))
    out = tmp_path / "out"
    rc, err = _run(capsys, "a red cat", f"model={model}", "--subjects", "green frog", "--out", str(out))
    assert rc == 2 and "subject 'green frog' not found" in err and not out.exists()
    # with a right subject, the same folder gets as far as loading, which fails as one line too
    rc, err = _run(capsys, "a red cat", f"model={model}", "--subjects", "red cat", "--out", str(out))
    assert rc == 2 and err.startswith(f"vidlab generate: error: could not load Wan pipeline '{model}'"), err


def test_a_bare_value_error_from_a_bug_keeps_its_traceback(tmp_path, monkeypatch):
    import vidlab.generation.cli as cli
    from vidlab.cli import main

    def broken(cfg):
        raise ValueError("a bug, not a user mistake")

    monkeypatch.setattr(cli, "load_pipeline", broken)
    with pytest.raises(ValueError, match="a bug"):
        main(["generate", "a red cat", "--out", str(tmp_path / "o")])


def test_no_subjects_without_lam_asked_warns_in_one_line(tmp_path, capsys):
    out = tmp_path / "out"
    rc = generate_main(["a quiet night", "--layout", str(_empty_layout(tmp_path)), "--out", str(out), *SMALL])
    err = capsys.readouterr().err
    assert rc == 0 and (out / "video.mp4").is_file()
    warning = [line for line in err.splitlines() if "warning" in line]
    assert warning and warning[0].startswith("vidlab generate: warning: the layout has no subjects")


def test_a_seed_beyond_the_generators_range_is_one_line_before_loading(tmp_path, capsys):
    """torch's generator takes a uint64: 2**70 used to end in an untyped overflow error after the model load."""
    rc, err = _run(capsys, "a red ball", "--out", str(tmp_path / "out"), *SMALL, f"seed={2**70}")
    assert (
        rc == 2
        and "seed: expected an int in [0, 18446744073709551615]" in err
        and "\n" not in err
        and "Traceback" not in err
    ), err
    assert not (tmp_path / "out").exists()
    GenerateConfig(seed=2**64 - 1)  # the largest seed torch takes is accepted


def test_a_config_built_in_python_is_checked_like_one_from_a_preset():
    with pytest.raises(ConfigError, match="steps: expected an int >= 1, got 0"):
        GenerateConfig(steps=0)
    with pytest.raises(ConfigError, match="alpha_max: expected a number >= 0.0, got -1.0"):
        from vidlab.generation.config import LAMConfig

        LAMConfig(alpha_max=-1.0)
    with pytest.raises(ConfigError, match="mask_source"):
        resolve(GenerateConfig, None, ["comp_attn.lam.mask_source=blob"])


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_device_cuda_without_a_gpu_is_one_line_before_any_load(tmp_path, capsys, monkeypatch):
    import vidlab.generation.cli as cli
    from vidlab.cli import main

    def no_load(cfg):
        raise AssertionError("the pipeline must not load")

    monkeypatch.setattr(cli, "load_pipeline", no_load)
    out = tmp_path / "out"
    rc = main(["generate", "a red cat", "--out", str(out), "device=cuda"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "device='cuda'" in err and "cpu" in err, err
    assert not out.exists()


def test_a_size_off_the_models_token_grid_is_refused_before_loading(tmp_path, capsys):
    import json as _json

    from vidlab.generation.tiny import build_tiny_pipeline

    model = tmp_path / "wan-16x"
    build_tiny_pipeline(vae_scale=16).save_pretrained(model)  # 32 px per token
    vae_cfg = _json.loads((model / "vae" / "config.json").read_text())
    assert vae_cfg["scale_factor_spatial"] == 16
    capsys.readouterr()  # save_pretrained's progress bars
    out = tmp_path / "out"
    rc, err = _run(capsys, "a red cat", f"model={model}", "--out", str(out), "--height", "48", *SMALL[2:])
    assert (
        rc == 2
        and len(err.splitlines()) == 1
        and "height=48 must be a positive multiple of spatial_stride=32" in err
    ), err
    assert not out.exists()
