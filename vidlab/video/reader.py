"""``open_video`` with auto backend selection: the factory over the backends (see :mod:`vidlab.video.base`
for the ``VideoReader`` interface they implement).
"""

from __future__ import annotations

import logging
import os

from .backends.decord_backend import decord_refuses, decord_safe, import_decord
from .base import VideoReader, fit_within, uniform_indices
from .errors import BackendUnavailableError, VideoReadError
from .probe import StreamIndex, build_index

BACKENDS = ("decord", "pyav", "torchcodec")
log = logging.getLogger(__name__)

__all__ = [  # the interface and the decord checks are re-exported where they used to live
    "BACKENDS",
    "VideoReader",
    "auto_backend",
    "available_backends",
    "decord_refuses",
    "decord_safe",
    "fit_within",
    "import_decord",
    "open_video",
    "uniform_indices",
]


def available_backends() -> list[str]:
    """Backends that can decode here, in preference order (PyAV is always present). decord counts when it
    imports (its wheel carries its own FFmpeg); torchcodec when a decoder builds on this machine's FFmpeg
    libraries (probed once per process: :func:`~vidlab.video.backends.torchcodec_backend.unavailable_reason`)."""
    out = []
    for name in BACKENDS:
        if name == "decord" and not _decord_imports():
            continue
        if name == "torchcodec" and _torchcodec_unavailable():
            continue
        out.append(name)  # PyAV: a core dependency
    return out


def _decord_imports() -> bool:
    try:
        import_decord()
    except Exception:  # noqa: BLE001 - a broken optional install counts as absent
        return False
    return True


def _torchcodec_unavailable() -> str | None:
    from .backends.torchcodec_backend import unavailable_reason

    return unavailable_reason()


_told: set[str] = set()  # fallbacks already logged in this process (one line each, not one per video)


def auto_backend(index: StreamIndex) -> tuple[str, str]:
    """Pick the backend for a file; returns ``(name, reason)``. Never a backend that cannot run here.

    Default: PyAV with planned decoding, frame-exact on every tested file type and measured fastest
    (docs/guides/video-io.md, "Backends and how auto chooses"). ``VIDLAB_AUTO_BACKEND=decord`` prefers decord
    where it is installed and :func:`decord_safe` passes (PyAV elsewhere); ``=torchcodec`` prefers torchcodec where it can decode
    (PyAV elsewhere, with the reason).
    """
    pref = os.environ.get("VIDLAB_AUTO_BACKEND", "pyav").strip().lower()
    pyav = "planned PyAV decoding (frame-exact on every tested file type, measured fastest)"
    if pref == "torchcodec":
        why = _torchcodec_unavailable()
        if not why:
            return "torchcodec", "VIDLAB_AUTO_BACKEND=torchcodec"
        reason = f"VIDLAB_AUTO_BACKEND=torchcodec, but {why}: {pyav}"
        if pref not in _told:
            _told.add(pref)
            log.warning("%s", reason)
        return "pyav", reason
    if pref == "decord" and _decord_imports():  # imports only when preferred
        ok, why = decord_safe(index)
        return ("decord", why) if ok else ("pyav", why)
    return "pyav", pyav


def open_video(
    path: str | os.PathLike, backend: str = "auto", stream: int | None = None, rotate: bool = True
) -> VideoReader:
    """Open ``path`` for frame-exact reading with ``backend`` ("auto", "decord", "pyav", "torchcodec").

    ``stream``: index (in the file, as ffprobe numbers streams) of the video stream to read; ``None``
    reads the one FFmpeg picks as best (``av_find_best_stream``: default disposition first), as
    ffprobe, ffmpeg and torchcodec do. ``rotate=True`` (default) applies the display rotation as
    FFmpeg's CLI does, so ``width``/``height`` are the displayed size; ``rotate=False`` returns the
    coded picture.

    Raises BackendUnavailableError (a VideoReadError: what is missing, what installs it) when the asked
    backend cannot run here; VideoReadError (naming the file and the reason) for missing, empty, truncated or
    non-video files, for a ``stream`` that is not a video stream, and when the asked backend would
    return frames that differ from the reference decode (auto then routes to PyAV); ValueError for
    an unknown backend name.
    """
    if backend not in ("auto", *BACKENDS):
        raise ValueError(f"unknown video backend {backend!r}; choose one of {['auto', *BACKENDS]}")
    if backend == "torchcodec":  # a machine without FFmpeg's libraries: one line, before reading the file
        from .backends.torchcodec_backend import check_available

        check_available(path)
    elif backend == "decord" and not _decord_imports():
        raise BackendUnavailableError("decord", "decord does not import here: pip install decord", path)
    index = build_index(path, stream=stream)
    reason = "asked for"
    auto = backend == "auto"
    if auto:
        backend, reason = auto_backend(index)
    if backend == "pyav":
        from .backends.pyav_backend import PyAVReader

        reader: VideoReader = PyAVReader(path, index, rotate=rotate)
    elif backend == "decord":
        from .backends.decord_backend import DecordReader

        try:
            reader = DecordReader(path, index, rotate=rotate)
        except VideoReadError as e:
            if not auto:
                raise
            from .backends.pyav_backend import PyAVReader

            reader, reason = PyAVReader(path, index, rotate=rotate), f"decord refused the file ({e.reason})"
    else:
        from .backends.torchcodec_backend import TorchCodecReader

        reader = TorchCodecReader(path, index, rotate=rotate)
    reader.selection_reason = reason
    return reader
