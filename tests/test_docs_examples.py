"""Every code block of the documentation (README.md, the area READMEs, docs/**/*.md) and every command's --help
example, run as written.

What "run" means per kind of block, and what is skipped (each skip says why in its reason):

- ``python`` blocks are executed for real, in order, one namespace per page (a block may use names an earlier
  block of the same page defined), in a temporary folder where the placeholder files the docs name
  (``video.mp4``, ``movie.mp4``, ``v.mp4``, ``videos/``) are small synthetic videos. A block preceded by a line
  ``<!-- docs-test: skip (REASON) -->`` is skipped; the only reasons allowed are a GPU or the network. A block
  preceded by ``<!-- docs-test: toy-wan (...) -->`` is a real-Wan recipe run on the shipped toy-world Wan on a
  CPU: a ``Wan-AI/...`` hub id loads ``generation/toyworld/weights`` (float32), ``.to("cuda")`` stays on the CPU
  when there is no CUDA device, and the call's size and steps are the toy model's own (64x64, 5 frames, 12 steps);
  everything else (diffusers' loading, ``apply_comp_attn``, the pipeline call, writing the video) runs as written.
- ``json`` blocks must parse; ``yaml`` blocks of QA settings must resolve as an ``EvalConfig`` preset.
- ``vidlab ...`` lines (shell blocks and --help examples) are checked up to the point where the command
  would start work: its argument parsing and its config resolution (preset names, every key=value override,
  types and ranges) run for real and must succeed; then the run is stopped (``vidlab.config.resolve`` is
  wrapped to stop right after it succeeds). So a help text cannot suggest a preset that does not exist or an
  override its command refuses. ``$ `` transcript lines (examples of refusals) must be refused.
- other shell lines: ``make T`` needs target T in the Makefile; ``python SCRIPT ...`` needs the script, and
  each ``--flag`` in the line must appear in ``python SCRIPT --help``; ``pytest PATH`` needs PATH.

Beside the blocks: every relative link of these pages points at a file that exists, no page speaks of work
sessions or issue numbers, and the generated configuration reference covers every field of every config.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _doc_pages() -> list[str]:
    """README.md, every README of a package folder, and every page of the docs site."""
    pages = ["README.md"]
    for area in ("vidlab", "generation", "understanding", "demos"):
        pages += sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / area).rglob("README.md"))
    pages += sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))
    return pages


READMES = _doc_pages()  # every documentation page (the name is kept from when only READMEs had code)
SKIP_MARK = re.compile(r"<!--\s*docs-test:\s*skip\s*\((.+?)\)\s*-->")
TOY_WAN_MARK = re.compile(r"<!--\s*docs-test:\s*toy-wan\b")
ALLOWED_SKIPS = ("gpu", "network")


# ------------------------------------------------------------------------------------------- parsing
def blocks(readme: str) -> list[dict[str, Any]]:
    """Fenced code blocks of one README: language, first line number, text, skip reason."""
    lines = (ROOT / readme).read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1).lower(), i + 1
        j = start
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        skip = SKIP_MARK.search(prev)
        out.append(
            {
                "readme": readme,
                "lang": lang,
                "line": start + 1,
                "text": "\n".join(lines[start:j]),
                "skip": skip.group(1) if skip else None,
                "toy_wan": bool(TOY_WAN_MARK.search(prev)),
            }
        )
        i = j + 1
    return out


def shell_lines(text: str) -> list[str]:
    """Commands of a shell block: continuation lines joined, comments and blank lines dropped."""
    joined, cur = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        if cur.strip() and not cur.lstrip().startswith("#"):
            joined.append(cur.strip())
        cur = ""
    return joined


def split_command(line: str) -> list[str]:
    """shlex words of a command, without a trailing ``# comment``."""
    lex = shlex.shlex(line, posix=True, punctuation_chars=False)
    lex.whitespace_split = True
    lex.commenters = "#"
    return list(lex)


ALL_BLOCKS = [b for r in READMES for b in blocks(r)]


def _id(b: dict[str, Any]) -> str:
    return f"{b['readme']}:{b['line']}"


