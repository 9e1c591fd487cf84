"""A wrong argument is refused before the heavy libraries load: every command validates first.

Each case runs ``vidlab <command> ...`` through ``vidlab.cli.main`` in one fresh interpreter (so nothing a test
imported earlier counts) and checks, at the moment the one-line error is printed, that torch, diffusers,
transformers and open_clip are still not imported: a property of the code path, not a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "diffusers", "transformers", "open_clip")

PROBE = r"""
import contextlib, io, json, sys
from vidlab.cli import main
heavy, cases, report = json.loads(sys.argv[1]), json.loads(sys.argv[2]), []
for argv in cases:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(argv)
        except SystemExit as e:  # argparse's own usage errors
            rc = e.code
    report.append({"argv": argv, "rc": rc, "err": err.getvalue(), "loaded": [m for m in heavy if m in sys.modules]})
print(json.dumps(report))
"""


def test_wrong_arguments_are_refused_before_torch_and_friends_import(tmp_path):
    readme, out = str(ROOT / "README.md"), str(tmp_path / "out")
    junk = tmp_path / "clip.mp4"
    junk.write_bytes(bytes(range(256)) * 8)  # not a video, not text
    trunc = tmp_path / "q.jsonl"
    trunc.write_text(
        '{"id": "a", "video": "v.mp4", "question": "Q?", "options": ["x", "y"], "answer": "A"}\n{"id": "b", "vid\n'
    )
    gen = ["generate", "a red circle to the left of a blue square", "--out", out]
    qa = ["qa", "--question", "Which?", "--policy", "toy:shipped"]
    ev = ["eval-qa", "--benchmark", "jsonl", "--policy", "toy:shipped", "--out", out]
    cases = [
        [*gen, "steps=0"],
        [*gen, "--model", "tinyy"],
        [*gen, "--preset", "tny"],
        ["generate", "a red zebra", "--model", "toyworld", "--out", out],
        [*gen, "--height", "100000", "--width", "100000"],
        [*gen[:2], "--out", readme],
        [*gen, "--layout", str(tmp_path / "missing.json")],
        [*gen, "--subjects", "green frog"],
        [*qa, "--video", str(tmp_path / "missing.mp4")],
        [*qa, "--video", readme],  # not a video: refused before the policy loads
        [*qa, "--video", readme, "--clip-model", "ViT-B-33"],
        ["qa", "--video", readme, "--question", "Which?", "--policy", "toi:shipped"],
        [*ev, "--data", readme],
        [*ev, "--data", readme, "--skip-bad-lines"],
        [*ev, "--data", str(junk)],
        [*ev, "--data", str(trunc)],
        [*ev, "--data", str(trunc), "--clip-model", "ViT-B-33"],
        ["index", str(tmp_path / "nope"), "--cache-dir", out],
        ["index", readme, "--model", "ViT-B-33", "--cache-dir", out],
        ["search", "a dog", "--index", str(tmp_path / "nope")],
        ["classify", "--data", readme, "--out", str(tmp_path / "labels.jsonl"), "--policy", "const:A"],
        ["toyworld-data", out, "0"],
        ["compbench", "plan", "--preset", "nosuch"],
        ["train-agent", "--engine", "toy", "bogus=1"],
        ["train-gen-toyworld", "--out", out, "bogus=1"],
        ["contact-sheet", str(tmp_path / "missing.mp4"), "--out", str(tmp_path / "s.png")],
    ]
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(HEAVY), json.dumps(cases)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    bad = [r for r in report if r["rc"] != 2 or r["loaded"] or len(r["err"].strip().splitlines()) != 1]
    assert not bad, json.dumps(bad, indent=1)
    assert not Path(out).exists()  # and nothing was written
