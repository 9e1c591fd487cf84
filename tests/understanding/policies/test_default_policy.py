"""The default policy is the best shipped one, ``toy:where`` (it serves the default toy world and the where-to-look
world), everywhere a default is chosen: the registry's ``DEFAULT_POLICY``, ``toy:default``, the demo, the
lmms-eval plug-in, the CLI's examples and messages, the quickstart and the README. ``toy:shipped`` stays
available by name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vidlab.understanding.policies import DEFAULT_POLICY, check_policy_spec
from vidlab.understanding.toyworld import SHIPPED, SHIPPED_CLIP, WEIGHTS_DIR, ToyPolicySpec, resolve_toy_dir

ROOT = Path(__file__).resolve().parents[3]


def test_the_default_policy_is_toy_where_and_toy_shipped_stays_by_name():
    assert DEFAULT_POLICY == "toy:where"
    check_policy_spec(DEFAULT_POLICY)
    check_policy_spec("toy:shipped")  # the default world's own policy, still there by name
    assert resolve_toy_dir("where") == resolve_toy_dir("default") == WEIGHTS_DIR / "where"
    assert resolve_toy_dir("shipped") == WEIGHTS_DIR != SHIPPED["where"]
    # a toy spec without a folder means the default policy's CLIP; toy:shipped keeps its own
    assert (
        ToyPolicySpec.clip_model("")
        == ToyPolicySpec.clip_model("where")
        == str(WEIGHTS_DIR / "where" / "clip")
    )
    assert ToyPolicySpec.clip_model("shipped") == str(SHIPPED_CLIP)


def test_the_demo_and_the_lmms_plugin_default_to_it():
    from vidlab.demos.app import demo_config
    from vidlab.demos.config import DemoQAConfig

    assert DemoQAConfig().policy == DEFAULT_POLICY
    assert demo_config([]).qa.policy == DEFAULT_POLICY == demo_config(["--preset", "default"]).qa.policy
    import inspect

    lmms = pytest.importorskip("vidlab.understanding.lmms.model")
    assert inspect.signature(lmms.VideoBrainLMM.__init__).parameters["policy"].default == DEFAULT_POLICY


def test_the_cli_names_it_in_its_examples_and_in_the_missing_policy_message(capsys):
    from vidlab.understanding.cli import eval_qa_main, qa_main

    for main in (qa_main, eval_qa_main):
        with pytest.raises(SystemExit):
            main(["--help"])
        text = capsys.readouterr().out
        assert "--policy toy:where" in text and "toy:shipped" in text
    # no policy named: one line that suggests the default policy, exit status 2
    assert qa_main(["--video", "v.mp4", "--question", "Q?"]) == 2
    err = capsys.readouterr().err
    assert "--policy is required" in err and "--policy toy:where" in err


def test_the_quickstart_and_the_readme_use_it_on_the_default_world():
    make = (ROOT / "Makefile").read_text()
    quick = make.split("\nquickstart:", 1)[1].split("\n\n", 1)[0]
    policies = re.findall(r"--policy (\S+)", quick)
    assert policies and set(policies) == {DEFAULT_POLICY}, policies
    assert "toyworld/test/questions.jsonl --policy toy:where" in quick  # the default world's eval-qa
    readme = (ROOT / "README.md").read_text()
    assert "--policy toy:shipped" not in readme
    assert "outputs/toyworld/test/questions.jsonl --policy toy:where" in readme
