"""Configs: dataclass defaults <- YAML preset <- ``key=value`` overrides, type- and range-checked.

A preset is a YAML file given by path, or by name from the preset folder (:func:`config_dir`):
``$VIDLAB_CONFIG_DIR`` if set, else a checkout's ``configs/`` where vidlab runs from one, else the presets
the installed package carries (``vidlab/presets/``, the same files: the wheel maps ``configs/`` there).
Presets are grouped by the command they serve
(``configs/generate/tiny.yaml``); a config class names its folder in ``PRESET_DIR`` so that the bare
name works for its command (``vidlab generate --preset tiny``). Nested dataclasses are addressed with dots:
``lam.alpha_max=2.5``. Values are parsed as YAML scalars (``steps=4``, ``sci.enabled=false``,
``blocks=[0,1]``) and then checked against the dataclass field's type at once, before any model
loads: ``int``, ``float`` (ints accepted), ``bool``, ``str``, ``Path``, ``Optional[...]``/unions,
``Literal[...]``, ``tuple[...]``/``list[...]``/``dict[str, ...]`` of those, and nested dataclasses.
A wrong value is a :class:`ConfigError` naming the key, what was expected and what was given::

    steps: expected an int in [1, 1000], got 'two'

Ranges are declared on the field, inclusive, ``None`` for an open end (:func:`in_range` writes the
metadata)::

    steps: int = field(default=4, metadata=in_range(1))      # == metadata={"range": (1, None)}

A config built in Python checks itself the same way: its ``__post_init__`` calls :func:`validate`, so
``GenerateConfig(steps=0)`` is refused exactly like ``steps=0`` on the command line::

    def __post_init__(self) -> None:
        validate(self)

Renamed keys keep working for one release: a dataclass lists them in ``LEGACY_KEYS`` (old key -> new
dotted key, relative to that dataclass), and :func:`from_dict` moves the value with one
:class:`ConfigDeprecationWarning` line.

An unknown key lists the valid ones; a malformed preset is reported with its file name and line.

Why hand-written rather than OmegaConf structured configs, draccus or tyro: OmegaConf 2.3 (installed)
has no ``Literal`` and no range checks and turns tuples into ListConfigs that leak into the code;
tyro and draccus generate ``--flag value`` parsers, a second grammar beside the ``key=value``
overrides every command already documents, and draccus is not installed. The merger here is ~200
lines over plain dataclasses, which is all the configs are, and it gives the one-line errors the CLI
needs.
"""

from __future__ import annotations

import dataclasses
import os
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from vidlab.errors import UserError

T = TypeVar("T")

CONFIG_ENV = "VIDLAB_CONFIG_DIR"
# the presets inside an installed package (pyproject maps the checkout's configs/ to vidlab/presets in the wheel)
PACKAGED_PRESETS = Path(__file__).resolve().parent / "presets"


class ConfigError(UserError, ValueError):
    """A preset or override that does not fit the config's dataclass."""


class ConfigDeprecationWarning(FutureWarning):
    """A config key that was renamed; the old key still works for one release."""


class PresetSourceWarning(UserWarning):
    """Said once per process: a checkout's ``configs/`` is used in place of the installed package's presets."""


def _is_checkout(root: Path) -> bool:
    """``root`` is a vidlab source tree: its pyproject.toml names the project and it has a configs/ folder."""
    try:
        head = (root / "pyproject.toml").read_text(errors="replace")[:4000]
    except OSError:
        return False
    return (root / "configs").is_dir() and re.search(r'(?m)^name\s*=\s*"vidlab"', head) is not None


def _checkout_configs() -> Path | None:
    """The configs/ of the checkout vidlab is imported from (editable install, PYTHONPATH), else of the
    checkout the working directory is in (its root or any folder below it)."""
    here = Path(__file__).resolve().parents[1]
    if _is_checkout(here):
        return here / "configs"
    cwd = Path.cwd().resolve()
    for root in (cwd, *cwd.parents):
        if _is_checkout(root):
            return root / "configs"
    return None


_SAID: set[Path] = set()


