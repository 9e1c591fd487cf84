"""The policy registry: a ``--policy SCHEME:REST`` spec names a class, resolved like compbench's metrics.

A policy class plugs in by being registered under a scheme, either in code::

    from vidlab.understanding.policies import register_policy

    @register_policy("mymodel")
    class MyPolicy:
        def __init__(self, rest: str, **kw): ...        # rest: what follows "mymodel:" in the spec
        def generate(self, messages, *, num_samples=1, temperature=0.0, max_new_tokens=512, seed=None): ...

or, from another installed package without touching vidlab, under the ``vidlab.policies`` entry-point group
(``[project.entry-points."vidlab.policies"]`` ``mymodel = "my_pkg.policy:MyPolicy"``). Two optional class
methods refine it: ``from_spec(rest, **kw)`` builds the policy instead of ``cls(rest, **kw)``, and
``check_spec(rest)`` validates the spec without loading anything (a one-line ``PolicySpecError`` before any
model loads). A third, ``clip_model(rest)``, names the CLIP model a policy ships with (a path or spec, or None);
the commands use it for ``clip_sample`` unless the user names another (``clip_model="auto"``,
``vidlab.understanding.evaluate.resolve_clip_model``). Built-in schemes come first: an entry point cannot replace one.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from importlib import import_module
from typing import Any

from vidlab.understanding.messages import Policy
from vidlab.understanding.policies.errors import PolicySpecError

ENTRY_POINT_GROUP = "vidlab.policies"

# scheme -> class, or "module:Class" imported on first use (heavy backends stay unimported until asked for)
_BUILTIN: dict[str, str] = {
    "hf": "vidlab.understanding.policies.builtin:HFSpec",
    "hf-tiny": "vidlab.understanding.policies.builtin:TinyQwenSpec",
    "openai": "vidlab.understanding.policies.builtin:OpenAISpec",
    "replay": "vidlab.understanding.policies.builtin:ReplaySpec",
    "const": "vidlab.understanding.policies.builtin:ConstSpec",
    "pixel": "vidlab.understanding.policies.builtin:PixelSpec",
}
_REGISTRY: dict[str, str | type] = dict(_BUILTIN)
_ORIGIN: dict[str, str] = {k: "built-in" for k in _BUILTIN}

__all__ = [
    "ENTRY_POINT_GROUP",
    "available_policies",
    "check_policy_spec",
    "get_policy_class",
    "load_policy",
    "register_policy",
    "split_spec",
]


def register_policy(scheme: str, cls: type | str | None = None) -> Any:
    """Register ``cls`` (a class or ``"module:Class"``) under ``scheme``; without ``cls``, a class decorator.

    Registering an existing scheme again replaces it (tests, notebooks); built-ins can be replaced this way
    only on purpose, in code, never by an installed entry point.
    """
    if not scheme or ":" in scheme or scheme != scheme.strip():
        raise ValueError(f"a policy scheme must be a non-empty word without ':', got {scheme!r}")

    def deco(c: type | str) -> type | str:
        _REGISTRY[scheme] = c
        _ORIGIN[scheme] = "registered"
        return c

    if cls is not None:
        return deco(cls)
    return deco


def unregister_policy(scheme: str) -> None:
    """Drop a registered scheme (built-ins come back as they were)."""
    _REGISTRY.pop(scheme, None)
    _ORIGIN.pop(scheme, None)
    if scheme in _BUILTIN:
        _REGISTRY[scheme], _ORIGIN[scheme] = _BUILTIN[scheme], "built-in"


def _load_entry_points() -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in _REGISTRY:
            _REGISTRY[ep.name] = ep.value
            _ORIGIN[ep.name] = f"entry point {ep.value}"


def available_policies() -> dict[str, str]:
    """Every scheme known now (built-in, registered, installed entry points) -> where it comes from."""
    _load_entry_points()
    return {k: _ORIGIN.get(k, "") for k in sorted(_REGISTRY)}


def split_spec(spec: Any) -> tuple[str, str]:
    """``"scheme:rest"`` -> ``(scheme, rest)``, or a ``PolicySpecError`` for a malformed or unknown scheme."""
    if not isinstance(spec, str) or ":" not in spec:
        raise PolicySpecError(
            str(spec), f"expected 'scheme:...' with scheme one of {tuple(available_policies())}"
        )
    scheme, rest = spec.split(":", 1)
    get_policy_class(scheme, spec)
    if not rest:
        raise PolicySpecError(spec, "nothing after the scheme")
    return scheme, rest


def get_policy_class(scheme: str, spec: str | None = None) -> type:
    """The class registered as ``scheme`` (imported on first use); ``PolicySpecError`` naming close schemes."""
    _load_entry_points()
    if scheme not in _REGISTRY:
        close = difflib.get_close_matches(scheme, list(_REGISTRY), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise PolicySpecError(
            spec or f"{scheme}:", f"unknown scheme {scheme!r}{hint}; known: {tuple(sorted(_REGISTRY))}"
        )
    target = _REGISTRY[scheme]
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        try:
            target = getattr(import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise PolicySpecError(
                spec or f"{scheme}:",
                f"scheme {scheme!r} points at {_REGISTRY[scheme]!r}, which cannot be imported: {e}",
            ) from e
        if not isinstance(target, type):
            raise PolicySpecError(spec or f"{scheme}:", f"{_REGISTRY[scheme]!r} is not a class")
        _REGISTRY[scheme] = target
    return target


def check_policy_spec(spec: str, **kw: Any) -> None:
    """Validate a ``--policy`` spec without loading a model or opening a connection (``PolicySpecError``).

    The scheme must be registered; the part after it is checked by the class's ``check_spec`` when it has one.
    """
    scheme, rest = split_spec(spec)
    cls = get_policy_class(scheme, spec)
    check: Callable[[str], Any] | None = getattr(cls, "check_spec", None)
    if check is not None:
        check(rest)


def load_policy(spec: str, **kw: Any) -> Policy:
    """Build the policy ``scheme:rest`` names; ``kw`` go to its ``from_spec`` (or its constructor)."""
    check_policy_spec(spec)
    scheme, rest = split_spec(spec)
    cls = get_policy_class(scheme, spec)
    build = getattr(cls, "from_spec", None)
    policy = build(rest, **kw) if build is not None else cls(rest, **kw)
    if not callable(getattr(policy, "generate", None)):
        raise PolicySpecError(spec, f"{type(policy).__name__} has no generate(messages, ...) method")
    if not getattr(policy, "name", None):
        try:
            policy.name = spec
        except AttributeError:
            pass
    return policy
