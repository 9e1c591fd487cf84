"""The suite loader: official order, stable ids, metadata alignment, clear errors; the real files when shared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vidlab.generation.compbench.suite import (
    CATEGORIES,
    DEFAULT_DATA,
    SuiteError,
    load_suite,
    subject_phrases,
)


def test_loads_seven_categories_in_official_order(compbench_suite):
    s = load_suite(compbench_suite)
    assert len(s.prompts) == 700
    assert [c.key for c in CATEGORIES] == list(dict.fromkeys(p.category for p in s.prompts))
    sp = s.by_category("spatial_relationship")
    lines = (compbench_suite / "prompts" / "3_spatial_relationship.txt").read_text().split("\n")
    assert [p.text for p in sp] == lines
    assert sp[0].id == "spatial_relationship-0001" and sp[99].id == "spatial_relationship-0100"
    assert sp[41].video_name == "0042.mp4" and s.get("spatial_relationship-0042").text == lines[41]
    assert sp[2].meta["spatial"] == "above"
    assert subject_phrases(s.get("consistent_attr-0001")) == ["a red cat", "a yellow chair"]
    assert subject_phrases(s.get("numeracy-0002")) == ["dog", "bird"]


def test_ids_are_stable_across_loads_and_fingerprint_tracks_content(compbench_suite):
    a, b = load_suite(compbench_suite), load_suite(compbench_suite)
    assert [p.id for p in a.prompts] == [p.id for p in b.prompts] and a.fingerprint == b.fingerprint
    f = compbench_suite / "prompts" / "6_interaction.txt"
    f.write_text(f.read_text().replace("A cat pushes", "A cat pulls", 1))
    f2 = compbench_suite / "meta_data" / "object_interactions.json"
    recs = json.loads(f2.read_text())
    recs[0]["prompt"] = recs[0]["prompt"].replace("pushes", "pulls")
    f2.write_text(json.dumps(recs))
    assert load_suite(compbench_suite).fingerprint != a.fingerprint


def test_selection(compbench_suite):
    s = load_suite(compbench_suite)
    sel = s.select(["numeracy", "3_spatial_relationship"], per_category=2)
    assert [p.id for p in sel] == [
        "numeracy-0001",
        "numeracy-0002",
        "spatial_relationship-0001",
        "spatial_relationship-0002",
    ]
    assert [p.id for p in s.select(ids=["interaction-0007"])] == ["interaction-0007"]
    with pytest.raises(SuiteError, match="unknown category 'colour'"):
        s.select(["colour"])
    with pytest.raises(SuiteError, match="no prompt with id"):
        s.get("numeracy-0101")


def test_missing_metadata_is_allowed_and_reported(tmp_path, suite_writer):
    root = suite_writer(tmp_path / "nometa", meta=False)
    s = load_suite(root)
    assert not any(s.has_meta.values()) and s.prompts[0].meta == {}
    assert subject_phrases(s.prompts[0]) == []


def test_errors_name_the_file(compbench_suite, tmp_path):
    meta = compbench_suite / "meta_data" / "action_binding.json"
    recs = json.loads(meta.read_text())
    recs[4]["prompt"] = "something else"
    meta.write_text(json.dumps(recs))
    with pytest.raises(SuiteError, match=r"action_binding.json record 5 is for 'something else'"):
        load_suite(compbench_suite)
    recs.pop()
    meta.write_text(json.dumps(recs))
    with pytest.raises(SuiteError, match="99 records, expected one per prompt"):
        load_suite(compbench_suite)
    meta.unlink()  # metadata is optional: without it the next check is reached
    (compbench_suite / "prompts" / "7_numeracy.txt").write_text("one prompt only")
    with pytest.raises(SuiteError, match="7_numeracy.txt holds 1 prompts, expected 100"):
        load_suite(compbench_suite)
    with pytest.raises(SuiteError, match="does not exist"):
        load_suite(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SuiteError, match="no prompts/ folder"):
        load_suite(tmp_path / "empty")


@pytest.mark.skipif(
    not (DEFAULT_DATA / "prompts").is_dir(), reason=f"needs ../shared (T2V-CompBench at {DEFAULT_DATA})"
)
def test_shared_benchmark():
    s = load_suite()
    assert len(s.prompts) == 700 and all(len(s.by_category(c.key)) == 100 for c in CATEGORIES)
    assert s.prompts[0].text == "A blue car drives past a white picket fence on a sunny day"
    assert s.get("numeracy-0002").meta["numbers"] == "3,1"
    assert s.has_meta["spatial_relationship"] is False and s.has_meta["numeracy"] is True
    first = Path(DEFAULT_DATA / "prompts" / "5_action_binding.txt").read_text().split("\n")[0]
    assert s.get("action_binding-0001").text == first
    assert subject_phrases(s.get("action_binding-0001")) == ["a dog", "a cat"]


def test_no_data_given_on_an_install_says_to_pass_data(tmp_path, monkeypatch):
    """On an install there is no ../shared beside the package: the default's absence asks for data=PATH."""
    from vidlab.generation.compbench import suite as S

    monkeypatch.setattr(S, "DEFAULT_DATA", tmp_path / "site-packages" / "shared" / "data" / "t2v-compbench")
    with pytest.raises(S.SuiteError, match=r"no T2V-CompBench folder: pass data=PATH"):
        S.load_suite()
