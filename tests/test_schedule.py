"""The suite's own scheduling (tests/conftest.py): xdist units are groups or whole modules, the costliest first;
and benchmarks/pytest_cpu.py replays that schedule from a CPU profile."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


class _Item:
    def __init__(self, nodeid: str, group: str | None = None):
        self.nodeid = nodeid
        self.marks = [pytest.mark.xdist_group(group).mark] if group else []

    def iter_markers(self, name: str):
        return iter([m for m in self.marks if m.name == name])

    def __repr__(self) -> str:
        return self.nodeid


def test_units_go_out_costliest_first_and_stay_whole(request):
    plugin = request.config.pluginmanager.get_plugin("vidlab-longest-first")
    order = type(plugin)(
        {"a.py::t1": 1.0, "a.py::t2": 1.0, "b.py::t1": 5.0, "c.py::t1": 0.5, "d.py::t1": 2.0, "d.py::t2": 2.5}
    ).order
    items = [
        _Item("a.py::t1"),
        _Item("b.py::t1"),
        _Item("a.py::t2"),
        _Item("c.py::t1"),
        _Item("d.py::t1", "ray"),
        _Item("e.py::t9"),  # not in the table: counts as the default cost
        _Item("d.py::t2", "ray"),
    ]
    got = [i.nodeid for i in order(items)]
    # units: the ray group 4.5 (two modules' tests, in collection order), b 5, a 2, c 0.5, e default
    assert got == ["b.py::t1", "d.py::t1", "d.py::t2", "a.py::t1", "a.py::t2", "c.py::t1", "e.py::t9"]
    # a table that ranks differently reorders the units, never the tests inside one
    got = [i.nodeid for i in type(plugin)({"c.py::t1": 9.0}).order(items)]
    assert got[0] == "c.py::t1" and got.index("a.py::t1") + 1 == got.index("a.py::t2")


def test_the_cost_table_names_tests_that_exist():
    """A stale table only mis-orders; a table whose names match nothing would silently order by collection."""
    table = json.loads((ROOT / "tests" / "cpu_seconds.json").read_text())
    files = {nodeid.split("::", 1)[0] for nodeid in table}
    missing = sorted(f for f in files if not (ROOT / f).is_file())
    assert len(missing) <= len(files) // 10, missing
    assert all(isinstance(v, float | int) and v >= 0 for v in table.values())


def _pytest_cpu():
    spec = importlib.util.spec_from_file_location("pytest_cpu", ROOT / "benchmarks" / "pytest_cpu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_replay_of_the_schedule_from_a_profile(tmp_path, capsys):
    mod = _pytest_cpu()

    def rec(cpu, reaped=0.0, desc=0.0):
        return {"call_cpu": cpu, "call_reaped": reaped, "call_desc": desc, "call_wall": cpu + 1}

    tests = {
        "m1.py::a": rec(4.0),
        "m1.py::b": rec(1.0, reaped=3.0, desc=2.0),  # children: the larger of the two figures
        "m2.py::a@ray": rec(6.0),
        "m3.py::a@ray": rec(1.0),
        "m4.py::a": rec(2.0),
        "m5.py::a": rec(1.0),
    }
    (tmp_path / "gw0.json").write_text(json.dumps({"worker": "gw0", "startup": {"cpu": 3.0}, "tests": tests}))
    costs = tmp_path / "costs.json"
    assert mod.main([str(tmp_path), "--lint-s", "2", "--write-costs", str(costs)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # units: m1 8, @ray 7, m4 2, m5 1; xdist gives each worker a unit, then one more while <= 2 tests pend:
    # gw0 m1 (2 tests) + m4 = 10, gw1 @ray (2 tests) + m5 = 8
    assert summary["cpu_s"] == 18.0 and summary["busy_s"] == [10.0, 8.0]
    assert summary["idle_estimate_s"] == 10.0 + 3.0 + 2.0
    table = json.loads(costs.read_text())
    assert table["m1.py::b"] == 4.0 and table["m2.py::a"] == 6.0  # the group suffix is not part of the name