# ------------------------------------------------------------------------------------- placeholders
@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A temporary folder holding the placeholder files the docs name."""
    from vidlab.video.synth import render_synthetic

    d = tmp_path_factory.mktemp("docs")
    src = render_synthetic(d / "video.mp4", 48, fps=8, width=96, height=72, seed=0)
    for name in ("movie.mp4", "v.mp4", "out.mp4", "talk.mp4", "clip.mp4", "V.mp4"):
        os.link(src, d / name)
    (d / "videos").mkdir()
    os.link(src, d / "videos" / "a.mp4")
    (d / "outputs").mkdir()
    os.link(src, d / "outputs" / "demo.mp4")  # contact-sheet's help reads what synth's help example writes
    # the guides' examples read what `make quickstart` writes
    (d / "outputs" / "quickstart" / "toyworld" / "test" / "videos").mkdir(parents=True)
    os.link(src, d / "outputs" / "quickstart" / "synthetic.mp4")
    os.link(src, d / "outputs" / "quickstart" / "toyworld" / "test" / "videos" / "200000.mp4")
    (d / "my_index.yaml").write_text(
        "run: {workers: 4, gpus_per_worker: 0.5}\n"
    )  # index's help: a user preset
    return d


@pytest.fixture
def in_workdir(workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return workdir


# ------------------------------------------------------------------------------- vidlab dry checking
class _Resolved(Exception):
    """Raised right after the command's config resolved: everything up to there was valid."""


def dry_run(argv: list[str], monkeypatch) -> tuple[str, str]:
    """Run ``vidlab ARGV`` until its config resolves. Returns ("resolved" | "ran", "") or ("error", message)."""
    import vidlab.config as vc
    from vidlab.cli import load_command
    from vidlab.errors import UserError

    real = vc.resolve

    def stop(*a: Any, **k: Any) -> Any:
        real(*a, **k)
        raise _Resolved

    monkeypatch.setattr(vc, "resolve", stop)
    name, rest = argv[0], argv[1:]
    try:
        rc = load_command(name)(rest)
    except _Resolved:
        return "resolved", ""
    except UserError as e:
        return "error", str(e)
    except SystemExit as e:  # argparse
        return ("error", f"exit {e.code}") if e.code else ("ran", "")
    finally:
        monkeypatch.setattr(vc, "resolve", real)
    return ("ran", "") if not rc else ("error", f"exit status {rc}")


RUN_FOR_REAL = {"synth", "contact-sheet"}  # no config grammar, seconds of work: run as written
# ...except the length of a long synth example (`--frames 14400`, ten minutes of video: ~90 s of CPU): it runs
# with every argument as written through the same code path, and renders its first SYNTH_MAX_FRAMES frames.
SYNTH_MAX_FRAMES = 600
# ...and the examples that write a data set (`vidlab toyworld-data DIR 4`, the needle benchmark's `python -c`
# line: each video seconds of CPU) run as written through the same code, writing at most this many videos.
EXAMPLE_MAX_VIDEOS = 2


def cap_example_data(monkeypatch) -> None:
    import vidlab.understanding.benchmarks.synthetic as synthetic
    import vidlab.understanding.toyworld.world as world

    real_build, real_needles = world.build_split, synthetic.write_needle_benchmark

    def build_capped(root: Any, name: str, n_videos: int, *a: Any, **k: Any) -> Any:
        return real_build(root, name, min(n_videos, EXAMPLE_MAX_VIDEOS), *a, **k)

    def needles_capped(out_dir: Any, n: int = 20, *a: Any, **k: Any) -> Any:
        return real_needles(out_dir, min(n, EXAMPLE_MAX_VIDEOS), *a, **k)

    monkeypatch.setattr(world, "build_split", build_capped)
    monkeypatch.setattr(synthetic, "write_needle_benchmark", needles_capped)


def check_vidlab_line(words: list[str], monkeypatch, capsys) -> None:
    assert words[0] == "vidlab"
    if len(words) == 1 or words[1] in ("--help", "-h"):
        return
    argv = words[1:]
    if argv[0] in RUN_FOR_REAL:
        import vidlab.video.synth as synth
        from vidlab.cli import load_command

        real_render = getattr(synth.render_synthetic, "__wrapped__", synth.render_synthetic)

        def render_capped(path: Any, num_frames: int, *a: Any, **k: Any) -> Any:
            return real_render(path, min(num_frames, SYNTH_MAX_FRAMES), *a, **k)

        render_capped.__wrapped__ = real_render  # type: ignore[attr-defined]
        monkeypatch.setattr(synth, "render_synthetic", render_capped)
        rc = load_command(argv[0])(argv[1:])
        assert not rc, f"`{' '.join(words)}` exited {rc}: {capsys.readouterr().err[-500:]}"
        return
    if argv[0] == "toyworld-data":
        cap_example_data(monkeypatch)
    if argv[0] == "search":  # needs an index built by a real `vidlab index` run: its arguments must parse
        from vidlab.clip.cli import _search_parser

        _search_parser().parse_args(argv[1:])
        return
    if argv[0] == "bench":  # minutes of benchmarks: the names must exist and the flags parse
        from vidlab.bench import available

        names = [w for w in argv[1:] if not w.startswith("-") and not w.endswith(".jsonl")]
        assert set(names) <= set(available()), (words, available())
        return
    status, message = dry_run(argv, monkeypatch)
    err = capsys.readouterr().err
    assert status != "error", f"`{' '.join(words)}` is refused: {message or err[-500:]}"


