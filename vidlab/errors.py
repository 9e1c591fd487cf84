"""User errors: the one way a command fails on a user's mistake.

A ``UserError`` (or a subclass: ``ConfigError``, ``VideoReadError``, ``JobLockedError``, ...) means
the input was wrong, not the code. ``vidlab <command>`` prints it as one line on stderr and exits
with status 2; any other exception is a bug and keeps its traceback. ``--debug`` or
``VIDLAB_DEBUG=1`` shows the traceback for user errors too.

Library modules never print: they report through ``warnings`` (deprecations, suspicious inputs) and
``logging`` (what a job skipped or redid). While a command runs, :func:`run_command` shows both on
stderr as one line each, ``prog: warning: ...``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence

USAGE_EXIT = 2


class UserError(Exception):
    """An input, setting or environment problem the user can fix; the message says what to do."""


def debug_enabled(argv: Sequence[str] | None = None) -> bool:
    return os.environ.get("VIDLAB_DEBUG", "").strip().lower() in ("1", "true", "yes") or (
        argv is not None and "--debug" in argv
    )


# the packages whose log records a command shows (WARNING and above)
LOGGERS = ("vidlab",)  # vidlab.generation, vidlab.understanding and vidlab.demos log beneath it


class _StderrLines(logging.Handler):
    """Log records as ``prog: warning: message`` on the current ``sys.stderr``."""

    def __init__(self, prog: str) -> None:
        super().__init__(logging.WARNING)
        self.prog = prog

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = " ".join(record.getMessage().split())
            print(f"{self.prog}: {record.levelname.lower()}: {msg}", file=sys.stderr)
        except Exception:  # noqa: BLE001 - logging must never break the command
            self.handleError(record)


class _OtherLibraries(logging.StreamHandler):
    """Root's handler while a command runs, where root has none: other libraries' warnings on stderr, as
    logging's last resort would print them, and never our packages' records (``_StderrLines`` prints those).
    With it in place a library's ``logging.basicConfig()`` (open_clip's tokenizer calls the module-level
    ``logging.info``, which runs it) adds no second handler, so no line is printed twice."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setLevel(logging.WARNING)
        self.addFilter(lambda record: not record.name.startswith(tuple(f"{n}." for n in LOGGERS) + LOGGERS))

    def emit(self, record: logging.LogRecord) -> None:
        self.setStream(sys.stderr)  # the current stderr (a test's capture, a redirected one)
        super().emit(record)


@contextlib.contextmanager
def command_reporting(prog: str) -> Iterator[None]:
    """While a command runs: warnings and the packages' log warnings are one stderr line each."""

    def show(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        print(f"{prog}: warning: {' '.join(str(message).split())}", file=sys.stderr)

    handler = _StderrLines(prog)
    # a command run from within another (``vidlab eval-qa`` -> its main) reports once, as the outer one
    loggers = [
        lg
        for lg in map(logging.getLogger, LOGGERS)
        if not any(isinstance(h, _StderrLines) for h in lg.handlers)
    ]
    root = logging.getLogger()
    fallback = _OtherLibraries() if not root.handlers else None
    with warnings.catch_warnings():
        warnings.showwarning = show  # type: ignore[assignment]
        for lg in loggers:
            lg.addHandler(handler)
        if fallback is not None:
            root.addHandler(fallback)
        try:
            yield
        finally:
            for lg in loggers:
                lg.removeHandler(handler)
            if fallback is not None:
                root.removeHandler(fallback)


def run_command(prog: str, func: Callable[[list[str]], int | None], argv: Sequence[str]) -> int:
    """Run ``func(argv)``; a ``UserError`` becomes one line ``prog: error: ...`` and exit status 2.
    Warnings and log warnings raised meanwhile are one line each (see :func:`command_reporting`)."""
    args = list(argv)
    debug = debug_enabled(args)
    if "--debug" in args:
        args.remove("--debug")
    try:
        with command_reporting(prog):
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
