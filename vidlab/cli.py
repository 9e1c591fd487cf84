"""The ``vidlab`` command: one entry point whose subcommands each area registers.

Subcommands are declared under the ``vidlab.commands`` entry-point group in pyproject.toml, so this
module never imports ``generation`` or ``understanding`` itself; each subcommand is a
``main(argv) -> int`` that tests call directly.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib import import_module
from importlib.metadata import entry_points

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


_EXTRAS = {
    "torch": "clip",
    "torchvision": "clip",
    "open_clip": "clip",
    "safetensors": "clip",
    "diffusers": "gen",
    "transformers": "gen",
    "accelerate": "gen",
    "ftfy": "gen",
    "sentencepiece": "gen",
    "pandas": "understand",
    "pyarrow": "understand",
    "ray": "ray",
    "gradio": "demo",
    "faiss": "ann",
}
_OWN = ("vidlab", "generation", "understanding", "demos", "benchmarks")


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
        missing = (e.name or "").split(".")[0]
        if not missing or missing in _OWN:
            raise
        extra = _EXTRAS.get(missing)
        how = f"pip install 'vidlab[{extra}]'" if extra else f"pip install {missing}"
        raise CommandUnavailable(
            f"`vidlab {name}` needs the {missing!r} package, which is not installed: {how}"
        ) from e


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

    def dispatch(args: list[str]) -> int | None:
        return load_command(name)(args)

    return run_command(f"vidlab {name}", dispatch, rest)


if __name__ == "__main__":
    raise SystemExit(main())
