"""A machine without FFmpeg's shared libraries, made here: the installed torchcodec, with its FFmpeg-linked
libraries replaced by empty files, first on ``PYTHONPATH`` (``vidlab.video.testing.torchcodec_without_ffmpeg``).
``import torchcodec.decoders`` works and building a ``VideoDecoder`` raises torchcodec's own ``RuntimeError``, as
on such a machine. CI installs the libraries, so this is where that path runs with the real torchcodec: every
torchcodec test skips naming the apt packages (none fails), ``--backend torchcodec`` is one line and exit 2, and
auto never picks torchcodec. Not ``slow``: both tests take 10.3 s of CPU together (one pytest run and three CLI
runs in subprocesses; ``/usr/bin/time -v pytest -n 0 tests/vidlab/test_video_no_ffmpeg_libs.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from vidlab.video.synth import render_synthetic
from vidlab.video.testing import torchcodec_without_ffmpeg

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
# every test module that decodes with torchcodec (tests/conftest.py SYSTEM_DEPS "torchcodec")
TORCHCODEC_TESTS = ["test_video_exactness.py", "test_video_errors.py", "test_video_real_inputs.py"]
APT = "apt-get install libavcodec59 libavformat59 libavutil57 libswscale6 libavdevice59 libavfilter8"
REASON = f"torchcodec cannot load FFmpeg's shared libraries: {APT} (Debian 12)"
VIDLAB = [sys.executable, "-c", "import sys; from vidlab.cli import main; sys.exit(main())"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    try:
        entry = torchcodec_without_ffmpeg(tmp_path_factory.mktemp("no-ffmpeg"))
    except ModuleNotFoundError:
        pytest.skip("torchcodec is not installed: pip install 'vidlab[torchcodec]'")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIDLAB_AUTO_BACKEND"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(entry), str(ROOT), os.environ.get("PYTHONPATH")]))
    env["OMP_NUM_THREADS"] = "1"
    probe = "import torchcodec.decoders as d, vidlab.video.backends.torchcodec_backend as t; print(t.unavailable_reason())"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == REASON, out.stdout + out.stderr[-2000:]
    return env


def _outcomes(junit: Path) -> dict[str, tuple[str, str]]:
    """test id -> (outcome, skip message) from pytest's JUnit XML."""
    out: dict[str, tuple[str, str]] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        tid = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag: child.get("message", "") for child in case}
        for tag in ("failure", "error", "skipped"):
            if tag in kinds:
                out[tid] = (tag, kinds[tag])
                break
        else:
            out[tid] = ("passed", "")
    return out


def test_torchcodec_tests_skip_naming_the_apt_packages(env, tmp_path):
    junit = tmp_path / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-k", "torchcodec",
           "--junitxml", str(junit), *(str(HERE / f) for f in TORCHCODEC_TESTS)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    outcomes = _outcomes(junit)
    bad = {tid: o for tid, o in outcomes.items() if o[0] in ("failure", "error")}
    assert not bad, bad
    # each case with the torchcodec parameter skips with the one line naming the packages
    param = {
        tid: o for tid, o in outcomes.items() if "torchcodec" in tid.partition("[")[2].rstrip("]").split("-")
    }
    assert param and all(o == ("skipped", REASON) for o in param.values()), param
    # the in-process checks of the same case (a fake torchcodec.decoders) pass here too
    inproc = [
        o
        for tid, o in outcomes.items()
        if tid.endswith("::test_contact_sheet_with_torchcodec_missing_is_one_line_exit_2")
    ]
    assert inproc == [("passed", "")], outcomes
    # the run ends with the group and the apt line that installs it
    assert f"skipped, torchcodec cannot load FFmpeg's shared libraries: {APT}" in proc.stdout


def test_cli_backend_torchcodec_is_one_line_and_auto_reads_with_pyav(env, tmp_path):
    video = tmp_path / "clip.mp4"
    render_synthetic(video, 24, width=64, height=48, gop=12)
    sheet = tmp_path / "sheet.png"
    base = ["contact-sheet", str(video), "--out", str(sheet), "--frames", "4"]
    proc = subprocess.run(
        [*VIDLAB, *base, "--backend", "torchcodec"], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"vidlab contact-sheet: error: video backend 'torchcodec' cannot run here: {REASON}, or use backend=pyav"
    ]
    assert not sheet.exists()
    # auto, even when torchcodec is preferred, reads with PyAV and says why
    for extra_env in ({}, {"VIDLAB_AUTO_BACKEND": "torchcodec"}):
        proc = subprocess.run(
            [*VIDLAB, *base], env={**env, **extra_env}, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr
        meta = json.loads(sheet.with_suffix(".json").read_text())
        assert meta["backend"] == "pyav" and sheet.is_file()
        if extra_env:
            assert meta["selection_reason"].startswith(f"VIDLAB_AUTO_BACKEND=torchcodec, but {REASON}")
            told = [line for line in proc.stderr.splitlines() if "VIDLAB_AUTO_BACKEND" in line]
            assert told == [f"vidlab contact-sheet: warning: {meta['selection_reason']}"], proc.stderr
