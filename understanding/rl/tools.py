"""VideoBrain's two agents as verl tools: subclasses of verl's real ``BaseTool``.

verl creates a tool instance per call (``create`` -> ``execute`` -> ``release``), so nothing that must survive
between calls lives on the instance. The per-sample state (video, total frames, fps, the call count, the call
history used for the duplicate rule, the frames shown) lives where verl keeps per-trajectory state across calls:
``agent_data.extra_fields["videobrain"]`` (verl's ``AgentData``, which the agent loop passes to ``execute`` as
``agent_data=``; its docstring reserves ``extra_fields`` for tool session data). It is a plain JSON-able dict.

``execute`` returns ``(ToolResponse(text=<observation prefix>, image=[PIL frames]), 0.0, metrics)`` with
``metrics["frames"]`` the frame indices in the order of the images, so the agent loop can interleave
``frame {idx}: <image>`` lines exactly as ``vidlab.understanding.protocol.build_observation`` does. A request the
reference refuses (start outside the video, a uniform range under 8 frames, a duplicate, a call past the budget)
comes back as a text-only response with ``metrics["error"]`` set; the VideoBrain agent loop ends the episode on it.

Agents are cached per rollout worker process: one reader per video, one CLIP model per worker (text prompts are
embedded by that model), candidate embeddings served from the cached, memory-mapped ``FrameIndex`` (read-only and
shared across workers through the page cache; a candidate missing from it is added once under a file lock).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from typing import Any
from uuid import uuid4

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from vidlab.understanding import protocol as P
from vidlab.understanding.agents import MAX_SIZE, NUM_CLIP, NUM_UNIFORM, AgentError, check_range
from vidlab.understanding.policies.images import to_pil

SESSION_KEY = "videobrain"


# ------------------------------------------------------------------------------------------ session state
def new_session(
    video: str, total_frames: int, fps: float, initial_frames: list[int] | None = None, max_calls: int = 5
) -> dict[str, Any]:
    """The per-sample state as stored in ``agent_data.extra_fields["videobrain"]``."""
    shown = sorted({int(i) for i in initial_frames or []})
    return {
        "video": str(video),
        "total_frames": int(total_frames),
        "fps": float(fps),
        "max_calls": int(max_calls),
        "num_calls": 0,
        "calls": [],  # {"name", "arguments", "frames"} per executed call, in order
        "initial_frames": list(shown),
        "frames_shown": shown,
    }


def get_session(agent_data: Any) -> dict[str, Any] | None:
    extra = getattr(agent_data, "extra_fields", None)
    return extra.get(SESSION_KEY) if isinstance(extra, dict) else None


def history(session: dict[str, Any]) -> list[P.ToolCall]:
    return [P.ToolCall(c["name"], dict(c["arguments"])) for c in session["calls"]]


# ------------------------------------------------------------------------------------------ worker agents
class WorkerAgents:
    """Per-process cache of readers, agents, the CLIP model and frame indices (LRU over videos)."""

    def __init__(self, max_videos: int = 64):
        self.max_videos = max_videos
        self._lock = threading.Lock()
        self._uniform: OrderedDict[tuple, Any] = OrderedDict()
        self._clip: OrderedDict[tuple, Any] = OrderedDict()
        self._models: dict[str, Any] = {}

    def _lru(self, cache: OrderedDict, key: tuple, make: Any) -> Any:
        with self._lock:
            if key in cache:
                cache.move_to_end(key)
                return cache[key]
        value = make()
        with self._lock:
            cache[key] = value
            while len(cache) > self.max_videos:
                cache.popitem(last=False)
        return value

    def uniform(self, video: str, num_frames: int = NUM_UNIFORM, max_size: tuple[int, int] = MAX_SIZE) -> Any:
        from vidlab.understanding.agents import UniformAgent

        return self._lru(
            self._uniform, (video, num_frames, max_size), lambda: UniformAgent(video, num_frames, max_size)
        )

    def clip_model(self, spec: str, device: str = "auto") -> Any:
        with self._lock:
            if spec in self._models:
                return self._models[spec]
        from vidlab.clip import load_model

        model = load_model(spec, device=device)
        with self._lock:
            return self._models.setdefault(spec, model)

    def clip(
        self,
        video: str,
        model_spec: str,
        sampling: str = "fps=1",
        cache_dir: str | None = None,
        parity: bool = True,
        num_frames: int = NUM_CLIP,
        max_size: tuple[int, int] = MAX_SIZE,
        device: str = "auto",
    ) -> Any:
        from vidlab.clip import FrameIndex
        from vidlab.understanding.agents import ClipAgent

        def make() -> Any:
            model = self.clip_model(model_spec, device)
            index = FrameIndex.build(video, model, sampling, cache_dir=cache_dir, progress=False)
            return ClipAgent(index, model, parity, reader=video, num_frames=num_frames, max_size=max_size)

        return self._lru(
            self._clip, (video, model_spec, sampling, cache_dir, parity, num_frames, max_size), make
        )


WORKER_AGENTS = WorkerAgents()


# ----------------------------------------------------------------------------------------------- tools
class VideoBrainTool(BaseTool):
    """Shared lifecycle of the two tools; subclasses say which agent runs and how."""

    tool_name = ""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None):
        if tool_schema is None:
            tool_schema = OpenAIFunctionToolSchema.model_validate(P.TOOL_SCHEMAS[self.tool_name])
        super().__init__(config or {}, tool_schema)
        if self.name != self.tool_name:
            raise ValueError(
                f"{type(self).__name__} must be declared with function name {self.tool_name!r}, got {self.name!r}"
            )
        cfg = self.config
        self.max_calls = int(cfg.get("max_calls", 5))
        w, h = (int(x) for x in cfg.get("max_size", MAX_SIZE))
        self.max_size: tuple[int, int] = (w, h)
        self._instances: dict[str, dict[str, Any]] = {}

    async def create(
        self, instance_id: str | None = None, create_kwargs: dict | None = None, **kwargs: Any
    ) -> tuple[str, ToolResponse]:
        """Remember this call's ``create_kwargs`` (from ``extra_info.tools_kwargs[name].create_kwargs``)."""
        iid = instance_id or uuid4().hex
        self._instances[iid] = dict(create_kwargs or {})
        return iid, ToolResponse()

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)

    def _session(self, instance_id: str, agent_data: Any) -> dict[str, Any]:
        """The trajectory's session from ``agent_data`` (created there from ``create_kwargs`` on the first call)."""
        session = get_session(agent_data)
        if session is not None:
            return session
        ck = self._instances.get(instance_id, {})
        video = ck.get("video")
        if not video:
            raise AgentError(
                f"{self.name}: no video for this sample (extra_info.tools_kwargs.{self.name}.create_kwargs.video)"
            )
        total, fps = ck.get("total_frames"), ck.get("fps")
        if total is None or fps is None:
            reader = WORKER_AGENTS.uniform(str(video)).reader
            total, fps = reader.num_frames, reader.fps
        session = new_session(str(video), int(total), float(fps), ck.get("initial_frames"), self.max_calls)
        extra = getattr(agent_data, "extra_fields", None)
        if isinstance(extra, dict):
            extra[SESSION_KEY] = session
        return session

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        """Validate like the reference, run the agent off the event loop, record the call in the session."""
        agent_data = kwargs.get("agent_data")
        try:
            session = self._session(instance_id, agent_data)
            call, err = P.parse_tool_call(
                json.dumps({"name": self.name, "arguments": parameters}, default=str)
            )
            if err or call is None:
                raise AgentError(err or f"{self.name}: unreadable call")
            if session["num_calls"] >= session["max_calls"]:
                raise AgentError(f"tool call after the call budget ({session['max_calls']}) was spent")
            dup = P.duplicate_reason(call, history(session))
            if dup:
                raise AgentError(dup)
            loop = asyncio.get_running_loop()
            frames = await loop.run_in_executor(None, lambda: self.run_agent(session, call))
        except AgentError as e:
            return ToolResponse(text=f"Error: {e}"), 0.0, {"error": str(e), "frames": []}
        idx = [f.index for f in frames]
        session["num_calls"] += 1
        session["calls"].append({"name": call.name, "arguments": dict(call.args), "frames": idx})
        session["frames_shown"] = sorted(set(session["frames_shown"]) | set(idx))
        final = session["num_calls"] >= session["max_calls"]
        text = P.observation_text(session["num_calls"], final)
        metrics = {
            "error": None,
            "frames": idx,
            "timestamps": [round(f.timestamp, 4) for f in frames],
            "num_calls": session["num_calls"],
            "final": final,
        }
        return ToolResponse(text=text, image=[to_pil(f.image) for f in frames]), 0.0, metrics

    def run_agent(self, session: dict[str, Any], call: P.ToolCall) -> list[Any]:
        raise NotImplementedError


