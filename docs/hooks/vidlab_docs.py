"""mkdocs hooks for vidlab's site.

- ``<!-- vidlab:config-reference -->`` in a page becomes the configuration reference, generated from the config
  dataclasses themselves: every field with its type, default, range or choices, and the comment the code carries
  for it (the comment lines right above the field and the one at the end of its line). Nothing of it is written by
  hand, so it cannot drift from the code.
- ``<!-- vidlab:results-pages -->`` becomes the list of the pages in ``docs/results/`` (title and first sentence),
  so a new results page needs only its line in ``mkdocs.yml``'s nav.
- Docstrings are written for Sphinx as much as for Markdown: a role (``:class:`~a.b.C```) is shown as the code
  name it points at (``C``), and a paragraph's closing ``::`` (a literal block follows) as one colon.
- A link or image that leaves ``docs/`` for a file of the repository (``../../generation/toyworld/figures/x.png``,
  a path that also works when the Markdown is read on a code host) is served from a copy under ``_repo/`` in the
  site. A link to a file that does not exist is left alone, so the strict build reports it.
- The API reference names modules as installed (``vidlab.generation.pipeline``), but the checkout keeps the areas
  beside ``vidlab/`` (pyproject's package mapping joins them). mkdocstrings reads source statically, so the build
  reads it from ``build/docs-src/vidlab/``: links to ``vidlab/``'s entries and to the area folders, as installed.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import posixpath
import re
import textwrap
import typing
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[2]
CONFIG_MARK = "<!-- vidlab:config-reference -->"
RESULTS_MARK = "<!-- vidlab:results-pages -->"
REPO_PREFIX = "_repo"

# (heading, how it is given, "module:Class"); nested dataclasses are expanded under their dotted key.
CONFIGS: list[tuple[str, str, str]] = [
    ("vidlab generate", "`--preset` from `configs/generate/`; `key=value` words", "vidlab.generation.pipeline:GenerateConfig"),
    ("vidlab compbench", "`--preset` from `configs/compbench/`; `key=value` words", "vidlab.generation.compbench.config:CompbenchConfig"),
    ("vidlab qa, eval-qa, classify", "`--preset` from `configs/qa/`; `key=value` words", "vidlab.understanding.config:EvalConfig"),
    ("vidlab index", "`--preset PATH`; `key=value` words", "vidlab.clip.indexing:IndexConfig"),
    ("vidlab train-agent --engine toy", "`--preset` from `configs/train-agent/`", "vidlab.understanding.toyworld.train:ToyTrainConfig"),
    ("vidlab train-agent --engine trl", "`--preset` from `configs/train-agent/`", "vidlab.understanding.rl.trl_adapter:TrlConfig"),
    ("vidlab train-agent --engine verl", "`--preset` from `configs/train-agent/`", "vidlab.understanding.rl.verl_launch:VerlConfig"),
    ("vidlab train-gen-toyworld", "`key=value` words", "vidlab.generation.toyworld.train:TrainConfig"),
    ("vidlab demo", "`--preset` from `configs/demo/`; `key=value` words", "vidlab.demos.config:DemoConfig"),
    ("vidlab synth", "flags (saved as `OUT.config.yaml`)", "vidlab.video.cli:SynthConfig"),
    ("vidlab contact-sheet", "flags (saved as `SHEET.config.yaml`)", "vidlab.video.cli:ContactSheetConfig"),
    ("The LLM layout planner", "`plan_layout(prompt, planner=\"llm\", **kw)`", "vidlab.generation.planners.llm:LLMPlannerConfig"),
    ("The rule layout planner's geometry", "`plan_layout(prompt, **kw)`", "vidlab.generation.planners.geometry:GeometryConfig"),
]  # fmt: skip


# ------------------------------------------------------------------------------------ configuration page
def _field_comments(cls: type) -> dict[str, str]:
    """Comment text per field, read from the source of ``cls`` and its dataclass bases."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass) or klass is object:
            continue
        try:
            lines, _ = inspect.getsourcelines(klass)
        except (OSError, TypeError):
            continue
        src = textwrap.dedent("".join(lines))
        body = src.splitlines()
        node = ast.parse(src).body[0]
        assert isinstance(node, ast.ClassDef)
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            above: list[str] = []
            k = stmt.lineno - 2
            while k >= 0 and body[k].strip().startswith("#"):
                above.insert(0, body[k].strip().lstrip("#").strip())
                k -= 1
            trailing = []
            for ln in body[stmt.lineno - 1 : (stmt.end_lineno or stmt.lineno)]:
                m = re.search(r"\s#\s?(.*)$", _strip_strings(ln))
                if m:
                    trailing.append(ln[m.start(1) :].strip())
            text = " ".join(above + trailing).strip()
            if text or stmt.target.id not in out:
                out[stmt.target.id] = text
    return out


