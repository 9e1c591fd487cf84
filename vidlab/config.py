"""Configs: dataclass defaults <- YAML preset <- ``key=value`` overrides; the resolved config is saved.

A preset is a YAML file given by path, or by name from ``configs/`` (``VIDLAB_CONFIG_DIR`` overrides
that folder). Nested dataclasses are addressed with dots: ``lam.alpha_max=2.5``. Values are parsed
as YAML scalars, so ``steps=4``, ``sci.enabled=false`` and ``blocks=[0,1]`` all do what they say.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from vidlab.errors import UserError

T = TypeVar("T")

CONFIG_DIR = Path(os.environ.get("VIDLAB_CONFIG_DIR", Path(__file__).resolve().parents[1] / "configs"))


class ConfigError(UserError, ValueError):
    """A preset or override that does not fit the config's dataclass."""


def preset_path(name_or_path: str | os.PathLike) -> Path:
    """Resolve a preset given as a path or as a name in ``configs/`` (with or without ``.yaml``)."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    for cand in (CONFIG_DIR / f"{name_or_path}.yaml", CONFIG_DIR / str(name_or_path)):
        if cand.is_file():
            return cand
    known = sorted(q.stem for q in CONFIG_DIR.glob("*.yaml")) if CONFIG_DIR.is_dir() else []
    raise ConfigError(
        f"unknown preset {str(name_or_path)!r}: not a file, and not one of {known} in {CONFIG_DIR}"
    )


def load_preset(name_or_path: str | os.PathLike) -> dict[str, Any]:
    path = preset_path(name_or_path)
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"preset {path} must hold a mapping, got {type(data).__name__}")
    return data


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """``["a.b=1", "c=x"]`` -> ``{"a": {"b": 1}, "c": "x"}`` with YAML-typed values."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(
                f"override {item!r} must look like key=value (e.g. steps=4 or lam.enabled=false)"
            )
        key, raw = item.split("=", 1)
        value = yaml.safe_load(raw) if raw.strip() else ""
        node = out
        parts = key.strip().split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r} conflicts with an earlier override of {part!r}")
        node[parts[-1]] = value
    return out


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(merged.get(k), dict):
            merged[k] = deep_merge(merged[k], v)
        else:
            merged[k] = v
    return merged


def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls)}


def _dataclass_in(tp: Any) -> type | None:
    if dataclasses.is_dataclass(tp):
        return tp
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            if dataclasses.is_dataclass(arg):
                return arg
    return None


def _coerce(value: Any, tp: Any, where: str) -> Any:
    if value is None:
        return None
    if tp in (float,) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is tuple or typing.get_origin(tp) is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return tuple(value)
    if tp is str and not isinstance(value, str):
        return str(value)
    if tp is int and isinstance(value, bool):
        raise ConfigError(f"{where}: expected an int, got {value!r}")
    if tp is bool and not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true/false, got {value!r}")
    return value


def from_dict(cls: type[T], data: dict[str, Any], where: str = "") -> T:
    """Build dataclass ``cls`` from ``data``, rejecting unknown keys with the list of valid ones."""
    types_ = _field_types(cls)
    unknown = set(data) - set(types_)
    if unknown:
        raise ConfigError(
            f"unknown config key(s) {sorted(where + k for k in unknown)}; valid keys here: {sorted(types_)}"
        )
    kwargs = {}
    defaults = cls()
    for name, tp in types_.items():
        if name not in data:
            continue
        sub = _dataclass_in(tp)
        value = data[name]
        if sub is not None and isinstance(value, dict):
            current = getattr(defaults, name)
            base = dataclasses.asdict(current) if dataclasses.is_dataclass(current) else {}
            kwargs[name] = from_dict(sub, deep_merge(base, value), where=f"{where}{name}.")
        else:
            kwargs[name] = _coerce(value, tp, where + name)
    return dataclasses.replace(defaults, **kwargs)


def resolve(cls: type[T], preset: str | os.PathLike | None = None, overrides: list[str] | None = None) -> T:
    """Defaults <- preset <- overrides, validated against ``cls``."""
    data: dict[str, Any] = load_preset(preset) if preset else {}
    data = deep_merge(data, parse_overrides(overrides))
    return from_dict(cls, data)


def to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def save_resolved(cfg: Any, out_dir: str | os.PathLike, name: str = "config.yaml") -> Path:
    """Write the resolved config next to an output so every result says how it was made."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(yaml.safe_dump(_plain(to_dict(cfg)), sort_keys=False))
    os.replace(tmp, path)
    return path


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


# --- the one command-line grammar: ``--preset NAME|PATH`` plus positional ``key=value`` overrides ---


def add_config_args(parser: Any) -> None:
    """Give an argparse parser the shared config grammar.

    ``--preset NAME|PATH`` picks a YAML preset; trailing ``key=value`` words are overrides
    (``--set key=value`` is an alias that may be repeated). Read them back with
    :func:`config_from_args`.
    """
    parser.add_argument(
        "--preset", metavar="NAME|PATH", help="YAML preset: a name in configs/ or a path to a .yaml file"
    )
    parser.add_argument(
        "--set",
        dest="set_overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an override, same as a trailing key=value word (may be repeated)",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        default=[],
        metavar="key=value",
        help="config overrides, e.g. steps=8 lam.enabled=false (dotted keys reach nested settings)",
    )


def config_from_args(cls: type[T], args: Any, flags: dict[str, Any] | None = None) -> T:
    """Defaults <- ``--preset`` <- ``key=value`` overrides <- explicit flags (dotted keys; None = unset)."""
    overrides = list(getattr(args, "overrides", None) or []) + list(getattr(args, "set_overrides", None) or [])
    for key, value in (flags or {}).items():
        if value is not None:
            overrides.append(f"{key}={yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}")
    return resolve(cls, getattr(args, "preset", None), overrides)