def config_dir(say: bool = True) -> Path:
    """The preset folder: ``$VIDLAB_CONFIG_DIR``, else a checkout's ``configs/`` (the one vidlab runs from, or
    the one the working directory is in), else the installed package's presets. Where a checkout's folder
    wins over installed presets, a :class:`PresetSourceWarning` says so once (``say=False``: not here)."""
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env).expanduser()
    checkout = _checkout_configs()
    if checkout is None:
        return PACKAGED_PRESETS
    if say and PACKAGED_PRESETS.is_dir() and checkout not in _SAID:
        _SAID.add(checkout)
        import warnings

        warnings.warn(
            f"presets: the checkout's {checkout} is used, not the installed package's {PACKAGED_PRESETS} "
            f"(set {CONFIG_ENV} to choose)",
            PresetSourceWarning,
            stacklevel=2,
        )
    return checkout


# the preset folder as found at import (for listings); lookups call config_dir(), which reads the environment
CONFIG_DIR = config_dir(say=False)


# Presets are grouped by the command they serve (configs/generate/, configs/train-agent/, configs/qa/,
# configs/demo/, configs/compbench/). The flat names they had before keep working for one release.
PRESET_RENAMES = {
    "tiny": "generate/tiny",
    "gen-toyworld": "generate/toyworld",
    "wan2.1-t2v-1.3b": "generate/wan2.1-t2v-1.3b",
    "wan2.1-t2v-14b": "generate/wan2.1-t2v-14b",
    "wan2.2-t2v-a14b": "generate/wan2.2-t2v-a14b",
    "toyworld": "train-agent/toyworld",
    "rl/trl-tiny": "train-agent/trl-tiny",
    "rl/trl-qwen3-vl-8b": "train-agent/trl-qwen3-vl-8b",
    "rl/verl-qwen3-vl-8b": "train-agent/verl-qwen3-vl-8b",
    "videobrain-qwen-vl": "qa/videobrain-qwen-vl",
    "demo": "demo/default",
    "demo-tiny": "demo/tiny",
}


def _named(folder: Path, name: str) -> Path | None:
    for cand in (folder / f"{name}.yaml", folder / name):
        if cand.is_file():
            return cand
    return None


def preset_path(name_or_path: str | os.PathLike, command: str | None = None) -> Path:
    """Resolve a preset given as a path, or as a name in ``configs/`` (with or without ``.yaml``).

    ``command`` is the preset folder of the command asking (a config class's ``PRESET_DIR``, e.g.
    ``"generate"``): there a bare name is enough (``tiny`` -> ``configs/generate/tiny.yaml``). A flat name
    from before the presets were grouped (:data:`PRESET_RENAMES`) still resolves, with one
    :class:`ConfigDeprecationWarning`."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    folder = config_dir()
    name = str(name_or_path)
    found = (_named(folder / command, name) if command else None) or _named(folder, name)
    if found is not None:
        return found
    new = PRESET_RENAMES.get(name.removesuffix(".yaml"))
    if new is not None and (found := _named(folder, new)) is not None:
        import warnings

        warnings.warn(
            f"preset name {name!r} is deprecated: write {new!r} (configs/{new}.yaml; the old name works "
            "for one release)",
            ConfigDeprecationWarning,
            stacklevel=3,
        )
        return found
    if not folder.is_dir():
        raise ConfigError(
            f"unknown preset {name!r}: not a file, and the preset folder {folder} does not exist "
            f"(pass a path to a .yaml file, or set {CONFIG_ENV} to a folder of presets)"
        )
    raise ConfigError(_unknown_preset(folder, name, command))


def _unknown_preset(folder: Path, name: str, command: str | None) -> str:
    """The message for a preset name that names nothing: a did-you-mean, then the asking command's presets
    only (``configs/<command>/``; every preset when the command has no folder of its own)."""
    import difflib

    own = folder / command if command and (folder / command).is_dir() else folder
    known = sorted(str(q.relative_to(folder).with_suffix("")) for q in own.rglob("*.yaml"))
    # a bare name is compared with the bare names (tny -> tiny), a folder/name with the full names
    stem = name.removesuffix(".yaml")
    by_key = {(k if "/" in stem else k.rsplit("/", 1)[-1]): k for k in known}
    close = [by_key[c] for c in difflib.get_close_matches(stem, list(by_key), n=2, cutoff=0.6)]
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return f"unknown preset {name!r}: not a file; {hint}the presets here: {known} (in {own}; or pass a .yaml path)"


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return str(problem)


def load_preset(name_or_path: str | os.PathLike, command: str | None = None) -> dict[str, Any]:
    """The mapping in a preset file; malformed YAML is a ConfigError naming ``file:line``."""
    path = preset_path(name_or_path, command)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read preset {path}: {e}") from e
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(f"preset {where}: invalid YAML ({_yaml_problem(e)})") from e
    if not isinstance(data, dict):
        raise ConfigError(f"preset {path} must hold a mapping of keys to values, got a {type(data).__name__}")
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
        if not key.strip() or any(not part for part in key.strip().split(".")):
            raise ConfigError(f"override {item!r} has an empty key; write key=value (e.g. steps=4)")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as e:
            raise ConfigError(f"override {item!r}: the value is not valid YAML ({_yaml_problem(e)})") from e
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
        return tp  # type: ignore[return-value]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            if dataclasses.is_dataclass(arg):
                return arg  # type: ignore[return-value]
    return None


# ------------------------------------------------------------------------------------- value checking
class _Mismatch(Exception):
    """Internal: the value does not fit the type; ``expected`` says what would."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


