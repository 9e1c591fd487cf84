"""Up-front device checks: a setting that names a GPU on a machine without one is one line, before any load.

Without these, ``device=cuda`` ends in torch's "Found no NVIDIA driver" traceback after the model loaded,
and a Ray job asking for ``GPU: 1`` per worker waits forever for a node that never comes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from vidlab.errors import UserError

_DEVICE = re.compile(r"^(cpu|cuda|mps|auto)(?::(\d+))?$")

__all__ = [
    "DeviceUnavailableError",
    "check_devices",
    "cuda_device_count",
    "require_device",
    "require_local_gpus",
]


class DeviceUnavailableError(UserError, RuntimeError):
    """A setting names a device (or a number of GPUs) that this machine does not have."""


def cuda_device_count() -> int:
    """CUDA devices torch can use here (0 without torch, a driver or a GPU); never initialises CUDA state."""
    try:
        import torch
    except ImportError:
        return 0
    try:
        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001 - a broken driver counts as no GPU
        return 0


def _mps_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def require_device(device: str | None, setting: str = "device") -> str:
    """Return ``device`` when this machine has it; raise :class:`DeviceUnavailableError` naming ``setting``.

    ``auto``/None and ``cpu`` always pass; ``cuda``/``cuda:N`` need N < the CUDA device count; ``mps`` needs
    Apple's backend. Anything else is refused as a malformed device name.
    """
    if device is None:
        return "auto"
    dev = str(device).strip()
    m = _DEVICE.match(dev)
    if not m:
        raise DeviceUnavailableError(
            f"{setting}={dev!r} is not a device name; use auto, cpu, cuda, cuda:N or mps"
        )
    kind, index = m.group(1), m.group(2)
    if kind in ("auto", "cpu"):
        if index is not None:
            raise DeviceUnavailableError(f"{setting}={dev!r}: {kind} takes no index; use {kind}")
        return dev
    if kind == "mps":
        if not _mps_available():
            raise DeviceUnavailableError(
                f"{setting}={dev!r}, but this machine has no Apple MPS device; set {setting}=cpu (or auto)"
            )
        return dev
    n = cuda_device_count()
    want = int(index or 0)
    if n == 0:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        extra = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        raise DeviceUnavailableError(
            f"{setting}={dev!r}, but torch sees no CUDA GPU on this machine{extra}; set {setting}=cpu (or auto, "
            "which picks the GPU when there is one)"
        )
    if want >= n:
        raise DeviceUnavailableError(
            f"{setting}={dev!r}, but this machine has {n} CUDA GPU(s) (cuda:0..cuda:{n - 1})"
        )
    return dev


def require_local_gpus(n: float, setting: str, hint: str = "") -> None:
    """Refuse a per-worker GPU request (``n > 0``) on a machine with no CUDA GPU, naming ``setting``.

    For jobs that start Ray on this machine; a job submitted to a cluster (``RAY_ADDRESS`` set) is left to
    the cluster, whose nodes this machine cannot see.
    """
    if not n or n <= 0 or os.environ.get("RAY_ADDRESS"):
        return
    if cuda_device_count() == 0:
        raise DeviceUnavailableError(
            f"{setting}={n:g} asks for a GPU per worker, but this machine has no CUDA GPU and RAY_ADDRESS names no "
            f"cluster; set {setting}=0{hint}, or run on a GPU machine / set RAY_ADDRESS to a GPU cluster"
        )


# accelerate's placements, not devices
_DEVICE_MAP_WORDS = ("auto", "balanced", "balanced_low_0", "sequential")


def check_devices(
    settings: Mapping[str, Any] | None = None,
    *,
    backend: str = "local",
    gpus_per_worker: float = 0,
    hint: str = "",
) -> None:
    """The one device check of every command that takes a device, before anything loads or is written.

    ``settings`` maps each setting's name as the user writes it (``--device``, ``device``,
    ``policy_kwargs.device``, ``generate.device``) to its value: each is checked by :func:`require_device`
    (``None`` is not set; a ``*device_map`` may also be one of accelerate's placements such as ``auto``, or a
    mapping, which are left to it). On the ``ray`` backend, ``gpus_per_worker`` > 0 needs a GPU here unless
    ``RAY_ADDRESS`` names a cluster (:func:`require_local_gpus`, naming ``run.gpus_per_worker``)."""
    for setting, value in (settings or {}).items():
        if value is None or (
            setting.endswith("device_map") and (not isinstance(value, str) or value in _DEVICE_MAP_WORDS)
        ):
            continue
        require_device(str(value), setting)
    if backend == "ray":
        require_local_gpus(gpus_per_worker, "run.gpus_per_worker", hint=hint)
