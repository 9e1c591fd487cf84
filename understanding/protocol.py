"""VideoBrain's conversation protocol: prompt templates, the turn parser, the trajectory format check, answer letters.

Templates follow the authors' release in content: a system prompt with the two tool schemas, a user turn with
the question, total frames, fps and the output format, then ``frame {idx}: `` + image per initial frame; each
observation turn repeats the format line, says frames follow, and lists ``frame {idx}: `` + image; after the
last allowed call the observation says no more calls are allowed. Nothing here raises on model output: parsers
return what they found plus a reason when something is wrong.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from vidlab.understanding.messages import Frame, Message

UNIFORM: Final = "uniform_sample"
CLIP: Final = "clip_sample"
TOOL_NAMES = (UNIFORM, CLIP)

# The format lines are part of the trained protocol: keep them byte-identical to the reference.
FORMAT_HINT = (
    "Start with <thinking>. Format strictly as: <thinking>...</thinking><tool_call>...</tool_call> "
    "or <thinking>...</thinking><answer>...</answer>"
)
FORMAT_HINT_FINAL = "Start with <thinking>. Format strictly as: <thinking>...</thinking><answer>...</answer>"
OBS_HEADER = "Based on sampling, here are the following frames"
OBS_RETRY_NOTE = (
    'If you need to call the "uniform_sample" function again in this round, please update your range.\n'
    'If you need to call the "clip_sample" function again in this round, please refine your prompt for better retrieval.'
)
OBS_FINAL_NOTE = (
    "You have already called the tool {n} times. Further tool calls are prohibited in this round. "
    "Please provide the answer to this question in this round."
)

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    UNIFORM: {
        "type": "function",
        "function": {
            "name": UNIFORM,
            "description": "Uniformly sample 8 frames between start_frame and end_frame.",
            "parameters": {
                "type": "object",
                "properties": {
                    "start_frame": {"type": "number", "description": "Start frame index"},
                    "end_frame": {"type": "number", "description": "End frame index"},
                },
                "required": ["start_frame", "end_frame"],
            },
        },
    },
    CLIP: {
        "type": "function",
        "function": {
            "name": CLIP,
            "description": "Sample 4 frames within the frame range based on semantic relevance to a text prompt.",
            "parameters": {
                "type": "object",
                "properties": {
                    "start_frame": {"type": "number", "description": "Start frame"},
                    "end_frame": {"type": "number", "description": "End frame"},
                    "prompt": {"type": "string", "description": "Text prompt guiding semantic relevance"},
                },
                "required": ["start_frame", "end_frame", "prompt"],
            },
        },
    },
}

_SYSTEM_INTRO = (
    "You are a helpful assistant to answer video questions.\n\n"
    "You will initially see {n_init} uniformly sampled frames from the video. These initial frames may not be "
    "sufficient to answer the question accurately. You can use the provided tools to gather more targeted "
    "frames before answering."
)
_SYSTEM_NO_TOOLS = (
    "You are a helpful assistant to answer video questions.\n\n"
    "You will see {n_init} frames sampled from the video. Answer the question from these frames."
)
_SYSTEM_TOOLS = """# Tools

You can call one or more functions to assist with the user query, especially when the initial frames are insufficient.
You are provided with function signatures within `<tools></tools>` XML tags:

<tools>
{schemas}
</tools>

# How to call a tool

Return a JSON object with the function name and arguments inside XML tags:

<tool_call>
{{"name": "<function-name>", "arguments": {{ /* params */ }}}}
</tool_call>

