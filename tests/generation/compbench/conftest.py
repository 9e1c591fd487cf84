"""Fixtures for the compbench tests: a small benchmark written here in the official repository's layout.

``compbench_suite`` writes ``prompts/N_<category>.txt`` (100 prompts each, no trailing newline, as the
official files) and ``meta_data/*.json`` for every category, so most tests never need ../shared.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

COLOURS = ["red", "blue", "green", "yellow", "black", "white", "purple", "orange", "pink", "brown"]
NOUNS = ["cat", "dog", "ball", "cube", "vase", "chair", "bird", "car", "apple", "lamp"]
NUMBERS = ["two", "three", "four"]
RELATIONS = [("on the left of", "left"), ("on the right of", "right"), ("above", "above"), ("below", "below")]
DIRECTIONS = [("leftwards", "left"), ("rightwards", "right"), ("upwards", "up"), ("downwards", "down")]


def _records(n: int) -> dict[str, list[dict]]:
    recs: dict[str, list[dict]] = {k: [] for k in ("ca", "da", "sp", "mo", "ab", "oi", "nu")}
    for i in range(n):
        c1, c2 = COLOURS[i % 10], COLOURS[(i + 3) % 10]
        n1, n2 = NOUNS[i % 10], NOUNS[(i + 5) % 10]
        p = f"A {c1} {n1} next to a {c2} {n2}"
        recs["ca"].append({"prompt": p, "phrases": f"a {c1} {n1}; a {c2} {n2}"})
        p = f"A timelapse of a {c1} {n1} turning {c2}"
        recs["da"].append(
            {"prompt": p, "state 0": f"A {c1} {n1}", "state 1": f"A {c2} {n1}", "tag": "colour"}
        )
        rel, key = RELATIONS[i % 4]
        recs["sp"].append({"prompt": f"A {n1} {rel} a {n2}", "spatial": key, "object_1": n1, "object_2": n2})
        word, d = DIRECTIONS[i % 4]
        recs["mo"].append(
            {
                "prompt": f"A {n1} moving {word} and a {n2} staying still",
                "object_1": n1,
                "d_1": d,
                "object_2": "",
                "d_2": "",
            }
        )
        recs["ab"].append(
            {
                "prompt": f"A {n1} runs while a {n2} sleeps",
                "phrase_0": [f"a {n1}?", f"a {n1} runs?"],
                "phrase_1": [f"a {n2}?", f"a {n2} sleeps?"],
            }
        )
        recs["oi"].append({"prompt": f"A {n1} pushes a {n2}"})
        k = NUMBERS[i % 3]
        recs["nu"].append(
            {
                "prompt": f"{k} {n1}s sit near a {c2} {n2}",
                "objects": f"{n1},{n2}",
                "numbers": f"{i % 3 + 2},1",
            }
        )
    return recs


FILES = {
    "ca": ("1_consistent_attr.txt", "consistent_attribute_binding.json"),
    "da": ("2_dynamic_attr.txt", "dynamic_attribute_binding.json"),
    "sp": ("3_spatial_relationship.txt", "spatial_relationships.json"),
    "mo": ("4_motion_binding.txt", "motion_binding.json"),
    "ab": ("5_action_binding.txt", "action_binding.json"),
    "oi": ("6_interaction.txt", "object_interactions.json"),
    "nu": ("7_numeracy.txt", "generative_numeracy.json"),
}


def write_suite(root: Path, n: int = 100, meta: bool = True) -> Path:
    (root / "prompts").mkdir(parents=True, exist_ok=True)
    (root / "meta_data").mkdir(exist_ok=True)
    for key, recs in _records(n).items():
        pfile, mfile = FILES[key]
        (root / "prompts" / pfile).write_text("\n".join(r["prompt"] for r in recs), encoding="utf-8")
        if meta:
            (root / "meta_data" / mfile).write_text(json.dumps(recs, indent=1), encoding="utf-8")
    return root


@pytest.fixture
def compbench_suite(tmp_path: Path) -> Path:
    return write_suite(tmp_path / "t2v-compbench")


@pytest.fixture
def suite_writer():
    return write_suite