def _strip_strings(line: str) -> str:
    """The line with string literals blanked (same length), so a '#' inside a string is not a comment."""
    return re.sub(r"(\"[^\"]*\"|'[^']*')", lambda m: " " * len(m.group(0)), line)


def _type_text(tp: Any) -> str:
    if tp is type(None):
        return "None"
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " | ".join(_type_text(a) for a in typing.get_args(tp))
    if origin is not None:
        args = typing.get_args(tp)
        name = getattr(origin, "__name__", str(origin))
        return (
            f"{name}[{', '.join('...' if a is Ellipsis else _type_text(a) for a in args)}]" if args else name
        )
    return getattr(tp, "__name__", str(tp).replace("typing.", ""))


def _range_text(meta: Any) -> str:
    rng = meta.get("range") if meta else None
    if not rng:
        return ""
    lo, hi = rng
    if lo is not None and hi is not None:
        return f"[{lo}, {hi}]"
    if lo is not None:
        return f"≥ {lo}"
    return f"≤ {hi}"


def _default_text(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        if dataclasses.is_dataclass(value):
            return "(section below)"
    else:
        return "(required)"
    if isinstance(value, Path):
        value = str(value)
    text = repr(value) if isinstance(value, str) else str(value)
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _dataclass_of(tp: Any) -> type | None:
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return tp
    for arg in typing.get_args(tp):
        found = _dataclass_of(arg)
        if found is not None:
            return found
    return None


def _section(cls: type, prefix: str, level: int, out: list[str]) -> None:
    hints = typing.get_type_hints(cls)
    comments = _field_comments(cls)
    doc = inspect.getdoc(cls) or ""
    first = doc.split("\n\n")[0].replace("\n", " ").strip()
    title = f"`{prefix.rstrip('.')}`" if prefix else f"`{cls.__name__}`"
    if prefix:
        out.append(f"{'#' * level} {title}\n")
    out.append(f"`{cls.__module__}.{cls.__qualname__}`" + (f": {_cell(first)}" if first else "") + "\n")
    out.append("| key | type | default | range | what it does |")
    out.append("|---|---|---|---|---|")
    nested: list[tuple[str, type]] = []
    for f in dataclasses.fields(cls):
        tp = hints.get(f.name, Any)
        sub = _dataclass_of(tp)
        key = prefix + f.name
        if sub is not None:
            nested.append((key + ".", sub))
        out.append(
            f"| `{key}` | {_cell(_type_text(tp))} | {_default_text(f)} | {_range_text(f.metadata)} | "
            f"{_cell(comments.get(f.name, ''))} |"
        )
    out.append("")
    for sub_prefix, sub in nested:
        _section(sub, sub_prefix, min(level + 1, 6), out)


def config_reference_markdown() -> str:
    """The whole generated reference: one section per command, nested settings under dotted keys."""
    out: list[str] = []
    for heading, given, target in CONFIGS:
        module, name = target.split(":")
        cls = getattr(importlib.import_module(module), name)
        out.append(f"## {heading}\n")
        out.append(f"Given by {given}.\n")
        _section(cls, "", 3, out)
    return "\n".join(out)


# ------------------------------------------------------------------------------------------ results list
def results_list_markdown(files: Any) -> str:
    rows = []
    for f in sorted(files.documentation_pages(), key=lambda f: f.src_uri):
        uri = f.src_uri
        if not uri.startswith("results/") or uri == "results/index.md":
            continue
        text = Path(f.abs_src_path).read_text(encoding="utf-8")
        title = next((ln[2:].strip() for ln in text.splitlines() if ln.startswith("# ")), uri)
        paras = [
            p.strip()
            for p in re.split(r"\n\s*\n", text)
            if p.strip() and not p.lstrip().startswith(("#", "|", "!", "<"))
        ]
        para = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", paras[0].replace("\n", " ")) if paras else ""
        first = re.split(r"(?<=\.)\s", para)[0]
        rows.append(f"- [{title}]({posixpath.relpath(uri, 'results')}): {first}")
    return "\n".join(rows) + "\n"


# ------------------------------------------------------------------------------- repository files in the site
_LINK = re.compile(r"(\]\()([^)\s]+)(\))")


def _repo_links(markdown: str, page: Any, config: Any, files: Any) -> str:
    from mkdocs.structure.files import File

    docs_dir = Path(config["docs_dir"]).resolve()
    page_dir = (docs_dir / page.file.src_uri).parent

    def fix(m: re.Match) -> str:
        target = m.group(2)
        path, _, anchor = target.partition("#")
        if not path or re.match(r"^[a-z]+:", path) or path.startswith("/"):
            return m.group(0)
        resolved = (page_dir / path).resolve()
        if resolved.is_relative_to(docs_dir) or not resolved.is_relative_to(ROOT) or not resolved.is_file():
            return m.group(0)
        if resolved.suffix == ".md":
            return m.group(
                0
            )  # a Markdown file outside docs/ is no page of the site: the strict build says so
        rel = resolved.relative_to(ROOT).as_posix()
        uri = f"{REPO_PREFIX}/{rel}"
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, abs_src_path=str(resolved)))
        new = posixpath.relpath(uri, posixpath.dirname(page.file.src_uri) or ".")
        return m.group(1) + new + (f"#{anchor}" if anchor else "") + m.group(3)

    out, in_code = [], False
    for line in markdown.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            in_code = not in_code
        out.append(line if in_code else _LINK.sub(fix, line))
    return "\n".join(out)


