"""vidlab.config: defaults <- preset <- overrides, validated, and saved next to outputs."""

from dataclasses import dataclass, field

import pytest
import yaml

from vidlab.config import ConfigError, parse_overrides, resolve, save_resolved


@dataclass
class Inner:
    alpha: float = 1.0
    blocks: tuple = ()
    enabled: bool = True


@dataclass
class Outer:
    name: str = "tiny"
    steps: int = 4
    inner: Inner = field(default_factory=Inner)


def test_defaults_only():
    cfg = resolve(Outer)
    assert cfg == Outer()


def test_preset_then_overrides(tmp_path):
    preset = tmp_path / "p.yaml"
    preset.write_text("steps: 10\ninner:\n  alpha: 2\n  blocks: [0, 1]\n")
    cfg = resolve(Outer, preset, ["inner.enabled=false", "name=wan"])
    assert cfg.steps == 10
    assert cfg.inner.alpha == 2.0 and isinstance(cfg.inner.alpha, float)
    assert cfg.inner.blocks == (0, 1)
    assert cfg.inner.enabled is False
    assert cfg.name == "wan"
    # overrides win over the preset
    assert resolve(Outer, preset, ["steps=3"]).steps == 3


def test_unknown_key_lists_valid_keys():
    with pytest.raises(ConfigError, match=r"inner\.alpah.*valid keys here: \['alpha', 'blocks', 'enabled'\]"):
        resolve(Outer, None, ["inner.alpah=3"])


def test_bad_override_syntax_and_type():
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["steps"])
    with pytest.raises(ConfigError, match="true/false"):
        resolve(Outer, None, ["inner.enabled=maybe"])


def test_unknown_preset_names_known_ones(tmp_path):
    with pytest.raises(ConfigError, match="unknown preset 'nope'"):
        resolve(Outer, "nope")


def test_save_resolved_round_trip(tmp_path):
    cfg = resolve(Outer, None, ["inner.blocks=[2,3]"])
    path = save_resolved(cfg, tmp_path / "run")
    data = yaml.safe_load(path.read_text())
    assert data == {"name": "tiny", "steps": 4, "inner": {"alpha": 1.0, "blocks": [2, 3], "enabled": True}}
    assert resolve(Outer, path) == cfg


# --- values checked against types and ranges ----------------------------------------------------
from typing import Literal, Optional  # noqa: E402


@dataclass
class Episode:
    max_calls: int = field(default=3, metadata={"range": (0, 50)})
    temperature: float = field(default=0.0, metadata={"range": (0.0, None)})


@dataclass
class Checked:
    steps: int = field(default=4, metadata={"range": (1, 1000)})
    mode: Literal["f1", "exact"] = "f1"
    seed: Optional[int] = None  # noqa: UP045 - the old spelling must work too
    limit: int | None = field(default=None, metadata={"range": (1, None)})
    blocks: tuple[int, ...] = (0, 1)
    size: tuple[int, int] = (64, 64)
    names: list[str] = field(default_factory=list)
    episode: Episode = field(default_factory=Episode)


@pytest.mark.parametrize(
    "override, message",
    [
        ("steps=two", "steps: expected an int in [1, 1000], got 'two'"),
        ("steps=-3", "steps: expected an int in [1, 1000], got -3"),
        ("steps=true", "steps: expected an int in [1, 1000], got True"),
        ("episode.max_calls=abc", "episode.max_calls: expected an int in [0, 50], got 'abc'"),
        ("episode.temperature=-1", "episode.temperature: expected a number >= 0.0, got -1"),
        ("limit=-5", "limit: expected an int or null >= 1, got -5"),
        ("mode=fuzzy", "mode: expected one of ['f1', 'exact'], got 'fuzzy'"),
        ("seed=x", "seed: expected an int or null, got 'x'"),
        ("blocks=3", "blocks: expected a list of ints like [0, 1], got 3"),
        ("blocks=[0,x]", "blocks: expected a list of ints like [0, 1], got [0, 'x']"),
        ("size=[1,2,3]", "size: expected a list of 2 values"),
        ("episode=3", "episode: expected a mapping of Episode keys (set one with episode.KEY=VALUE), got 3"),
    ],
)
def test_wrong_values_refused_naming_key_expected_and_value(override, message):
    with pytest.raises(ConfigError) as ei:
        resolve(Checked, None, [override])
    assert message in str(ei.value)


def test_good_values_are_converted():
    cfg = resolve(
        Checked,
        None,
        [
            "steps=8",
            "mode=exact",
            "seed=3",
            "limit=null",
            "blocks=[2]",
            "size=[8,16]",
            "names=[a,b]",
            "episode.temperature=1e-3",
            "episode.max_calls=0",
        ],
    )
    assert (cfg.steps, cfg.mode, cfg.seed, cfg.limit, cfg.blocks, cfg.size) == (
        8,
        "exact",
        3,
        None,
        (2,),
        (8, 16),
    )
    assert cfg.names == ["a", "b"] and cfg.episode == Episode(max_calls=0, temperature=0.001)


def test_malformed_yaml_preset_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: 4\nepisode:\n  max_calls: [1, 2\nmode: f1\n")
    with pytest.raises(ConfigError, match=rf"preset {bad}:\d+: invalid YAML \(line \d+, column \d+"):
        resolve(Checked, bad)
    lst = tmp_path / "list.yaml"
    lst.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        resolve(Checked, lst)


def test_preset_values_are_checked_too(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("episode:\n  max_calls: many\n")
    with pytest.raises(ConfigError, match="episode.max_calls: expected an int in \\[0, 50\\], got 'many'"):
        resolve(Checked, p)


def test_bad_override_value_yaml_is_a_config_error():
    with pytest.raises(ConfigError, match="not valid YAML"):
        resolve(Checked, None, ["blocks=[1,"])
    with pytest.raises(ConfigError, match="empty key"):
        resolve(Checked, None, ["=3"])


def test_preset_dir_from_env_at_call_time(tmp_path, monkeypatch):
    (tmp_path / "mine.yaml").write_text("steps: 7\n")
    monkeypatch.setenv("VIDLAB_CONFIG_DIR", str(tmp_path))
    assert resolve(Checked, "mine").steps == 7
    monkeypatch.setenv("VIDLAB_CONFIG_DIR", str(tmp_path / "absent"))
    with pytest.raises(ConfigError, match="does not exist"):
        resolve(Checked, "mine")


def test_config_from_args_grammar_and_flags():
    import argparse

    from vidlab.config import add_config_args, config_from_args

    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int)
    add_config_args(p)
    args = p.parse_args(["mode=exact", "--set", "episode.max_calls=2", "--steps", "9"])
    cfg = config_from_args(Checked, args, {"steps": args.steps})
    assert (cfg.mode, cfg.episode.max_calls, cfg.steps) == ("exact", 2, 9)
    with pytest.raises(ConfigError, match="steps: expected an int"):
        config_from_args(Checked, p.parse_args(["--steps", "-1"]), {"steps": -1})


def test_every_shipped_preset_is_valid_yaml():
    from vidlab.config import CONFIG_DIR, load_preset

    presets = sorted(CONFIG_DIR.rglob("*.yaml"))
    assert presets, f"no presets found in {CONFIG_DIR}"
    for p in presets:
        assert isinstance(load_preset(p), dict)
