"""The wheel works on its own: built from the checkout, installed into a fresh venv outside the repository, and
run from another folder, it finds its presets, its shipped weights and its commands with no checkout in sight.

The fresh venv gets vidlab from the wheel alone (``pip install --no-deps``); the libraries it needs (torch,
diffusers, open_clip, ...) are linked in through a ``.pth`` file from the environment running this test, so no
package index is needed. A ``.pth`` in a linked folder is not executed, so the editable vidlab of the running
environment stays out: the test checks that every module it runs comes from the venv.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import envs  # noqa: E402  (tests/install/envs.py)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]
PROMPT = "a red circle to the left of a blue square"


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{cmd}: rc {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    return res


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """``pip wheel`` of a copy of the checkout (a build writes build/ and *.egg-info into its source tree)."""
    return envs.build_wheel(tmp_path_factory.mktemp("wheel"))[0]


def test_wheel_contents(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    dist = next(t for t in tops if t.endswith(".dist-info"))
    # one import package, plus the old names' one-file aliases for one release; nothing of tests/benchmarks/docs
    assert tops - {dist} == {"vidlab", "generation", "understanding", "demos"}
    for old in ("generation", "understanding", "demos"):
        assert [n for n in names if n.startswith(f"{old}/")] == [f"{old}/__init__.py"]
    for must in (
        "vidlab/presets/generate/toyworld-calibrated.yaml",
        "vidlab/presets/demo/default.yaml",
        "vidlab/presets/train-agent/toyworld-where.yaml",
        "vidlab/generation/pipeline.py",
        "vidlab/generation/toyworld/weights/transformer/diffusion_pytorch_model.safetensors",
        "vidlab/understanding/toyworld/weights/where/policy.safetensors",
        "vidlab/demos/app.py",
        "vidlab/clip/model_configs/vidlab-tiny.json",
    ):
        assert must in names, must
    presets = sorted(p.relative_to(ROOT / "configs").as_posix() for p in (ROOT / "configs").rglob("*.yaml"))
    assert presets and all(f"vidlab/presets/{p}" in names for p in presets)
    entry = zipfile.ZipFile(wheel).read(f"{dist}/entry_points.txt").decode()
    assert "generate = vidlab.generation.cli:generate_main" in entry
    assert "toy = vidlab.understanding.toyworld:ToyPolicySpec" in entry
    assert not any(n.startswith(("tests/", "benchmarks/", "docs/", "configs/")) for n in names)


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """A fresh venv with the wheel installed; returns (its python, env, a working folder outside any checkout)."""
    base = tmp_path_factory.mktemp("venv")
    # the libraries vidlab needs, from this environment (the editable vidlab's own .pth is not run from there)
    linked = [Path(p) for p in sys.path if p.endswith("-packages") and Path(p).is_dir()]  # site dirs only
    py = envs.venv_python(base / "venv", linked)
    env = envs.clean_env(py, base / "home")
    envs.install_wheel(py, wheel, env)
    work = base / "elsewhere"
    work.mkdir()
    return py, env, work


def test_installed_vidlab_is_the_wheel_and_finds_its_presets(venv):
    py, env, work = venv
    code = (
        "import json, vidlab, vidlab.generation, vidlab.understanding, vidlab.demos, vidlab.config as c;"
        "print(json.dumps({m.__name__: m.__file__ for m in (vidlab, vidlab.generation, vidlab.understanding,"
        " vidlab.demos)} | {'presets': str(c.config_dir())}))"
    )
    got = json.loads(_run([str(py), "-c", code], work, env).stdout)
    venv_dir = py.parents[1]
    assert all(Path(f).is_relative_to(venv_dir) for f in got.values()), got
    assert Path(got["presets"]) == Path(got["vidlab"]).parent / "presets"


def test_old_import_names_work_with_a_deprecation_warning(venv):
    py, env, work = venv
    res = _run(
        [
            str(py),
            "-W",
            "always::DeprecationWarning",
            "-c",
            "import generation.pipeline as g, vidlab.generation.pipeline as v, understanding; print(g is v)",
        ],
        work,
        env,
    )
    assert res.stdout.strip() == "True"
    assert "'import generation' is deprecated: import vidlab.generation" in res.stderr
    assert "'import understanding' is deprecated" in res.stderr


def test_readme_recipes_run_from_outside_the_repository(venv):
    py, env, work = venv
    vidlab = str(py.parent / "vidlab")
    assert "generate" in _run([vidlab, "--help"], work, env).stdout
    assert "--preset" in _run([vidlab, "demo", "--help"], work, env).stdout
    res = _run(
        [
            vidlab,
            "generate",
            PROMPT,
            "--model",
            "toyworld",
            "--preset",
            "generate/toyworld-calibrated",
            "--num-videos",
            "1",
            "--out",
            "gen",
        ],
        work,
        env,
        timeout=900,
    )
    assert "presets: the checkout" not in res.stderr
    videos = sorted((work / "gen").rglob("*.mp4"))
    assert videos, res.stdout[-2000:]
    resolved = sorted((work / "gen").rglob("*.yaml")) + sorted((work / "gen").rglob("config*.json"))
    assert resolved, "the resolved config is written next to the output"
    _run([vidlab, "toyworld-data", "toy", "1"], work, env, timeout=900)
    rows = [json.loads(line) for line in (work / "toy" / "test" / "questions.jsonl").read_text().splitlines()]
    for policy in ("toy:shipped", "toy:where"):
        for row in (r for r in rows if r["category"] == "needle"):  # a short event: the policy must look
            truth = row["options"][ord(row["answer"]) - ord("A")]
            out = work / f"qa-{policy.replace(':', '-')}-{row['category']}.json"
            _run(
                [
                    vidlab,
                    "qa",
                    "--video",
                    str(work / "toy" / "test" / row["video"]),
                    "--question",
                    row["question"],
                    "--options",
                    *row["options"],
                    "--truth",
                    truth,
                    "--policy",
                    policy,
                    "episode.frame_resize=fit",
                    "--json",
                    str(out),
                ],
                work,
                env,
                timeout=900,
            )
            got = json.loads(out.read_text())
            # the policy's own CLIP, loaded from the installed package, and the truth shown beside the answer
            assert Path(got["clip_model"]).is_relative_to(py.parents[1]), got["clip_model"]
            assert got["truth_option"] == truth and got["valid"], got
            assert got["correct"], f"{policy} on {row['id']}: {got['predicted_option']} (truth {truth})"
