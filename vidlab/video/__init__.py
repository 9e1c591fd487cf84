"""vidlab.video: frame-exact video reading (decord / PyAV / torchcodec), writing, synthetic test videos.

Public API: ``open_video``, ``VideoReader``, ``VideoReadError`` (``BackendUnavailableError``), ``VideoWriteError``, ``write_video``,
``uniform_indices``. See vidlab/video/README.md.
"""

from .base import VideoReader, fit_within, uniform_indices
from .errors import BackendUnavailableError, VideoReadError, VideoWriteError
from .reader import available_backends, open_video
from .writer import write_video

__all__ = [
    "BackendUnavailableError",
    "VideoReadError",
    "VideoWriteError",
    "VideoReader",
    "available_backends",
    "fit_within",
    "open_video",
    "uniform_indices",
    "write_video",
]
