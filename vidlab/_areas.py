"""The areas under one name: ``vidlab.generation``, ``vidlab.understanding``, ``vidlab.demos``.

The checkout keeps the folders the design fixes (``generation/``, ``understanding/``, ``demos/`` beside
``vidlab/``); pyproject's package mapping installs them as ``vidlab.<area>``, so an installed vidlab puts one
top-level name in site-packages that nothing else is likely to shadow. Two things here make that hold outside
an install too, and keep the old names working for one release:

- :class:`CheckoutAreas` finds ``vidlab.<area>`` in the folder beside ``vidlab/`` when no installed mapping does
  (a checkout on ``PYTHONPATH``, ``python demos/app.py``). It is consulted after every other finder.
- :func:`alias_old_name` makes ``import generation`` (and ``generation.x``) the very module objects of
  ``vidlab.generation`` (and ``vidlab.generation.x``), with one DeprecationWarning: never a second copy.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from pathlib import Path
from types import FrameType, ModuleType

AREAS = ("generation", "understanding", "demos")
_ROOT = Path(__file__).resolve().parents[1]
_MARK = "from vidlab._areas import alias_old_name"  # every area's __init__ holds it


class CheckoutAreas(importlib.abc.MetaPathFinder):
    """``vidlab.<area>`` from ``<checkout>/<area>/`` (used only when nothing installed provides it)."""

    def find_spec(self, fullname: str, path=None, target=None):  # noqa: ANN001 (importlib's signature)
        head, _, area = fullname.partition(".")
        if head != "vidlab" or area not in AREAS:
            return None
        init = _ROOT / area / "__init__.py"
        if not init.is_file():  # the area travelled as a top-level folder of its own (Ray's py_modules)
            found = importlib.machinery.PathFinder.find_spec(area)
            init = Path(found.origin) if found is not None and found.origin else init
            if not init.is_file() or _MARK not in init.read_text(errors="replace"):
                return None  # nothing, or some other package of that name
        return importlib.util.spec_from_file_location(
            fullname, init, submodule_search_locations=[str(init.parent)]
        )


class _AliasLoader(importlib.abc.Loader):
    """Loads ``area.x`` as the module ``vidlab.area.x`` itself (its own spec kept)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec):  # noqa: ANN001
        module = importlib.import_module(self.target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        if self._spec is not None:  # the import system stamped the alias's spec on it: put the real one back
            module.__spec__ = self._spec


class OldNames(importlib.abc.MetaPathFinder):
    """``generation.x`` -> ``vidlab.generation.x`` once ``generation`` itself was aliased (first on meta_path,
    so the folder is never imported a second time under the old name)."""

    def find_spec(self, fullname: str, path=None, target=None):  # noqa: ANN001
        head = fullname.partition(".")[0]
        if head not in AREAS or "." not in fullname or sys.modules.get(head) is None:
            return None
        if getattr(sys.modules[head], "__name__", "") != f"vidlab.{head}":
            return None  # `head` is some other package of that name (a user's own folder): not ours to alias
        return importlib.util.spec_from_loader(fullname, _AliasLoader(f"vidlab.{fullname}"))


def install_checkout_finder() -> None:
    if not any(isinstance(f, CheckoutAreas) for f in sys.meta_path):
        sys.meta_path.append(CheckoutAreas())


def _importer_stacklevel() -> int:
    """The stacklevel of the code that wrote the old import: past the import machinery and the alias's own
    modules, so the warning names the user's file and line (and filters by module work on it)."""
    level = 1
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith("<frozen importlib"):  # warnings.warn does not count these frames either
            ours = name == __file__ or (name.endswith("__init__.py") and Path(name).parent.name in AREAS)
            if not ours:
                return level
            level += 1
        frame = frame.f_back
    return 1


def alias_old_name(old: str) -> ModuleType:
    """Make the old top-level name ``old`` (``generation``, ``understanding``, ``demos``) an alias of
    ``vidlab.<old>``, warning once; returns the module."""
    if old not in AREAS:
        raise ValueError(f"{old!r} is not one of vidlab's areas {AREAS}")
    warnings.warn(
        f"'import {old}' is deprecated: import vidlab.{old} (the old name works for one more release)",
        DeprecationWarning,
        stacklevel=_importer_stacklevel(),
    )
    install_checkout_finder()
    module = importlib.import_module(f"vidlab.{old}")
    sys.modules[old] = module
    if not any(isinstance(f, OldNames) for f in sys.meta_path):
        sys.meta_path.insert(0, OldNames())
    return module
