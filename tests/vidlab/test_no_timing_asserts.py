"""No test asserts a wall-clock bound: speed is a benchmark figure (benchmarks/), measured as a ratio.

Walks every test module's AST: an ``assert`` may not read a clock (``time.perf_counter()``,
``time.time()``, ``time.monotonic()``) or a name computed from one in the same function."""

from __future__ import annotations

import ast
from pathlib import Path

CLOCKS = {"perf_counter", "time", "monotonic", "perf_counter_ns", "monotonic_ns"}
TESTS = Path(__file__).resolve().parents[1]


def _reads_clock(node: ast.AST, tainted: set[str]) -> bool:
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in CLOCKS
            and isinstance(sub.func.value, ast.Name)
            and sub.func.value.id == "time"
        ):
            return True
        if isinstance(sub, ast.Name) and sub.id in tainted:
            return True
    return False


def timing_asserts(source: str) -> list[int]:
    """Line numbers of asserts that depend on a clock reading."""
    bad = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        tainted: set[str] = set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and _reads_clock(node.value, set()):
                tainted |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and _reads_clock(node.value, tainted):
                tainted |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        # a deadline (time.time() + N) only bounds a wait loop; comparing against it in an assert is fine
        deadlines = {n for n in tainted if "deadline" in n}
        for node in ast.walk(fn):
            if not isinstance(node, ast.Assert) or not _reads_clock(node.test, tainted - deadlines):
                continue
            if any(isinstance(n, ast.Name) and n.id in deadlines for n in ast.walk(node.test)):
                continue  # `assert time.monotonic() < deadline`: a hang guard in a wait loop, not a speed bound
            bad.append(node.lineno)
    return bad


def test_detector_sees_a_timing_assert():
    src = "import time\ndef test_x():\n    t0 = time.perf_counter()\n    f()\n    dt = time.perf_counter() - t0\n    assert dt < 1\n"
    assert timing_asserts(src) == [6]
    guard = "import time\ndef test_y():\n    deadline = time.time() + 5\n    assert time.time() < deadline\n"
    assert timing_asserts(guard) == []


def test_no_test_asserts_a_wall_clock_bound():
    found = []
    for path in sorted(TESTS.rglob("test_*.py")):
        for line in timing_asserts(path.read_text()):
            found.append(f"{path.relative_to(TESTS)}:{line}")
    assert not found, f"wall-clock asserts (move the figure into benchmarks/): {found}"
