"""Protocol: templates, the never-raising turn parser, the trajectory format check, option-letter extraction."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vidlab.understanding import protocol as P
from vidlab.understanding.messages import Frame


def call(name: str = "uniform_sample", **args) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def turn(body: str, thought: str = "need more") -> str:
    return f"<thinking>{thought}</thinking>{body}"


def frames(indices):
    return [Frame(np.zeros((4, 6, 3), np.uint8), i, i / 10) for i in indices]


# ----------------------------------------------------------------------------------------------- templates
def test_system_prompt_lists_offered_tool_schemas_as_json():
    text = P.system_prompt()
    tools = json.loads(re.search(r"<tools>\n(.*)\n</tools>", text, re.DOTALL).group(1))
    assert [t["function"]["name"] for t in tools] == ["uniform_sample", "clip_sample"]
    assert tools[1]["function"]["parameters"]["required"] == ["start_frame", "end_frame", "prompt"]
    assert "16 uniformly sampled frames" in text
    only_uniform = P.system_prompt(("uniform_sample",))
    assert "clip_sample" not in only_uniform and "uniform_sample" in only_uniform
    assert "<tools>" not in P.system_prompt(())


def test_initial_messages_follow_reference_layout():
    msgs = P.build_initial_messages(
        "What colour is the ball?", frames([0, 13, 26]), 40, 10.0, ["red", "B. blue"]
    )
    assert [m.role for m in msgs] == ["system", "user"]
    user = msgs[1]
    text = user.content[0]
    assert text.startswith("Question: What colour is the ball?\nA. red\nB. blue\n")  # prefix not doubled
    assert "- Total frames: 40\n- FPS: 10\n" in text
    assert text.endswith(P.FORMAT_HINT)
    # each frame preceded by "\nframe {idx}: "
    assert user.content[1:] == [
        "\nframe 0: ",
        user.frames[0],
        "\nframe 13: ",
        user.frames[1],
        "\nframe 26: ",
        user.frames[2],
    ]
    assert [f.index for f in user.frames] == [0, 13, 26]


def test_observation_turns_and_no_more_calls_variant():
    obs = P.build_observation(frames([5, 9]), num_calls=2, final=False)
    assert obs.role == "user" and [f.index for f in obs.frames] == [5, 9]
    assert obs.text.startswith(P.FORMAT_HINT) and "update your range" in obs.text
    assert obs.text.endswith("\nframe 5: \nframe 9: ")
    final = P.build_observation(frames([5]), num_calls=5, final=True)
    assert final.text.startswith(P.FORMAT_HINT_FINAL)
    assert "called the tool 5 times" in final.text and "prohibited" in final.text


def test_strip_observations_removes_our_tagged_instructions():
    rollout = (
        turn(call(start_frame=0, end_frame=50))
        + "\n"
        + P.observation_text(1, False)
        + "\nframe 3: <image>\n"
        + turn("<answer>B</answer>", "ok")
    )
    stripped = P.strip_observations(rollout)
    assert P.FORMAT_HINT not in stripped and stripped.count("<thinking>") == 2
    assert P.observed_frame_indices(rollout) == [3]
    final = P.observation_text(5, True)
    assert P.strip_observations(final).strip() == ""


# ---------------------------------------------------------------------------------------------- turn parser
def test_parse_valid_call_and_answer():
    t = P.parse_assistant_turn(
        turn(call("clip_sample", start_frame="10", end_frame=99.7, prompt=" red ball "))
    )
    assert t.ok and t.thinking == "need more" and t.answer is None
    assert t.tool_call == P.ToolCall(
        "clip_sample", {"start_frame": 10, "end_frame": 99, "prompt": "red ball"}
    )
    a = P.parse_assistant_turn("preamble " + turn("<answer> C </answer>"))
    assert a.ok and a.answer == "C" and a.tool_call is None


@pytest.mark.parametrize(
    "text, reason",
    [
        ("just text", "missing <thinking>"),
        ("<thinking>a</thinking>", "neither <tool_call> nor <answer>"),
        ("<thinking></thinking><answer>A</answer>", "empty <thinking>"),
        ("<thinking>a</thinking><answer> </answer>", "empty <answer>"),
        ("<thinking>a<answer>A</answer>", "unbalanced <thinking>"),
        ("<thinking>a</thinking><thinking>b</thinking><answer>A</answer>", "2 <thinking> blocks"),
        ("<thinking>a</thinking><answer>A</answer><answer>B</answer>", "exactly one"),
        (turn(call(start_frame=0, end_frame=8) + "<answer>A</answer>"), "exactly one"),
        (turn("<tool_call>{not json}</tool_call>"), "not valid JSON"),
        (turn("<tool_call>[1, 2]</tool_call>"), "must be a JSON object"),
        (turn("<tool_call></tool_call>"), "empty <tool_call>"),
        (turn(call("zoom", start_frame=0, end_frame=9)), "unknown tool name 'zoom'"),
        (turn(call(start_frame=0)), "missing argument(s) end_frame"),
        (turn(call("clip_sample", start_frame=0, end_frame=9)), "missing argument(s) prompt"),
        (turn(call(start_frame=9, end_frame=9)), "must be < end_frame"),
        (turn(call(start_frame="x", end_frame=9)), "must be integers"),
        (turn(call(start_frame=True, end_frame=9)), "must be integers"),
        (turn(call("clip_sample", start_frame=0, end_frame=9, prompt="  ")), "non-empty string"),
        (
            turn('<tool_call>{"name": "uniform_sample", "arguments": "0, 9"}</tool_call>'),
            "'arguments' must be",
        ),
        (
            turn(
                '<tool_call>{"name": "uniform_sample", "arguments": {"start_frame": 1e999, "end_frame": 9}}</tool_call>'
            ),
            "integers",
        ),
    ],
)
def test_parse_reports_why_a_turn_is_invalid(text, reason):
    t = P.parse_assistant_turn(text)
    assert t.error is not None and reason in t.error, t.error


_FRAGMENTS = st.sampled_from(
    ["<thinking>", "</thinking>", "<tool_call>", "</tool_call>", "<answer>", "</answer>", "{", "}", '"name"', ":",
     '"uniform_sample"', '"clip_sample"', '"arguments"', '"start_frame"', '"end_frame"', '"prompt"', "1", "-3",
     "1e400", "NaN", "null", "[", "]", ",", "A", " ", "\n", '"'],
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), st.lists(_FRAGMENTS, max_size=40).map("".join)))
def test_parser_and_format_check_never_raise(text):
    t = P.parse_assistant_turn(text)
    if t.ok:
        assert (t.tool_call is None) != (t.answer is None)
        assert t.thinking
    else:
        assert isinstance(t.error, str) and t.error
    f = P.check_format(text)
    assert f.valid == (f.reason is None)
    if f.valid:
        assert f.answer


@settings(max_examples=100, deadline=None)
@given(st.integers(-5, 10**6), st.integers(-5, 10**6), st.text(min_size=1, max_size=20))
def test_parser_accepts_exactly_the_well_formed_calls(start, end, prompt):
    t = P.parse_assistant_turn(turn(call("clip_sample", start_frame=start, end_frame=end, prompt=prompt)))
    should = start < end and prompt.strip() != ""
    assert t.ok == should, t.error
    if should:
        assert t.tool_call.args == {"start_frame": start, "end_frame": end, "prompt": prompt.strip()}


def test_a_close_tag_before_its_open_tag_is_a_protocol_error_not_a_crash():
    # found by the property test above: balanced counts, no block (an IndexError before the fix)
    t = P.parse_assistant_turn("<thinking>{</thinking></tool_call><tool_call>")
    assert not t.ok and "malformed <tool_call>" in t.error
    t = P.parse_assistant_turn("<thinking>a</thinking><answer><answer>A</answer></answer>")
    assert not t.ok and "malformed <answer>" in t.error
    assert not P.check_format("<thinking>{</thinking></tool_call><tool_call>").valid


def test_parser_rejects_non_text():
    assert "not text" in P.parse_assistant_turn(None).error  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------- format check
def test_format_check_valid_trajectory():
    text = "\n".join(
        [
            turn(call(start_frame=0, end_frame=100)),
            turn(call("clip_sample", start_frame=0, end_frame=100, prompt="dog")),
            turn(call(start_frame=2, end_frame=100)),  # 2 frames away: not a repeat
            turn("<answer>first</answer>"),
            turn("<answer>B</answer>"),  # the last answer counts
        ]
    )
    f = P.check_format(text)
    assert f.valid and f.answer == "B" and f.num_tool_calls == 3


@pytest.mark.parametrize(
    "turns, reason",
    [
        ([turn(call(start_frame=0, end_frame=100)), turn(call(start_frame=1, end_frame=99)), turn("<answer>A</answer>")], "repeated uniform_sample"),
        ([turn(call(start_frame=0, end_frame=100)), turn(call(start_frame=0, end_frame=100)), turn("<answer>A</answer>")], "repeated uniform_sample"),
        ([turn(call("clip_sample", start_frame=0, end_frame=9, prompt="dog")), turn(call("clip_sample", start_frame=5, end_frame=90, prompt=" dog")), turn("<answer>A</answer>")], "repeated clip_sample prompt"),
        ([turn(call(start_frame=0, end_frame=100))], "no <answer>"),
        (["<thinking>x</thinking>", turn("<answer>A</answer>")], "2 <thinking> blocks but 0 <tool_call> + 1"),
        ([turn("<answer>A</answer>"), "<answer>"], "unbalanced <answer>"),
        ([turn("<answer>A</answer>"), turn("<answer> </answer>")], "last <answer> block is empty"),
        ([turn("<answer>A</answer>", thought=" ")], "empty <thinking>"),
        ([turn(call("zoom", start_frame=0, end_frame=9)), turn("<answer>A</answer>")], "unknown tool"),
        ([turn(call(start_frame=10, end_frame=3)), turn("<answer>A</answer>")], "must be < end_frame"),
    ],
)  # fmt: skip
def test_format_check_failures_name_the_reason(turns, reason):
    f = P.check_format("\n".join(turns))
    assert not f.valid and reason in f.reason, f.reason


def test_format_check_strips_observation_text_with_tags():
    rollout = (
        turn(call(start_frame=0, end_frame=50))
        + "<|im_end|>\n<|im_start|>user\n"
        + P.observation_text(5, True)
        + "\nframe 0: <|vision_start|><|image_pad|><|vision_end|>"
        + "<|im_end|>\n<|im_start|>assistant\n"
        + turn("<answer>B</answer>")
    )
    assert P.check_format(rollout).valid
    assert not P.check_format(rollout.replace(P.FORMAT_HINT_FINAL, P.FORMAT_HINT_FINAL[:-3])).valid


# ------------------------------------------------------------------------------------------- answer letters
@pytest.mark.parametrize(
    "reply, letter, rule",
    [
        ("B", "B", "the reply is the letter"),
        ("(c)", "C", "the reply is the letter"),
        ("D. a cat on a mat", "D", "opens the reply"),
        ("(B) The man leaves.", "B", "opens the reply"),
        ("I think it is C", "C", "ends the reply"),
        ("Answer: B", "B", "ends the reply"),  # the old lmms-eval extractor read this as A
        ("The best answer is B, since the ball is red.", "B", "follows an answer phrase"),
        ("after watching, (C) fits best, not the others", "C", "(X)"),
        ("A dog runs; then (D) is right, so", "D", "(X)"),
        ("**C**", "C", "the reply is the letter"),
        ("either A. or C. here, sure", "C", "X."),
        ("dog", "B", "matches an option's text"),
    ],
)
def test_extract_choice_rules(reply, letter, rule):
    got, why = P.extract_choice(reply, "ABCD", ["cat", "dog", "bird", "fish"])
    assert (got, why) == (letter, rule)


@pytest.mark.parametrize(
    "reply, reason",
    [
        ("Dancing", "no option letter (A-D)"),  # both lmms-eval extractors read this as D
        ("A man opens the door", "no option letter"),  # the article is not option A
        ("E", "letter E is not an option (A-D)"),
        ("The answer is E.", "letter E is not an option"),
        ("", "empty answer"),
        ("   ", "empty answer"),
    ],
)
def test_extract_choice_unparsable_is_none_with_reason(reply, reason):
    got, why = P.extract_choice(reply, "ABCD")
    assert got is None and reason in why


def test_extract_choice_respects_actual_options_and_mlvu_six():
    assert P.extract_choice("F", "ABCDEF") == ("F", "the reply is the letter")
    assert P.extract_choice("F", "ABCD")[0] is None
    assert P.extract_choice("x", []) == (None, "no option letters given")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80), st.integers(2, 6))
def test_extract_choice_never_raises_and_stays_in_options(text, n):
    letters = P.option_letters(n)
    got, why = P.extract_choice(text, letters)
    assert got is None or got in letters
    assert isinstance(why, str) and why
