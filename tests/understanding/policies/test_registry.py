"""The policy registry: built-in schemes, code registration, and a plug-in found through a `vidlab.policies`
entry point of another (test-made) distribution, used by `vidlab qa` without editing vidlab."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vidlab.understanding.policies import (
    PolicySpecError,
    available_policies,
    check_policy_spec,
    load_policy,
    register_policy,
    unregister_policy,
)

PLUGIN = '''
from vidlab.understanding.policies.errors import PolicySpecError


class EchoPolicy:
    """Answers the option letter named after the scheme, e.g. echo:B, after one uniform_sample call."""

    def __init__(self, rest, **kw):
        self.letter = rest
        self.name = f"echo:{rest}"

    @staticmethod
    def check_spec(rest):
        if len(rest) != 1 or not rest.isupper():
            raise PolicySpecError(f"echo:{rest}", "expected one capital letter")

    def generate(self, messages, *, num_samples=1, temperature=0.0, max_new_tokens=512, seed=None):
        turns = sum(1 for m in messages if m.role == "assistant")
        if turns == 0:
            call = '{"name": "uniform_sample", "arguments": {"start_frame": 0, "end_frame": 40}}'
            return [f"<thinking>look</thinking><tool_call>{call}</tool_call>"] * num_samples
        return [f"<thinking>done</thinking><answer>{self.letter}</answer>"] * num_samples
'''


@pytest.fixture
def plugin_dist(tmp_path: Path) -> Path:
    """A folder holding module `echo_policy` and an installed-looking distribution declaring it as `echo`."""
    (tmp_path / "echo_policy.py").write_text(PLUGIN)
    info = tmp_path / "echo_policy-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-policy\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vidlab.policies]\necho = echo_policy:EchoPolicy\n")
    return tmp_path


def test_builtin_schemes_and_the_toy_world_registers_itself():
    known = available_policies()
    for scheme in ("hf", "hf-tiny", "openai", "replay", "const", "pixel"):
        assert known[scheme] == "built-in"
    # toy comes from this distribution's own entry point, not from an import inside vidlab.understanding.policies
    assert known["toy"].startswith("entry point vidlab.understanding.toyworld")
    import ast

    import vidlab.understanding.policies as pkg

    for path in Path(pkg.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                )
                assert not any(n.startswith("vidlab.understanding.toyworld") for n in names), (
                    path.name,
                    names,
                )


def test_unknown_scheme_names_close_ones():
    with pytest.raises(PolicySpecError, match=r"unknown scheme 'hf_tiny'.*did you mean hf-tiny"):
        check_policy_spec("hf_tiny:qwen2_5_vl")
    with pytest.raises(PolicySpecError, match="expected 'scheme:...'"):
        check_policy_spec("const")
    with pytest.raises(PolicySpecError, match="nothing after the scheme"):
        check_policy_spec("const:")


def test_builtin_checks_still_refuse_bad_specs(tmp_path):
    with pytest.raises(PolicySpecError, match="KIND one of"):
        check_policy_spec("hf-tiny:llama")
    with pytest.raises(PolicySpecError, match="URL@MODEL"):
        check_policy_spec("openai:http://127.0.0.1:8000/v1")
    with pytest.raises(PolicySpecError, match="colour must be one of"):
        check_policy_spec("pixel:chartreuse")
    with pytest.raises(PolicySpecError, match="file not found"):
        check_policy_spec(f"replay:{tmp_path / 'missing.json'}")
    with pytest.raises(PolicySpecError, match="not a folder"):
        check_policy_spec(f"hf:{tmp_path / 'nope'}")
    assert load_policy("const:C").generate([])[0].endswith("<answer>C</answer>")


def test_register_in_code_then_unregister():
    class Upper:
        def __init__(self, rest, **kw):
            self.name, self.rest = f"upper:{rest}", rest.upper()

        def generate(self, messages, **kw):
            return [f"<answer>{self.rest}</answer>"]

    register_policy("upper", Upper)
    try:
        pol = load_policy("upper:b")
        assert isinstance(pol, Upper) and pol.generate([]) == ["<answer>B</answer>"]
        assert available_policies()["upper"] == "registered"
    finally:
        unregister_policy("upper")
    with pytest.raises(PolicySpecError, match="unknown scheme 'upper'"):
        load_policy("upper:b")
    with pytest.raises(ValueError):
        register_policy("a:b", Upper)


def test_a_class_without_generate_is_refused():
    class NoGenerate:
        def __init__(self, rest, **kw):
            pass

    register_policy("mute", NoGenerate)
    try:
        with pytest.raises(PolicySpecError, match="no generate"):
            load_policy("mute:x")
    finally:
        unregister_policy("mute")


def test_entry_point_plugin_in_process(plugin_dist, monkeypatch):
    monkeypatch.syspath_prepend(str(plugin_dist))
    assert available_policies()["echo"] == "entry point echo_policy:EchoPolicy"
    with pytest.raises(PolicySpecError, match="one capital letter"):
        check_policy_spec("echo:bb")
    pol = load_policy("echo:B")
    assert type(pol).__name__ == "EchoPolicy" and pol.name == "echo:B"
    unregister_policy("echo")  # the registry caches the class; leave no trace for other tests


def test_entry_point_plugin_through_vidlab_qa(plugin_dist, tmp_path):
    """`vidlab qa --policy echo:B` runs a model that vidlab never heard of, through the real episode loop."""
    from vidlab.understanding.benchmarks.synthetic import write_needle_benchmark

    jsonl = write_needle_benchmark(tmp_path / "nb", n=1, num_frames=80, fps=10.0)
    row = json.loads(jsonl.read_text().splitlines()[0])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(plugin_dist), os.environ.get("PYTHONPATH", "")]))
    env["OMP_NUM_THREADS"] = "1"
    out = tmp_path / "qa.json"
    cmd = [sys.executable, "-m", "vidlab.cli", "qa", "--video", str(jsonl.parent / row["video"]),
           "--question", row["question"], "--options", *row["options"], "--policy", "echo:B",
           "--json", str(out)]  # fmt: skip
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    rec = json.loads(out.read_text())
    assert "policy: echo:B" in res.stdout
    assert rec["predicted"] == "B" and rec["valid"] is True
    # the plug-in's one uniform_sample call ran in the episode: more frames than the 16 of the initial view
    assert rec["num_tool_calls"] == 1 and rec["num_frames_used"] > 16
    bad = subprocess.run(
        [*cmd[:-2], "--policy", "echo:bb"], env=env, capture_output=True, text=True, timeout=300
    )
    assert bad.returncode == 2 and "one capital letter" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_plugin_source_is_importable_text():
    # the fixture's plug-in is plain Python a user would write; keep it compiling
    compile(textwrap.dedent(PLUGIN), "echo_policy.py", "exec")
