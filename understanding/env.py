"""The VideoBrain episode: a state machine over turns, tool calls, frames shown, dedup rules and end conditions.

One ``Episode`` serves inference (``run_episode``), evaluation (the same, per item) and training (a trainer
calls ``reset`` then ``step(assistant_text)`` and feeds back the observation ``Message``). Each observation is a
user turn of text plus frames. End conditions: an answer; an output that breaks the protocol; a duplicate call
(uniform range within ±1 frame, identical clip prompt); a call after the budget; a bad range (start outside the
video, or a uniform range shorter than 8 frames, which ends the episode as in the reference); the turn limit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from vidlab.config import in_range, validate
from vidlab.understanding import protocol as P
from vidlab.understanding.agents import (
    MAX_SIZE,
    NUM_CLIP,
    NUM_INITIAL,
    NUM_UNIFORM,
    AgentError,
    UniformAgent,
    check_range,
    open_reader,
)
from vidlab.understanding.messages import Frame, Message, Policy

BAD_TURN = ("end", "last_tool_call")


@dataclass
class EpisodeConfig:
    """Budgets and behaviour of one episode; defaults are the reference's (checked on construction).

    ``frame_resize``: ``reference`` (default) shows every frame at exactly ``max_size`` (640x360), stretching
    other aspect ratios and upscaling small videos, as the authors' release does, because their checkpoints
    were trained on such frames; ``fit`` keeps aspect and only shrinks (``vidlab.video.fit_within``).
    ``on_bad_turn``: ``end`` (default) ends the episode, invalid, on a turn that breaks the protocol;
    ``last_tool_call`` executes the turn's last parsable ``<tool_call>`` instead (what the authors' inference
    loop does), and the trajectory stays invalid, since the reward's format check scores it 0 either way.
    The default is ``end`` so that training never spends rollouts continuing a trajectory worth nothing;
    use ``last_tool_call`` to reproduce the authors' evaluation of their checkpoints.
    """

    num_initial_frames: int = field(default=NUM_INITIAL, metadata=in_range(1, 1024))
    max_calls: int = field(
        default=5, metadata=in_range(0, 100)
    )  # after the last allowed call: "no more calls"
    max_turns: int = field(default=6, metadata=in_range(1, 101))  # assistant turns (5 calls + the answer)
    uniform_frames: int = field(default=NUM_UNIFORM, metadata=in_range(1, 1024))
    clip_frames: int = field(default=NUM_CLIP, metadata=in_range(1, 1024))
    min_uniform_range: int = field(
        default=8, metadata=in_range(1)
    )  # a shorter uniform range ends the episode
    max_size: tuple[int, int] = field(default=MAX_SIZE, metadata=in_range(1, 8192))
    frame_resize: Literal["reference", "fit"] = "reference"  # exactly max_size | keep aspect, only shrink
    on_bad_turn: Literal["end", "last_tool_call"] = "end"
    tools: tuple[Literal["uniform_sample", "clip_sample"], ...] = (
        P.UNIFORM,
        P.CLIP,
    )  # offered if an agent exists
    end_on_duplicate: bool = True  # a duplicate call fails the reward's format check anyway
    temperature: float = field(default=0.0, metadata=in_range(0.0, 10.0))
    max_new_tokens: int = field(default=1024, metadata=in_range(1))
    seed: int | None = field(default=None, metadata=in_range(0))

    def __post_init__(self) -> None:
        validate(self, "episode.")


@dataclass
class Trajectory:
    """Everything one episode produced; ``assistant_text`` is what ``reward.compute_score`` takes."""

    messages: list[Message]
    assistant_turns: list[str]
    answer: str | None
    predicted: str | None  # option letter for multiple choice, else None
    predicted_reason: str
    tool_calls: list[dict[str, Any]]
    frames_used: list[int]  # sorted unique frame indices shown (initial view + observations)
    valid: bool
    invalid_reason: str | None
    end_reason: str
    question: str = ""
    options: list[str] | None = None
    total_frames: int = 0
    fps: float = 0.0
    initial_frames: list[int] = field(default_factory=list)

    @property
    def assistant_text(self) -> str:
        """All assistant turns joined (one per line), as a trainer's ``solution_str`` without observations."""
        return "\n".join(self.assistant_turns)

    @property
    def num_tool_calls(self) -> int:
        return len(self.tool_calls)

    @property
    def num_turns(self) -> int:
        return len(self.assistant_turns)

    @property
    def num_frames_used(self) -> int:
        return len(self.frames_used)

    def reward_extra_info(self) -> dict[str, Any]:
        """What ``compute_score`` can use beyond the text: the frames shown."""
        return {"frames_used": self.frames_used, "initial_frame_indices": self.initial_frames}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record (pixels dropped; frames appear as ``<frame idx>`` in message text)."""
        return {
            "question": self.question,
            "options": self.options,
            "answer": self.answer,
            "predicted": self.predicted,
            "predicted_reason": self.predicted_reason,
            "valid": self.valid,
            "invalid_reason": self.invalid_reason,
            "end_reason": self.end_reason,
            "num_turns": self.num_turns,
            "num_tool_calls": self.num_tool_calls,
            "tool_calls": self.tool_calls,
            "frames_used": self.frames_used,
            "num_frames_used": self.num_frames_used,
            "total_frames": self.total_frames,
            "fps": self.fps,
            "assistant_turns": self.assistant_turns,
            "messages": [
                {
                    "role": m.role,
                    "text": "".join(p if isinstance(p, str) else f"<frame {p.index}>" for p in m.content),
                }
                for m in self.messages
            ],
        }


@dataclass
class StepResult:
    """What one assistant turn led to: the next observation (None when the episode ended) and why it ended."""

    observation: Message | None
    done: bool
    reason: str | None = None


class Episode:
    """The turn loop's state: call ``reset()`` for the opening messages, then ``step(text)`` per assistant turn."""

    def __init__(
        self,
        video: Any,
        question: str,
        options: Sequence[str] | None = None,
        config: EpisodeConfig | None = None,
        agents: Mapping[str, Any] | Sequence[Any] | None = None,
    ):
        self.config = config or EpisodeConfig()
        if options is not None and len(options) == 0:
            raise ValueError(
                f"question {question[:60]!r}: options is an empty list (use None for open-ended)"
            )
        self.question = question
        self.options = [str(o) for o in options] if options else None
        self.agents = _agent_map(agents)
        if video is None and P.UNIFORM in self.agents:
            video = self.agents[P.UNIFORM].reader
        if video is None:
            raise ValueError("Episode needs a video (a path or an open reader) or a uniform_sample agent")
        self.reader = open_reader(video)
        if P.UNIFORM not in self.agents:
            self.agents[P.UNIFORM] = UniformAgent(
                self.reader, self.config.uniform_frames, self.config.max_size, self.config.frame_resize
            )
        self.tools = tuple(t for t in self.config.tools if t in self.agents)
        self.total_frames = int(self.reader.num_frames)
        self.fps = float(self.reader.fps)
        self._reset_state()

    def _reset_state(self) -> None:
        self.messages: list[Message] = []
        self.turns: list[str] = []
        self.calls: list[P.ToolCall] = []
        self.call_records: list[dict[str, Any]] = []
        self.shown: set[int] = set()
        self.initial: list[int] = []
        self.answer: str | None = None
        self.done = False
        self.end_reason = ""
        self.invalid_reason: str | None = None
        self.format_violations: list[
            str
        ] = []  # bad turns whose last tool call ran (on_bad_turn=last_tool_call)

    # ----------------------------------------------------------------------------------------------- loop
    def reset(self) -> list[Message]:
        """Start (or restart) the episode: system + user turn with the initial frames."""
        self._reset_state()
        uniform = self.agents[P.UNIFORM]
        frames = uniform.initial(self.config.num_initial_frames)
        self.initial = [f.index for f in frames]
        self.shown.update(self.initial)
        self.messages = P.build_initial_messages(
            self.question, frames, self.total_frames, self.fps, self.options, tools=self.tools
        )
        return list(self.messages)

    def step(self, text: str) -> StepResult:
        """Consume one assistant turn; return the observation to show next, or end the episode."""
        if self.done:
            raise RuntimeError("episode already ended; call reset() to start again")
        if not self.messages:
            self.reset()
        text = text if isinstance(text, str) else str(text)
        self.turns.append(text)
        self.messages.append(Message("assistant", [text]))
        n = len(self.turns)
        parsed = P.parse_assistant_turn(text)
        if parsed.error:
            call = self._last_tool_call(text) if self.config.on_bad_turn == "last_tool_call" else None
            if call is None:
                return self._end(f"turn {n}: {parsed.error}", invalid=True)
            self.format_violations.append(f"turn {n}: {parsed.error} (its last <tool_call> was executed)")
        elif parsed.answer is not None:
            self.answer = parsed.answer
            return self._end("answered", invalid=False)
        else:
            call = parsed.tool_call
        assert call is not None
        if len(self.calls) >= self.config.max_calls:
            return self._end(
                f"turn {n}: tool call after the call budget ({self.config.max_calls}) was spent", True
            )
        if n >= self.config.max_turns:
            return self._end(f"turn limit ({self.config.max_turns}) reached without an answer", True)
        if call.name not in self.tools:
            return self._end(
                f"turn {n}: {call.name} is not offered in this episode (tools: {list(self.tools)})", True
            )
        dup = P.duplicate_reason(call, self.calls)
        if dup and self.config.end_on_duplicate:
            return self._end(f"turn {n}: {dup}", invalid=True)
        try:
            frames = self.execute(call)
        except AgentError as e:
            return self._end(f"turn {n}: {e}", invalid=True)
        self.calls.append(call)
        self.call_records.append(
            {
                "turn": n,
                "name": call.name,
                "arguments": dict(call.args),
                "frames": [f.index for f in frames],
                "timestamps": [round(f.timestamp, 4) for f in frames],
            }
        )
        self.shown.update(f.index for f in frames)
        final = len(self.calls) >= self.config.max_calls
        obs = P.build_observation(frames, len(self.calls), final)
        self.messages.append(obs)
        return StepResult(obs, False)

    @staticmethod
    def _last_tool_call(text: str) -> P.ToolCall | None:
        """The last ``<tool_call>...</tool_call>`` block of a turn, if it is a valid call (else None)."""
        blocks = P._blocks(text, "tool_call")
        if not blocks:
            return None
        call, err = P.parse_tool_call(blocks[-1])
        return None if err else call

    def execute(self, call: P.ToolCall) -> list[Frame]:
        """Run one validated tool call against its agent (range rules as in the reference)."""
        start, end = call.args["start_frame"], call.args["end_frame"]
        if call.name == P.UNIFORM:
            s, e = check_range(call.name, start, end, self.total_frames)
            if e - s < self.config.min_uniform_range:
                raise AgentError(
                    f"uniform_sample range [{s}, {e}) has {e - s} frames, fewer than {self.config.min_uniform_range}"
                )
            return self.agents[P.UNIFORM].sample(s, e)
        return self.agents[P.CLIP].sample(start, end, call.args["prompt"])

    def _end(self, reason: str, invalid: bool) -> StepResult:
        self.done = True
        self.end_reason = reason
        self.invalid_reason = reason if invalid else None
        return StepResult(None, True, reason)

    # --------------------------------------------------------------------------------------------- result
    def trajectory(self) -> Trajectory:
        """The episode so far as a ``Trajectory`` (valid only if it answered and passes the format check)."""
        invalid = self.invalid_reason
        if invalid is None and self.format_violations:
            invalid = self.format_violations[0]
        if self.done and invalid is None:
            check = P.check_format("\n".join(self.turns))
            if not check.valid:
                invalid = f"format check: {check.reason}"
        elif not self.done:
            invalid = "episode not finished"
        predicted, why = None, "open-ended question"
        if self.options:
            if self.answer is None:
                why = "no answer"
            else:
                predicted, why = P.extract_choice(
                    self.answer, P.option_letters(len(self.options)), self.options
                )
        return Trajectory(
            messages=list(self.messages),
            assistant_turns=list(self.turns),
            answer=self.answer,
            predicted=predicted,
            predicted_reason=why,
            tool_calls=[dict(r) for r in self.call_records],
            frames_used=sorted(self.shown),
            valid=invalid is None,
            invalid_reason=invalid,
            end_reason=self.end_reason,
            question=self.question,
            options=self.options,
            total_frames=self.total_frames,
            fps=self.fps,
            initial_frames=list(self.initial),
        )