**Examples:**
{examples}
# Instructions
{instructions}"""
_EXAMPLES = {
    UNIFORM: (
        "Uniform sampling for a specific time range:\n"
        '<tool_call>\n{"name": "uniform_sample", "arguments": {"start_frame": 0, "end_frame": 300}}\n</tool_call>\n'
    ),
    CLIP: (
        "Semantic sampling for finding specific content:\n"
        "<tool_call>\n"
        '{"name": "clip_sample", "arguments": {"start_frame": 0, "end_frame": 5000, "prompt": "person playing football"}}'
        "\n</tool_call>\n"
    ),
}
_INSTRUCTIONS = {
    None: "When you think there is insufficient information, you can obtain more frames by calling {tools}.",
    UNIFORM: "For problems such as inference, sorting, or summarization, `uniform_sample` can be considered first.",
    CLIP: (
        "For visual positioning and confirming specific information, `clip_sample` can be considered as a "
        "priority.\nWhen using `clip_sample`, a concise and to-the-point prompt is crucial. The meaning of the "
        "prompt should not be scattered, and the prompt should not be too long. A few words are sufficient."
    ),
}


# ----------------------------------------------------------------------------------------------- templates
def system_prompt(tools: Sequence[str] = TOOL_NAMES, num_initial_frames: int = 16) -> str:
    """The system turn: the task, the tool schemas (only the tools this episode offers) and how to call them."""
    tools = [t for t in TOOL_NAMES if t in tools]
    if not tools:
        return _SYSTEM_NO_TOOLS.format(n_init=num_initial_frames)
    schemas = "[\n" + ",\n".join(json.dumps(TOOL_SCHEMAS[t], indent=4) for t in tools) + "\n]"
    examples = "".join(f"\nExample {i} - {_EXAMPLES[t]}" for i, t in enumerate(tools, 1))
    names = " or ".join(f"`{t}`" for t in tools)
    lines = [_INSTRUCTIONS[None].format(tools=names)] + [_INSTRUCTIONS[t] for t in tools]
    instructions = "\n".join(f"{i}. {line}" for i, line in enumerate("\n".join(lines).split("\n"), 1))
    return (
        _SYSTEM_INTRO.format(n_init=num_initial_frames)
        + "\n\n"
        + _SYSTEM_TOOLS.format(schemas=schemas, examples=examples, instructions=instructions)
    )


_OPTION_PREFIX = re.compile(r"^\s*(?:\(?[A-Z]\)|[A-Z][.:]|\([A-Z]\))\s*")


def option_letters(n: int) -> list[str]:
    """The letters of ``n`` options: A, B, C, ..."""
    return [chr(65 + i) for i in range(n)]


def format_question(question: str, options: Sequence[str] | None = None) -> str:
    """The question with its options as ``A. text`` lines (lmms-eval style); prefixes like ``A.`` are not doubled."""
    if not options:
        return question.strip()
    lines = [
        f"{letter}. {_OPTION_PREFIX.sub('', str(text)).strip()}"
        for letter, text in zip(option_letters(len(options)), options)
    ]
    tail = "Answer with the option's letter from the given choices."
    return question.strip() + "\n" + "\n".join(lines) + "\n" + tail


def user_prompt(
    question: str, total_frames: int, fps: float, options: Sequence[str] | None = None, *, tools: bool = True
) -> str:
    """The first user turn's text (frames follow it): question, video information, output format."""
    hint = FORMAT_HINT if tools else FORMAT_HINT_FINAL
    fps_text = f"{fps:g}" if isinstance(fps, float) else str(fps)
    return (
        f"Question: {format_question(question, options)}\n\n# Video Information:\n- Total frames: {total_frames}\n"
        f"- FPS: {fps_text}\n\n# Output Format:\n{hint}"
    )


def frame_parts(frames: Sequence[Frame]) -> list[str | Frame]:
    """``\\nframe {idx}: `` before each frame, the way both the initial view and observations show frames."""
    parts: list[str | Frame] = []
    for f in frames:
        parts.append(f"\nframe {f.index}: ")
        parts.append(f)
    return parts


def build_initial_messages(
    question: str,
    frames: Sequence[Frame],
    total_frames: int,
    fps: float,
    options: Sequence[str] | None = None,
    *,
    tools: Sequence[str] = TOOL_NAMES,
) -> list[Message]:
    """System turn + first user turn (question, video info, format, then each initial frame after its label)."""
    sys_msg = Message("system", [system_prompt(tools, num_initial_frames=len(frames))])
    user = Message(
        "user", [user_prompt(question, total_frames, fps, options, tools=bool(tools))] + frame_parts(frames)
    )
    return [sys_msg, user]


