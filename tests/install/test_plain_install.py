"""A plain ``pip install vidlab`` (no extras) speaks: every command either runs or says in one line which extra
to install, exit 2, before it writes anything.

Two clean venvs get the wheel (``--no-deps``) and, linked in from the environment running this test, only
vidlab's base requirements, or those plus the pinned torch pair (tests/install/envs.py): the two installs a
newcomer ends up with. Every command runs once in each, from a folder outside the checkout.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import envs  # noqa: E402  (tests/install/envs.py)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("plain-install")]

QUESTION = ["--question", "What colour was the triangle?", "--options", "magenta", "white", "blue", "yellow"]
VIDEO = "toy/test/videos/200000.mp4"
DATA = "toy/test/questions.jsonl"
# every command once: (argv, the extra its one line names; None: it runs). The data commands run first and
# make the inputs of the others (a video, a toy world).
COMMANDS: list[tuple[list[str], str | None]] = [
    (["--help"], None),
    (["synth", "clip.mp4", "--frames", "12", "--width", "64", "--height", "48"], None),
    (["contact-sheet", "clip.mp4", "--out", "sheet.png", "--frames", "4"], None),
    (["toyworld-data", "toy", "1"], None),
    (["plan-cache", "list"], None),
    (["compbench", "metrics"], None),
    (["index", "clip.mp4", "--cache-dir", "index"], "clip"),
    (["search", "a red ball", "--index", "index"], "clip"),
    (
        [
            "generate",
            "a red circle to the left of a blue square",
            "--preset",
            "generate/toyworld-calibrated",
            "--num-videos",
            "1",
            "--out",
            "gen",
        ],
        "gen",
    ),  # fmt: skip
    (["compbench", "generate", "out=cb", "prompts_per_category=1"], "gen"),
    (["train-gen-toyworld", "--out", "gen-train"], "gen"),
    (["qa", "--video", VIDEO, *QUESTION, "--policy", "toy:where"], "understand"),
    (
        ["eval-qa", "--benchmark", "jsonl", "--data", DATA, "--policy", "toy:where", "--out", "eval"],
        "understand",
    ),
    (["classify", "--data", DATA, "--policy", "toy:where", "--out", "labelled.jsonl"], "understand"),
    (["train-agent", "--engine", "toy", "--preset", "toyworld", "out=agent"], "understand"),
    (["train-agent", "--engine", "trl", "--data", "labelled.jsonl", "--out", "trl"], "rl"),
    (["demo"], "demo"),
]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return envs.build_wheel(tmp_path_factory.mktemp("wheel"))[0]


def _listing(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


@pytest.mark.parametrize("with_torch", [False, True], ids=["base", "base+torch"])
def test_every_command_runs_or_names_its_extra_in_one_line(with_torch, wheel, tmp_path):
    pytest.importorskip("torch")
    linked = [tmp_path / "base"]
    envs.link_closure(linked[0], envs.base_requirements())
    if with_torch:
        linked.append(tmp_path / "torch")
        assert {"torch", "torchvision"} <= set(envs.link_closure(linked[1], ["torch", "torchvision"]))
    py = envs.venv_python(tmp_path / "venv", linked)
    env = envs.clean_env(py, tmp_path / "home")
    envs.install_wheel(py, wheel, env)
    work = tmp_path / "elsewhere"
    work.mkdir()
    probe = "import importlib.util as u; print([m for m in ('torch', 'diffusers', 'open_clip') if u.find_spec(m)])"
    found = subprocess.run(
        [str(py), "-c", probe], cwd=work, env=env, capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == ("['torch']" if with_torch else "[]")
    vidlab = str(py.parent / "vidlab")
    for argv, extra in COMMANDS:
        before = _listing(work)
        res = subprocess.run([vidlab, *argv], cwd=work, env=env, capture_output=True, text=True, timeout=600)
        shown = f"vidlab {' '.join(argv)}: rc {res.returncode}\n{res.stdout[-1500:]}\n{res.stderr[-3000:]}"
        if extra is None:
            assert res.returncode == 0, shown
            continue
        lines = res.stderr.strip().splitlines()
        assert res.returncode == 2 and len(lines) == 1, shown
        assert (
            lines[0].startswith(f"vidlab {argv[0]}")
            and ": error: " in lines[0]
            and f"pip install 'vidlab[{extra}]'" in lines[0]
        ), shown
        assert _listing(work) == before, f"{shown}\nleft behind: {sorted(set(_listing(work)) - set(before))}"
