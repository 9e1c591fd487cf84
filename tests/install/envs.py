"""Helpers of the install tests (not a test module): build the wheel from a copy of the checkout, and make a
fresh venv whose third-party packages are linked in from the environment running the tests, as chosen.

Linking (symlinks plus one ``.pth`` file) instead of installing keeps these tests off the package index and
fast; a ``.pth`` inside a linked folder is not executed, so the running environment's editable vidlab stays
out of the venv.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def key(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def copy_checkout(dest: Path) -> Path:
    """The checkout's tracked and unignored files, copied to ``dest`` (a build writes build/ and *.egg-info into
    its source tree, and must not see the checkout's ignored outputs)."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    for rel in filter(None, files):
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    return dest


def build_wheel(base: Path) -> tuple[Path, str]:
    """``pip wheel`` of a copy of the checkout into ``base``; returns the wheel and the build's whole output
    (pip passes the build backend's warnings through when not run with ``-q``)."""
    src = copy_checkout(base / "src")
    env = dict(os.environ, PIP_NO_INDEX="1")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(base),
        str(src),
    ]
    res = subprocess.run(cmd, cwd=base, env=env, capture_output=True, text=True, timeout=600)
    log = res.stdout + res.stderr
    assert res.returncode == 0, f"{cmd}: rc {res.returncode}\n{log[-4000:]}"
    (whl,) = base.glob("vidlab-*.whl")
    return whl, log


def link_closure(base: Path, roots: list[str]) -> list[str]:
    """Symlink the distributions ``roots`` (``"name"`` or ``"name[extra,...]"``) and everything they require,
    extras followed, into the folder ``base``; returns the linked distributions' names."""
    from packaging.requirements import Requirement

    base.mkdir(parents=True, exist_ok=True)
    todo: list[tuple[str, frozenset[str]]] = []
    for root in roots:
        req = Requirement(root)
        todo.append((req.name, frozenset(req.extras)))
    seen: set[tuple[str, frozenset[str]]] = set()
    linked: set[str] = set()
    while todo:
        name, extras = todo.pop()
        if (key(name), extras) in seen:
            continue
        seen.add((key(name), extras))
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        for raw in dist.requires or []:
            req = Requirement(raw)
            envs = [{"extra": e} for e in extras] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((req.name, frozenset(req.extras)))
        linked.add(key(name))
        site = Path(str(dist.locate_file("")))
        for top in {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            if (site / top).exists() and not (base / top).exists():
                (base / top).symlink_to(site / top)
    return sorted(linked)


def base_requirements() -> list[str]:
    """vidlab's own requirements without any extra, as the running environment's metadata declares them."""
    from packaging.requirements import Requirement

    out = []
    for raw in distribution("vidlab").requires or []:
        req = Requirement(raw)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            out.append(req.name)
    return out


def venv_python(base: Path, linked: list[Path]) -> Path:
    """A fresh venv at ``base`` (no pip) whose site-packages sees the folders ``linked``; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base)], check=True, timeout=300)
    py = base / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "zz_linked_libraries.pth").write_text("".join(f"{p}\n" for p in linked))
    return py


def install_wheel(py: Path, wheel: Path, env: dict[str, str]) -> None:
    """The wheel alone into the venv of ``py`` (``--no-deps``: its libraries are linked, not installed)."""
    cmd = [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(wheel)]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"{cmd}: rc {res.returncode}\n{res.stderr[-4000:]}"


def clean_env(py: Path, home: Path) -> dict[str, str]:
    """The running environment less vidlab's and Python's own variables, with the venv first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIDLAB_"))}
    env.update(PATH=f"{py.parent}:{env.get('PATH', '')}", PIP_NO_INDEX="1", HOME=str(home))
    return env