# ------------------------------------------------------------------------------------------ README
TOY_WAN_CALL = dict(height=64, width=64, num_frames=5, num_inference_steps=12, guidance_scale=6.0)


def use_toy_wan(monkeypatch) -> None:
    """A real-Wan recipe on the shipped toy-world Wan, on a CPU: hub id -> the shipped folder (float32), no CUDA
    move without CUDA, the toy model's own size and steps for the call. The rest runs as written."""
    import diffusers
    import torch

    from vidlab.generation.comp_attn import CompAttn
    from vidlab.generation.pipeline import SHIPPED_MODELS

    toy = str(SHIPPED_MODELS["toyworld"])
    for cls in (diffusers.WanPipeline, diffusers.AutoencoderKLWan):
        real = cls.from_pretrained.__func__

        def from_pretrained(klass: Any, name: Any, *a: Any, _real: Any = real, **k: Any) -> Any:
            if isinstance(name, str) and name.startswith("Wan-AI/"):
                name = toy
                k = {key: v for key, v in k.items() if key not in ("dtype", "torch_dtype")} | {
                    "dtype": torch.float32
                }
            return _real(klass, name, *a, **k)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(from_pretrained))
    real_to = diffusers.WanPipeline.to

    def to(self: Any, *a: Any, **k: Any) -> Any:
        if not torch.cuda.is_available() and any("cuda" in str(x) for x in [*a, *k.values()]):
            return self
        return real_to(self, *a, **k)

    monkeypatch.setattr(diffusers.WanPipeline, "to", to)
    real_generate = CompAttn.generate

    def generate(self: Any, *a: Any, **k: Any) -> Any:
        return real_generate(self, *a, **{**k, **TOY_WAN_CALL})

    monkeypatch.setattr(CompAttn, "generate", generate)


@pytest.mark.slow
@pytest.mark.parametrize("readme", [r for r in READMES if any(b["lang"] == "python" for b in blocks(r))])
def test_python_blocks_run(readme, in_workdir, monkeypatch):
    """A page's python blocks in order, in one namespace (a later block may use an earlier one's names)."""
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    skipped, ran = [], 0
    for block in (b for b in blocks(readme) if b["lang"] == "python"):
        if block["skip"]:
            assert block["skip"].split()[0].lower().rstrip(":,") in ALLOWED_SKIPS, block["skip"]
            skipped.append(f"{_id(block)}: {block['skip']}")
            continue
        if block["toy_wan"]:
            use_toy_wan(monkeypatch)
        exec(compile(block["text"], _id(block), "exec"), namespace)  # noqa: S102 - the page's own code
        ran += 1
    if not ran:
        pytest.skip("every block skipped: " + "; ".join(skipped))


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b["lang"] == "json"], ids=_id)
def test_json_blocks_parse(block):
    json.loads(block["text"])


@pytest.mark.parametrize("block", [b for b in ALL_BLOCKS if b["lang"] == "yaml"], ids=_id)
def test_yaml_blocks_are_valid_settings(block, tmp_path):
    import yaml

    from vidlab.config import resolve
    from vidlab.understanding.config import EvalConfig

    data = yaml.safe_load(block["text"])
    assert isinstance(data, dict)
    p = tmp_path / "block.yaml"
    p.write_text(block["text"])
    resolve(EvalConfig, str(p), [])


SHELL_BLOCKS = [b for b in ALL_BLOCKS if b["lang"] in ("bash", "sh", "")]


