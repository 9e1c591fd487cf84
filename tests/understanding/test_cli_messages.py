"""`vidlab qa` never guesses silently: a key=value word after --options is refused unless it is a setting
(then it is an override), and the policy must be named (the default const:A answers "A" without looking)."""

from __future__ import annotations

import pytest
import yaml

from vidlab.understanding.cli import qa_main
from vidlab.video.synth import render_synthetic


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    return str(render_synthetic(tmp_path_factory.mktemp("v") / "a.mp4", 24, fps=8, width=64, height=48))


def test_options_word_like_an_override_is_refused_not_an_option(video, capsys):
    rc = qa_main(
        ["--video", video, "--question", "Q?", "--options", "a", "b", "steps=8", "--policy", "const:B"]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "'steps=8' looks like a key=value setting" in err and err.count("\n") == 1
    # a real setting after --options is an override, and an option's text with spaces around '=' stays text
    rc = qa_main(
        [
            "--video",
            video,
            "--question",
            "Q?",
            "--options",
            "a",
            "x = 5",
            "episode.max_calls=0",
            "--policy",
            "const:B",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "options: A. a  B. x = 5" in out and "C." not in out


def test_qa_requires_a_policy_instead_of_defaulting_to_const_a(video, tmp_path, capsys):
    assert qa_main(["--video", video, "--question", "Q?", "--options", "a", "b"]) == 2
    err = capsys.readouterr().err
    assert "--policy is required" in err and "const:A" in err
    # named by an override or a preset: fine (the preset is the user's choice)
    assert qa_main(["--video", video, "--question", "Q?", "--options", "a", "b", "policy=const:B"]) == 0
    assert "predicted B" in capsys.readouterr().out
    preset = tmp_path / "p.yaml"
    preset.write_text(yaml.safe_dump({"policy": "const:A"}))
    assert (
        qa_main(["--video", video, "--question", "Q?", "--options", "a", "b", "--preset", str(preset)]) == 0
    )
    assert "predicted A" in capsys.readouterr().out