def _agent_map(agents: Mapping[str, Any] | Sequence[Any] | None) -> dict[str, Any]:
    if agents is None:
        return {}
    if isinstance(agents, Mapping):
        out = {str(k): v for k, v in agents.items() if v is not None}
    else:
        out = {a.name: a for a in agents if a is not None}
    unknown = set(out) - set(P.TOOL_NAMES)
    if unknown:
        raise ValueError(f"unknown agent name(s) {sorted(unknown)}; known: {list(P.TOOL_NAMES)}")
    return out


def run_episode(
    policy: Policy,
    video: Any,
    question: str,
    options: Sequence[str] | None = None,
    config: EpisodeConfig | None = None,
    agents: Mapping[str, Any] | Sequence[Any] | None = None,
) -> Trajectory:
    """Run ``policy`` on one question until it answers, breaks the protocol, or hits a limit.

    ``video`` is a path or an open ``vidlab.video`` reader; ``agents`` maps tool names to agents (default:
    a ``UniformAgent`` over the video; ``clip_sample`` is offered only when a ``ClipAgent`` is given).
    """
    ep = Episode(video, question, options, config, agents)
    for _ in iter_episode(policy, ep):
        pass
    return ep.trajectory()


def iter_episode(policy: Policy, episode: Episode) -> Iterator[StepResult | None]:
    """Drive ``episode`` with ``policy`` turn by turn, yielding after the reset (``None``) and after every
    assistant turn (its ``StepResult``), so a caller (the demo) can show the trajectory as it unfolds."""
    cfg = episode.config
    messages = episode.reset()
    yield None
    while not episode.done:
        seed = None if cfg.seed is None else cfg.seed + len(episode.turns)
        outs = policy.generate(
            messages, num_samples=1, temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens, seed=seed
        )
        result = episode.step(outs[0] if outs else "")
        if result.observation is not None:
            messages = episode.messages
        yield result
