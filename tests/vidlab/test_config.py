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
