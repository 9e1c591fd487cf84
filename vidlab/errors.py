"""User errors: the one way a command fails on a user's mistake.

A ``UserError`` (or a subclass: ``ConfigError``, ``VideoReadError``, ``JobLockedError``, ...) means
the input was wrong, not the code. ``vidlab <command>`` prints it as one line on stderr and exits
with status 2; any other exception is a bug and keeps its traceback. ``--debug`` or
``VIDLAB_DEBUG=1`` shows the traceback for user errors too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

USAGE_EXIT = 2


class UserError(Exception):
    """An input, setting or environment problem the user can fix; the message says what to do."""


def debug_enabled(argv: Sequence[str] | None = None) -> bool:
    return os.environ.get("VIDLAB_DEBUG", "").strip().lower() in ("1", "true", "yes") or (
        argv is not None and "--debug" in argv
    )


def run_command(prog: str, func: Callable[[list[str]], int | None], argv: Sequence[str]) -> int:
    """Run ``func(argv)``; a ``UserError`` becomes one line ``prog: error: ...`` and exit status 2."""
    args = list(argv)
    debug = debug_enabled(args)
    if "--debug" in args:
        args.remove("--debug")
    try:
        return int(func(args) or 0)
    except UserError as exc:
        if debug:
            raise
        msg = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return USAGE_EXIT
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
