"""Shared test setup: offline, deterministic, loopback only."""

import os
import tempfile

# Never reach a model hub from tests; every model is built in code.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# Ray binds the external interface on Linux unless this is 0 (see vidlab.distributed).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# Caches (frame indices, packet indices) go to a fresh folder, never the user's ~/.cache.
_CACHE = tempfile.mkdtemp(prefix="vidlab-test-cache-")
os.environ.pop("VIDLAB_CACHE", None)  # deprecated (frame index only); VIDLAB_CACHE_DIR is the one root
os.environ["VIDLAB_CACHE_DIR"] = _CACHE

import pytest  # noqa: E402


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:
        has_cuda = False
    if not has_cuda:
        skip = pytest.mark.skip(reason="needs a CUDA device")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
