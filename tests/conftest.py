"""Shared test setup: offline, deterministic, loopback only."""

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from types import FrameType

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
    config.addinivalue_line(
        "markers",
        f"needs(*names): needs system packages beyond pip, one of {sorted(SYSTEM_DEPS)}; skips naming them",
    )
    if config.pluginmanager.hasplugin("xdist"):  # its hook is unknown to pytest under `-p no:xdist`
        config.pluginmanager.register(_Scheduler(), "vidlab-xdist-scheduler")
    config.pluginmanager.register(_GroupNodeIds(), "vidlab-xdist-group-node-ids")
    config.pluginmanager.register(LongestFirst.from_file(COSTS), "vidlab-longest-first")
    if os.environ.get("VIDLAB_TEST_PROFILE"):
        config.pluginmanager.register(_CpuProfile(os.environ["VIDLAB_TEST_PROFILE"]), "vidlab-cpu-profile")


class _CpuProfile:
    """``VIDLAB_TEST_PROFILE=DIR pytest ...`` writes DIR/<worker>.json: per test and phase the wall seconds, the
    CPU seconds of this process, of its reaped children (``RUSAGE_CHILDREN``) and of its descendants sampled
    every 0.2 s (catches processes that are never reaped here, such as Ray's workers), plus the worker's
    start-up (interpreter, conftest, collection). CPU seconds do not depend on the machine's load."""

    def __init__(self, folder: str):
        import threading
        import time

        self.t0 = time.perf_counter()
        self.folder = folder
        self.tests: dict[str, dict[str, float]] = {}
        self.seen: dict[tuple[int, float], float] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        threading.Thread(target=self._sample_loop, daemon=True).start()

    def _sample(self) -> None:
        import psutil

        try:
            kids = psutil.Process().children(recursive=True)
        except psutil.Error:
            return
        for kid in kids:
            try:
                t = kid.cpu_times()
                key = (kid.pid, kid.create_time())
            except psutil.Error:
                continue
            with self.lock:
                self.seen[key] = max(self.seen.get(key, 0.0), t.user + t.system)

    def _sample_loop(self) -> None:
        while not self.stop.wait(0.2):
            self._sample()

    @staticmethod
    def _now() -> tuple[float, float, float]:
        import resource
        import time

        ch = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.perf_counter(), time.process_time(), ch.ru_utime + ch.ru_stime

    def _phase(self, item, phase: str):
        self._sample()
        with self.lock:
            before_seen = dict(self.seen)
        w0, c0, k0 = self._now()
        yield
        w1, c1, k1 = self._now()
        self._sample()
        with self.lock:
            desc = sum(v - before_seen.get(key, 0.0) for key, v in self.seen.items())
        rec = self.tests.setdefault(item.nodeid, {})
        if phase == "setup":
            rec["start"] = round(w0 - self.t0, 3)
        rec[f"{phase}_wall"] = round(w1 - w0, 3)
        rec[f"{phase}_cpu"] = round(c1 - c0, 3)
        rec[f"{phase}_reaped"] = round(k1 - k0, 3)
        rec[f"{phase}_desc"] = round(desc, 3)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        yield from self._phase(item, "setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        yield from self._phase(item, "call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item):
        yield from self._phase(item, "teardown")

    def pytest_collection_finish(self, session):
        import resource
        import time

        import psutil

        me = resource.getrusage(resource.RUSAGE_SELF)
        self.startup = {
            "cpu": round(me.ru_utime + me.ru_stime, 3),
            "wall": round(time.time() - psutil.Process().create_time(), 3),
            "modules": len(__import__("sys").modules),
        }

    def pytest_sessionfinish(self, session):
        from vidlab.io import atomic_write_json

        self.stop.set()
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        out = {"worker": worker, "startup": getattr(self, "startup", {}), "tests": self.tests}
        atomic_write_json(os.path.join(self.folder, f"{worker}.json"), out)


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


# Work units for `-n 2 --dist loadgroup` (the Makefile's): a group, else a whole test module, so that a module's
# fixtures are built on one worker only. Units go out longest first (by the CPU seconds recorded in COSTS), so
# the short ones fill in at the end and both workers finish together; a test missing from COSTS (the table leaves
# out those under 0.05 s) counts as DEFAULT_COST. Rewrite COSTS after adding slow tests:
# `python benchmarks/pytest_cpu.py PROFILE_DIR --write-costs tests/cpu_seconds.json` (see there).
COSTS = Path(__file__).with_name("cpu_seconds.json")
DEFAULT_COST = 0.02


def _group_of(nodeid: str) -> str | None:
    """The xdist group that pytest-xdist appended to a node id ("...::test@ray"), or None (xdist's own rule)."""
    return nodeid.rsplit("@", 1)[-1] if nodeid.rfind("@") > nodeid.rfind("]") else None


