"""The environment-variable table (docs/reference/environment.md) lists every variable the code reads (and only those)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("vidlab", "generation", "understanding", "demos", "benchmarks")
NAME = re.compile(r"\b(?:VIDLAB|OPENAI|RAY)_[A-Z0-9_]*[A-Z0-9]\b")
# Python constants, not variables: RAY_TMP_ENV holds VIDLAB_RAY_TMPDIR; RAY_PROBE / RAY_REMOTE are script texts
# (understanding/rl/verl_launch.py)
IGNORE = {"RAY_TMP_ENV", "RAY_PROBE", "RAY_REMOTE"}


def _code_names() -> set[str]:
    names: set[str] = set()
    for pkg in SOURCES:
        for path in (ROOT / pkg).rglob("*.py"):
            names |= set(NAME.findall(path.read_text()))
    return names - IGNORE


def _table_names() -> set[str]:
    text = (ROOT / "docs" / "reference" / "environment.md").read_text()
    section = text.split("# Environment variables", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {n for row in rows for n in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split("|")[1])}


def test_every_variable_the_code_reads_is_in_the_readme_table():
    missing = sorted(_code_names() - _table_names())
    assert not missing, f"add these to the table in docs/reference/environment.md: {missing}"


def test_the_table_lists_no_variable_the_code_does_not_mention():
    stale = sorted(_table_names() - _code_names())
    assert not stale, f"docs/reference/environment.md lists variables no code reads: {stale}"
