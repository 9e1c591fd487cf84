"""Benchmark loaders on annotation files written here in each released format, with videos rendered here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vidlab.understanding.benchmarks import (
    BENCHMARKS,
    BenchmarkError,
    QAItem,
    QAItemError,
    duration_bucket,
    load_benchmark,
    split_inline_options,
)
from vidlab.understanding.benchmarks.items import answer_letter

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> Path:
    from vidlab.video.synth import render_synthetic

    return render_synthetic(tmp_path_factory.mktemp("v") / "src.mp4", 24, fps=8, width=64, height=48, seed=1)


def put(video: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(video, dest)
    return dest


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


# ------------------------------------------------------------------------------------------- LongVideoBench
def lvb_record(i: int, correct: int | None = 1, **kw) -> dict:
    rec = {
        "id": f"lvb{i}",
        "video_id": f"vid{i}",
        "video_path": f"vid{i}.mp4",
        "question": f"What happens at {i}?",
        "candidates": ["walks", "runs", "sits", "jumps"],
        "correct_choice": correct,
        "position": [1, 5],
        "question_category": "TOS",
        "topic_category": "NP-News-Programs",
        "level": "L2-Relation",
        "duration_group": 600,
        "duration": 423.5,
        "subtitle_path": f"vid{i}_en.json",
        "starting_timestamp_for_subtitles": 0,
    }
    if correct is None:
        rec.pop("correct_choice")
    rec.update(kw)
    return rec


def test_longvideobench_json(tmp_path, video):
    put(video, tmp_path / "videos" / "vid0.mp4")
    write_json(
        tmp_path / "lvb_val.json",
        [lvb_record(0), lvb_record(1, correct=3, candidates=["a", "b", "c", "d", "e"])],
    )
    res = load_benchmark("longvideobench", tmp_path)
    assert [it.id for it in res.items] == ["lvb0", "lvb1"] and not res.problems
    a, b = res.items
    assert a.answer == "B" and a.options == ["walks", "runs", "sits", "jumps"]
    assert b.answer == "D" and len(b.options) == 5
    assert a.category == "TOS" and a.duration == 423.5 and a.duration_group == "600"
    assert Path(a.video_path) == tmp_path / "videos" / "vid0.mp4" and Path(a.video_path).is_file()
    assert a.extra["level"] == "L2-Relation" and a.extra["position"] == [1, 5]


def test_longvideobench_test_split_has_no_answers_reported(tmp_path):
    write_json(tmp_path / "lvb_test_wo_gt.json", [lvb_record(0, correct=None), lvb_record(1, correct=9)])
    # nothing to score: an error that says why, not an empty evaluation
    with pytest.raises(BenchmarkError, match=r"no usable longvideobench question: all 2 record\(s\)") as e:
        load_benchmark("longvideobench", tmp_path, split="test")
    assert "lvb0: no correct_choice (test split answers are hidden)" in str(e.value)
    assert "lvb1: answer index 9 is outside" in str(e.value)


def test_a_split_or_a_file_with_no_question_is_an_error(tmp_path):
    row = {
        "id": "x1",
        "video": "v.mp4",
        "question": "Q?",
        "options": ["a", "b"],
        "answer": "A",
        "category": "c",
    }
    (tmp_path / "q.jsonl").write_text(json.dumps(row) + "\n")
    assert len(load_benchmark("jsonl", tmp_path / "q.jsonl", split="c").items) == 1
    with pytest.raises(BenchmarkError, match="no jsonl question in split 'd'"):
        load_benchmark("jsonl", tmp_path / "q.jsonl", split="d")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(BenchmarkError, match="no jsonl question found"):
        load_benchmark("jsonl", tmp_path / "empty.jsonl")


def test_longvideobench_parquet_options_padded_with_na(tmp_path):
    rows = []
    for i in range(2):
        r = lvb_record(i)
        r.pop("candidates")
        r.pop("position")
        opts = ["walks", "runs", "sits", "N/A", "N/A"]
        r.update({f"option{j}": o for j, o in enumerate(opts)})
        rows.append(r)
    pd.DataFrame(rows).to_parquet(tmp_path / "validation-00000.parquet")
    res = load_benchmark("lvb", tmp_path)
    assert len(res.items) == 2 and res.items[0].options == ["walks", "runs", "sits"]
    assert res.items[0].answer == "B"


# -------------------------------------------------------------------------------------------------- Video-MME
def videomme_rows() -> list[dict]:
    rows = []
    for vid, dur in (("001", "short"), ("002", "long"), ("003", "long")):
        for q in (1, 2):
            rows.append(
                {
                    "video_id": vid,
                    "duration": dur,
                    "domain": "Knowledge",
                    "sub_category": "Humanity & History",
                    "url": f"https://www.youtube.com/watch?v=yt{vid}",
                    "videoID": f"yt{vid}",
                    "question_id": f"{vid}-{q}",
                    "task_type": "Counting Problem" if q == 1 else "Action Recognition",
                    "question": f"Question {q} about {vid}?",
                    "options": ["A. one", "B. two", "C. three", "D. four"],
                    "answer": "C" if q == 1 else "A",
                }
            )
    return rows


def test_videomme_parquet_and_long_split(tmp_path, video):
    (tmp_path / "videomme").mkdir()
    pd.DataFrame(videomme_rows()).to_parquet(tmp_path / "videomme" / "test-00000-of-00001.parquet")
    put(video, tmp_path / "data" / "yt002.mp4")
    put(video, tmp_path / "data" / "yt003.MP4")  # the release mixes extensions
    full = load_benchmark("videomme", tmp_path)
    assert len(full.items) == 6
    long = load_benchmark("video-mme", tmp_path, split="long")
    assert [it.id for it in long.items] == ["002-1", "002-2", "003-1", "003-2"]
    it = long.items[0]
    assert it.options == ["one", "two", "three", "four"]  # "A. " prefixes stripped
    assert it.answer == "C" and it.category == "Counting Problem" and it.duration_group == "long"
    assert it.extra["domain"] == "Knowledge"
    assert Path(long.items[2].video_path).name == "yt003.MP4" and Path(long.items[2].video_path).is_file()
    with pytest.raises(BenchmarkError, match="splits by duration"):
        load_benchmark("videomme", tmp_path, split="huge")


# ------------------------------------------------------------------------------------------------------ MLVU
def test_mlvu_official_needle_answer_not_in_candidates_is_reported(tmp_path, video):
    put(video, tmp_path / "video" / "2_needle" / "needle_1.mp4")
    write_json(
        tmp_path / "json" / "2_needle.json",
        [
            {
                "video": "needle_1.mp4",
                "duration": 425.0,
                "question": "What is the man holding?",
                "candidates": ["a cup", "a pen", "a phone", "a book"],
                "answer": "a pen",
                "question_type": "needle",
            },
            {
                "video": "needle_2.mp4",
                "duration": 300.0,
                "question": "What colour is the car?",
                "candidates": ["red", "blue", "green", "black"],
                "answer": "purple",
                "question_type": "needle",
            },
        ],
    )
    write_json(
        tmp_path / "json" / "9_summary.json",
        [
            {
                "video": "sum_1.mp4",
                "duration": 1200.0,
                "question": "Summarise the video.",
                "answer": "A cooking show.",
                "question_type": "summary",
            }
        ],
    )
    res = load_benchmark("mlvu", tmp_path)
    ids = [it.id for it in res.items]
    assert ids == ["needle_0", "summary_0"]
    needle, summary = res.items
    assert needle.answer == "B" and needle.category == "needle" and needle.duration_group == "2-15min"
    assert Path(needle.video_path).is_file()
    assert summary.question_type == "oe" and summary.options is None and summary.answer == "A cooking show."
    assert len(res.problems) == 1 and res.problems[0].record == "needle_1"
    assert "not among the candidates" in res.problems[0].reason
    only = load_benchmark("mlvu", tmp_path, split="needle")
    assert [it.id for it in only.items] == ["needle_0"]


def test_mlvu_lmms_eval_dev_parquet(tmp_path):
    rows = [
        {
            "video_name": "plot_1.mp4",
            "duration": 200.0,
            "question": "Who enters first?\n(A) a dog\n(B) a cat\n(C) a man\n(D) a car",
            "candidates": ["a dog", "a cat", "a man", "a car"],
            "answer": "(C) a man",
            "task_type": "plotQA",
            "question_id": "p1",
        },
        {
            "video_name": "cnt_1.mp4",
            "duration": 90.0,
            "question": "How many?\n(A) 1\n(B) 2\n(C) 3\n(D) 4\n(E) 5\n(F) 6",
            "candidates": None,
            "answer": "F",
            "task_type": "count",
            "question_id": "c1",
        },
    ]
    pd.DataFrame(rows).to_parquet(tmp_path / "dev.parquet")
    res = load_benchmark("mlvu", tmp_path / "dev.parquet")
    a, b = res.items
    assert a.question == "Who enters first?" and a.answer == "C" and a.category == "plotQA"
    assert b.options == ["1", "2", "3", "4", "5", "6"] and b.answer == "F"  # MLVU-Test style six options


# ---------------------------------------------------------------------------------------------------- LVBench
def test_lvbench_meta_jsonl(tmp_path, video):
    put(video, tmp_path / "videos" / "keyA.mp4")
    lines = [
        {
            "key": "keyA",
            "type": "cartoon",
            "qa": [
                {
                    "uid": "1",
                    "question": "What does the rabbit eat?\n(A) carrot\n(B) apple\n(C) grass\n(D) bread",
                    "answer": "A",
                    "question_type": ["entity recognition", "key information retrieval"],
                    "time_reference": "00:15-00:19",
                },
                {
                    "uid": "2",
                    "question": "No options here?",
                    "answer": "B",
                    "question_type": ["reasoning"],
                    "time_reference": "",
                },
            ],
        },
        {
            "key": "keyB",
            "type": "sports",
            "qa": [
                {
                    "uid": "3",
                    "question": "Who wins?\n(A) red\n(B) blue\n(C) tie\n(D) nobody",
                    "answer": "D",
                    "question_type": ["reasoning"],
                    "time_reference": "01:00-01:30",
                }
            ],
        },
    ]
    path = tmp_path / "video_info.meta.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n{not json\n")
    with pytest.raises(BenchmarkError, match=r"line 3: not valid JSON.*--skip-bad-lines"):
        load_benchmark("lvbench", tmp_path)  # a truncated line is refused, named, unless asked to skip it
    res = load_benchmark("lvbench", tmp_path, skip_bad_lines=True)
    assert [it.id for it in res.items] == ["1", "3"]
    it = res.items[0]
    assert it.question == "What does the rabbit eat?" and it.options == ["carrot", "apple", "grass", "bread"]
    assert it.answer == "A" and it.category == "entity recognition"
    assert it.extra["question_types"] == ["entity recognition", "key information retrieval"]
    assert Path(it.video_path).is_file()
    reasons = {p.record: p.reason for p in res.problems}
    assert "without options" in reasons["2"]  # a multiple-choice question without options: a clear error
    assert any("not valid JSON" in r for r in reasons.values())


# -------------------------------------------------------------------------------------------------- EgoSchema
def test_egoschema_subset_only(tmp_path, video):
    qs = [
        {
            "q_uid": f"u{i}",
            "question": f"What is c doing {i}?",
            **{f"option {j}": f"opt{j}" for j in range(5)},
        }
        for i in range(4)
    ]
    write_json(tmp_path / "questions.json", qs)
    write_json(tmp_path / "subset_answers.json", {"u1": 4, "u3": 0})
    put(video, tmp_path / "videos" / "u1.mp4")
    res = load_benchmark("egoschema", tmp_path)
    assert [(it.id, it.answer) for it in res.items] == [("u1", "E"), ("u3", "A")]
    assert res.items[0].options == [f"opt{j}" for j in range(5)] and res.items[0].duration == 180.0
    assert Path(res.items[0].video_path).is_file()


def test_egoschema_lmms_eval_parquet(tmp_path):
    rows = [
        {
            "question_idx": "0",
            "question": "Q0?",
            "video_idx": "u0",
            "option": [f"{c}. o{c}" for c in "ABCDE"],
            "answer": "2",
        },
        {
            "question_idx": "1",
            "question": "Q1?",
            "video_idx": "u1",
            "option": [f"{c}. o{c}" for c in "ABCDE"],
            "answer": None,
        },
    ]
    pd.DataFrame(rows).to_parquet(tmp_path / "Subset.parquet")
    res = load_benchmark("egoschema", tmp_path)
    assert [(it.id, it.answer) for it in res.items] == [("u0", "C")]
    assert res.items[0].options == ["oA", "oB", "oC", "oD", "oE"]


# ----------------------------------------------------------------------------------------------------- JSONL
def test_jsonl_answers_as_letter_index_or_text(tmp_path, video):
    put(video, tmp_path / "clips" / "a.mp4")
    rows = [
        {
            "id": "x1",
            "video": "clips/a.mp4",
            "question": "Q1?",
            "options": ["red", "blue"],
            "answer": "B",
            "category": "color",
        },
        {
            "question_id": "x2",
            "video_path": "clips/a.mp4",
            "question": "Q2?",
            "candidates": ["A. red", "B. blue"],
            "answer": 0,
        },
        {"id": "x3", "video": "clips/a.mp4", "question": "Q3?", "choices": ["red", "blue"], "answer": "blue"},
        {
            "id": "x4",
            "video": "clips/a.mp4",
            "question": "Describe it.",
            "answer": "a red ball",
            "duration": 4000,
        },
        {"id": "x5", "video": "clips/a.mp4", "question": "Q5?", "question_type": "mc", "answer": "A"},
        {"id": "x6", "question": "Q6?", "options": ["a", "b"], "answer": "A"},
    ]
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    res = load_benchmark("jsonl", tmp_path / "q.jsonl")
    got = {it.id: it for it in res.items}
    assert [got[k].answer for k in ("x1", "x2", "x3")] == ["B", "A", "B"]
    assert got["x2"].options == ["red", "blue"]
    assert got["x4"].question_type == "oe" and got["x4"].duration_group == "60min+"
    assert Path(got["x1"].video_path).is_file() and got["x1"].category == "color"
    reasons = {p.record: p.reason for p in res.problems}
    assert reasons["x5"] == "multiple-choice question without options"
    assert "no video" in reasons["x6"]
    assert len(load_benchmark("jsonl", tmp_path / "q.jsonl", limit=2).items) == 2


# ------------------------------------------------------------------------------------------------ the basics
def test_qaitem_validation_is_a_clear_error():
    with pytest.raises(QAItemError, match="'q1'.*without options"):
        QAItem("q1", "v.mp4", "Which?", None, "A")
    with pytest.raises(QAItemError, match="not one of the option letters"):
        QAItem("q2", "v.mp4", "Which?", ["x", "y"], "C")
    it = QAItem("q3", "v.mp4", "Which?", ["x", "y"], "B", duration=30)
    assert it.option_letters == ["A", "B"] and it.duration_group == "0-2min"
    assert QAItem.from_dict(it.to_dict()) == it


def test_unknown_or_missing_benchmark_is_a_typed_error(tmp_path):
    with pytest.raises(BenchmarkError, match="unknown benchmark"):
        load_benchmark("nope", tmp_path)
    with pytest.raises(BenchmarkError, match="no such file"):
        load_benchmark("mlvu", tmp_path / "missing")
    for name in BENCHMARKS:
        if name == "jsonl":
            continue
        with pytest.raises(BenchmarkError):
            load_benchmark(name, tmp_path)  # an empty folder names what it expected
    (tmp_path / "lvb_val.json").write_text("{broken")
    with pytest.raises(BenchmarkError, match="not valid JSON"):
        load_benchmark("longvideobench", tmp_path)


def test_helpers():
    assert split_inline_options("Q?\n(A) x\n(B) y z\n") == ("Q?", ["x", "y z"])
    assert split_inline_options("Q?\nA. x\nB. y") == ("Q?", ["x", "y"])
    assert split_inline_options("Q about (A) thing") == ("Q about (A) thing", [])
    assert answer_letter("(B)", ["x", "y"], "i") == "B"
    assert answer_letter("B. y", ["x", "y"], "i") == "B"
    assert answer_letter("A man", ["A man", "A dog"], "i") == "A"
    with pytest.raises(QAItemError):
        answer_letter("Dancing", ["x", "y"], "i")
    assert [duration_bucket(s) for s in (10, 600, 1500, 3000, 5000)] == [
        "0-2min",
        "2-15min",
        "15-30min",
        "30-60min",
        "60min+",
    ]