class LongestFirst:
    """Orders the collected items unit by unit, the unit with the most recorded CPU seconds first."""

    def __init__(self, costs: dict[str, float]):
        self.costs = costs

    @classmethod
    def from_file(cls, path: Path) -> "LongestFirst":
        return cls(json.loads(path.read_text()) if path.is_file() else {})

    @staticmethod
    def unit(item) -> str:
        groups = [
            m.args[0] if m.args else m.kwargs.get("name", "default") for m in item.iter_markers("xdist_group")
        ]
        return "@" + "_".join(sorted(map(str, groups))) if groups else item.nodeid.split("::", 1)[0]

    def order(self, items: list) -> list:
        units: dict[str, list] = {}
        for item in items:
            units.setdefault(self.unit(item), []).append(item)
        cost = {u: sum(self.costs.get(i.nodeid, DEFAULT_COST) for i in its) for u, its in units.items()}
        ranked = sorted(units, key=lambda u: -cost[u])  # stable: equal units keep the collection order
        return [item for u in ranked for item in units[u]]


class _Scheduler:
    @staticmethod
    def pytest_xdist_make_scheduler(config, log):
        """`--dist loadgroup` with a module as the unit of a test outside any group, in the order of the
        collection (which LongestFirst sorted; xdist's own reordering by test count is switched off)."""
        if config.getvalue("dist") != "loadgroup":
            return None
        from xdist.scheduler import LoadGroupScheduling

        class ModulesAndGroups(LoadGroupScheduling):
            def _split_scope(self, nodeid: str) -> str:
                group = _group_of(nodeid)
                return "@" + group if group is not None else nodeid.split("::", 1)[0]

        config.option.loadscopereorder = False
        return ModulesAndGroups(config, log)


@pytest.hookimpl(tryfirst=True)  # the group marks are in place before pytest-xdist reads them
def pytest_collection_modifyitems(config, items):
    for item in items:
        for group, member in SERIAL_GROUPS.items():
            if member(item):
                item.add_marker(pytest.mark.xdist_group(group))
                break
    items[:] = config.pluginmanager.get_plugin("vidlab-longest-first").order(items)
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


