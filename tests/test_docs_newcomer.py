"""The docs as a newcomer reads them: one story about the wheel and its presets, the extra each command needs
(and the same one the command names when it is missing), the current API in the examples, citations that resolve,
what was not run here said on the rendered page, and the folders recipes write to kept out of git."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))]


def _text(page: str) -> str:
    return (ROOT / page).read_text(encoding="utf-8")


def _visible(text: str) -> str:
    """What the rendered page shows: the text less its HTML comments."""
    return re.sub(r"<!--.*?-->", "", text, flags=re.S)


def test_recipe_output_folders_are_ignored_by_git():
    for folder in ("runs", "outputs"):
        res = subprocess.run(["git", "check-ignore", "-q", f"{folder}/vb/ray_job.sh"], cwd=ROOT)
        assert res.returncode == 0, f"{folder}/ is not in .gitignore, though recipes write there"


def test_no_page_says_the_presets_are_left_out_of_the_wheel():
    """They ship as vidlab/presets/ (tests/install/test_packaging.py checks the wheel's files)."""
    wrong = re.compile(r"(not\**\s+packaged\s+into\s+the\s+wheel|not\s+in\s+the\s+wheel)", re.I)
    said = [p for p in PAGES if wrong.search(" ".join(_text(p).split()))]
    assert not said, said


def test_examples_call_run_job_with_a_run_config():
    """run_job's five keywords gave way to one RunConfig (the `run:` block of every job's config)."""
    old = re.compile(r"run_job\((?:[^()]|\([^()]*\))*?\b(backend|num_workers|num_cpus_per_worker|num_gpus_per_worker"
                     r"|max_retries)\s*=", re.S)  # fmt: skip
    for page in PAGES:
        for block in re.findall(r"```python\n(.*?)```", _text(page), flags=re.S):
            code = re.sub(r"#.*", "", block)  # a comment may name a backend
            assert not old.search(code), (
                f"{page}: run_job(...) with the old keywords; pass run=RunConfig(...)"
            )


def test_cited_notes_are_in_the_repository():
    for page in PAGES:
        for cited in re.findall(r"`((?:research|notes)/[\w./-]+\.md)`", _text(page)):
            assert (ROOT / cited).is_file() or (ROOT / "docs" / cited).is_file(), f"{page} cites {cited}"


def test_recipes_run_only_on_the_toy_model_say_so_on_the_page():
    """A real-Wan block that the docs test runs on the toy-world Wan says so in text the page shows."""
    for page in PAGES:
        text = _text(page)
        for m in re.finditer(r"<!--\s*docs-test:\s*toy-wan\b", text):
            before = (
                _visible(text[: m.start()]).rstrip().rsplit("\n\n", 1)[-1]
            )  # the paragraph above the block
            assert "Not run here" in before and "toy-world Wan" in before, f"{page}: {before[-300:]}"


def _readme_extras() -> dict[str, str]:
    """command (or ``command sub``, ``train-agent --engine E``) -> the extra the README's table names for it
    (``none``: the base install)."""
    text = _text("README.md")
    table = text[text.index("| extra | commands |") :].split("\n\n", 1)[0].splitlines()[2:]
    out: dict[str, str] = {}
    for row in table:
        extra_cell, commands_cell = (c.strip() for c in row.strip("|").split(" | ", 1))
        extra = "none" if extra_cell.startswith("none") else extra_cell.split("`")[1]
        for chunk in re.findall(r"`([a-z][^`]*)`", commands_cell):
            head, _, alternatives = chunk.replace("\\|", "|").rpartition(" ")
            for alt in alternatives.split("|"):
                name = f"{head} {alt}".strip()
                out.setdefault(name, extra)
                out.setdefault(name.split()[0], extra)
    return out


def test_readme_names_the_extra_each_command_says_it_needs():
    from vidlab import cli

    listed = _readme_extras()
    conditional = {  # NEEDS with a `when`: the runs it checks, and a run it leaves alone
        "compbench": {"compbench generate": "gen", "compbench score": "gen", "compbench report": "none"},
        "train-agent": {"train-agent --engine toy": "understand", "train-agent --engine trl": "rl"},
    }
    for name, needs in cli.NEEDS.items():
        for key, extra in conditional.get(name, {name: needs.extra}).items():
            assert listed.get(key) == extra, (key, listed.get(key), extra)
    for name in ("synth", "contact-sheet", "toyworld-data", "plan-cache"):
        assert listed.get(name) == "none" and name not in cli.NEEDS, name
    assert set(cli.commands(available_only=False)) - {"bench"} <= set(listed), (
        "a command the table leaves out"
    )


def test_every_readme_recipe_names_its_extra():
    text = _visible(_text("README.md"))
    recipes = text[text.index("## Recipes") : text.index("## Results")]
    paragraphs = [p for p in recipes.split("\n\n") if p.startswith("**")]
    assert len(paragraphs) >= 3
    for p in paragraphs:
        assert re.search(r"`vidlab\[[a-z,]+\]`", p), p[:200]


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    """The fenced blocks of a page, in order: (language, lines)."""
    out: list[tuple[str, list[str]]] = []
    lang, body = None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if lang is None:
                lang, body = line[3:].strip().lower(), []
            else:
                out.append((lang, body))
                lang = None
        elif lang is not None:
            body.append(line)
    return out


@pytest.mark.parametrize("page", ["README.md", "docs/guides/training.md", "docs/guides/videobrain-qa.md"])
def test_a_placeholder_data_file_points_at_the_quickstarts(page):
    """`--data train.jsonl` in a recipe says which file of `make quickstart` shows its format."""
    found = 0
    for lang, lines in _blocks(_text(page)):
        if lang not in ("bash", "sh", ""):
            continue
        for i, line in enumerate(lines):
            if line.startswith("vidlab") and "--data train.jsonl" in line:
                found += 1
                assert "outputs/quickstart/" in "\n".join(lines[:i]), f"{page}: {line}"
    assert found, f"{page}: no recipe with --data train.jsonl (update this test's list)"
