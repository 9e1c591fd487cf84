"""torchcodec backend (the ``torchcodec`` extra): torchcodec's VideoDecoder, numbered by vidlab's index.

torchcodec links the system's FFmpeg shared libraries (Debian 12: ``libavcodec59 libavformat59
libavutil57 libswscale6 libavdevice59 libavfilter8``); :func:`unavailable_reason` says which package
to install when they are missing (probed once per process by building a decoder: torchcodec imports
without them). It reads the stream vidlab's index was built on (the best one, as
FFmpeg picks it, unless ``stream=`` chose another), converts to RGB as FFmpeg's CLI does (0.0 mean
difference on the tested 8- and 10-bit files), and rotates frames for display itself (``rotate=False``
undoes it losslessly). ``seek_mode`` is torchcodec's: ``"exact"`` (default; scans the file once on
open) or ``"approximate"`` (trusts the header; refused when its frame count differs from the index).
"""

from __future__ import annotations

import functools
import os

import numpy as np

from .. import orientation
from ..base import VideoReader
from ..errors import BackendUnavailableError, VideoReadError
from ..probe import StreamIndex

TAIL_PROBE = 16  # frames at the end of a truncated file's prefix that are checked to decode
FFMPEG_APT_PACKAGES = "libavcodec59 libavformat59 libavutil57 libswscale6 libavdevice59 libavfilter8"
INSTALL_LIBS = f"apt-get install {FFMPEG_APT_PACKAGES} (Debian 12)"
INSTALL_EXTRA = "pip install 'vidlab[torchcodec]'"


def _probe_video() -> bytes:
    """A one-frame 16x16 MPEG-4 Part 2 video in memory (PyAV's encoder; every FFmpeg build decodes it)."""
    import io

    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        stream = out.add_stream("mpeg4", rate=1)
        stream.width, stream.height, stream.pix_fmt = 16, 16, "yuv420p"
        frame = av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), format="rgb24")
        for packet in (*stream.encode(frame), *stream.encode()):
            out.mux(packet)
    return buf.getvalue()


@functools.cache
def unavailable_reason() -> str | None:
    """Why the torchcodec backend cannot decode here (one line, with what installs it), or None when it can.

    Probed once per process (cached): torchcodec imports without FFmpeg's shared libraries and loads them
    only when a ``VideoDecoder`` is built, so the probe builds one on a one-frame video made in memory and
    decodes its frame.
    """
    try:
        from torchcodec.decoders import VideoDecoder
    except ImportError as e:
        if (e.name or "").split(".")[0] == "torchcodec":
            return f"torchcodec is not installed: {INSTALL_EXTRA}"
        return f"torchcodec does not import ({_first_line(e)}): {INSTALL_EXTRA}"
    except Exception as e:  # noqa: BLE001 - a broken install counts as unavailable, with its first line
        return _cannot_load(e)
    try:
        VideoDecoder(_probe_video(), seek_mode="approximate").get_frames_at(indices=[0])
    except Exception as e:  # noqa: BLE001 - torchcodec raises RuntimeError when no FFmpeg loads
        return _cannot_load(e)
    return None


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0].strip() if lines else ''}"


def _cannot_load(e: BaseException) -> str:
    """One line for torchcodec's failure to load or decode (its own message is ~40 lines of tracebacks)."""
    if "Could not load libtorchcodec" in str(e):
        return f"torchcodec cannot load FFmpeg's shared libraries: {INSTALL_LIBS}"
    return f"torchcodec cannot decode a one-frame test video ({_first_line(e)})"


def check_available(path: str | os.PathLike = "") -> None:
    """Raise :class:`BackendUnavailableError` (one line: what is missing, what installs it) unless torchcodec can
    decode here."""
    why = unavailable_reason()
    if why:
        raise BackendUnavailableError("torchcodec", why, path)