@pytest.fixture
def ray_local():
    """One local Ray (2 CPUs, loopback only) shared by the `ray` group's tests that ask for it: they run one
    after another on one worker, so it starts once, and it stops after the last of them (below)."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        try:
            ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
        except BaseException:
            ray.shutdown()  # a failed start leaves its processes behind; the next test starts afresh
            raise
    return ray


def pytest_runtest_teardown(item, nextitem):
    if "ray_local" in getattr(item, "fixturenames", ()) and "ray_local" not in getattr(
        nextitem, "fixturenames", ()
    ):
        import ray

        ray.shutdown()


# --- system packages beyond pip ------------------------------------------------------------------------------
# A test that needs one is marked `@pytest.mark.needs("ffmpeg")` (for one parameter:
# `pytest.param("torchcodec", marks=pytest.mark.needs("torchcodec"))`), or calls the `needs` fixture from a test
# or a fixture; where it is missing the test skips with one line naming the Debian packages, and the run ends
# with the skipped groups and the apt line that installs them (pytest_terminal_summary below). CI installs them
# all (.ci/run), so CI runs every test.
def _torchcodec_missing() -> str | None:
    from vidlab.video.backends.torchcodec_backend import unavailable_reason

    return unavailable_reason()  # "torchcodec cannot load FFmpeg's shared libraries: apt-get install ..."


def _ffmpeg_missing() -> str | None:
    return None if shutil.which("ffmpeg") else "needs Debian's ffmpeg CLI: apt-get install ffmpeg"


def _chromium_missing() -> str | None:
    if (shutil.which("chromium") or shutil.which("chromium-browser")) and shutil.which("chromedriver"):
        return None
    return "needs Debian's browser packages: apt-get install chromium chromium-driver"


SYSTEM_DEPS = {  # name -> () -> None when present, else the skip reason (one line, naming the packages)
    "torchcodec": _torchcodec_missing,  # FFmpeg 4-9's shared libraries, loaded when a decoder is built
    "ffmpeg": _ffmpeg_missing,
    "chromium": _chromium_missing,
}


@functools.cache
def missing(name: str) -> str | None:
    """Why the system dependency ``name`` (a key of SYSTEM_DEPS) is missing here, or None; probed once."""
    return SYSTEM_DEPS[name]()


def _skip_unless(names) -> None:
    for name in names:
        if name not in SYSTEM_DEPS:
            raise pytest.UsageError(
                f"needs({name!r}): unknown system dependency; known: {sorted(SYSTEM_DEPS)}"
            )
        why = missing(name)
        if why:
            pytest.skip(why)


@pytest.hookimpl(tryfirst=True)  # before any fixture is built
def pytest_runtest_setup(item):
    for mark in item.iter_markers("needs"):
        _skip_unless(mark.args)


@pytest.fixture(scope="session")
def needs():
    """``needs("ffmpeg", ...)``: skip the calling test or fixture (naming the Debian packages) unless present."""
    return lambda *names: _skip_unless(names)


APT = re.compile(r"apt-get install ((?:[a-z0-9][a-z0-9.+-]* ?)+)")


@pytest.hookimpl(wrapper=True, tryfirst=True)  # after pytest's own summary, right before the counts line
def pytest_terminal_summary(terminalreporter):
    """After the run: the tests skipped for a missing system package, grouped, and the line that installs them."""
    result = yield
    groups: dict[tuple[str, ...], list[str]] = {}
    for rep in terminalreporter.stats.get("skipped", []):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        text = reason.removeprefix("Skipped: ")
        found = APT.search(text)
        if found:
            what = text[: found.start()].rstrip(" :") or "?"
            groups.setdefault(tuple(found.group(1).split()), []).append(what)
    if groups:
        tr = terminalreporter
        tr.write_sep("=", "skipped: system packages missing (CI installs them)")
        for packages, whats in groups.items():
            tr.write_line(f"{len(whats):4d} skipped, {whats[0]}: apt-get install {' '.join(packages)}")
        if len(groups) > 1:
            every = dict.fromkeys(p for packages in groups for p in packages)
            tr.write_line(f"all of them: apt-get install {' '.join(every)}")
    return result


# --- deprecations our own code triggers fail the test ---------------------------------------------------------
# pyproject's `filterwarnings` makes a DeprecationWarning or FutureWarning an error when the warning names one of
# our modules: a library that warns with its stacklevel at our call, or our code calling our own deprecated path.
# Libraries that warn through a helper name their own frame instead: diffusers' `deprecate()` (so
# `from_pretrained(..., torch_dtype=...)`) names `diffusers.utils.deprecation_utils`, which no module filter can tie
# to our call. The hook below sees the live stack when such a warning is shown: issued by an installed package, and
# walking outwards past installed packages the first frame of this repository is in OWN_PACKAGES (not a test), it
# raises the warning there, as an `error` filter would. It sees only what no filter ignores (an `ignore` entry in
# pyproject, or `@pytest.mark.filterwarnings("ignore:...")`, silences a library's own deprecation it triggers).
ROOT = Path(__file__).resolve().parents[1]
OWN_PACKAGES = ("vidlab", "generation", "understanding", "demos", "benchmarks")
_OWN_DIRS = tuple(str(ROOT / name) + os.sep for name in OWN_PACKAGES)
_REPO_DIR, _VENV_DIRS = str(ROOT) + os.sep, (str(ROOT / ".venv") + os.sep, sys.prefix + os.sep)


def _in_repo(filename: str) -> bool:
    return filename.startswith(_REPO_DIR) and not filename.startswith(_VENV_DIRS)


def _library_warning_at_our_call(issuer: FrameType | None) -> bool:
    """``issuer``: the frame that called ``warnings.warn`` (or ran the C code that warned)."""
    if issuer is None or _in_repo(issuer.f_code.co_filename):
        return False  # issued here: pyproject's filters decide, and pytest.warns can expect it
    frame = issuer.f_back
    while frame is not None and not _in_repo(frame.f_code.co_filename):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(_OWN_DIRS)


_show_warning = warnings._showwarnmsg  # type: ignore[attr-defined]  # what warn() calls to show a warning


def _fail_our_deprecations(msg: warnings.WarningMessage) -> None:
    if isinstance(msg.message, (DeprecationWarning, FutureWarning)) and _library_warning_at_our_call(
        sys._getframe(1)
    ):
        raise msg.message
    _show_warning(msg)


warnings._showwarnmsg = _fail_our_deprecations  # type: ignore[attr-defined]


# ------------------------------------------------------------------------------ commands as a user types them
def run_vidlab(
    cwd: Path, *args: str, timeout: float = 900, env: dict | None = None
) -> subprocess.CompletedProcess:
    """``vidlab ARGS``: the installed console script run from ``cwd`` (the chain tests run it from a folder that
    is neither the checkout nor the data's), output captured; no PYTHONPATH or RAY_ADDRESS of the caller's."""
    exe = Path(sys.executable).parent / "vidlab"
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS")}
    env = {**base, **(env or {})}
    return subprocess.run(
        [str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture(scope="session")
def vidlab_cli():
    """:func:`run_vidlab` for a test: ``vidlab_cli(cwd, "index", "../data", ...)``."""
    return run_vidlab