class UniformSampleTool(VideoBrainTool):
    """``uniform_sample(start_frame, end_frame)``: 8 frames at ``linspace(start, end-1, 8)`` (reference rules)."""

    tool_name = P.UNIFORM

    def run_agent(self, session: dict[str, Any], call: P.ToolCall) -> list[Any]:
        s, e = check_range(
            self.name, call.args["start_frame"], call.args["end_frame"], session["total_frames"]
        )
        min_range = int(self.config.get("min_uniform_range", 8))
        if e - s < min_range:
            raise AgentError(f"uniform_sample range [{s}, {e}) has {e - s} frames, fewer than {min_range}")
        agent = WORKER_AGENTS.uniform(
            session["video"], int(self.config.get("num_frames", NUM_UNIFORM)), self.max_size
        )
        return agent.sample(s, e)


class ClipSampleTool(VideoBrainTool):
    """``clip_sample(start_frame, end_frame, prompt)``: the 4 candidates most similar to the prompt, from the index.

    Tool config: ``clip_model`` (e.g. ``ViT-B-16:openai``), ``clip_sampling`` (``fps=1``), ``index_cache_dir``
    (where ``vidlab index`` put the frame indices; default: the vidlab cache), ``parity`` (the reference's K
    linspace candidates; false = search every indexed frame in range), ``device``.
    """

    tool_name = P.CLIP

    def run_agent(self, session: dict[str, Any], call: P.ToolCall) -> list[Any]:
        cfg = self.config
        check_range(self.name, call.args["start_frame"], call.args["end_frame"], session["total_frames"])
        agent = WORKER_AGENTS.clip(
            session["video"],
            str(cfg.get("clip_model", "ViT-B-16:openai")),
            str(cfg.get("clip_sampling", "fps=1")),
            cfg.get("index_cache_dir"),
            bool(cfg.get("parity", True)),
            int(cfg.get("num_frames", NUM_CLIP)),
            self.max_size,
            str(cfg.get("device", "auto")),
        )
        return agent.sample(call.args["start_frame"], call.args["end_frame"], call.args["prompt"])
