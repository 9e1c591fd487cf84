"""The frame-selector record shows its JSON's figures: every strategy row of every world, the per-kind intervals
quoted, the count table and the findings' figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs/results/frame-selectors.md"
JSON = ROOT / "understanding/toyworld/figures/frame_selectors.json"


@pytest.fixture(scope="module")
def record():
    return PAGE.read_text(), json.loads(JSON.read_text())


def _ci(v: dict, digits: int) -> str:
    lo, hi = v["ci95"]
    return f"{v['mean']:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


@pytest.mark.parametrize("world", ["default", "where", "corpus"])
def test_every_strategy_row_is_the_json(record, world):
    text, data = record
    res = data["worlds"][world]
    strategies = res["strategies"]
    assert len(strategies) == 16 and "agent" in strategies  # 5 methods x 3 budgets + the agent
    for name, s in strategies.items():
        cells = [f"{s['accuracy']:.3f}", f"{s['frames']:.1f}", f"{s['calls']:.2f}"]
        if "agent_minus" in s:
            cells.insert(1, _ci(s["agent_minus"], 3))
        row = [
            line
            for line in text.splitlines()
            if line.startswith(f"| {name} |") or line.startswith(f"| **{name}** |")
        ]
        assert any(all(c in r for c in cells) for r in row), (world, name, cells)
    assert res["budget"] == round(res["validation"]["agent_frames"])  # the budget came from validation


def test_findings_quote_the_json(record):
    text, data = record
    w = data["worlds"]
    for world, name in (("default", "topk-32"), ("where", "aks-32"), ("corpus", "topk-32")):
        assert _ci(w[world]["strategies"][name]["agent_minus"], 3) in text
        # and it is the smallest gap of that world
        gaps = {n: s["agent_minus"]["mean"] for n, s in w[world]["strategies"].items() if n != "agent"}
        assert min(gaps, key=gaps.get) == name
    d = w["default"]["strategies"]
    assert _ci(d["topk-32"]["agent_minus_kinds"]["distractor"], 2) in text
    assert _ci(d["topk-26"]["agent_minus_kinds"]["needle"], 2) in text
    # no selector's interval reaches 0 on a looked-at kind of the where world or the corpus
    for world in ("where", "corpus"):
        for n, s in w[world]["strategies"].items():
            for kind, v in s.get("agent_minus_kinds", {}).items():
                assert kind == "static" or v["ci95"][0] > 0, (world, n, kind)


def test_count_table_and_its_conclusion(record):
    text, data = record
    where = data["worlds"]["where"]
    short = where["count_by_circle"]["8-12 frames"]
    views = where["count_views"]["8-12 frames"]
    best = max(v["accuracy"] for n, v in short.items() if n != "agent")
    assert best <= 0.134 and f"{best:.2f}" in text  # no selector counts them
    assert max(v["in_view"] for n, v in views.items() if not n.startswith("interval-")) <= 0.134
    inside = [v["inside"] for n, v in views.items() if not n.startswith("interval-")]
    assert f"{min(inside):.1f}-{max(inside):.1f} fall inside" in text
    assert views["interval-uniform-26"]["in_view"] == 1.0  # the same budget on the interval shows every count
    for n, v in short.items():
        row = re.search(rf"^\| {re.escape(n)} \| ([0-9.]+) \[", text, re.M)
        assert row and float(row.group(1)) == pytest.approx(v["accuracy"], abs=0.005), n