def observation_text(num_calls: int, final: bool) -> str:
    """The instruction prefix of an observation turn (frames follow); ``final`` is the "no more calls" variant."""
    if final:
        return f"{FORMAT_HINT_FINAL}\n\n{OBS_HEADER}\n\n{OBS_FINAL_NOTE.format(n=num_calls)}"
    return f"{FORMAT_HINT}\n\n{OBS_HEADER}\n\n{OBS_RETRY_NOTE}"


def build_observation(frames: Sequence[Frame], num_calls: int, final: bool) -> Message:
    """A tool result as a user turn: prefix, then ``frame {idx}: `` + image per returned frame."""
    return Message("user", [observation_text(num_calls, final)] + frame_parts(frames))


# Observation text in our own format, as it shows up when a trainer concatenates the whole rollout.
_OBS_STRIP = re.compile(
    "|".join(
        [
            re.escape(f"{FORMAT_HINT}\n\n{OBS_HEADER}\n\n{OBS_RETRY_NOTE}"),
            re.escape(f"{FORMAT_HINT_FINAL}\n\n{OBS_HEADER}\n\n")
            + re.escape(OBS_FINAL_NOTE).replace(re.escape("{n}"), r"\d+"),
            re.escape(FORMAT_HINT),
            re.escape(FORMAT_HINT_FINAL),
        ]
    )
)
_FRAME_LINE = re.compile(r"(?m)^frame (\d+): ")


def strip_observations(text: str) -> str:
    """Remove our observation/format-instruction text (which itself contains tags) before checking a trajectory."""
    return _OBS_STRIP.sub("", text)


def observed_frame_indices(text: str) -> list[int]:
    """Frame indices listed as ``frame {idx}: `` lines in (observation) text, in order of appearance."""
    return [int(m) for m in _FRAME_LINE.findall(text)]


# -------------------------------------------------------------------------------------------------- parsing
@dataclass(frozen=True)
class ToolCall:
    """One validated tool call: the tool name and its arguments (frame numbers as ints)."""

    name: str
    args: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": dict(self.args)}


@dataclass(frozen=True)
class ParsedTurn:
    """What one assistant turn said; ``error`` says why it breaks the protocol (None when it does not)."""

    thinking: str | None = None
    tool_call: ToolCall | None = None
    answer: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


_TAGS = ("thinking", "tool_call", "answer")


def _blocks(text: str, tag: str) -> list[str]:
    return re.findall(rf"<{tag}>(.*?)</{tag}>", text, flags=re.DOTALL)


def _tag_counts(text: str) -> dict[str, tuple[int, int]]:
    return {t: (text.count(f"<{t}>"), text.count(f"</{t}>")) for t in _TAGS}


