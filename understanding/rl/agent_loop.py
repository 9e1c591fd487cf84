"""``VideoBrainAgentLoop``: verl's agent loop for VideoBrain, registered as ``videobrain_agent``.

Why a custom loop rather than verl's stock ``tool_agent`` loop (read from the installed
``verl/experimental/agent_loop/tool_agent_loop.py``): the stock loop renders a tool result as a ``tool``-role
message with all images first and the text after, and it has no notion of a call budget. VideoBrain's
observation is a *user* turn: the instruction prefix, then one ``\\nframe {idx}: `` line before each image,
and after the 5th call the "no more calls" prefix. Only a custom loop reproduces that byte for byte.

One episode (same rules, same order as ``vidlab.understanding.env.Episode.step``):
1. the prompt (system + user turn with 16 ``frame {idx}: <image>`` lines, from the dataset) is tokenised by
   verl's Continuous Token builder (the processor expands each image into its pad tokens);
2. per assistant turn: generate through verl's server manager, append the tokens (mask 1), parse the turn with
   ``vidlab.understanding.protocol.parse_assistant_turn``; an answer or a broken turn ends the episode; a call past the
   budget, on the last allowed turn, to a tool not offered, or one the tool refuses ends it (invalid);
3. otherwise the tool runs (verl ``BaseTool.create/execute/release``, state in ``agent_data.extra_fields``) and
   the observation user turn is appended through the builder (mask 0), its images added to ``image_data``.
Limits: ``max_turns`` assistant turns (6), ``max_calls`` calls (5), and verl's ``rollout.response_length``.

``extra_fields`` carries ``frames_used``, ``initial_frame_indices``, ``num_tool_calls``, ``end_reason`` and
``invalid_reason``; verl's reward manager merges them into the ``extra_info`` that ``compute_score`` receives.
"""

from __future__ import annotations

import logging
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import AgentData

from vidlab.understanding import protocol as P
from vidlab.understanding.rl.tools import SESSION_KEY, get_session, new_session

log = logging.getLogger(__name__)

AGENT_NAME = "videobrain_agent"


def observation_message(prefix: str, frame_indices: list[int], images: list[Any]) -> dict[str, Any]:
    """The observation user turn in chat-template form: prefix, then ``\\nframe {idx}: `` + image per frame."""
    if len(frame_indices) != len(images):
        raise ValueError(f"{len(frame_indices)} frame indices for {len(images)} images")
    content: list[dict[str, Any]] = [{"type": "text", "text": prefix}]
    for idx, image in zip(frame_indices, images):
        content.append({"type": "text", "text": f"\nframe {int(idx)}: "})
        content.append({"type": "image", "image": image})
    return {"role": "user", "content": content}