def _describe(tp: Any) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is type(None):
        return "null"
    if tp in (int, float, bool, str):
        return {"int": "an int", "float": "a number", "bool": "true/false", "str": "a string"}[tp.__name__]
    if tp is Path:
        return "a path"
    if origin is typing.Literal:
        return f"one of {list(args)}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if tp in (tuple, list) or origin in (tuple, list):
        inner = args[0] if args and (len(args) == 1 or args[-1] is Ellipsis) else None
        return f"a list of {_describe(inner).removeprefix('a ').removeprefix('an ')}s" if inner else "a list"
    if tp is dict or origin is dict:
        return "a mapping"
    if dataclasses.is_dataclass(tp):
        return f"a mapping of {getattr(tp, '__name__', 'its')} keys"
    return getattr(tp, "__name__", str(tp))


def _check_type(value: Any, tp: Any) -> Any:
    """``value`` converted to ``tp`` (int -> float, list -> tuple, str -> Path), or :class:`_Mismatch`."""
    if tp is Any or tp is object or isinstance(tp, TypeVar):
        return value
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _check_type(value, args[0])
    if tp is type(None):
        if value is None:
            return None
        raise _Mismatch("null")
    if origin in (typing.Union, types.UnionType):
        # exact types first, so that 1 stays an int in ``int | float`` and "1" a string in ``str | int``
        for arg in sorted(
            args, key=lambda a: 0 if isinstance(value, a if isinstance(a, type) else ()) else 1
        ):
            try:
                return _check_type(value, arg)
            except _Mismatch:
                continue
        raise _Mismatch(_describe(tp))
    if origin is typing.Literal:
        if value in args and not (isinstance(value, bool) and not any(isinstance(a, bool) for a in args)):
            return value
        if isinstance(value, (int, float)) and str(value) in args:
            return str(value)
        raise _Mismatch(_describe(tp))
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch("true/false")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise _Mismatch("an int")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads 1e-3 as a string
            try:
                return float(value)
            except ValueError:
                pass
        raise _Mismatch("a number")
    if tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return str(value)
        raise _Mismatch("a string")
    if tp is Path or (isinstance(tp, type) and issubclass(tp, os.PathLike)):
        if isinstance(value, (str, os.PathLike)):
            return Path(value)
        raise _Mismatch("a path")
    if tp in (tuple, list) or origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise _Mismatch(_describe(tp) + " like [0, 1]")
        seq = tuple if (tp is tuple or origin is tuple) else list
        if not args:
            return seq(value)
        if seq is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            fixed = f"a list of {len(args)} values ({', '.join(_describe(a) for a in args)})"
            if len(value) != len(args):
                raise _Mismatch(fixed)
            try:
                return tuple(_check_type(v, a) for v, a in zip(value, args))
            except _Mismatch:
                raise _Mismatch(fixed) from None
        try:
            return seq(_check_type(v, args[0]) for v in value)
        except _Mismatch:
            raise _Mismatch(_describe(tp) + " like [0, 1]") from None
    if tp is dict or origin is dict:
        if not isinstance(value, dict):
            raise _Mismatch("a mapping")
        if len(args) == 2:
            return {_check_type(k, args[0]): _check_type(v, args[1]) for k, v in value.items()}
        return dict(value)
    if dataclasses.is_dataclass(tp):
        raise _Mismatch(_describe(tp))
    if isinstance(tp, type) and not isinstance(value, tp):
        raise _Mismatch(_describe(tp))
    return value


