"""One import name: pyproject's package list covers every folder it maps, the old names are aliases of the new
ones (one module object each, one DeprecationWarning), a user's own package of an old name is left alone, and a
checkout that is not installed still imports ``vidlab.<area>``. Fast: no build (tests/install/test_wheel.py
builds and installs the wheel)."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AREAS = ("generation", "understanding", "demos")

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")


def _packages_in(folder: Path, prefix: str) -> set[str]:
    out = set()
    for init in folder.rglob("__init__.py"):
        rel = init.parent.relative_to(folder)
        if "_legacy" in rel.parts or "__pycache__" in rel.parts:
            continue
        out.add(".".join((prefix, *rel.parts)) if rel.parts else prefix)
    return out


# source folder -> where the wheel puts it
ROOTS = {"vidlab": "vidlab", **{area: f"vidlab/{area}" for area in AREAS}, "configs": "vidlab/presets"}
DATA_SUFFIXES = (".yaml", ".json", ".txt", ".safetensors")  # [tool.setuptools.package-data] in pyproject.toml


def _tracked() -> list[str]:
    """The files a build copies (tests/install/envs.py, copy_checkout)."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [f for f in out.splitlines() if (ROOT / f).is_file()]


def _is_data_folder(rel: Path) -> bool:
    """A folder whose files ship as package data: the presets (configs/...) and the shipped weights."""
    return rel.parts[0] == "configs" or any(p.startswith("weights") for p in rel.parts)


def shipped_files() -> dict[str, str]:
    """wheel path -> source path of every file the wheel must carry: the modules of each package, and the
    data files (presets, model configs, tokenizers, weights) of packages and data folders. Not shipped: area
    READMEs, figures/ (the docs' plots and their JSON), the old names' packages (one __init__.py each)."""
    out = {}
    for rel in map(Path, _tracked()):
        if rel.parts[0] not in ROOTS or "_legacy" in rel.parts:
            continue
        package = (ROOT / rel.parent / "__init__.py").is_file()
        if (
            rel.suffix == ".py"
            and package
            or rel.suffix in DATA_SUFFIXES
            and (package or _is_data_folder(rel))
        ):
            out["/".join((ROOTS[rel.parts[0]], *rel.parts[1:]))] = rel.as_posix()
    return out


def _data_packages() -> set[str]:
    """The data folders as the namespace packages pyproject lists them as (a name that is not an identifier, such
    as configs/train-agent, is no package: its parent's package data carries it)."""
    out = set()
    for wheel_path in shipped_files():
        parts = wheel_path.split("/")[:-1]
        if not (ROOT / shipped_files()[wheel_path]).with_name("__init__.py").is_file() and all(
            p.isidentifier() for p in parts
        ):
            out |= {
                ".".join(parts[:i])
                for i in range(3 if parts[:2] == ["vidlab", "presets"] else 4, len(parts) + 1)
            }
    return out


def test_package_list_covers_every_folder():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(tool["packages"])
    want = _packages_in(ROOT / "vidlab", "vidlab")
    for area in AREAS:
        want |= _packages_in(ROOT / area, f"vidlab.{area}")
        assert tool["package-dir"][f"vidlab.{area}"] == area
        assert tool["package-dir"][area] == f"vidlab/_legacy/{area}"
    assert tool["package-dir"]["vidlab.presets"] == "configs"
    want |= _data_packages()
    missing, extra = want - listed, listed - want - {"vidlab.presets", *AREAS}
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"
    assert not extra, f"listed but no such folder: {sorted(extra)}"


def test_wheel_builds_without_a_warning_and_carries_every_shipped_file(tmp_path):
    """setuptools warns (and says it will stop shipping them) when package data lies in a folder that Python can
    import but `packages` does not list; any other warning of the build fails here too. The wheel's files are
    exactly the modules and data files of the shipped folders, plus the old names' one-file aliases."""
    sys.path.insert(0, str(Path(__file__).parent))
    from envs import build_wheel

    wheel, log = build_wheel(tmp_path)
    warnings = sorted(
        {line.strip() for line in log.splitlines() if re.search(r"\w*Warning\b|warning:", line)}
    )
    assert not warnings, "\n".join(warnings)
    names = {n for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/" not in n}
    want = set(shipped_files()) | {f"{area}/__init__.py" for area in AREAS}
    assert not want - names, f"missing from the wheel: {sorted(want - names)}"
    assert not names - want, f"in the wheel, not in a shipped folder: {sorted(names - want)}"
    for must in (
        "vidlab/presets/train-agent/toyworld.yaml",
        "vidlab/presets/generate/toyworld-calibrated.yaml",
    ):
        assert must in names
    assert (
        sum(n.endswith(".safetensors") for n in names) == sum(f.endswith(".safetensors") for f in want) >= 10
    )


def _py(code: str, cwd: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *flags, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("cwd", ["root", "elsewhere"])
def test_old_names_are_the_same_modules_with_one_warning(cwd, tmp_path):
    code = (
        "import warnings; warnings.simplefilter('always')\n"
        "import generation.layout as old, vidlab.generation.layout as new\n"
        "from understanding.toyworld import ToyPolicySpec\n"
        "import vidlab.understanding.toyworld as t, demos.config, vidlab.demos.config as dc, sys\n"
        "assert old is new and ToyPolicySpec is t.ToyPolicySpec and demos.config is dc\n"
        "assert new.__spec__.name == 'vidlab.generation.layout', new.__spec__.name\n"
        "assert sys.modules['generation'] is sys.modules['vidlab.generation']\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'generation'))\n"
    )
    res = _py(code, ROOT if cwd == "root" else tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "['generation', 'generation.layout']"
    warns = [line for line in res.stderr.splitlines() if "DeprecationWarning" in line]
    assert len(warns) == 3, res.stderr  # one per old name, none per submodule
    assert all("<string>" in w for w in warns), warns  # charged to the importing code, not to vidlab


def test_old_names_warning_is_an_error_under_W_error(tmp_path):
    res = _py("import generation", tmp_path, "-W", "error::DeprecationWarning")
    assert res.returncode != 0 and "import vidlab.generation" in res.stderr


def test_a_users_own_package_of_an_old_name_wins(tmp_path):
    mine = tmp_path / "generation"
    mine.mkdir()
    (mine / "__init__.py").write_text("MINE = True\n")
    (mine / "layout.py").write_text("WHOSE = 'mine'\n")
    res = _py("import vidlab, generation, generation.layout as l; print(generation.MINE, l.WHOSE)", tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "True mine" and "DeprecationWarning" not in res.stderr


def test_a_checkout_on_the_path_imports_the_areas_without_an_install(tmp_path):
    """No site-packages (-S -I): only the checkout on sys.path, as with PYTHONPATH or `python demos/app.py`."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "import vidlab.generation, vidlab.understanding, vidlab.demos\n"
        "print(vidlab.generation.__file__, vidlab.understanding.__file__, vidlab.demos.__file__)\n"
    )
    res = _py(code, tmp_path, "-S", "-I")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [str(ROOT / a / "__init__.py") for a in AREAS]
