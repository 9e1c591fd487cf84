"""The ``vidlab`` dispatcher: subcommands come from entry points and each is a main(argv)."""

import subprocess
import sys

import pytest

from vidlab import cli

EXPECTED = {"synth", "contact-sheet", "index", "search", "generate", "qa", "eval-qa", "classify", "bench"}


def test_all_subcommands_registered():
    assert EXPECTED <= set(cli.commands())


def test_help_lists_commands(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in EXPECTED:
        assert name in out


def test_unknown_command_is_one_line_exit_2_with_suggestion(capsys):
    assert cli.main(["generat"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "vidlab: error: unknown command 'generat'; did you mean: generate? `vidlab --help` lists the commands"
    ]


def _fake_commands(monkeypatch, table):
    from importlib.metadata import EntryPoint

    eps = [EntryPoint(name=n, value=v, group="vidlab.commands") for n, v in table.items()]
    monkeypatch.setattr(cli, "entry_points", lambda group: eps)


def test_help_lists_only_commands_whose_code_is_installed(monkeypatch, capsys):
    _fake_commands(monkeypatch, {"synth": "vidlab.video.cli:synth_main", "ghost": "no_such_pkg_9.app:main"})
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "synth" in out and "ghost" not in out
    assert cli.main(["ghost"]) == 2


def test_missing_optional_dependency_is_one_line_naming_the_extra(monkeypatch, tmp_path, capsys):
    (tmp_path / "vidlab_fake_cmd.py").write_text(
        "import gradio_not_installed_xyz\ndef main(argv):\n    return 0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(
        cli._DISTRIBUTIONS, "gradio_not_installed_xyz", "gradio"
    )  # an import name of gradio's
    _fake_commands(monkeypatch, {"fake": "vidlab_fake_cmd:main"})
    assert cli.main(["fake"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'vidlab[demo]'" in err[0]


def test_optional_package_missing_while_a_command_runs_is_one_line_naming_its_extra(
    monkeypatch, tmp_path, capsys
):
    """The command imports lazily (generate meets diffusers only when it loads the pipeline): the import error
    raised inside it names the command's own extra where that brings the package (transformers: gen for
    generate, understand for qa), else the smallest extra that does (ray)."""
    for mod in ("transformers_not_installed_xyz", "ray_not_installed_xyz"):
        (tmp_path / f"vidlab_fake_{mod}.py").write_text(f"def main(argv):\n    import {mod}\n    return 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli._DISTRIBUTIONS, "transformers_not_installed_xyz", "transformers")
    monkeypatch.setitem(cli._DISTRIBUTIONS, "ray_not_installed_xyz", "ray")
    # only the run-time path: nothing to check before the run
    monkeypatch.setattr(cli, "NEEDS", {"generate": cli.Needs("gen", ()), "qa": cli.Needs("understand", ())})
    for name, mod, extra in (
        ("generate", "transformers_not_installed_xyz", "gen"),
        ("qa", "transformers_not_installed_xyz", "understand"),
        ("qa", "ray_not_installed_xyz", "ray"),
    ):
        _fake_commands(monkeypatch, {name: f"vidlab_fake_{mod}:main"})
        assert cli.main([name]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [
            f"vidlab {name}: error: `vidlab {name}` needs the {mod!r} package, not installed here: "
            f"pip install 'vidlab[{extra}]'"
        ]


def test_a_module_no_extra_brings_stays_a_traceback_at_run_time(monkeypatch, tmp_path):
    (tmp_path / "vidlab_fake_run2.py").write_text("def main(argv):\n    import undeclared_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _fake_commands(monkeypatch, {"fake": "vidlab_fake_run2:main"})
    with pytest.raises(ModuleNotFoundError):
        cli.main(["fake"])


@pytest.mark.parametrize(
    ("argv", "blocked", "extra"),
    [
        (["generate", "a red circle", "--preset", "generate/toyworld-calibrated", "--out", "OUT"], "diffusers", "gen"),
        (["qa", "--video", "v.mp4", "--question", "q?", "--options", "a", "b", "--policy", "toy:where"], "safetensors",
         "understand"),
        (["classify", "--data", "q.jsonl", "--policy", "toy:where", "--out", "OUT"], "open_clip", "understand"),
        (["index", "v.mp4", "--cache-dir", "OUT"], "torch", "clip"),
        (["train-agent", "--engine", "toy", "out=OUT"], "safetensors", "understand"),
        (["compbench", "generate", "out=OUT"], "diffusers", "gen"),
    ],
)  # fmt: skip
def test_a_command_without_its_extra_is_one_line_before_it_writes_anything(argv, blocked, extra, monkeypatch,
                                                                           tmp_path, capsys):  # fmt: skip
    """A package that is not there (None in sys.modules: Python's own "not importable") is named before the
    command starts: one line, exit 2, the extra to install, and no output folder, job or lock file."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, blocked, None)
    assert cli.main([a.replace("OUT", str(tmp_path / "out")) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and f"needs the {blocked!r} package, not installed here: pip install 'vidlab[{extra}]'" in err[0]
    )
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(SystemExit) as exc:  # its help still works
        cli.main([argv[0], "--help"])
    assert exc.value.code == 0


def test_import_error_inside_our_own_code_stays_a_bug(monkeypatch, tmp_path):
    (tmp_path / "vidlab_fake_cmd3.py").write_text("import vidlab.no_such_module\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _fake_commands(monkeypatch, {"fake": "vidlab_fake_cmd3:main"})
    with pytest.raises(ModuleNotFoundError):
        cli.main(["fake"])


def _raiser_commands(monkeypatch, tmp_path):
    (tmp_path / "vidlab_fake_err.py").write_text(
        "from vidlab.config import ConfigError\n"
        "def main(argv):\n    raise ConfigError('steps: expected an int, got \\'two\\'')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    _fake_commands(monkeypatch, {"fake": "vidlab_fake_err:main"})


def test_debug_flag_anywhere_and_env_show_the_traceback(monkeypatch, tmp_path, capsys):
    from vidlab.config import ConfigError

    _raiser_commands(monkeypatch, tmp_path)
    monkeypatch.delenv("VIDLAB_DEBUG", raising=False)
    assert cli.main(["fake", "steps=two"]) == 2
    assert capsys.readouterr().err.strip() == "vidlab fake: error: steps: expected an int, got 'two'"
    for argv in (["--debug", "fake"], ["fake", "--debug"]):
        with pytest.raises(ConfigError):
            cli.main(argv)
    monkeypatch.setenv("VIDLAB_DEBUG", "1")
    with pytest.raises(ConfigError):
        cli.main(["fake"])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_subcommand_has_help(name, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([name, "--help"])
    assert exc.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_console_script_runs():
    proc = subprocess.run([sys.executable, "-m", "vidlab.cli", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "commands:" in proc.stdout


def test_bench_unwritable_out_and_missing_checkout_are_one_line(monkeypatch, tmp_path, capsys):
    from vidlab import bench

    (tmp_path / "afile").write_text("x")
    assert cli.main(["bench", "--out", str(tmp_path / "afile" / "b.jsonl"), "failure_paths"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write --out" in err[0]
    monkeypatch.setattr(bench, "BENCH_DIR", tmp_path / "no-benchmarks")
    assert cli.main(["bench"]) == 2
    assert "ship with a checkout" in capsys.readouterr().err


def test_contact_sheet_bad_sizes_and_unwritable_out_are_one_line(tmp_path, capsys):
    from vidlab.video.synth import render_synthetic

    video = tmp_path / "v.mp4"
    render_synthetic(video, 12, fps=12, width=64, height=48, seed=0)
    for flag in ("--tile-width", "--tile-height", "--columns"):
        with pytest.raises(SystemExit) as ei:
            cli.main(["contact-sheet", str(video), "--out", str(tmp_path / "s.png"), flag, "0"])
        assert ei.value.code == 2
        assert f"error: {flag} must be >= 1, got 0" in capsys.readouterr().err
    (tmp_path / "afile").write_text("x")
    assert cli.main(["contact-sheet", str(video), "--out", str(tmp_path / "afile" / "s.png")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a file, not a folder" in err[0]


def test_every_command_has_a_description_in_the_help(capsys):
    from pathlib import Path

    import tomllib

    pyproject = tomllib.loads((Path(cli.__file__).resolve().parents[1] / "pyproject.toml").read_text())
    declared = set(pyproject["project"]["entry-points"]["vidlab.commands"]) | set(cli.commands(False))
    assert not [name for name in sorted(declared) if not cli.DESCRIPTIONS.get(name, "").strip()]
    assert cli.main(["--help"]) == 0
    listed = [ln.split(None, 1) for ln in capsys.readouterr().out.splitlines() if ln.startswith("  ")]
    assert listed and all(len(parts) == 2 for parts in listed), listed  # `toyworld-data` had an empty one


@pytest.mark.parametrize(
    ("argv", "suggestion", "own"),
    [
        (["generate", "a cat", "--preset", "tny"], "did you mean 'generate/tiny'?", "generate/"),
        (
            ["qa", "--video", "v.mp4", "--question", "q", "--preset", "videobrain"],
            "'qa/videobrain-qwen-vl'",
            "qa/",
        ),
        (["train-agent", "--preset", "trl-tny"], "did you mean 'train-agent/trl-tiny'?", "train-agent/"),
    ],
)
def test_a_preset_typo_suggests_and_lists_only_that_commands_presets(argv, suggestion, own, tmp_path, capsys):
    import re

    extra = ["--out", str(tmp_path / "o")] if argv[0] == "generate" else []
    assert cli.main([*argv, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and suggestion in err, err
    listed = re.findall(r"'([\w.-]+/[\w.-]+)'", err.split("the presets here:", 1)[1])
    assert listed and all(name.startswith(own) for name in listed), listed
    assert not (tmp_path / "o").exists()