def _range_text(lo: Any, hi: Any) -> str:
    if lo is not None and hi is not None:
        return f"in [{lo}, {hi}]"
    return f">= {lo}" if lo is not None else f"<= {hi}"


def _check_range(value: Any, rng: Any) -> bool:
    lo, hi = rng
    vals = value if isinstance(value, (list, tuple)) else [value]
    for v in vals:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                return False
    return True


def check_value(value: Any, tp: Any, key: str, metadata: typing.Mapping[str, Any] | None = None) -> Any:
    """Check (and convert) one config value against its field type and ``metadata["range"]``."""
    rng = (metadata or {}).get("range")
    try:
        out = _check_type(value, tp)
    except _Mismatch as m:
        expected = m.expected + (f" {_range_text(*rng)}" if rng else "")
        raise ConfigError(f"{key}: expected {expected}, got {value!r}") from None
    if rng and out is not None and not _check_range(out, rng):
        raise ConfigError(f"{key}: expected {_describe(tp)} {_range_text(*rng)}, got {value!r}")
    return out


def _coerce(value: Any, tp: Any, where: str) -> Any:  # kept for callers of the old name
    return check_value(value, tp, where)


def in_range(lo: float | None = None, hi: float | None = None) -> dict[str, Any]:
    """Field metadata for an inclusive range (``None`` = open end): ``field(default=4, metadata=in_range(1))``."""
    return {"range": (lo, hi)}


_HINTS: dict[type, dict[str, Any]] = {}


def validate(obj: Any, prefix: str = "") -> None:
    """Check (and normalise: list -> tuple, int -> float, str -> Path) every field of dataclass ``obj`` in
    place against its type and ``metadata["range"]``; call it from ``__post_init__``. Nested dataclass
    values check themselves. A wrong value is a :class:`ConfigError` naming ``prefix + field``, the same
    one-line message :func:`from_dict` gives for a preset or an override."""
    cls = type(obj)
    if cls not in _HINTS:
        _HINTS[cls] = _field_types(cls)
    hints = _HINTS[cls]
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            continue
        checked = check_value(value, hints.get(f.name, Any), prefix + f.name, f.metadata)
        if checked is not value:
            object.__setattr__(obj, f.name, checked)  # frozen dataclasses too


def _apply_legacy_keys(cls: type, data: dict[str, Any], where: str) -> dict[str, Any]:
    """Move renamed keys (``cls.LEGACY_KEYS``: old -> new dotted key) to their new place, one warning each."""
    legacy: dict[str, str] = getattr(cls, "LEGACY_KEYS", None) or {}
    if not any(old in data for old in legacy):
        return data
    import warnings

    out = {k: v for k, v in data.items() if k not in legacy}
    for old, new in legacy.items():
        if old not in data:
            continue
        parts = new.split(".")
        node: Any = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{where}{old} (now {where}{new}) conflicts with {where}{part}={node!r}")
        if parts[-1] in node:
            raise ConfigError(f"{where}{old} is the old name of {where}{new}; set only {where}{new}")
        node[parts[-1]] = data[old]
        warnings.warn(
            f"config key {where}{old} is deprecated: write {where}{new} (the old key works for one release)",
            ConfigDeprecationWarning,
            stacklevel=4,
        )
    return out


