"""The frame selectors (``topk:K``, ``aks:K``, ``bolt:K``) from every entry point that takes a strategy:
``vidlab eval-qa --strategies``, ``vidlab qa --strategy``, the lmms-eval plug-in and the demo's QA tab."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vidlab.understanding.cli import eval_qa_main, qa_main

SELECTORS = ("topk:4", "aks:4", "bolt:4:alpha=2.5")


@pytest.fixture(autouse=True)
def one_thread():
    torch = pytest.importorskip("torch")
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny CLIP matmuls on a shared 2-core box
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    from vidlab.video.synth import Event, render_synthetic

    d = tmp_path_factory.mktemp("sel-cli")
    render_synthetic(
        d / "a.mp4",
        60,
        fps=8,
        width=64,
        height=48,
        seed=0,
        events=[Event(40, 48, "square", "red", (0.5, 0.5), 0.6)],
    )
    rows = [
        {"id": "r1", "video": "a.mp4", "question": "What colour is the square?", "options": ["blue", "red"],
         "answer": "B", "category": "needle"},
        {"id": "r2", "video": "a.mp4", "question": "Which shape?", "options": ["circle", "square"], "answer": "B",
         "category": "shape"},
    ]  # fmt: skip
    (d / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def test_eval_qa_runs_every_selector_over_one_frame_index(data, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["--benchmark", "jsonl", "--data", str(data / "q.jsonl"), "--policy", "const:B", "--out", str(out),
            "--clip-model", "vidlab-tiny", f"cache_dir={tmp_path / 'cache'}", "--strategies", "clip:4",
            *SELECTORS, "--set", "run.retries=0"]  # fmt: skip
    assert eval_qa_main(argv) == 0
    text = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    for label in ("topk-4", "aks-4", "bolt-4_alpha=2.5"):
        assert f"| {label} | 2 | 100.0 |" in text
        recs = [json.loads(line) for line in (out / label / "results.jsonl").read_text().splitlines()]
        recs = [r.get("result", r) for r in recs]
        assert len(recs) == 2 and all(r["strategy"] == label and r["num_tool_calls"] == 0 for r in recs)
        assert all(
            1 <= r["frames_used"] <= 4 and r["frame_indices"] == sorted(r["frame_indices"]) for r in recs
        )
        assert summary[label]["mean_frames"] <= 4.0
    # one frame index per video and CLIP, shared by every strategy: built by the first question only
    built = [
        json.loads(line).get("result", {}).get("clip_index")
        for p in sorted(out.glob("*/results.jsonl"))
        for line in p.read_text().splitlines()
    ]
    assert built.count("built") == 1 and built.count("cached") == len(built) - 1


def test_eval_qa_refuses_a_bad_selector_before_any_job(data, tmp_path, capsys):
    base = ["--benchmark", "jsonl", "--data", str(data / "q.jsonl"), "--out", str(tmp_path / "o")]
    assert eval_qa_main(base + ["--strategies", "agent", "aks:8"]) == 2
    err = capsys.readouterr().err
    assert "needs clip_model" in err and len(err.strip().splitlines()) == 1
    assert eval_qa_main(base + ["--clip-model", "vidlab-tiny", "--strategies", "bolt:8:beta=2"]) == 2
    err = capsys.readouterr().err
    assert "no parameter 'beta'" in err and "bolt:8:beta=2" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())


@pytest.mark.parametrize("spec", ["aks:6", "bolt:6", "topk:6"])
def test_qa_strategy_selector(data, tmp_path, spec, capsys):
    out_json = tmp_path / "traj.json"
    rc = qa_main(["--video", str(data / "a.mp4"), "--question", "What colour is the square?", "--options", "blue",
                  "red", "--policy", "const:B", "--strategy", spec, "--clip-model", "vidlab-tiny",
                  "--cache-dir", str(tmp_path / "cache"), "--json", str(out_json)])  # fmt: skip
    text = capsys.readouterr().out
    assert rc == 0 and "predicted B" in text
    m = re.search(r"\[initial view\] (\d+) frames", text)
    saved = json.loads(out_json.read_text())
    assert m and 1 <= int(m.group(1)) <= 6 and saved["num_tool_calls"] == 0
    assert len(saved["frames_used"]) == int(m.group(1))


def test_lmms_plugin_answers_with_a_selector(data, tmp_path):
    pytest.importorskip("lmms_eval")
    from vidlab.understanding.lmms.model import VideoBrainLMM

    traj = tmp_path / "t.jsonl"
    lmm = VideoBrainLMM(policy="const:B", clip_model="vidlab-tiny", strategy="aks:4", trajectories=str(traj),
                        cache_dir=str(tmp_path / "cache"))  # fmt: skip
    assert lmm.worker.strategy == "aks:4" and lmm.worker.baseline.method == "aks"
    text, got = lmm.answer(str(data / "a.mp4"), "What colour is the square?", ["blue", "red"])
    assert text == "B" and got.num_tool_calls == 0 and 1 <= len(got.frames_used) <= 4
    assert got.end_reason == "answered (aks-4)"
    with pytest.raises(Exception, match="needs clip_model"):
        VideoBrainLMM(policy="const:B", strategy="bolt:4")


def test_demo_qa_tab_offers_and_runs_the_selectors(data, tmp_path):
    pytest.importorskip("gradio")
    from vidlab.demos.config import DemoQAConfig
    from vidlab.demos.qa_tab import QAInputError, QAService
    from vidlab.demos.work import WorkArea
    from vidlab.understanding.config import StrategyError

    work = WorkArea(tmp_path / "work")
    qa = QAService(
        DemoQAConfig(policy="const:B", clip_model="vidlab-tiny", synthetic_videos=0, strategy="bolt:8"), work
    )
    assert qa.strategies[:2] == ["bolt:8", "agent"] and {"aks:16", "topk:16", "bolt:16"} <= set(qa.strategies)
    states = list(qa.run(str(data / "a.mp4"), "What colour is the square?", "blue\nred", "B", "aks:16"))
    final = states[-1]["final"]
    assert final["tool_calls"] == 0 and final["predicted"] == "B" and final["correct"]
    assert 1 <= final["frames_used"] <= 16 and final["end_reason"] == "answered (aks-16)"
    assert len(states[-1]["gallery"]) == final["frames_used"]
    assert f"frames used: **{final['frames_used']}**" in states[-1]["tallies"]
    with pytest.raises(QAInputError, match="strategy must be one of"):
        list(qa.run(str(data / "a.mp4"), "Q?", "a\nb", None, "aks:7"))
    no_clip = QAService(DemoQAConfig(policy="const:B", clip_model=None, synthetic_videos=0), work)
    assert no_clip.strategies == ["agent", "uniform:16"]  # no CLIP model, no CLIP-scored strategies
    with pytest.raises(StrategyError, match="needs clip_model"):
        QAService(
            DemoQAConfig(policy="const:B", clip_model=None, synthetic_videos=0, strategy="aks:16"), work
        )
