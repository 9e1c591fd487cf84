"""Benchmark parity: MLVU's numeric answers are option text, LVBench's separate options column, reward ground truth."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vidlab.understanding.benchmarks import QAItemError, load_benchmark
from vidlab.understanding.benchmarks.items import answer_letter
from vidlab.understanding.reward import ground_truth_letter, score_trajectory

COUNT_CANDIDATES = ["3", "6", "5", "4"]


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> Path:
    from vidlab.video.synth import render_synthetic

    return render_synthetic(tmp_path_factory.mktemp("v") / "src.mp4", 24, fps=8, width=64, height=48, seed=2)


def _put(video: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(video, dest)


def test_mlvu_numeric_answers_are_option_text(tmp_path, video):
    """MLVU's counting task: the answer "3" is the option whose text is "3" (A), never position 3 (D)."""
    records = [
        {
            "video": "c1.mp4",
            "duration": 3.0,
            "question": "How many cars?",
            "candidates": COUNT_CANDIDATES,
            "answer": "3",
            "question_type": "count",
        },
        {
            "video": "c1.mp4",
            "duration": 3.0,
            "question": "How many dogs?",
            "candidates": COUNT_CANDIDATES,
            "answer": "4",
            "question_type": "count",
        },
        {
            "video": "c1.mp4",
            "duration": 3.0,
            "question": "How many cats?",
            "candidates": ["0", "1", "2", "7"],
            "answer": 2,
            "question_type": "count",
        },  # a JSON number is the option "2" as well
        {
            "video": "c1.mp4",
            "duration": 3.0,
            "question": "How many birds?",
            "candidates": ["1", "2", "5", "6"],
            "answer": "3",
            "question_type": "count",
        },  # not among the candidates: reported, not read as D
    ]
    (tmp_path / "json").mkdir()
    (tmp_path / "json" / "4_count.json").write_text(json.dumps(records))
    _put(video, tmp_path / "video" / "4_count" / "c1.mp4")
    res = load_benchmark("mlvu", tmp_path)
    assert [it.answer for it in res.items] == ["A", "D", "C"]
    assert len(res.problems) == 1 and "not among the candidates" in res.problems[0].reason


def test_mlvu_dev_parquet_letters_still_letters(tmp_path, video):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    rows = [
        {
            "video_name": "c1.mp4",
            "duration": 3.0,
            "question": "How many?\n(A) 3\n(B) 6\n(C) 5\n(D) 4",
            "candidates": COUNT_CANDIDATES,
            "answer": "B",
            "task_type": "count",
            "question_id": "q1",
        },
        {
            "video_name": "c1.mp4",
            "duration": 3.0,
            "question": "How many?\n(A) 3\n(B) 6\n(C) 5\n(D) 4",
            "candidates": COUNT_CANDIDATES,
            "answer": "5",
            "task_type": "count",
            "question_id": "q2",
        },
    ]
    pd.DataFrame(rows).to_parquet(tmp_path / "dev.parquet")
    _put(video, tmp_path / "video" / "c1.mp4")
    res = load_benchmark("mlvu", tmp_path / "dev.parquet")
    assert [it.answer for it in res.items] == ["B", "C"]


def test_answer_forms_follow_the_benchmark_format():
    assert answer_letter("3", COUNT_CANDIDATES, "q") == "A"  # default: text first
    assert answer_letter(1, ["x", "y"], "q", forms=("index",)) == "B"  # LongVideoBench / EgoSchema
    with pytest.raises(QAItemError, match="read as an option's text"):
        answer_letter("1", ["x", "y"], "q", forms=("text",))
    with pytest.raises(QAItemError):
        answer_letter(3, ["x", "y", "z", "w"], "q")  # an int is an index only where the format says so


