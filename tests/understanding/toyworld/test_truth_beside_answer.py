"""Every place that shows an answer shows the truth beside it when it is known; `answer` never means two things."""

import pytest

from vidlab.demos.qa_tab import example_truth, judged_answer
from vidlab.understanding.cli import UsageError, qa_record, truth_letter
from vidlab.understanding.env import Trajectory

OPTS = ["magenta", "white", "blue", "yellow"]


def test_truth_letter_accepts_a_letter_or_the_option_text_and_refuses_anything_else():
    assert truth_letter("a", OPTS) == "A" and truth_letter("Blue", OPTS) == "C"
    assert truth_letter(None, OPTS) is None
    with pytest.raises(UsageError, match="neither an option letter"):
        truth_letter("purple", OPTS)
    with pytest.raises(UsageError, match="needs --options"):
        truth_letter("A", None)


def _traj(reply, predicted):
    return Trajectory(
        messages=[],
        assistant_turns=[f"<answer>{reply}</answer>"],
        answer=reply,
        predicted=predicted,
        predicted_reason="exact",
        tool_calls=[],
        frames_used=[1, 2],
        valid=True,
        invalid_reason=None,
        end_reason="answer",
        question="What colour was the triangle?",
        options=OPTS,
        total_frames=100,
        fps=1.0,
    )


def test_the_qa_json_calls_the_models_reply_reply_and_adds_the_truth():
    t = _traj("C", "C")
    wrong = qa_record(t, "A")
    assert "answer" not in wrong and wrong["reply"] == "C" and wrong["predicted_option"] == "blue"
    assert wrong["truth"] == "A" and wrong["truth_option"] == "magenta" and wrong["correct"] is False
    assert qa_record(t, "C")["correct"] is True
    assert "truth" not in qa_record(t)


def test_the_demo_marks_the_answer_right_or_wrong_with_the_option_text():
    assert judged_answer("C", "C", OPTS, "A") == "C. blue ✗ (right answer: A. magenta)"
    assert judged_answer("A", "A", OPTS, "A") == "A. magenta ✓"
    assert judged_answer("C", "C", OPTS, None) == "C. blue"
    row = {"question": "Q?", "options": OPTS, "answer": "A"}
    assert example_truth(row, None, "Q?", "\n".join(OPTS)) == "A"
    assert example_truth(row, "upload.mp4", "Q?", "\n".join(OPTS)) is None  # someone else's video
    assert example_truth(row, None, "Another question?", "\n".join(OPTS)) is None  # an edited question
    assert example_truth(row, None, "Q?", "\n".join(OPTS[::-1])) is None  # reordered options