@register(AGENT_NAME)
class VideoBrainAgentLoop(AgentLoopBase):
    """VideoBrain's turn loop over verl's server manager, tools and Continuous Token builder."""

    def __init__(
        self,
        *args: Any,
        tools: Any = None,
        max_calls: int = 5,
        max_turns: int | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        multi_turn = self.rollout_config.multi_turn
        self.max_calls = int(max_calls)
        self.max_turns = int(max_turns or multi_turn.get("max_assistant_turns") or 6)
        self.response_length = int(self.rollout_config.response_length)
        self.tools = {t.name: t for t in (tools.tools if tools is not None else [])}

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        messages = list(kwargs["raw_prompt"])
        extra_info = dict(kwargs.get("extra_info") or {})
        tools_kwargs = dict(kwargs.get("tools_kwargs") or {})
        vb: dict[str, Any] = dict(extra_info.get(SESSION_KEY) or {})
        offered = [t for t in (vb.get("tools") or list(self.tools)) if t in self.tools]

        mm = await self.process_multi_modal_info(messages)
        images: Any = mm.get("images")
        no_videos: Any = None
        agent_data = AgentData(
            messages=messages,
            image_data=images,
            video_data=no_videos,
            audio_data=None,
            mm_processor_kwargs=self._get_mm_processor_kwargs(None),
            metrics={},
            request_id=uuid4().hex,
            tools_kwargs=tools_kwargs,
        )
        if "video" in vb:
            agent_data.extra_fields[SESSION_KEY] = new_session(
                vb["video"], vb["total_frames"], vb["fps"], vb.get("initial_frames"), self.max_calls
            )
        self._assert_mm_supported(bool(images))
        agent_data.prompt_ids = await self.ct_build_initial_tokens(messages, images=images)
        prompt_len = len(agent_data.prompt_ids)

        end_reason, invalid = "response length limit reached", True
        turns: list[str] = []
        while True:
            out = await self.server_manager.generate(
                request_id=agent_data.request_id,
                prompt_ids=agent_data.prompt_ids,
                sampling_params=sampling_params,
                image_data=agent_data.image_data,
                video_data=None,
                mm_processor_kwargs=agent_data.mm_processor_kwargs,
            )
            agent_data.assistant_turns += 1
            merge, mask, logprobs = await self.ct_merge_assistant_token(
                agent_data.prompt_ids,
                out.token_ids,
                agent_data.response_mask,
                agent_data.response_logprobs if (agent_data.response_logprobs or out.log_probs) else None,
                assistant_logprobs=out.log_probs or None,
            )
            agent_data.prompt_ids, agent_data.response_mask = merge.token_ids, mask
            if logprobs is not None:
                agent_data.response_logprobs = logprobs
            text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            turns.append(text)
            agent_data.messages.append({"role": "assistant", "content": text})
            n = len(turns)
            if len(agent_data.response_mask) >= self.response_length:
                break
            parsed = P.parse_assistant_turn(text)
            if parsed.error:
                end_reason = f"turn {n}: {parsed.error}"
                break
            if parsed.answer is not None:
                end_reason, invalid = "answered", False
                break
            call = parsed.tool_call
            assert call is not None  # the parser returns an error, an answer or a call
            session = get_session(agent_data)
            spent = session["num_calls"] if session else 0
            if spent >= self.max_calls:
                end_reason = f"turn {n}: tool call after the call budget ({self.max_calls}) was spent"
                break
            if n >= self.max_turns:
                end_reason = f"turn limit ({self.max_turns}) reached without an answer"
                break
            if call.name not in offered:
                end_reason = f"turn {n}: {call.name} is not offered in this episode (tools: {offered})"
                break
            response, metrics = await self._call_tool(call, tools_kwargs, agent_data)
            if metrics.get("error"):
                end_reason = f"turn {n}: {metrics['error']}"
                break
            processed = await self.process_multi_modal_info(
                [observation_message(response.text or "", metrics["frames"], list(response.image or []))]
            )
            obs = observation_message(response.text or "", metrics["frames"], processed.get("images") or [])
            previous = list(agent_data.messages)
            agent_data.messages.append(obs)
            merge, mask, logprobs = await self.ct_merge_context_msg(
                previous,
                agent_data.messages,
                agent_data.prompt_ids,
                agent_data.response_mask,
                agent_data.response_logprobs or None,
            )
            if len(mask) >= self.response_length:
                end_reason = "response length limit reached (observation did not fit)"
                break
            agent_data.prompt_ids, agent_data.response_mask = merge.token_ids, mask
            if agent_data.response_logprobs:
                agent_data.response_logprobs = logprobs or []
            agent_data.image_data = list(agent_data.image_data or []) + list(obs_images(obs))
            agent_data.user_turns += 1

        state: dict[str, Any] = get_session(agent_data) or {}
        response_ids = agent_data.prompt_ids[prompt_len:]
        extra = {
            "frames_used": list(state.get("frames_shown", vb.get("initial_frames", []))),
            "initial_frame_indices": list(state.get("initial_frames", vb.get("initial_frames", []))),
            "num_tool_calls": int(state.get("num_calls", 0)),
            "tool_calls": list(state.get("calls", [])),
            "end_reason": end_reason,
            "invalid_reason": end_reason if invalid else None,
            "assistant_turns": turns,
        }
        multi_modal_data = {"images": agent_data.image_data} if agent_data.image_data is not None else {}
        output = AgentLoopOutput(
            prompt_ids=agent_data.prompt_ids[:prompt_len],
            response_ids=response_ids[: self.response_length],
            response_mask=agent_data.response_mask[: self.response_length],
            response_logprobs=agent_data.response_logprobs[: self.response_length]
            if agent_data.response_logprobs
            else None,
            multi_modal_data=multi_modal_data,
            mm_processor_kwargs=agent_data.mm_processor_kwargs,
            num_turns=agent_data.user_turns + agent_data.assistant_turns + 1,
            metrics=AgentLoopMetrics(**agent_data.metrics),
            extra_fields=extra,
        )
        return output

    async def _call_tool(self, call: P.ToolCall, tools_kwargs: dict, agent_data: Any) -> tuple[Any, dict]:
        """verl's BaseTool lifecycle for one call: create (with the sample's create_kwargs), execute, release."""
        tool = self.tools[call.name]
        create_kwargs = dict((tools_kwargs.get(call.name) or {}).get("create_kwargs") or {})
        instance_id, _ = await tool.create(create_kwargs=create_kwargs)
        try:
            response, _reward, metrics = await tool.execute(
                instance_id, dict(call.args), agent_data=agent_data
            )
        finally:
            await tool.release(instance_id)
        return response, dict(metrics or {})


def obs_images(message: dict[str, Any]) -> list[Any]:
    return [b["image"] for b in message["content"] if isinstance(b, dict) and b.get("type") == "image"]