class TorchCodecReader(VideoReader):
    """Reader on torchcodec's VideoDecoder; resizing with antialiased bilinear (torch)."""

    backend = "torchcodec"
    native_rotation = True

    def __init__(self, path, index: StreamIndex | None = None, rotate: bool = True, seek_mode: str = "exact"):
        self._prefix: int | None = None  # on a truncated file: the frames torchcodec decodes (see below)
        super().__init__(path, index, rotate=rotate)
        self._dec = None
        if seek_mode not in ("exact", "approximate"):
            raise ValueError(f"seek_mode must be 'exact' or 'approximate', got {seek_mode!r}")
        self.seek_mode = seek_mode
        try:
            check_available(self.path)
        except BackendUnavailableError:
            self.close()
            raise
        if orientation.mirrors(self._index.orient_op):
            self.close()
            raise VideoReadError(
                self.path,
                f"mirrored display matrix ({self._index.orient_op}): torchcodec's handling is not verified; "
                "use backend='pyav' or 'auto'",
            )
        from torchcodec.decoders import VideoDecoder

        try:
            self._dec = VideoDecoder(
                str(self.path),
                stream_index=self._index.stream_index,
                seek_mode=seek_mode,
                dimension_order="NHWC",
            )
        except Exception as e:  # noqa: BLE001
            self.close()
            raise VideoReadError(self.path, f"torchcodec cannot open it: {e}") from e
        md = self._dec.metadata
        n = md.num_frames if md.num_frames is not None else len(self._dec)
        damaged = bool(self._index.extra.get("damaged"))  # the index keeps the decodable prefix of its frames
        if n is not None and (int(n) < self.num_frames if damaged else int(n) != self.num_frames):
            self.close()
            raise VideoReadError(
                self.path,
                f"torchcodec ({seek_mode} seek mode) sees {n} frames, the packet index {self.num_frames}",
            )
        self._shown = self._index.display_size
        if damaged:
            self._prefix = self._decodable_prefix()

    def _decodable_prefix(self) -> int:
        """The frames of a truncated file that torchcodec decodes. The index's prefix (what PyAV decodes) can end
        in a packet the cut went through: PyAV decodes it, torchcodec refuses it ("Could not push packet to
        decoder", FFmpeg 5.1.9); its last ``TAIL_PROBE`` frames are tried one by one, and the prefix stops
        before the first refused (those frames count as lost)."""
        assert self._dec is not None
        n = self._index.num_frames
        for i in range(max(0, n - TAIL_PROBE), n):
            try:
                self._dec.get_frames_at(indices=[i])
            except Exception:  # noqa: BLE001 - torchcodec raises RuntimeError for a refused packet
                return i
        return n

    @property
    def num_frames(self) -> int:
        return self._index.num_frames if self._prefix is None else self._prefix

    @property
    def lost_frames(self) -> int:
        return self._index.lost_frames + (self._index.num_frames - self.num_frames)

    def _decode_sorted(self, indices: np.ndarray, width: int, height: int) -> np.ndarray:
        try:
            batch = self._dec.get_frames_at(indices=indices.tolist()).data
        except Exception as e:  # noqa: BLE001
            raise VideoReadError(
                self.path, f"torchcodec failed on frames {indices[:8].tolist()}...: {e}"
            ) from e
        if tuple(batch.shape[1:3]) != (self._shown[1], self._shown[0]):
            raise VideoReadError(
                self.path,
                f"torchcodec returned {batch.shape[2]}x{batch.shape[1]} frames, the displayed size is "
                f"{self._shown[0]}x{self._shown[1]}",
            )
        if (width, height) != self._shown:
            import torch.nn.functional as F

            x = batch.permute(0, 3, 1, 2).float()
            x = F.interpolate(x, size=(height, width), mode="bilinear", antialias=True, align_corners=False)
            batch = x.round().clamp(0, 255).to(batch.dtype).permute(0, 2, 3, 1)
        return np.ascontiguousarray(batch.numpy())

    def close(self) -> None:
        self._dec = None
        super().close()