@functools.cache
def _script_help(script: str) -> str:
    """``python SCRIPT --help`` (or ``python -m MODULE --help``), once per run: pages share benchmarks."""
    target = script.split() if script.startswith("-m ") else [str(ROOT / script)]
    return subprocess.run(
        [sys.executable, *target, "--help"], capture_output=True, text=True, timeout=300, cwd=ROOT
    ).stdout


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=_id)
def test_shell_blocks_are_valid(block, in_workdir, monkeypatch, capsys):
    lines = shell_lines(block["text"])
    if block["skip"]:
        assert block["skip"].split()[0].lower().rstrip(":,") in ALLOWED_SKIPS, block["skip"]
        pytest.skip(f"{_id(block)}: {block['skip']}")
    if not any(re.match(r"^(\$ )?(vidlab|make|python|pytest|pip|bash|export|RAY_ADDRESS|accelerate)\b", ln)
               for ln in lines):  # fmt: skip
        pytest.skip(f"{_id(block)}: not commands (a layout or a listing)")
    raw = block["text"].splitlines()
    transcript = any(r.startswith("$ ") for r in raw)
    for k, line in enumerate(raw):  # transcripts: `$ command` and the refusal printed under it
        if line.startswith("$ "):
            words = split_command(line[2:])
            status, message = dry_run(words[1:], monkeypatch)
            err = capsys.readouterr().err
            shown = raw[k + 1].split("error: ", 1)[-1].strip() if k + 1 < len(raw) else ""
            # a refusal of the settings themselves must be the one shown; one that needs a state the transcript
            # assumes (an earlier job in runs/q, a data file) comes after resolution, where the dry run stops
            assert status in ("error", "resolved"), (line, message)
            if status == "error":
                assert shown[:60] in message + err, (line, message, err, shown)
    for line in [] if transcript else lines:
        if not re.match(r"^(vidlab|make|python|pytest|pip|bash|export|RAY_ADDRESS|accelerate)\b", line):
            continue  # the output of a transcript line
        words = split_command(line)
        while words and re.match(r"^[A-Z_]+=", words[0]):  # VAR=value prefix
            words = words[1:]
        head = words[0]
        if head == "vidlab":
            check_vidlab_line(words, monkeypatch, capsys)
        elif head == "make":
            targets = re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.M)
            assert all(t in targets for t in words[1:] if not t.startswith("-")), (line, targets)
        elif head == "python" and words[1:2] != ["-c"]:
            module = words[1:2] == ["-m"]
            script = words[2] if module else words[1]
            if module:
                assert importlib.util.find_spec(script) is not None, line
            else:
                assert (ROOT / script).is_file(), line
            text = _script_help(("-m " if module else "") + script)
            for w in words[(3 if module else 2) :]:
                if w.startswith("--"):
                    assert w.split("=")[0] in text, f"{line}: {w} is not an option of {script}"
        elif head == "python":
            cap_example_data(monkeypatch)
            exec(compile(words[2], _id(block), "exec"), {"__name__": "__docs__"})  # noqa: S102
        elif head == "pytest":
            for w in words[1:]:
                if not w.startswith("-"):
                    assert (ROOT / w).exists(), f"{line}: {w} does not exist"
        # pip / bash runs/... / export / accelerate: environment set-up on a GPU node, not checkable here