def test_lvbench_separate_options_column(tmp_path, video):
    """lmms-eval's LVBench rows carry the options in their own column; the question holds only the stem."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    rows = [
        {
            "key": "k1",
            "type": "sport",
            "uid": "u1",
            "question": "Who scores first?",
            "options": ["(A) red team", "(B) blue team", "(C) nobody", "(D) referee"],
            "answer": "B",
            "question_type": ["reasoning"],
            "time_reference": "00:01-00:02",
            "video_path": "k1.mp4",
        },
        {
            "key": "k1",
            "type": "sport",
            "uid": "u2",
            "question": "What is the score?",
            "options": "(A) 1-0\n(B) 2-0\n(C) 0-0\n(D) 3-1",
            "answer": "D",
            "question_type": ["key information retrieval"],
            "time_reference": "00:01-00:02",
            "video_path": "k1.mp4",
        },
        {
            "key": "k1",
            "type": "sport",
            "uid": "u3",
            "question": "Inline?\n(A) yes\n(B) no",
            "answer": "A",
            "question_type": ["reasoning"],
            "time_reference": "",
            "video_path": "k1.mp4",
        },
    ]
    pd.DataFrame([rows[0]]).to_parquet(tmp_path / "a.parquet")  # options as a list
    pd.DataFrame([rows[1]]).to_parquet(tmp_path / "b.parquet")  # options as one string of (A) lines
    pd.DataFrame([rows[2]]).to_parquet(tmp_path / "c.parquet")  # no column: inside the question
    _put(video, tmp_path / "videos" / "k1.mp4")
    res = load_benchmark("lvbench", tmp_path)
    assert not res.problems, res.problems
    by = {it.id: it for it in res.items}
    assert by["u1"].options == ["red team", "blue team", "nobody", "referee"] and by["u1"].answer == "B"
    assert by["u1"].question == "Who scores first?"
    assert by["u2"].options == ["1-0", "2-0", "0-0", "3-1"] and by["u2"].answer == "D"
    assert by["u3"].options == ["yes", "no"] and by["u3"].question == "Inline?"


def test_reward_ground_truth_numeric_is_option_text():
    assert ground_truth_letter("3", list("ABCD"), COUNT_CANDIDATES) == "A"
    assert ground_truth_letter(4, list("ABCD"), COUNT_CANDIDATES) == "D"
    # numeric options make a number that is not among them ambiguous: never read as a position
    assert ground_truth_letter("2", list("ABCD"), COUNT_CANDIDATES) is None
    assert (
        ground_truth_letter("1", list("AB"), ["cat", "dog"]) == "B"
    )  # word options: an index is unambiguous
    text = "<thinking>I counted three cars.</thinking><answer>A</answer>"
    s = score_trajectory(text, "3", {"options": COUNT_CANDIDATES, "question_type": "mc"})
    assert s.acc == 1.0
    s = score_trajectory(
        text.replace(">A<", ">D<"), "3", {"options": COUNT_CANDIDATES, "question_type": "mc"}
    )
    assert s.acc == 0.0


# ----------------------------------------------------------------------------------- the reward reads strictly
def _mc_acc(answer: str, gt: str = "C") -> float:
    text = f"<thinking>Looking at the frames.</thinking><answer>{answer}</answer>"
    extra = {"options": ["red", "blue", "green", "white"], "question_type": "mc", "classification": "direct"}
    return score_trajectory(text, gt, extra).acc


@pytest.mark.parametrize(
    "answer",
    [
        "D and A",
        "C\nD",
        "either C or B",
        "C or B",
        "The answer is C or D",
        "C, B",
        "(C) (A)",
        "I choose C and A",
    ],
)
def test_reward_hedges_earn_nothing(answer):
    assert _mc_acc(answer) == 0.0
    assert _mc_acc(answer, gt="A") == 0.0 and _mc_acc(answer, gt="D") == 0.0


@pytest.mark.parametrize(
    ("answer", "gt"),
    [
        ("I choose A because the ball is red", "A"),
        ("B is incorrect; the answer is C", "C"),
        ("A and B are wrong, so C", "C"),
        ("The answer is C. A and B are wrong.", "C"),
        ("(c)", "C"),
        ("green", "C"),
        ("C. green", "C"),
        ("Answer: B", "B"),
        ("not B, it is D", "D"),
    ],
)
def test_reward_reads_one_committed_letter(answer, gt):
    assert _mc_acc(answer, gt) == 1.0
    other = "A" if gt != "A" else "B"
    assert _mc_acc(answer, other) == 0.0


def test_evaluation_keeps_the_lmms_eval_extractor():
    """Evaluation's extractor stays lmms-eval-compatible (documented ranking), so its figures compare."""
    from vidlab.understanding import protocol as P

    assert P.extract_choice("D and A", list("ABCD"))[0] == "D"  # opens the reply
    assert P.strict_choice("D and A", list("ABCD"))[0] is None
