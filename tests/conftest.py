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
# pytest-xdist (`make test` runs `-n 2 --dist loadgroup`): every worker is a process of its own, with its own
# cache root (above) and tmp_path folders; two workers share the two cores, so each uses one thread
# (set before torch or BLAS are imported).
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import pytest  # noqa: E402

try:  # Hypothesis: no per-example deadline and no "input generation is slow" health check. Both measure
    # the machine's load (two xdist workers, other jobs), not the property; every example still runs.
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "vidlab", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
    )
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "vidlab"))
except ImportError:  # pragma: no cover - hypothesis is in the dev extra
    pass

# Tests that run one after another on the same xdist worker (a group each): every test that starts a local Ray
# instance (two Ray heads at once on 2 cores only slow each other, and the cleanup test counts Ray's
# processes), and every test that serves HTTP on a port it picked free or drives a browser (the other worker
# could take the port between pick and bind).
SERIAL_GROUPS = {
    "ray": lambda item: "ray" in item.keywords,
    "server": lambda item: (
        item.path.name in {"test_demo_http.py", "test_demo_browser.py", "test_demo_honest.py"}
    ),
}


def pytest_configure(config):
    # registered here too, so that --strict-markers accepts it when pytest-xdist is not installed
    config.addinivalue_line("markers", "xdist_group(name): run on one xdist worker with its group")
    config.pluginmanager.register(_GroupNodeIds(), "vidlab-xdist-group-node-ids")


class _GroupNodeIds:
    """pytest-xdist 3.8 tells the scheduler an item's group by appending "@group" to ``item._nodeid``; pytest
    9.2 reads node ids from ``item._id``, so the suffix was lost and every group ran on both workers at once
    (pytest-dev/pytest-xdist#1386). Runs after xdist's hook and writes the suffix where pytest reads it; a
    no-op where xdist's own write took effect (older pytest, or a fixed xdist)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        if not config.getoption("loadgroup", False):  # set on xdist workers only, for --dist loadgroup
            return
        from _pytest.nodeid import NodeId

        for item in items:
            names = {
                str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                for m in item.iter_markers("xdist_group")
            }
            suffix = "@" + "_".join(sorted(names))
            if names and not item.nodeid.endswith(suffix) and hasattr(item, "_id"):
                item._id = NodeId.parse(item.nodeid + suffix)


@pytest.hookimpl(tryfirst=True)  # the group marks are in place before pytest-xdist reads them
def pytest_collection_modifyitems(config, items):
    for item in items:
        for group, member in SERIAL_GROUPS.items():
            if member(item):
                item.add_marker(pytest.mark.xdist_group(group))
                break
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
