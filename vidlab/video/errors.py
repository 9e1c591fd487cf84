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