def _as_frame(value: Any) -> int | None:
    """Frame numbers as the reference reads them (``int(x)``): ints, finite floats, integer strings; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def parse_tool_call(content: str) -> tuple[ToolCall | None, str | None]:
    """Validate one ``<tool_call>`` body: JSON object, known name, required args, ``start < end``; never raises."""
    body = content.strip()
    if not body:
        return None, "empty <tool_call> block"
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, RecursionError, ValueError) as e:
        return None, f"tool call is not valid JSON ({type(e).__name__}: {str(e)[:80]})"
    if not isinstance(data, dict):
        return None, f"tool call must be a JSON object, got {type(data).__name__}"
    name = data.get("name")
    if name not in TOOL_NAMES:
        return None, f"unknown tool name {str(name)[:60]!r} (known: {', '.join(TOOL_NAMES)})"
    args = data.get("arguments", {})
    if not isinstance(args, dict):
        return None, f"{name}: 'arguments' must be a JSON object, got {type(args).__name__}"
    required = ("start_frame", "end_frame", "prompt") if name == CLIP else ("start_frame", "end_frame")
    missing = [k for k in required if args.get(k) is None]
    if missing:
        return None, f"{name}: missing argument(s) {', '.join(missing)}"
    start, end = _as_frame(args["start_frame"]), _as_frame(args["end_frame"])
    if start is None or end is None:
        return (
            None,
            f"{name}: start_frame/end_frame must be integers, got {args['start_frame']!r}, {args['end_frame']!r}",
        )
    if start >= end:
        return None, f"{name}: start_frame ({start}) must be < end_frame ({end})"
    out: dict[str, Any] = {"start_frame": start, "end_frame": end}
    if name == CLIP:
        prompt = args["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            return None, f"{name}: prompt must be a non-empty string"
        out["prompt"] = prompt.strip()
    return ToolCall(name, out), None


def parse_assistant_turn(text: str) -> ParsedTurn:
    """Parse one assistant turn: exactly one non-empty ``<thinking>`` then one ``<tool_call>`` or ``<answer>``.

    Never raises; a turn that breaks the protocol comes back with what could be read plus ``error``.
    """
    if not isinstance(text, str):
        return ParsedTurn(error=f"assistant output is not text ({type(text).__name__})")
    counts = _tag_counts(text)
    thinking = _blocks(text, "thinking")
    calls = _blocks(text, "tool_call")
    answers = _blocks(text, "answer")
    think_text = thinking[0].strip() if thinking else None
    answer_text = answers[-1].strip() if answers else None

    def fail(reason: str, call: ToolCall | None = None) -> ParsedTurn:
        return ParsedTurn(think_text, call, answer_text, reason)

    for tag, (n_open, n_close) in counts.items():
        if n_open != n_close:
            return fail(f"unbalanced <{tag}> tags ({n_open} open, {n_close} close)")
    for tag, found in (("thinking", thinking), ("tool_call", calls), ("answer", answers)):
        if len(found) != counts[tag][0]:  # balanced counts, but a close before its open, or nested blocks
            return fail(f"malformed <{tag}> blocks (nested, or </{tag}> before <{tag}>)")
    n_think, n_call, n_ans = counts["thinking"][0], counts["tool_call"][0], counts["answer"][0]
    if n_think == 0:
        return fail("missing <thinking> block")
    if n_think > 1:
        return fail(f"{n_think} <thinking> blocks in one turn (expected 1)")
    if n_call + n_ans == 0:
        return fail("turn has neither <tool_call> nor <answer>")
    if n_call + n_ans > 1:
        return fail(
            f"turn has {n_call} <tool_call> and {n_ans} <answer> blocks (expected exactly one of them)"
        )
    if not think_text:
        return fail("empty <thinking> block")
    if n_ans:
        if not answer_text:
            return fail("empty <answer> block")
        return ParsedTurn(think_text, None, answer_text, None)
    call, err = parse_tool_call(calls[0])
    if err:
        return fail(err)
    return ParsedTurn(think_text, call, None, None)


# ---------------------------------------------------------------------------------------------- format check
def _near(a: tuple[int, int], b: tuple[int, int], tol: int = 1) -> bool:
    return abs(a[0] - b[0]) <= tol and abs(a[1] - b[1]) <= tol


def duplicate_reason(call: ToolCall, history: Sequence[ToolCall]) -> str | None:
    """Why ``call`` repeats an earlier one (uniform range within ±1 frame, or identical clip prompt), else None."""
    for prev in history:
        if prev.name != call.name:
            continue
        if call.name == UNIFORM:
            a = (call.args["start_frame"], call.args["end_frame"])
            b = (prev.args["start_frame"], prev.args["end_frame"])
            if _near(a, b):
                return f"repeated uniform_sample range {list(a)} (previous {list(b)}, within ±1 frame)"
        elif call.args["prompt"] == prev.args["prompt"]:
            return f"repeated clip_sample prompt {call.args['prompt'][:60]!r}"
    return None


@dataclass
class FormatResult:
    """The trajectory-level format check: valid or the first reason it fails, plus the final answer and calls."""

    valid: bool
    reason: str | None
    answer: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)

    @property
    def num_tool_calls(self) -> int:
        return len(self.tool_calls)


def check_format(solution_str: str) -> FormatResult:
    """The reward's format check over a whole trajectory's text (observation text stripped first).

    Balanced tags; #thinking = #tool_call + #answer; no empty thinking/tool_call blocks; at least one answer and
    the last one non-empty; every call valid JSON with a known name, integer frames and start < end, a non-empty
    clip prompt; no repeated uniform range (±1 frame) or identical clip prompt. Never raises.
    """
    if not isinstance(solution_str, str):
        return FormatResult(False, f"solution is not text ({type(solution_str).__name__})", None)
    text = strip_observations(solution_str)
    counts = _tag_counts(text)
    for tag, (n_open, n_close) in counts.items():
        if n_open != n_close:
            return FormatResult(False, f"unbalanced <{tag}> tags ({n_open} open, {n_close} close)", None)
    n_think, n_call, n_ans = counts["thinking"][0], counts["tool_call"][0], counts["answer"][0]
    if n_think != n_call + n_ans:
        return FormatResult(
            False, f"{n_think} <thinking> blocks but {n_call} <tool_call> + {n_ans} <answer> blocks", None
        )
    if any(not t.strip() for t in _blocks(text, "thinking")):
        return FormatResult(False, "empty <thinking> block", None)
    answers = _blocks(text, "answer")
    if not answers:
        return FormatResult(False, "no <answer> block", None)
    answer = answers[-1].strip()
    if not answer:
        return FormatResult(False, "the last <answer> block is empty", None)
    calls: list[ToolCall] = []
    for body in _blocks(text, "tool_call"):
        call, err = parse_tool_call(body)
        if err:
            return FormatResult(False, err, answer, calls)
        dup = duplicate_reason(call, calls)
        if dup:
            return FormatResult(False, dup, answer, calls)
        calls.append(call)
    return FormatResult(True, None, answer, calls)


# ------------------------------------------------------------------------------------------ answer letters
_ANSWER_PHRASE = re.compile(
    r"(?:the\s+)?(?:best\s+|correct\s+|final\s+|right\s+)?(?:answer|option|choice)\s*(?:is|would\s+be|should\s+be|:)?\s*[:\-]?\s*",
    flags=re.IGNORECASE,
)
_STRIP_CHARS = " \t\r\n*_`'\"[]{}"


def _reply_and_letters(text: Any, options_letters: Any) -> tuple[str, str]:
    """The stripped reply and the option letters as one string (``"ABCD"``); on bad input
    ``(reason, "")``. Shared by both extractors so they read their input the same way."""
    letters = [str(x).strip().upper() for x in options_letters if str(x).strip()]
    letters = [x for x in letters if len(x) == 1 and "A" <= x <= "Z"]
    if not letters:
        return "no option letters given", ""
    if not isinstance(text, str):
        return f"answer is not text ({type(text).__name__})", ""
    reply = text.strip().strip(_STRIP_CHARS).strip()
    if not reply:
        return "empty answer", ""
    return reply, "".join(letters)


def extract_choice(
    text: str, options_letters: Sequence[str], options_text: Sequence[str] | None = None
) -> tuple[str | None, str]:
    """The option letter a reply chooses, and why; ``(None, reason)`` when it names no valid option.

    lmms-eval's rules in priority order (letter opens the reply; ends it; follows "the answer is"; ``(X)``;
    ``X.``; ``X:``; ``X)``; ``X ``), ties to the later position, but only the question's own uppercase option
    letters count and a letter must stand alone ("Dancing" is not D; "A man ..." is the article, not A).
    With ``options_text`` a reply that is exactly one option's text also counts. Never raises.
    """
    reply, letters = _reply_and_letters(text, options_letters)
    if not letters:
        return None, reply
    allowed = letters
    # A lone lowercase letter ("b", "(c)") is unambiguous.
    lone = re.fullmatch(r"\(?([A-Za-z])\)?[.:]?", reply)
    if lone:
        cand = lone.group(1).upper()
        if cand in letters:
            return cand, "the reply is the letter"
        return None, f"letter {cand} is not an option ({allowed[0]}-{allowed[-1]})"
    L = f"[{re.escape(allowed)}]"
    solo = rf"(?<![A-Za-z0-9])({L})(?![A-Za-z0-9])"
    article = re.compile(r"A [a-z]")
    rules: list[tuple[str, re.Pattern[str]]] = [
        ("opens the reply", re.compile(rf"^\(?({L})(?:$|[.):,;\s])")),
        ("ends the reply", re.compile(rf"(?<![A-Za-z0-9])\(?({L})\)?[.!]?$")),
        (
            "follows an answer phrase",
            re.compile(_ANSWER_PHRASE.pattern + rf"\(?({L})(?![A-Za-z0-9])", re.IGNORECASE),
        ),
        ("(X)", re.compile(rf"\(({L})\)")),
        ("X.", re.compile(solo + r"\.")),
        ("X:", re.compile(solo + ":")),
        ("X)", re.compile(solo + r"\)")),
        ("X followed by a space", re.compile(solo + " ")),
    ]
    for name, pattern in rules:
        best: tuple[int, str] | None = None
        for m in pattern.finditer(reply):
            letter = m.group(m.lastindex or 1)
            if letter not in letters:  # the answer-phrase rule is case-insensitive on the phrase only
                continue
            if (
                letter == "A"
                and article.match(reply, m.start(m.lastindex or 1))
                and name != "follows an answer phrase"
            ):
                continue
            pos = m.start(m.lastindex or 1)
            if best is None or pos >= best[0]:
                best = (pos, letter)
        if best is not None:
            return best[1], name
    if options_text:
        norm = _norm_text(reply)
        hits = [
            letters[i] for i, t in enumerate(options_text) if i < len(letters) and _norm_text(str(t)) == norm
        ]
        if len(hits) == 1:
            return hits[0], "matches an option's text"
    other = re.search(r"(?<![A-Za-z0-9])\(?([A-Z])\)?(?![A-Za-z0-9])", reply)
    if other and other.group(1) not in letters and not (other.group(1) in "AI" and len(reply) > 2):
        return None, f"letter {other.group(1)} is not an option ({allowed[0]}-{allowed[-1]})"
    return None, f"no option letter ({allowed[0]}-{allowed[-1]}) found in {reply[:60]!r}"


def _norm_text(s: str) -> str:
    s = _OPTION_PREFIX.sub("", s.strip())
    return re.sub(r"[^a-z0-9]+", " ", s.lower()).strip()


# ---------------------------------------------------------------------------------- the reward's strict reading
_PICK_PHRASE = (
    r"(?:(?:the\s+)?(?:best\s+|correct\s+|final\s+|right\s+)?(?:answer|option|choice)\s*(?:is|would\s+be|should\s+be"
    r"|must\s+be|:|-)?\s*(?:option\s+|choice\s+)?"
    r"|\b(?:i\s+)?(?:choose|chose|pick|select|go\s+with|opt\s+for)\s+(?:option\s+|choice\s+)?)"
)
_NEGATIVE_AFTER = (
    r"\s+(?:is|are|seems?|would\s+be)\s+(?:not\b|incorrect|wrong|false|unlikely|ruled\s+out|eliminated)"
)
_NEGATIVE_BEFORE = (
    r"(?:\bnot|n't|\brule\s+out|\beliminate|\bexclude|\bexcluding|\bexcept|\bagainst)\s+(?:option\s+)?"
)
_SENTENCE_END = re.compile(r"[.;!?\n]")


def strict_choice(
    text: str, options_letters: Sequence[str], options_text: Sequence[str] | None = None
) -> tuple[str | None, str]:
    """The one option letter a reply commits to, for the reward; ``(None, reason)`` for anything ambiguous.

    Stricter than :func:`extract_choice` (which stays for evaluation, with lmms-eval's documented ranking):
    a hedge earns nothing. Rules, in order:

    1. the reply is a letter (``B``, ``(b)``, ``B.``) or exactly one option's text (with or without its letter);
    2. letters that the reply rules out are dropped: ``B is incorrect``, ``A and B are wrong``, ``not C``;
    3. explicit picks (``the answer is C``, ``answer: C``, ``I choose A because ...``, ``option D``, or a reply
       that opens with ``C.`` / ``(C)`` / ``C)`` / ``C:``) must all name the same letter, with no other
       option letter later in the same sentence (``the answer is C or D`` is a hedge);
    4. with no explicit pick, exactly one distinct stand-alone option letter may remain (``D and A``,
       ``A\\nD``, ``either C or B`` earn nothing). An ``A``/``I`` followed by a lowercase word is the
       article / pronoun, not a letter.
    Never raises.
    """
    reply, letters = _reply_and_letters(text, options_letters)
    if not letters:
        return None, reply
    allowed = letters
    span = f"({allowed[0]}-{allowed[-1]})"
    lone = re.fullmatch(r"\(?([A-Za-z])\)?[.:]?", reply)
    if lone:
        cand = lone.group(1).upper()
        return (
            (cand, "the reply is the letter")
            if cand in letters
            else (None, f"letter {cand} is not an option {span}")
        )
    if options_text:
        norm = _norm_text(reply)
        hits = {
            letters[i] for i, t in enumerate(options_text) if i < len(letters) and _norm_text(str(t)) == norm
        }
        prefixed = re.match(r"^\(?([A-Z])\)?[.):]\s*(.+)$", reply, flags=re.DOTALL)
        if prefixed and prefixed.group(1) in letters:
            i = letters.index(prefixed.group(1))
            if i < len(options_text) and _norm_text(str(options_text[i])) == _norm_text(prefixed.group(2)):
                return prefixed.group(1), "the reply is the option's letter and text"
        if len(hits) == 1:
            return hits.pop(), "matches an option's text"
    L = f"[{re.escape(allowed)}]"
    solo = rf"\(?({L})\)?(?![A-Za-z0-9])"
    # 2. letters the reply rules out
    ruled_out: set[int] = set()
    group = rf"(?<![A-Za-z0-9])\(?{L}\)?(?:\s*(?:,|and|or|&|/)\s*\(?{L}\)?)*"
    for m in re.finditer(group + _NEGATIVE_AFTER, reply, flags=re.IGNORECASE):
        ruled_out.update(range(m.start(), m.end()))
    for m in re.finditer(
        _NEGATIVE_BEFORE + rf"(?<![A-Za-z0-9])\(?{L}\)?(?![A-Za-z0-9])", reply, flags=re.IGNORECASE
    ):
        ruled_out.update(range(m.start(), m.end()))

    def standalone(start: int = 0, end: int | None = None) -> list[tuple[int, str]]:
        found = []
        for m in re.finditer(rf"(?<![A-Za-z0-9]){solo}", reply[: len(reply) if end is None else end]):
            pos = m.start(1)
            if pos < start or pos in ruled_out:
                continue
            letter = m.group(1)
            if letter in "AI" and re.match(r"[A-Z] [a-z]", reply[pos : pos + 3]):
                continue  # the article "A man ...", the pronoun "I think ..."
            found.append((pos, letter))
        return found

    # 3. explicit picks
    picks: list[tuple[int, str]] = []
    opening = re.match(rf"^(?:\(({L})\)|({L})[.):])", reply)
    if opening:
        picks.append((0, opening.group(1) or opening.group(2)))
    for m in re.finditer(_PICK_PHRASE + rf"\(?({L})\)?(?![A-Za-z0-9])", reply, flags=re.IGNORECASE):
        letter = m.group(m.lastindex or 1)
        pos = m.start(m.lastindex or 1)
        if letter in letters and letter == reply[pos] and pos not in ruled_out:
            picks.append((pos, letter))
    if picks:
        chosen = {p[1] for p in picks}
        if len(chosen) > 1:
            return None, f"the reply picks several letters ({', '.join(sorted(chosen))})"
        letter = chosen.pop()
        for pos, _ in picks:
            stop = _SENTENCE_END.search(reply, pos + 1)
            others = {x for _, x in standalone(pos + 1, stop.start() if stop else None) if x != letter}
            if others:
                return None, f"hedge: {letter} and {', '.join(sorted(others))} in one sentence"
        return letter, "explicit pick"
    # 4. one stand-alone letter
    found = {x for _, x in standalone()}
    if len(found) == 1:
        return found.pop(), "the only option letter in the reply"
    if len(found) > 1:
        return None, f"several option letters ({', '.join(sorted(found))}) and no single pick"
    return None, f"no option letter {span} found in {reply[:60]!r}"
