"""Install into an environment a researcher already has: `pip install -e ".[EXTRA]"` keeps its torch and
brings only what that area needs, and that area's tests pass in it.

The "existing environment" is a fresh venv whose only packages are torch, torchvision and everything they
require (CUDA libraries included), linked in through a ``.pth`` file from the environment running this test,
as a CUDA user's environment has them. pip sees that torch as installed; the test fails if pip installs any
torch, torchvision or nvidia package, or a package of another area. Opt-in (``VIDLAB_INSTALL_TEST=1``): it
installs the extra from the package index (a few minutes per extra, faster with pip's cache), e.g.::

    VIDLAB_INSTALL_TEST=1 python -m pytest -q tests/install -k gen
    VIDLAB_INSTALL_TEST=1 VIDLAB_INSTALL_TEST_PATHS=tests/generation/test_tiny.py python -m pytest -q tests/install -k gen
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import envs  # noqa: E402  (tests/install/envs.py)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("VIDLAB_INSTALL_TEST") != "1",
        reason="installs from the package index; set VIDLAB_INSTALL_TEST=1",
    ),
]

# extra -> (the area's tests, packages of other areas that must not come with it)
AREAS = {
    "gen": (["tests/generation"], ["gradio", "ray", "pandas", "verl", "trl"]),
    "understand": (["tests/understanding"], ["diffusers", "gradio", "ray", "verl", "trl"]),
}
TORCH_LIKE = re.compile(r"^(torch|torchvision|triton|nvidia-.*|cuda-.*)$")


@pytest.mark.parametrize("extra", sorted(AREAS))
def test_one_extra_keeps_torch_and_runs_its_area(extra, tmp_path):
    pytest.importorskip("torch")
    tests, foreign = AREAS[extra]
    tests = os.environ.get("VIDLAB_INSTALL_TEST_PATHS", "").split() or tests  # a quicker subset, if given
    linked = envs.link_closure(tmp_path / "existing", ["torch", "torchvision"])
    assert {"torch", "torchvision"} <= set(linked)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(site, "existing-env.pth").write_text(str(tmp_path / "existing") + "\n")
    before = subprocess.run([str(py), "-c", "import torch; print(torch.__version__, torch.__file__)"],
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    report = tmp_path / "report.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    res = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "-e", f".[{extra}]", "pytest", "pytest-timeout", "hypothesis",
         "--report", str(report)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=2400,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    installed = sorted(envs.key(i["metadata"]["name"]) for i in json.loads(report.read_text())["install"])
    assert not [n for n in installed if TORCH_LIKE.match(n)], f"pip replaced torch: {installed}"
    assert not set(installed) & {envs.key(f) for f in foreign}, (
        f"other areas' packages came along: {installed}"
    )
    after = subprocess.run([str(py), "-c", "import torch; print(torch.__version__, torch.__file__)"],
                           capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert after == before and str(tmp_path / "existing") in after[1]
    res = subprocess.run(
        [str(py), "-m", "pytest", "-q", "-m", "not slow", "-p", "no:cacheprovider", *tests],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-4000:]
