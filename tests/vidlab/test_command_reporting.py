"""A command's log warnings are one stderr line each, even after a library calls ``logging.basicConfig()``
(open_clip's tokenizer does, through the module-level ``logging.info``): that used to print every package warning
twice, once as ``prog: warning: ...`` and once through the root handler basicConfig added."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import logging
from vidlab.errors import run_command

def main(argv):
    logging.info("a library's module-level call")  # runs logging.basicConfig() where root has no handler
    logging.getLogger("vidlab.clip.corpus").warning("skipped a.mp4: its cache fails its checksum")
    logging.getLogger("somelib.sub").warning("a library's own warning")
    logging.getLogger("somelib.sub").info("not shown")
    return 0

raise SystemExit(run_command("vidlab demo-cmd", main, []))
"""


def test_each_warning_is_printed_once_after_a_library_runs_basicconfig():
    res = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    ours = [ln for ln in lines if "skipped a.mp4" in ln]
    assert ours == ["vidlab demo-cmd: warning: skipped a.mp4: its cache fails its checksum"], lines
    assert [ln for ln in lines if "a library's own warning" in ln] == ["a library's own warning"], lines
    assert not any("not shown" in ln or "module-level call" in ln for ln in lines), lines


def test_the_root_logger_is_left_as_found():
    code = CODE.replace("raise SystemExit(", "rc = (") + (
        "\nassert logging.getLogger().handlers == [], logging.getLogger().handlers\nprint('clean')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "clean", res.stderr
