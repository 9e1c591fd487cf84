"""Jobs never publish a result under settings that did not produce it; one grammar; one-line mistakes.

``vidlab eval-qa`` and ``vidlab classify`` through their ``main(argv)``, on a synthetic needle benchmark
rendered here, with a second real process holding an output folder's lock for the concurrency cases.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vidlab.understanding.cli import classify_main, eval_qa_main, qa_main


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    from vidlab.understanding.benchmarks.synthetic import write_needle_benchmark

    d = tmp_path_factory.mktemp("needles")
    return write_needle_benchmark(d, n=4, num_frames=120, width=64, height=48, needle_len=12)


def _eval(bench: Path, out: Path, *extra: str) -> list[str]:
    return ["--benchmark", "jsonl", "--data", str(bench), "--strategies", "agent", "--out", str(out), *extra]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _one_line_error(capsys, *needles: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


def test_rerun_with_other_settings_never_reuses_answers(bench, tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        eval_qa_main(_eval(bench, out, "--policy", "pixel:red", "--max-calls", "5")) == 2
    )  # not a flag here
    _one_line_error(capsys, "unrecognized argument")
    assert not out.exists()
    assert eval_qa_main(_eval(bench, out, "--policy", "pixel:red")) == 0
    first = json.loads((out / "summary.json").read_text())
    assert first["agent"]["accuracy"] == 1.0
    capsys.readouterr()
    before = _snapshot(out)

    # another policy into the same folder: refused, naming what differs; nothing touched
    assert eval_qa_main(_eval(bench, out, "--policy", "const:B")) == 2
    _one_line_error(capsys, "policy: 'pixel:red' -> 'const:B'", "--overwrite")
    assert _snapshot(out) == before
    # other episode settings
    assert eval_qa_main(_eval(bench, out, "--policy", "pixel:red", "episode.max_calls=1")) == 2
    _one_line_error(capsys, "episode.max_calls: 5 -> 1")
    assert _snapshot(out) == before
    # another data file (same ids, one answer changed)
    other = tmp_path / "other.jsonl"
    rows = [json.loads(line) for line in bench.read_text().splitlines()]
    rows[0]["answer"] = "B"
    other.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for v in {r["video"] for r in rows}:
        (tmp_path / v).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(bench.parent / v, tmp_path / v)
    assert eval_qa_main(_eval(other, out, "--policy", "pixel:red")) == 2
    _one_line_error(capsys, "inputs.data")
    assert _snapshot(out) == before

    # the same identity resumes: no question is asked again (more workers or a larger --limit do not matter)
    lines = (out / "agent" / "results.jsonl").read_text().count("\n")
    assert eval_qa_main(_eval(bench, out, "--policy", "pixel:red", "max_retries=3")) == 0
    assert (out / "agent" / "results.jsonl").read_text().count("\n") == lines
    capsys.readouterr()

    # --overwrite starts over with the new settings, and the report is the new policy's own
    assert eval_qa_main(_eval(bench, out, "--policy", "const:B", "--overwrite")) == 0
    s = json.loads((out / "summary.json").read_text())["agent"]
    assert s["accuracy"] == 0.5 and s["mean_tool_calls"] == 0.0
    import yaml

    assert yaml.safe_load((out / "config.yaml").read_text())["policy"] == "const:B"


HOLD = """
import sys
from vidlab.distributed.job import job_lock
with job_lock(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()  # held until the test is done with it (its stdin closes, or it is killed): a state, not a time
"""


@pytest.fixture
def hold_lock():
    procs = []

    def hold(folder: Path) -> None:
        p = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(folder)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(p)
        assert p.stdout.readline().strip() == "held"

    yield hold
    for p in procs:
        p.kill()
        p.wait()


def test_concurrent_run_refuses_in_one_line_and_touches_nothing(bench, tmp_path, capsys, hold_lock):
    out = tmp_path / "busy"
    assert eval_qa_main(_eval(bench, out, "--policy", "const:A")) == 0
    capsys.readouterr()
    before = _snapshot(out)
    hold_lock(out)  # a second process is running a job in this folder
    assert eval_qa_main(_eval(bench, out, "--policy", "const:A")) == 2
    _one_line_error(capsys, "in use by another running job")
    assert _snapshot(out) == before


def _rows(bench: Path, tmp_path: Path) -> Path:
    rows = [json.loads(line) for line in bench.read_text().splitlines()]
    for r in rows:
        r["video"] = str(bench.parent / r["video"])
    p = tmp_path / "train.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_classify_is_a_resumable_locked_job(bench, tmp_path, capsys, hold_lock):
    data = _rows(bench, tmp_path)
    out = tmp_path / "lab" / "labelled.jsonl"
    argv = [
        "--data",
        str(data),
        "--out",
        str(out),
        "--policy",
        "const:B",
        "classify.k=1",
        "classify.rich_clip_frames=0",
    ]
    assert classify_main(argv) == 0
    labels = {
        json.loads(line)["id"]: json.loads(line)["classification"] for line in out.read_text().splitlines()
    }
    assert labels == {
        "needle_000": "filtered",
        "needle_001": "direct",
        "needle_002": "filtered",
        "needle_003": "direct",
    }
    job = out.with_name("labelled.jsonl.job")
    assert (job / "results.jsonl").is_file() and (job / "job.json").is_file()
    capsys.readouterr()
    records = (job / "results.jsonl").read_text()
    assert classify_main(argv) == 0  # resumes: no row redone
    assert (job / "results.jsonl").read_text() == records
    capsys.readouterr()
    before = {**_snapshot(out.parent)}
    assert classify_main([*argv[:-2], "classify.k=2", "classify.rich_clip_frames=0"]) == 2
    _one_line_error(capsys, "classify.k: 1 -> 2")
    assert classify_main([*argv[:5], "const:A", *argv[6:]]) == 2
    _one_line_error(capsys, "policy: 'const:B' -> 'const:A'")
    hold_lock(job)
    assert classify_main(argv) == 2
    _one_line_error(capsys, "in use by another running job")
    assert _snapshot(out.parent) == before


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["episode.max_calls=abc"], ["episode.max_calls: expected an int in [0, 100], got 'abc'"]),
        (["--limit", "-5"], ["limit: expected an int", ">= 1, got -5"]),
        (["--set", "episode.frame_resize=stretch"], ["episode.frame_resize: expected one of"]),
        (["--policy", "gpt:x"], ["bad policy spec 'gpt:x'", "unknown scheme"]),
        (["--policy", "pixel:purple"], ["colour must be one of"]),
        (["--strategies", "random:3"], ["uniform:K or clip:K"]),
        (["--judge", "llm"], ["unknown judge spec"]),
        (["--backend", "slurm"], ["backend: expected one of ['local', 'ray']"]),
        (["--preset", "no-such-preset"], ["unknown preset"]),
        (["episode.nope=1"], ["unknown config key"]),
    ],
)
def test_eval_mistakes_are_one_line_and_write_nothing(bench, tmp_path, capsys, argv, needles):
    out = tmp_path / "never"
    assert eval_qa_main(_eval(bench, out, *argv)) == 2
    _one_line_error(capsys, *needles)
    assert not out.exists()


def test_missing_inputs_are_one_line(bench, tmp_path, capsys):
    out = tmp_path / "never"
    assert (
        eval_qa_main(["--benchmark", "jsonl", "--data", str(tmp_path / "nope.jsonl"), "--out", str(out)]) == 2
    )
    _one_line_error(capsys, "nope.jsonl")
    assert eval_qa_main(["--benchmark", "jsonl", "--out", str(out)]) == 2
    _one_line_error(capsys, "--data is required")
    assert not out.exists()
    lab = tmp_path / "lab.jsonl"
    assert classify_main(["--data", str(tmp_path / "nope.jsonl"), "--out", str(lab)]) == 2
    _one_line_error(capsys, "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\nnot json\n')
    assert classify_main(["--data", str(bad), "--out", str(lab)]) == 2
    _one_line_error(capsys, "bad.jsonl:2: not valid JSON")
    assert classify_main(["--data", str(_rows(bench, tmp_path)), "--out", str(lab), "--k", "0"]) == 2
    _one_line_error(capsys, "classify.k: expected an int in [1, 256], got 0")
    assert not lab.exists() and not (tmp_path / "lab.jsonl.job").exists()
    video = str(bench.parent / "videos" / "needle_000.mp4")
    assert qa_main(["--video", str(tmp_path / "missing.mp4"), "--question", "Q?"]) == 2
    _one_line_error(capsys, "--policy is required")  # no silent const:A default
    assert qa_main(["--video", str(tmp_path / "missing.mp4"), "--question", "Q?", "--policy", "const:A"]) == 2
    _one_line_error(capsys, "missing.mp4")
    assert qa_main(["--video", video, "--question", "Q?", "--max-calls", "abc"]) == 2
    _one_line_error(capsys, "--max-calls")
    assert qa_main(["--video", video, "--question", "Q?", "--options", "a", "b", "episode.max_turns=0"]) == 2
    _one_line_error(capsys, "episode.max_turns: expected an int in [1, 101], got 0")


def test_config_is_a_deprecated_alias_and_overrides_follow_options(bench, tmp_path, capsys):
    preset = tmp_path / "p.yaml"
    preset.write_text("episode: {num_initial_frames: 4}\npolicy: const:A\n")
    video = str(bench.parent / "videos" / "needle_000.mp4")
    assert (
        qa_main(
            [
                "--video",
                video,
                "--question",
                "Q?",
                "--options",
                "yes",
                "no",
                "episode.max_calls=2",
                "--config",
                str(preset),
            ]
        )
        == 0
    )
    cap = capsys.readouterr()
    assert "[initial view] 4 frames" in cap.out and "options: A. yes  B. no" in cap.out
    assert "--config is deprecated" in cap.err
    assert (
        qa_main(
            [
                "--video",
                video,
                "--question",
                "Q?",
                "--preset",
                str(preset),
                "--set",
                "episode.num_initial_frames=6",
            ]
        )
        == 0
    )
    assert "[initial view] 6 frames" in capsys.readouterr().out


def test_damaged_record_is_redone_not_trusted(bench, tmp_path, capsys):
    """A results line that is valid JSON but damaged (a string score) is redone, with one warning line."""
    out = tmp_path / "damaged"
    argv = _eval(bench, out, "--policy", "pixel:red")
    assert eval_qa_main(argv) == 0
    path = out / "agent" / "results.jsonl"
    lines = path.read_text().splitlines()
    rec = json.loads(lines[0])
    rec["result"]["score"] = "1.0"  # a string where a number belongs
    lines[0] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert eval_qa_main(argv) == 0
    cap = capsys.readouterr()
    assert f"{path.name}:1" in cap.err or f"{path}:1" in cap.err, cap.err
    s = json.loads((out / "summary.json").read_text())["agent"]
    assert s["n"] == 4 and s["accuracy"] == 1.0 and s["job"]["done"] == 1