# ---------------------------------------------------------------------------------------- Sphinx in docstrings
_ROLE = re.compile(r":(?:py:)?(?:class|mod|func|meth|attr|data|exc|obj):<code>~?([^<]+)</code>")


def _sphinx_roles(html: str) -> str:
    def short(m: re.Match) -> str:
        name = m.group(1)
        return f"<code>{name.rsplit('.', 1)[-1] if m.group(0).count('~') else name}</code>"

    return _ROLE.sub(short, html).replace("::</p>", ":</p>")


# ----------------------------------------------------------------------------------------------- the hooks
INSTALLED_VIEW = ROOT / "build" / "docs-src"  # mkdocs.yml: mkdocstrings' `paths`
AREAS = ("generation", "understanding", "demos")


def installed_view() -> Path:
    """``build/docs-src/vidlab/``: the package as the wheel lays it out. griffe resolves links, so vidlab's own
    modules are copied (a linked ``__init__.py`` would lead it back to the checkout's folder, which lacks the
    areas) and its subpackages and the areas are linked."""
    import shutil

    pkg = INSTALLED_VIEW / "vidlab"
    shutil.rmtree(INSTALLED_VIEW, ignore_errors=True)
    pkg.mkdir(parents=True)
    for entry in (ROOT / "vidlab").iterdir():
        if entry.is_file() and entry.suffix == ".py":
            shutil.copy2(entry, pkg / entry.name)
        elif entry.is_dir() and (entry / "__init__.py").is_file() and entry.name != "_legacy":
            (pkg / entry.name).symlink_to(entry)
    for area in AREAS:
        (pkg / area).symlink_to(ROOT / area)
    return INSTALLED_VIEW


_CWD: list[str] = []


# before mkdocstrings' on_config: its handler keeps only the `paths` that exist when it starts
@event_priority(100)
def on_config(config: Any) -> Any:
    """Build from the installed view: griffe first looks for a package relative to the working directory, where
    the checkout's ``vidlab/`` (without the areas) would win, so the build runs from the view; the paths the
    config names relative to the working directory (snippets) are made absolute first. The view is made before
    any plugin reads the configuration (a fresh clone has no ``build/``)."""
    import os

    view = installed_view()
    snippets = config["mdx_configs"].get("pymdownx.snippets")
    if snippets:
        snippets["base_path"] = [str((Path.cwd() / p).resolve()) for p in snippets.get("base_path", ["."])]
    _CWD.append(os.getcwd())
    os.chdir(view)
    return config


def on_post_build(config: Any) -> None:
    import os

    if _CWD:
        os.chdir(_CWD.pop())


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if CONFIG_MARK in markdown:
        markdown = markdown.replace(CONFIG_MARK, config_reference_markdown())
    if RESULTS_MARK in markdown:
        markdown = markdown.replace(RESULTS_MARK, results_list_markdown(files))
    return _repo_links(markdown, page, config, files)


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    return _sphinx_roles(html)
