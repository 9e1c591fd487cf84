"""Shared fixtures for the verl / TRL tests: two small synthetic videos, a tiny Qwen2.5-VL on disk, one thread."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("trl")
torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """Tiny matmuls on a shared 2-core box run far faster without intra-op threads fighting."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def rl_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("rl")


@pytest.fixture(scope="session")
def needles(rl_root) -> Path:
    """questions.jsonl over two 120-frame, 10 fps videos (one shows a red square)."""
    from vidlab.understanding.benchmarks.synthetic import write_needle_benchmark

    return write_needle_benchmark(rl_root / "needles", n=2, num_frames=120, fps=10.0)


@pytest.fixture(scope="session")
def question_rows(needles) -> list[dict]:
    rows = [json.loads(line) for line in needles.read_text().splitlines() if line.strip()]
    for r in rows:
        r["video"] = str((needles.parent / r["video"]).resolve())
        r["classification"] = "active"
    return rows


@pytest.fixture(scope="session")
def tiny_dir(rl_root) -> Path:
    from vidlab.understanding.policies.tiny_qwen import save_tiny_qwen_vl

    return save_tiny_qwen_vl(rl_root / "tiny-qwen2_5_vl", "qwen2_5_vl", seed=0)


# ------------------------------------------------------------------- the documented chain, as a user runs it
@pytest.fixture(scope="session")
def labelled_chain(tmp_path_factory, vidlab_cli) -> dict[str, Path]:
    """The chain's first two commands, from a working directory that is neither the checkout nor the data's
    folder, with paths typed relative to it: ``vidlab toyworld-data ../data 2 --world where`` (10 questions over
    two long videos) then ``vidlab classify --data ../data/test/questions.jsonl --policy toy:where --out
    ../runs/labelled.jsonl``. Returns the folders and files (``cwd``, ``data``, ``runs``, ``labelled``)."""
    root = tmp_path_factory.mktemp("chain")
    cwd = root / "cwd"
    cwd.mkdir()
    made = vidlab_cli(cwd, "toyworld-data", "../data", "2", "--world", "where", "--no-progress")
    assert made.returncode == 0, made.stderr[-3000:]
    lab = vidlab_cli(
        cwd, "classify", "--data", "../data/test/questions.jsonl", "--policy", "toy:where",
        "--out", "../runs/labelled.jsonl", "classify.k=1",
    )  # fmt: skip
    assert lab.returncode == 0, lab.stderr[-3000:]
    return {
        "cwd": cwd,
        "data": root / "data" / "test" / "questions.jsonl",
        "runs": root / "runs",
        "labelled": root / "runs" / "labelled.jsonl",
    }
