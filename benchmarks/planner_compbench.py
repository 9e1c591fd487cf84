"""Measure a planner on T2V-CompBench's prompts: subjects found, counts, relations and motion directions.

``python benchmarks/planner_compbench.py [DATA_DIR] [--planner rule]`` (or ``vidlab bench planner_compbench``)
prints one line per figure and a final JSON line. DATA_DIR holds ``prompts/`` and ``meta_data/`` (default ``../shared/data/t2v-compbench``
next to the repository). The expected values are read from the benchmark's metadata where it exists
(subjects, counts; for dynamic attributes the head noun of ``state 0``) and from direction/relation words in the prompt, independently of the planner's patterns.

``--smoke`` measures a 14-prompt suite in the benchmark's layout, written by the script (two prompts per
category, with their metadata), so the whole measurement runs where the data is absent; ``--quick`` without the
data ends with ``{"skipped": ...}`` (the full measurement reads the real prompts).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, when run as a script
from vidlab.generation.layout import SPATIAL_RELATIONS, Layout  # noqa: E402
from vidlab.generation.planners.lexicon import QUANTIFIERS, singular  # noqa: E402

PROMPT_FILES = (
    "1_consistent_attr.txt",
    "2_dynamic_attr.txt",
    "3_spatial_relationship.txt",
    "4_motion_binding.txt",
    "5_action_binding.txt",
    "6_interaction.txt",
    "7_numeracy.txt",
)
DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "t2v-compbench"

SPATIAL_CUES = {  # first match wins
    "left of": r"\bleft(?: side)? of\b",
    "right of": r"\bright(?: side)? of\b",
    "in front of": r"in front of",
    "behind": r"\bbehind\b",
    "under": r"\bunder\b|\bbeneath\b|\bbottom of\b",
    "below": r"\bbelow\b",
    "above": r"\babove\b",
    "on": r"\bon\b|\batop\b",
}
DIRECTION_WORDS = {
    "left": "moving left",
    "right": "moving right",
    "top": "moving up",
    "bottom": "moving down",
}
MOTION_CUES = [
    ("moving up", r"\bup(?:wards?)?\b|ascend|\brise|\brises\b|lifts|surfaces"),
    ("moving down", r"\bdown(?:wards?)?\b|descen|\bfall|drop|sink|lowering"),
    ("moving right", r"rightwards?|to the right|\bright\b"),
    ("moving left", r"leftwards?|to the left|\bleft\b"),
]


def read_prompts(data: Path, name: str) -> list[str]:
    """One prompt per line (the files have no trailing newline)."""
    return [p for p in (data / "prompts" / name).read_text(encoding="utf-8").split("\n") if p.strip()]


def subject_heads(layout: Layout) -> list[str]:
    """Singular head noun of every subject, one entry per copy ("Man in a black suit" -> "man")."""
    out = []
    for s in layout.subjects:
        core = re.split(r"\s+(?:in|with|wearing)\s+", s.phrase, maxsplit=1)[0].lower().split()
        owner = next((w for w in core if w.endswith("'s")), None)  # "book's pages" -> book
        out.append(singular(owner[:-2] if owner else core[-1]))
    return out


def meta_head(phrase: str) -> str:
    """Head noun of a metadata phrase ("a man in a black suit" -> man, "a load of orange pumpkins" -> pumpkin)."""
    p = phrase.strip().rstrip("?").lower()
    p = re.split(r"\s+(?:in|with|wearing|on)\s+", p, maxsplit=1)[0]
    m = re.match(r"^(.*?)\s+of\s+(.*)$", p)
    if m:  # "a load of orange pumpkins" -> pumpkins; "a puddle of water" -> puddle
        p = m.group(2) if m.group(1).split()[-1] in QUANTIFIERS else m.group(1)
    owner = next((w for w in p.split() if w.endswith("'s")), None)
    return singular(owner[:-2] if owner else p.split()[-1])


def expected_spatial(prompt: str) -> str | None:
    """The relation a spatial prompt names, read from its words."""
    low = prompt.lower()
    return next((rel for rel, pat in SPATIAL_CUES.items() if re.search(pat, low)), None)


def expected_motion(prompt: str) -> str | None:
    """The first motion a prompt names, read from its words."""
    low = prompt.lower()
    m = re.search(
        r"(left|right|top|bottom)\b(?: side)?(?: of the \w+)? to (?:the )?(left|right|top|bottom)", low
    )
    if m:
        return DIRECTION_WORDS[m.group(2)]
    hits = [(m.start(), rel) for rel, pat in MOTION_CUES for m in [re.search(pat, low)] if m]
    return min(hits)[1] if hits else None


def measure(plan: Callable[[str], Layout], data: Path = DEFAULT_DATA) -> dict[str, Any]:
    """Every figure for ``plan`` (a prompt -> Layout function), with the misses listed."""
    # Keyed by the stripped prompt: some prompt lines end in a space that the metadata does not have.
    layouts = {p.strip(): plan(p) for name in PROMPT_FILES for p in read_prompts(data, name)}
    out: dict[str, Any] = {"prompts": sum(len(read_prompts(data, name)) for name in PROMPT_FILES)}
    out["no_subject"] = [p for p, lay in layouts.items() if not lay.subjects]
    out["phrase_not_in_prompt"] = [
        p for p, lay in layouts.items() if any(s.phrase.lower() not in p.lower() for s in lay.subjects)
    ]

    def recall(pairs: list[tuple[str, list[str]]]) -> tuple[float, list[str]]:
        found, total, misses = 0, 0, []
        for prompt, listed in pairs:
            lay = layouts.get(prompt.strip()) or plan(prompt)  # a few metadata prompts differ from the file
            have = subject_heads(lay)
            for phrase in listed:
                total += 1
                if meta_head(phrase) in have:
                    found += 1
                else:
                    misses.append(f"{prompt!r}: {phrase.strip()!r}")
        return found / max(total, 1), misses

    meta = json.loads((data / "meta_data" / "consistent_attribute_binding.json").read_text(encoding="utf-8"))
    out["attr_recall"], out["attr_misses"] = recall([(m["prompt"], m["phrases"].split(";")) for m in meta])
    meta = json.loads((data / "meta_data" / "action_binding.json").read_text(encoding="utf-8"))
    pairs = [(m["prompt"], [m["phrase_0"][0], m["phrase_1"][0]]) for m in meta]
    out["action_recall"], out["action_misses"] = recall(pairs)

    meta = json.loads((data / "meta_data" / "dynamic_attribute_binding.json").read_text(encoding="utf-8"))
    out["dynamic_recall"], out["dynamic_misses"] = recall([(m["prompt"], [m["state 0"]]) for m in meta])

    meta = json.loads((data / "meta_data" / "generative_numeracy.json").read_text(encoding="utf-8"))
    exact, total, wrong = 0, 0, []
    for m in meta:
        have = subject_heads(layouts.get(m["prompt"].strip()) or plan(m["prompt"]))
        for obj, num in zip(m["objects"].split(","), m["numbers"].split(",")):
            total += 1
            got = have.count(meta_head(obj))
            exact += got == int(num)
            if got != int(num):
                wrong.append(f"{m['prompt']!r}: {obj} x{num}, planned {got}")
    out["numeracy_exact"], out["numeracy_wrong"] = exact / max(total, 1), wrong

    found, total, misses, violated = 0, 0, [], []
    for p in read_prompts(data, "3_spatial_relationship.txt"):
        lay, cue = layouts[p.strip()], expected_spatial(p)
        rels = [r for r in lay.relations if r.relation in SPATIAL_RELATIONS]
        violated += [f"{p!r}: {r.to_dict()}" for r in rels if not lay.relation_holds(r)]
        total += 1
        if any(r.relation == cue or {r.relation, cue} == {"under", "below"} for r in rels):
            found += 1
        else:
            misses.append(f"{p!r}: expected {cue}")
    out["spatial_found"], out["spatial_misses"] = found / max(total, 1), misses

    found, total, misses = 0, 0, []
    for p in read_prompts(data, "4_motion_binding.txt"):
        lay, want = layouts[p.strip()], expected_motion(p)
        moving = [r for r in lay.relations if r.relation.startswith("moving")]
        violated += [f"{p!r}: {r.to_dict()}" for r in moving if not lay.relation_holds(r)]
        total += 1
        if any(r.relation == want for r in moving):
            found += 1
        else:
            misses.append(f"{p!r}: expected {want}")
    out["motion_found"], out["motion_misses"] = found / max(total, 1), misses
    out["relations_violated"] = violated
    return out


SMOKE_PROMPTS = {
    "1_consistent_attr.txt": ["A green car parks beside a yellow house", "A white cat sleeps on a blue sofa"],
    "2_dynamic_attr.txt": [
        "A timelapse of a banana turning from green to brown",
        "An ice cube melting into water",
    ],
    "3_spatial_relationship.txt": ["A dog on the left of a bicycle", "A lamp above a wooden table"],
    "4_motion_binding.txt": [
        "A ball rolling to the left across a floor",
        "A bird flying upwards into the sky",
    ],
    "5_action_binding.txt": ["A horse runs while a dog sleeps", "A boy reads as a girl paints"],
    "6_interaction.txt": ["Two robots shake hands", "A cat chases a mouse"],
    "7_numeracy.txt": ["three apples on a plate", "two ducks swim past one boat"],
}


def write_smoke_suite(root: Path) -> Path:
    """A tiny suite in T2V-CompBench's layout (prompts/ and the meta_data/ files ``measure`` reads)."""
    (root / "prompts").mkdir(parents=True, exist_ok=True)
    (root / "meta_data").mkdir(exist_ok=True)
    for name, lines in SMOKE_PROMPTS.items():
        (root / "prompts" / name).write_text("\n".join(lines), encoding="utf-8")
    attr, dyn, spatial, motion, action, _, num = SMOKE_PROMPTS.values()
    meta = {
        "consistent_attribute_binding.json": [
            {"prompt": attr[0], "phrases": "a green car; a yellow house"},
            {"prompt": attr[1], "phrases": "a white cat; a blue sofa"},
        ],
        "action_binding.json": [
            {"prompt": action[0], "phrase_0": ["a horse?"], "phrase_1": ["a dog?"]},
            {"prompt": action[1], "phrase_0": ["a boy?"], "phrase_1": ["a girl?"]},
        ],
        "dynamic_attribute_binding.json": [
            {"prompt": dyn[0], "state 0": "A green banana", "state 1": "A brown banana"},
            {"prompt": dyn[1], "state 0": "An ice cube", "state 1": "Water"},
        ],
        "generative_numeracy.json": [
            {"prompt": num[0], "objects": "apple", "numbers": "3"},
            {"prompt": num[1], "objects": "duck,boat", "numbers": "2,1"},
        ],
    }
    for name, rows in meta.items():
        (root / "meta_data" / name).write_text(json.dumps(rows), encoding="utf-8")
    return root


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit 2 when the data is missing (``--quick``: skipped)."""
    ap = argparse.ArgumentParser(
        description="Measure a layout planner on T2V-CompBench prompts.",
        epilog="example: python benchmarks/planner_compbench.py ../shared/data/t2v-compbench",
    )
    ap.add_argument(
        "data", nargs="?", type=Path, default=DEFAULT_DATA, help="folder with prompts/ and meta_data/"
    )
    ap.add_argument("--planner", default="rule", help="planner name for plan_layout (default: rule)")
    ap.add_argument("--show-misses", action="store_true", help="list every miss")
    ap.add_argument(
        "--quick", action="store_true", help="accepted for `vidlab bench` (the check takes seconds)"
    )
    ap.add_argument(
        "--smoke", action="store_true", help="a 14-prompt suite the script writes (no data needed)"
    )
    args = ap.parse_args(argv)
    if args.smoke:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="vidlab-planner-smoke-") as tmp:
            return report(args, write_smoke_suite(Path(tmp)))
    if not (args.data / "prompts").is_dir():
        why = f"no T2V-CompBench data at {args.data} (needs prompts/ and meta_data/)"
        if args.quick:
            from benchmarks._common import emit_skipped

            return emit_skipped("planner_compbench", why)
        print(why, file=sys.stderr)
        return 2
    return report(args, args.data)


def report(args: argparse.Namespace, data: Path) -> int:
    """Measure the planner on ``data``, print the figures and the final JSON line."""
    from vidlab.generation.planners import plan_layout

    figures = measure(lambda p: plan_layout(p, planner=args.planner), data)
    for key in (
        "attr_recall",
        "action_recall",
        "dynamic_recall",
        "numeracy_exact",
        "spatial_found",
        "motion_found",
    ):
        print(f"{key:16s} {figures[key]:.3f}")
    print(f"{'prompts':16s} {figures['prompts']} (no subject: {len(figures['no_subject'])}, "
          f"relations violated: {len(figures['relations_violated'])})")  # fmt: skip
    if args.show_misses:
        for key, value in figures.items():
            if isinstance(value, list) and value:
                print(f"{key}:", *value, sep="\n  ")
    summary = {k: (round(v, 4) if isinstance(v, float) else len(v) if isinstance(v, list) else v)
               for k, v in figures.items()}  # fmt: skip
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
