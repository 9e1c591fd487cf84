"""The LVBench-shaped toy corpus: 50 videos of 20-60 minutes, 11 questions each, answers that follow from the world's
ground truth; rendering cached; eval-qa indexes each video once across strategies."""

import json

import pytest

from vidlab.understanding.toyworld.corpus import (
    COUNT_ANY,
    CorpusConfig,
    CorpusMismatchError,
    build_corpus,
    corpus_questions,
    count_any_intervals,
    quick_config,
)
from vidlab.understanding.toyworld.world import COUNT_WORDS, video_spec


def test_the_full_corpus_is_benchmark_sized_with_every_kind_on_every_video():
    cfg = CorpusConfig()
    wc = cfg.world_config()
    assert (cfg.videos, wc.fps, wc.min_frames, wc.max_frames) == (50, 1.0, 1200, 3600)
    kinds = set()
    for seed in cfg.seeds():
        spec = video_spec(seed, wc)
        assert 1200 <= spec.num_frames <= 3600
        rows = corpus_questions(spec, f"videos/{seed:06d}.mp4", cfg)
        assert len(rows) >= 10 and len({r["id"] for r in rows}) == len(rows)
        kinds |= {r["category"] for r in rows}
    assert kinds == {"static", "needle", "count", "distractor", "twolook", COUNT_ANY}


def test_count_any_answers_are_the_circles_wholly_inside_and_none_straddles():
    cfg = CorpusConfig()
    wc = cfg.world_config()
    checked = 0
    for seed in cfg.seeds()[:10]:
        spec = video_spec(seed, wc)
        rows = {r["question"]: r for r in corpus_questions(spec, "v.mp4", cfg) if r["category"] == COUNT_ANY}
        for a, b, count in count_any_intervals(spec, cfg.extra_counts, wc.count_interval, wc.count_event):
            circles = [e for e in spec.events if e.shape == "circle"]
            assert not any(e.start < a < e.end or e.start < b < e.end for e in circles)
            inside = [e for e in circles if a <= e.start and e.end <= b]
            assert count == len(inside) < len(COUNT_WORDS)
            lo, hi = spec.count_interval
            assert b <= lo or a >= hi  # apart from the world's own count question
            row = rows[f"How many circles appear between frame {a} and frame {b}?"]
            assert row["options"][ord(row["answer"]) - 65] == COUNT_WORDS[count]
            checked += 1
    assert checked >= 50


def test_build_corpus_renders_once_and_refuses_another_config(tmp_path):
    cfg = quick_config(videos=1)
    first = build_corpus(tmp_path, cfg)
    assert first.rendered == 1 and first.jsonl.is_file()
    video = tmp_path / first.rows[0]["video"]
    stamp = (video.stat().st_mtime_ns, first.jsonl.stat().st_mtime_ns)
    again = build_corpus(tmp_path, cfg)
    assert again.rendered == 0 and again.rows == first.rows
    assert (video.stat().st_mtime_ns, again.jsonl.stat().st_mtime_ns) == stamp  # nothing rewritten
    assert [json.loads(x) for x in first.jsonl.read_text().splitlines()] == first.rows
    with pytest.raises(CorpusMismatchError, match="another configuration"):
        build_corpus(tmp_path, quick_config(videos=2))


@pytest.mark.slow
def test_eval_qa_builds_each_index_once_across_strategies(tmp_path):
    """Two strategies over one video's 11 questions: one record says "built", every other one "cached"; a rerun in
    another folder with the same cache builds nothing, and its records equal the first run's without the run's
    own fields (RUN_FIELDS)."""
    from vidlab.cli import main
    from vidlab.understanding.evaluate import RUN_FIELDS, load_results

    corpus = build_corpus(tmp_path / "corpus", quick_config(videos=1))
    cache = tmp_path / "cache"

    def run(out):
        argv = ["eval-qa", "--benchmark", "jsonl", "--data", str(corpus.jsonl), "--policy", "toy:shipped",
                "--clip-model", "auto", "--strategies", "agent", "uniform:16", "--out", str(out),
                f"cache_dir={cache}", "episode.frame_resize=fit"]  # fmt: skip
        assert main(argv) == 0

    run(tmp_path / "a")
    recs = {s: load_results(tmp_path / "a" / s) for s in ("agent", "uniform-16")}
    marks = [r["clip_index"] for s in recs.values() for r in s]
    assert (
        len(marks) == 2 * len(corpus.rows)
        and marks.count("built") == 1
        and marks.count("cached") == len(marks) - 1
    )
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["agent"]["index_builds"] + summary["uniform-16"]["index_builds"] == 1
    run(tmp_path / "b")
    for s, first in recs.items():
        second = load_results(tmp_path / "b" / s)
        assert all(r["clip_index"] == "cached" for r in second)
        strip = [{k: v for k, v in r.items() if k not in RUN_FIELDS} for r in first]
        assert strip == [{k: v for k, v in r.items() if k not in RUN_FIELDS} for r in second]
