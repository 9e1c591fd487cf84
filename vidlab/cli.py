"""The ``vidlab`` command: one entry point whose subcommands each area registers.

Subcommands are declared under the ``vidlab.commands`` entry-point group in pyproject.toml, so this
module never imports ``generation`` or ``understanding`` itself; each subcommand is a
``main(argv) -> int`` that tests call directly.
"""

from __future__ import annotations

import sys
from importlib import import_module
from importlib.metadata import entry_points

DESCRIPTIONS = {
    "synth": "render a procedural test video (shapes, colours, counters, text) to mp4",
    "contact-sheet": "read a video through vidlab and write a contact-sheet PNG plus its metadata",
    "index": "build CLIP frame-embedding caches for videos (local or Ray workers)",
    "search": "search indexed videos with a text query",
    "bench": "run the performance benchmarks in benchmarks/",
    "generate": "text-to-video with Comp-Attn on a Wan pipeline (tiny offline model or real weights)",
    "compbench": "generate and score T2V-CompBench prompts",
    "qa": "answer one question about a long video, printing the agent's trajectory",
    "eval-qa": "evaluate a policy on a long-video QA benchmark",
    "classify": "label training samples Direct / Adaptive / Active for VideoBrain",
    "train-agent": "train the VideoBrain policy (toy GRPO)",
    "demo": "serve the Gradio generation demo",
}


def commands() -> dict[str, str]:
    """Registered subcommands as ``name -> "module:function"``."""
    return {ep.name: ep.value for ep in entry_points(group="vidlab.commands")}


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


def load_command(name: str):
    cmds = commands()
    if name not in cmds:
        import difflib

        close = difflib.get_close_matches(name, list(cmds), n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise SystemExit(f"vidlab: unknown command {name!r}.{hint}\n\n{_usage(cmds)}")
    module, func = cmds[name].split(":")
    return getattr(import_module(module), func)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmds = commands()
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage(cmds))
        return 0
    if argv[0] == "--version":
        from vidlab import __version__

        print(f"vidlab {__version__}")
        return 0
    from vidlab.errors import run_command

    return run_command(f"vidlab {argv[0]}", load_command(argv[0]), argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