def from_dict(cls: type[T], data: dict[str, Any], where: str = "") -> T:
    """Build dataclass ``cls`` from ``data``: unknown keys (listing the valid ones), wrong types and
    out-of-range values are :class:`ConfigError` naming the dotted key."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where.rstrip('.') or 'config'}: expected a mapping of keys, got {data!r}")
    data = _apply_legacy_keys(cls, data, where)
    types_ = _field_types(cls)
    meta = {f.name: f.metadata for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(data) - set(types_)
    if unknown:
        raise ConfigError(
            f"unknown config key(s) {sorted(where + str(k) for k in unknown)}; valid keys here: {sorted(types_)}"
        )
    kwargs: dict[str, Any] = {}
    defaults = cls()
    for name, tp in types_.items():
        if name not in data:
            continue
        sub = _dataclass_in(tp)
        value = data[name]
        if sub is not None and isinstance(value, dict):
            current = getattr(defaults, name)
            base = dataclasses.asdict(current) if dataclasses.is_dataclass(current) else {}  # type: ignore[arg-type]
            value = _apply_legacy_keys(
                sub, value, f"{where}{name}."
            )  # before the defaults fill in the new keys
            kwargs[name] = from_dict(sub, deep_merge(base, value), where=f"{where}{name}.")
        elif sub is not None and value is not None and not isinstance(value, sub):
            raise ConfigError(
                f"{where}{name}: expected a mapping of {sub.__name__} keys "
                f"(set one with {where}{name}.KEY=VALUE), got {value!r}"
            )
        else:
            kwargs[name] = check_value(value, tp, where + name, meta[name])
    try:
        return dataclasses.replace(defaults, **kwargs)  # type: ignore[type-var]
    except ConfigError:
        raise
    except (ValueError, TypeError) as e:  # a __post_init__ that validates combinations
        raise ConfigError(f"{where.rstrip('.') or cls.__name__}: {e}") from e


def resolve(cls: type[T], preset: str | os.PathLike | None = None, overrides: list[str] | None = None) -> T:
    """Defaults <- preset <- overrides, validated against ``cls``. A bare preset name is looked up in
    ``configs/<cls.PRESET_DIR>/`` first (the folder of the command the config serves)."""
    data: dict[str, Any] = load_preset(preset, getattr(cls, "PRESET_DIR", None)) if preset else {}
    data = deep_merge(data, parse_overrides(overrides))
    return from_dict(cls, data)


def to_dict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def save_resolved(cfg: Any, out_dir: str | os.PathLike, name: str = "config.yaml") -> Path:
    """Write the resolved config next to an output (atomically) so every result says how it was made."""
    from vidlab.io import atomic_write_text

    path = Path(out_dir) / name
    return atomic_write_text(path, yaml.safe_dump(_plain(to_dict(cfg)), sort_keys=False))


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


# --- the one command-line grammar: ``--preset NAME|PATH`` plus positional ``key=value`` overrides ---


def add_config_args(parser: Any, positional: bool = True, example: str | None = None) -> None:
    """Give an argparse parser the shared config grammar.

    ``--preset NAME|PATH`` picks a YAML preset; trailing ``key=value`` words are overrides
    (``--set key=value`` is an alias that may be repeated). Read them back with
    :func:`config_from_args`. A command whose own positional argument takes many words (``vidlab index
    INPUTS...``) passes ``positional=False``, moves the ``key=value`` words of its positional into
    ``args.overrides`` itself, and gets only the two options here. ``example``: override words valid for
    this command's config, shown in its help (tests/test_docs_examples.py resolves every one).
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
    if not positional:
        return
    parser.add_argument(
        "overrides",
        nargs="*",
        default=[],
        metavar="key=value",
        help=f"config overrides{f', e.g. {example}' if example else ''} (dotted keys reach nested settings)",
    )


def config_from_args(cls: type[T], args: Any, flags: dict[str, Any] | None = None) -> T:
    """Defaults <- ``--preset`` <- ``key=value`` overrides <- explicit flags (dotted keys; None = unset)."""
    overrides = list(getattr(args, "overrides", None) or []) + list(
        getattr(args, "set_overrides", None) or []
    )
    for key, value in (flags or {}).items():
        if value is not None:
            overrides.append(
                f"{key}={yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}"
            )
    return resolve(cls, getattr(args, "preset", None), overrides)
