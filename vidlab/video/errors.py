"""Typed errors of the video layer: each names the file and the reason, so a batch job can record it."""

from __future__ import annotations

import os

from vidlab.errors import UserError


class VideoReadError(UserError):
    """A video that cannot be opened or decoded; ``.path`` and ``.reason`` say which and why."""

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path = str(path)
        self.reason = str(reason)
        super().__init__(f"cannot read video {self.path!r}: {self.reason}")

    def __reduce__(self):  # keep path/reason when pickled across processes (Ray, multiprocessing)
        return (type(self), (self.path, self.reason))


class VideoWriteError(UserError):
    """A video that cannot be written (bad frames, unknown codec, unwritable path)."""

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path = str(path)
        self.reason = str(reason)
        super().__init__(f"cannot write video {self.path!r}: {self.reason}")

    def __reduce__(self):
        return (type(self), (self.path, self.reason))


class BackendUnavailableError(VideoReadError):
    """A decoder backend that cannot run on this machine (not installed, or its system libraries missing).

    ``.backend`` names it, ``.reason`` says what is missing and what installs it; the message is one line and
    ends with the backend that works everywhere (PyAV). A ``VideoReadError``, so callers that record unreadable
    videos keep working; ``.path`` is the video being opened ("" when none).
    """

    def __init__(self, backend: str, reason: str, path: str | os.PathLike = ""):
        self.backend = str(backend)
        self.path = str(path)
        self.reason = " ".join(str(reason).split())
        UserError.__init__(
            self, f"video backend {self.backend!r} cannot run here: {self.reason}, or use backend=pyav"
        )

    def __reduce__(self):
        return (type(self), (self.backend, self.reason, self.path))