# ------------------------------------------------------------------------------------- --help examples
def _help(name: str, capsys) -> str:
    from vidlab.cli import load_command

    with pytest.raises(SystemExit) as e:
        load_command(name)(["--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


def _commands() -> list[str]:
    from vidlab.cli import commands

    return sorted(commands())


@pytest.mark.parametrize("name", _commands())
def test_help_examples_are_valid(name, in_workdir, monkeypatch, capsys):
    text = _help(name, capsys)
    if name == "compbench":
        for sub in ("plan", "generate", "score", "report", "export"):
            text += _help_sub(name, sub, capsys)
    examples = [ln for ln in shell_lines(text) if ln.startswith("vidlab ") and " ... " not in ln]
    for m in re.finditer(r"e\.g\.\s+((?:[\w.\[\]-]+=\S+\s*)+)", text):  # "overrides, e.g. k=v k2=v2"
        words = m.group(1).split()
        words[-1] = words[-1].rstrip(")")
        own = next((e for e in examples if split_command(e)[1] == name), f"vidlab {name}")
        if name == "compbench":
            own = "vidlab compbench plan"
        examples.append(own + " " + " ".join(words))  # the override words on the command's own first example
    assert examples, f"vidlab {name} --help shows no example"
    for line in examples:
        words = split_command(line)
        if "--compare" in words:
            continue  # re-plots runs finished earlier (runs/qwen25 ...): nothing to check before they exist
        if name == "train-gen-toyworld" and words[1] == "generate" and "model=outputs/toy" in words:
            continue  # generates from a model that the example above it trains: checked by its own command
        check_vidlab_line(words, monkeypatch, capsys)


def _help_sub(name: str, sub: str, capsys) -> str:
    from vidlab.cli import load_command

    with pytest.raises(SystemExit):
        load_command(name)([sub, "--help"])
    return capsys.readouterr().out


# ------------------------------------------------------------------------------------- the pages themselves
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _prose(page: str) -> str:
    """A page without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", (ROOT / page).read_text(encoding="utf-8"), flags=re.M | re.S)


@pytest.mark.parametrize("page", READMES)
def test_relative_links_point_at_files(page):
    """Every relative link or image of a page names a file or folder of the repository (anchors aside)."""
    base = (ROOT / page).parent
    missing = []
    for target in LINK.findall(_prose(page)):
        path = target.split("#", 1)[0]
        if not path or re.match(r"^[a-z]+:", path) or path.startswith("/"):
            continue
        if not (base / path).exists():
            missing.append(target)
    assert not missing, f"{page}: links to nothing: {missing}"


def test_no_page_speaks_of_sessions_or_issue_numbers():
    """The documents speak of the project (versions, dates, commits, commands), not of how it was worked on."""
    bad = re.compile(r"\b[Ss]essions?\b|\b[Ii]ssue \d+\b")
    found = [f"{page}: {m.group(0)!r}" for page in READMES for m in bad.finditer(_prose(page))]
    assert not found, found


def test_readme_is_short_and_shows_a_real_wan_command_early():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, len(lines)
    first = next(i for i, ln in enumerate(lines) if "Wan-AI/" in ln)
    assert first < 80, first


def test_configuration_reference_covers_every_field():
    """The generated reference (docs/hooks/vidlab_docs.py) has one row per field of every config, nested ones
    under their dotted key, with the field's range where it declares one."""
    import dataclasses
    import importlib
    import typing

    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        hooks = importlib.import_module("vidlab_docs")
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    page = hooks.config_reference_markdown()

    def rows(cls: type, prefix: str) -> list[tuple[str, Any]]:
        out = []
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            out.append((prefix + f.name, f))
            sub = hooks._dataclass_of(hints.get(f.name, Any))
            if sub is not None:
                out += rows(sub, prefix + f.name + ".")
        return out

    for _, _, target in hooks.CONFIGS:
        module, name = target.split(":")
        for key, f in rows(getattr(importlib.import_module(module), name), ""):
            row = next((ln for ln in page.splitlines() if ln.startswith(f"| `{key}` |")), None)
            assert row is not None, f"{target}: no row for {key}"
            if f.metadata.get("range"):
                assert hooks._range_text(f.metadata) in row, (key, row)
    from vidlab.generation.pipeline import GenerateConfig

    assert "| `comp_attn.lam.alpha_max` | float | `1.0` | ≥ 0.0 |" in page
    assert GenerateConfig.__module__ in page


def test_site_builds_strict_from_a_fresh_clone(tmp_path):
    """`make docs` on a clone without ``build/``: the API reference reads the installed view
    (``build/docs-src``), which the docs hook must make before mkdocstrings starts (it drops search paths that do
    not exist yet). The repository is linked file by file; the hook is copied, since it finds the root from its
    own resolved path."""
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (the `docs` extra)")
    pytest.importorskip(
        "mkdocstrings_handlers.python", reason="mkdocstrings-python is not installed (the `docs` extra)"
    )
    root = tmp_path / "clone"
    root.mkdir()
    for entry in ROOT.iterdir():
        if entry.name in {"build", "site", "docs", ".git"} or entry.name.startswith(".venv"):
            continue
        (root / entry.name).symlink_to(entry)
    (root / "docs").mkdir()
    for entry in (ROOT / "docs").iterdir():
        if entry.name != "hooks":
            (root / "docs" / entry.name).symlink_to(entry)
    (root / "docs" / "hooks").mkdir()
    for hook in (ROOT / "docs" / "hooks").glob("*.py"):
        (root / "docs" / "hooks" / hook.name).write_bytes(hook.read_bytes())
    assert not (root / "build").exists()
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "api" / "generation" / "index.html").is_file()
