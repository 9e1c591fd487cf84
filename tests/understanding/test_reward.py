"""Reward: R = 0 on a format failure, else 0.05 + Acc + B, with B exactly per the behaviour table."""

from __future__ import annotations

import json

import pytest

from vidlab.understanding import protocol as P
from vidlab.understanding.judge import RuleJudge
from vidlab.understanding.reward import behaviour_bonus, compute_score, score_trajectory

KEYS = {"score", "format", "acc", "bonus", "num_tool_calls", "frames_used"}
OPTS = {"options": ["cat", "dog", "bird", "fish"]}


def call(name="uniform_sample", **args) -> str:
    return f"<thinking>look</thinking><tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def answer(text: str) -> str:
    return f"<thinking>so</thinking><answer>{text}</answer>"


DIRECT = answer("B")
WITH_TOOL = call(start_frame=0, end_frame=100) + "\n" + answer("B")
WRONG_DIRECT = answer("C")
WRONG_TOOL = call(start_frame=0, end_frame=100) + "\n" + answer("C")


# (classification, solution, expected score) — every cell of the table
@pytest.mark.parametrize(
    "cls, solution, score, bonus",
    [
        ("direct", DIRECT, 1.55, 0.5),
        ("direct", WITH_TOOL, 1.05, 0.0),
        ("adaptive", DIRECT, 1.55, 0.5),
        ("adaptive", WITH_TOOL, 1.55, 0.5),
        ("active", DIRECT, 1.05, 0.0),
        ("active", WITH_TOOL, 1.55, 0.5),
        ("direct", WRONG_DIRECT, 0.05, 0.0),
        ("direct", WRONG_TOOL, 0.05, 0.0),
        ("adaptive", WRONG_DIRECT, 0.05, 0.0),
        ("adaptive", WRONG_TOOL, 0.05, 0.0),
        ("active", WRONG_DIRECT, 0.05, 0.0),
        ("active", WRONG_TOOL, 0.25, 0.2),
        ("", DIRECT, 1.05, 0.0),  # unknown class: no bonus (as the reference)
        ("F", WRONG_TOOL, 0.25, 0.2),  # the release's letter labels are accepted
        ("a", DIRECT, 1.55, 0.5),
    ],
)
def test_reward_table(cls, solution, score, bonus):
    r = compute_score("lvb", solution, "B", {"classification": cls, "question_type": "mc", **OPTS})
    assert set(r) == KEYS
    assert r["score"] == pytest.approx(score) and r["bonus"] == pytest.approx(bonus)
    assert r["format"] == 0.05
    assert r["num_tool_calls"] == (1 if "tool_call" in solution else 0)


def test_behaviour_bonus_function_matches_table():
    table = {
        ("direct", 1, 0): 0.5, ("direct", 1, 1): 0.0, ("adaptive", 1, 0): 0.5, ("adaptive", 1, 1): 0.5,
        ("active", 1, 0): 0.0, ("active", 1, 1): 0.5, ("active", 0, 1): 0.2, ("active", 0, 0): 0.0,
        ("direct", 0, 1): 0.0, ("adaptive", 0, 1): 0.0,
    }  # fmt: skip
    for (cls, acc, u), b in table.items():
        assert behaviour_bonus(cls, float(acc), bool(u)) == b, (cls, acc, u)


@pytest.mark.parametrize(
    "solution",
    [
        "<answer>B</answer>",  # no thinking
        call(start_frame=0, end_frame=100),  # no answer
        call(start_frame=0, end_frame=100) + call(start_frame=1, end_frame=101) + answer("B"),  # repeat ±1
        call("clip_sample", start_frame=0, end_frame=9, prompt="cat")
        + call("clip_sample", start_frame=0, end_frame=90, prompt="cat")
        + answer("B"),
        answer(""),
    ],
)
def test_format_failure_scores_zero(solution):
    r = compute_score("x", solution, "B", {"classification": "adaptive", **OPTS})
    assert (r["score"], r["format"], r["acc"], r["bonus"]) == (0.0, 0.0, 0.0, 0.0)
    d = score_trajectory(solution, "B", {"classification": "adaptive", **OPTS})
    assert not d.valid and d.reason


