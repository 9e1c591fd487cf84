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


def test_unknown_command_suggests_close_name():
    with pytest.raises(SystemExit, match="Did you mean: generate"):
        cli.main(["generat"])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_subcommand_has_help(name, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([name, "--help"])
    assert exc.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_console_script_runs():
    proc = subprocess.run([sys.executable, "-m", "vidlab.cli", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "commands:" in proc.stdout
