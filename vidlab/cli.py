"""The ``vidlab`` command: one entry point whose subcommands each area registers.

Subcommands are declared under the ``vidlab.commands`` entry-point group in pyproject.toml, so this
module never imports ``generation`` or ``understanding`` itself; each subcommand is a
``main(argv) -> int`` that tests call directly.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import PackageNotFoundError, distribution, entry_points

from vidlab.errors import UserError

DESCRIPTIONS = {
    "synth": "render a procedural test video (shapes, colours, counters, text) to mp4",
    "contact-sheet": "read a video through vidlab and write a contact-sheet PNG plus its metadata",
    "index": "build CLIP frame-embedding caches for videos (local or Ray workers)",
    "search": "search indexed videos with a text query",
    "bench": "run the performance benchmarks in benchmarks/",
    "generate": "text-to-video with Comp-Attn on a Wan pipeline (tiny offline model or real weights)",
    "compbench": "generate and score T2V-CompBench prompts",
    "plan-cache": "list or clear the LLM layout planner's on-disk plan cache",
    "qa": "answer one question about a long video, printing the agent's trajectory",
    "eval-qa": "evaluate a policy on a long-video QA benchmark",
    "toyworld-data": "write synthetic long videos + multiple-choice questions (the QA toy world) for eval-qa",
    "classify": "label training samples Direct / Adaptive / Active for VideoBrain",
    "train-agent": "train a VideoBrain policy (toy world on CPU, or the verl/TRL engines)",
    "train-gen-toyworld": "train the toy world's small Wan (VAE, then transformer + UMT5) on CPU, resumably",
    "demo": "serve the Gradio generation demo",
}


def _module_exists(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is not installed
        return False


def commands(available_only: bool = True) -> dict[str, str]:
    """Registered subcommands as ``name -> "module:function"``; by default only those whose module is
    installed (``demo`` lives in the checkout's ``demos/`` package, not in the wheel)."""
    cmds = {ep.name: ep.value for ep in entry_points(group="vidlab.commands")}
    if available_only:
        cmds = {n: v for n, v in cmds.items() if _module_exists(v.split(":")[0])}
    return cmds


class CommandUnavailable(UserError):
    """A subcommand whose code or optional dependencies are not installed."""


def _usage(cmds: dict[str, str]) -> str:
    width = max((len(n) for n in cmds), default=8)
    lines = [
        "usage: vidlab <command> [options]",
        "",
        "vidlab: compositional video generation (Comp-Attn) and long-video understanding (VideoBrain).",
        "",
        "commands:",
    ]
    for name in sorted(cmds):
        lines.append(f"  {name:<{width}}  {DESCRIPTIONS.get(name, '')}")
    lines += ["", "Run `vidlab <command> --help` for a command's options."]
    return "\n".join(lines)


# import names whose distribution is named otherwise (any other import name is its distribution's name)
_DISTRIBUTIONS = {
    "open_clip": "open-clip-torch",
    "faiss": "faiss-cpu",
    "cv2": "opencv-python-headless",
    "hydra": "hydra-core",
    "google": "protobuf",
    "sklearn": "scikit-learn",
    "PIL": "pillow",
    "yaml": "pyyaml",
}
_OWN = ("vidlab", "generation", "understanding", "demos", "benchmarks")
# extras that gather the others, or are for working on vidlab itself: never the one to name
_NOT_NAMED = ("all", "dev", "docs")


@dataclass(frozen=True)
class Needs:
    """What a command needs beyond vidlab's base requirements: the extra that brings it, and the modules that
    every run imports (checked before the command runs, so a missing one is one line and nothing is written).
    ``when`` limits the check to some runs (a subcommand, an engine); ``--help`` is never checked."""

    extra: str
    modules: tuple[str, ...]
    when: Callable[[list[str]], bool] = lambda argv: True


def _first_positional(argv: list[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def _engine(argv: list[str]) -> str:
    for i, arg in enumerate(argv):
        if arg.startswith("--engine="):
            return arg.split("=", 1)[1]
        if arg == "--engine" and i + 1 < len(argv):
            return argv[i + 1]
    return "toy"


_CLIP = ("torch", "open_clip", "safetensors")
_GEN = ("torch", "diffusers", "transformers", "safetensors")
# Options that need more (--backend ray, --scorer faiss, a Hugging Face policy) are told at run time: a missing
# optional module raised inside a command is the same one line (see `missing_extra`).
NEEDS: dict[str, Needs] = {
    "index": Needs("clip", _CLIP),
    "search": Needs("clip", _CLIP),
    "generate": Needs("gen", _GEN),
    "train-gen-toyworld": Needs("gen", _GEN),
    "compbench": Needs("gen", (*_GEN, "open_clip"), lambda a: _first_positional(a) in ("generate", "score")),
    "qa": Needs("understand", _CLIP),
    "eval-qa": Needs("understand", _CLIP),
    "classify": Needs("understand", _CLIP),
    "train-agent": Needs("understand", _CLIP, lambda a: _engine(a) == "toy"),
    "demo": Needs("demo", ("gradio", *_GEN, "open_clip")),
}


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def extras() -> dict[str, frozenset[str]]:
    """Each extra of the installed vidlab -> the distributions it brings (normalised names), the extras it
    includes (``vidlab[clip]``) followed; read from the installed metadata, so pyproject.toml is the one list."""
    try:
        reqs = distribution("vidlab").requires or []
    except PackageNotFoundError:  # a checkout on sys.path, not installed
        return {}
    direct: dict[str, set[str]] = {}
    for raw in reqs:
        marker = re.search(r"""extra\s*==\s*['"]([^'"]+)['"]""", raw)
        name = re.match(r"\s*([A-Za-z0-9._-]+)\s*(\[([^\]]*)\])?", raw)
        if not marker or not name:
            continue
        items = direct.setdefault(marker.group(1), set())
        if _key(name.group(1)) == "vidlab":
            items.update(f"vidlab[{e.strip()}]" for e in (name.group(3) or "").split(",") if e.strip())
        else:
            items.add(_key(name.group(1)))

    def closure(extra: str, seen: frozenset[str]) -> set[str]:
        out: set[str] = set()
        for item in direct.get(extra, ()):
            if item.startswith("vidlab["):
                inner = item[len("vidlab[") : -1]
                if inner not in seen:
                    out |= closure(inner, seen | {inner})
            else:
                out.add(item)
        return out

    return {extra: frozenset(closure(extra, frozenset({extra}))) for extra in direct}


def install_hint(modules: list[str], command: str | None = None) -> str:
    """``pip install 'vidlab[EXTRA]'`` for the missing ``modules`` (import names): the command's own extra
    where it brings them all, else the smallest extra that does; ``pip install NAME`` where no extra does."""
    dists = {_key(_DISTRIBUTIONS.get(m, m)) for m in modules}
    table = {e: d for e, d in extras().items() if e not in _NOT_NAMED}
    own = NEEDS[command].extra if command in NEEDS else None
    if own is not None and dists <= table.get(own, frozenset()):
        return f"pip install 'vidlab[{own}]'"
    fits = [e for e, d in table.items() if dists <= d]
    if fits:
        return f"pip install 'vidlab[{min(fits, key=lambda e: (len(table[e]), e))}]'"
    return "pip install " + " ".join(sorted(dists))


def _unavailable(command: str, modules: list[str]) -> CommandUnavailable:
    names = ", ".join(repr(m) for m in modules)
    noun = "package" if len(modules) == 1 else "packages"
    return CommandUnavailable(
        f"`vidlab {command}` needs the {names} {noun}, not installed here: {install_hint(modules, command)}"
    )


def check_needs(command: str, argv: list[str]) -> None:
    """A ``CommandUnavailable`` (one line naming the extra) if a module every run of ``command`` imports is
    missing; nothing for ``--help`` or a run that needs none of them."""
    needs = NEEDS.get(command)
    if needs is None or "-h" in argv or "--help" in argv or not needs.when(argv):
        return
    missing = [m for m in needs.modules if not _module_exists(m)]
    if missing:
        raise _unavailable(command, missing)


def missing_extra(
    command: str, exc: ModuleNotFoundError, known_only: bool = True
) -> CommandUnavailable | None:
    """The one-line error for a ``ModuleNotFoundError`` of an optional package (or None: one of our own modules,
    a bug; with ``known_only``, also a module that no extra brings, which is a bug in the requirements)."""
    missing = (exc.name or "").split(".")[0]
    if not missing or missing in _OWN:
        return None
    dist = _key(_DISTRIBUTIONS.get(missing, missing))
    if known_only and not any(dist in d for d in extras().values()):
        return None
    return _unavailable(command, [missing])


def load_command(name: str) -> Callable[[list[str]], int | None]:
    """The ``main(argv)`` of subcommand ``name``; a UserError (one line) if it is unknown or its
    optional dependencies are missing. An import error inside our own code stays a bug (traceback)."""
    cmds = commands()
    if name not in cmds:
        import difflib

        close = difflib.get_close_matches(name, list(cmds), n=3)
        hint = f"did you mean: {', '.join(close)}? " if close else ""
        raise CommandUnavailable(f"unknown command {name!r}; {hint}`vidlab --help` lists the commands")
    module, func = cmds[name].split(":")
    try:
        return getattr(import_module(module), func)
    except ModuleNotFoundError as e:
        err = missing_extra(name, e, known_only=False)
        if err is None:
            raise
        raise err from e


def run(name: str, argv: list[str]) -> int | None:
    """Run subcommand ``name`` as ``vidlab NAME ARGV`` does, less the error reporting: its needs are checked
    first, and a missing optional package met while it runs is the same one line naming the extra."""
    check_needs(name, argv)
    main_fn = load_command(name)
    try:
        return main_fn(argv)
    except ModuleNotFoundError as e:
        err = missing_extra(name, e)
        if err is None:
            raise
        raise err from e


def main(argv: list[str] | None = None) -> int:
    """``vidlab [--debug] <command> [args]``: every command fails the same way (see vidlab.errors)."""
    from vidlab.errors import run_command

    argv = list(sys.argv[1:] if argv is None else argv)
    debug = False
    while argv and argv[0] == "--debug":  # `vidlab --debug generate ...` as well as `... generate --debug`
        argv.pop(0)
        debug = True
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage(commands()))
        return 0
    if argv[0] == "--version":
        from vidlab import __version__

        print(f"vidlab {__version__}")
        return 0
    name, rest = argv[0], argv[1:] + (["--debug"] if debug else [])
    if name not in commands():  # `vidlab: error: unknown command ...`, not `vidlab <typo>: error: ...`
        return run_command("vidlab", lambda _: load_command(name)([]), ["--debug"] if debug else [])

    return run_command(f"vidlab {name}", lambda args: run(name, args), rest)


if __name__ == "__main__":
    raise SystemExit(main())