def test_answer_not_an_option_letter_is_wrong_with_reason():
    d = score_trajectory(answer("E"), "B", {"classification": "direct", **OPTS})
    assert d.valid and d.acc == 0.0 and d.predicted is None and "E is not an option" in d.predicted_reason
    d = score_trajectory(answer("Dancing"), "D", {"classification": "direct", **OPTS})
    assert d.acc == 0.0 and "no option letter" in d.predicted_reason


@pytest.mark.parametrize("gt", ["B", "(B)", 1, "1", "dog"])
def test_ground_truth_forms(gt):
    assert (
        compute_score("x", DIRECT, gt, {"classification": "direct", "question_type": "mc", **OPTS})["acc"]
        == 1.0
    )


def test_letters_from_question_text_when_options_absent():
    q = "What is shown?\n(A) cat\n(B) dog\n(C) bird"
    assert compute_score("x", answer("D"), "D", {"question": q, "question_type": "mc"})["acc"] == 0.0
    assert compute_score("x", answer("C"), "C", {"question": q, "question_type": "mc"})["acc"] == 1.0


def test_observation_turns_in_solution_str_are_ignored():
    rollout = (
        call(start_frame=0, end_frame=50)
        + "<|im_end|>\n<|im_start|>user\n"
        + P.observation_text(1, False)
        + "\nframe 0: <|image_pad|>\nframe 7: <|image_pad|>\nframe 49: <|image_pad|><|im_end|>\n<|im_start|>assistant\n"
        + answer("B")
    )
    r = compute_score(
        "x", rollout, "B", {"classification": "active", **OPTS, "initial_frame_indices": [0, 10, 20]}
    )
    assert r["score"] == pytest.approx(1.55) and r["num_tool_calls"] == 1
    assert r["frames_used"] == 5  # {0, 10, 20} ∪ {0, 7, 49}


def test_frames_used_from_episode_or_nominal():
    assert compute_score("x", WITH_TOOL, "B", {"frames_used": [1, 2, 3, 3]})["frames_used"] == 3
    assert compute_score("x", WITH_TOOL, "B", {"frames_used": 21})["frames_used"] == 21
    clip_then = call("clip_sample", start_frame=0, end_frame=9, prompt="cat") + WITH_TOOL
    assert compute_score("x", clip_then, "B", {})["frames_used"] == 16 + 4 + 8  # nominal count


def test_open_ended_uses_the_judge():
    extra = {"classification": "active", "question_type": "oe", "question": "What does he hold?"}
    r = compute_score(
        "x", call(start_frame=0, end_frame=99) + answer("a red umbrella"), "red umbrella", extra
    )
    assert r["acc"] == 1.0 and r["score"] == pytest.approx(1.55)
    r = compute_score(
        "x", call(start_frame=0, end_frame=99) + answer("a blue umbrella"), "red umbrella", extra
    )
    assert 0 < r["acc"] < 1 and r["bonus"] == 0.2  # Active + tool use on a partial answer
    assert r["score"] == pytest.approx(0.05 + r["acc"] + 0.2)

    class Half:
        name = "half"

        def score(self, question, reference, answer):
            assert question == "What does he hold?" and reference == "red umbrella"
            return 0.5

    d = score_trajectory(answer("x"), "red umbrella", extra, judge=Half())
    assert d.acc == 0.5 and d.bonus == 0.0 and "judge half" in d.predicted_reason


def test_question_type_inferred_when_missing():
    assert score_trajectory(answer("three"), "3", {"classification": "direct"}, judge=RuleJudge()).acc == 1.0
    assert score_trajectory(answer("B"), "B", {}).question_type == "mc"


def test_non_text_solution_scores_zero():
    assert compute_score("x", None, "B", {})["score"] == 0.0  # type: ignore[arg-type]


def test_trl_reward_function_matches_compute_score():
    from vidlab.understanding.reward import trl_reward

    conv = [{"role": "assistant", "content": WITH_TOOL}]
    got = trl_reward(
        ["p1", "p2", "p3"],
        [DIRECT, conv, "garbage"],
        answer=["B", "B", "B"],
        classification=["direct", "active", "adaptive"],
        options=[OPTS["options"]] * 3,
    )
    assert got == pytest.approx([1.55, 1.55, 0.0])
