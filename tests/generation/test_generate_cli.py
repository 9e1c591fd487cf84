"""`vidlab generate` end to end on the tiny preset, its help, presets and config handling."""

import json

import pytest
import yaml

from generation.cli import GenerateConfig, generate_main
from vidlab.config import ConfigError, resolve

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
    from generation.layout import Layout, SubjectLayout

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
