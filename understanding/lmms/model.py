"""``VideoBrainLMM``: lmms-eval's ``lmms`` interface over vidlab's VideoBrain episode loop.

``--model_args`` (lmms-eval's ``key=value,key=value``):
  ``policy``         a vidlab policy spec (default ``toy:where``): ``hf:...``, ``openai:URL@MODEL``, ``toy:DIR``,
                     or any scheme registered under ``vidlab.policies``
  ``clip_model``     a vidlab.clip spec; offers ``clip_sample`` over the cached frame index (default: none,
                     uniform_sample only)
  ``clip_sampling``  the frame index's grid (default ``fps=1``); ``cache_dir`` where indexes are cached
  ``strategy``       ``agent`` (default, the episode loop) or a baseline such as ``uniform:16``, ``clip:16``, or a
                     frame selector ``topk:16``, ``aks:32``, ``bolt:16`` (parameters after a colon, ``;`` between
                     them: ``aks:32:t1=0.6;max_depth=4``)
  ``trajectories``   a JSONL path: one line per answered doc (question, options, prediction, frames used,
                     tool calls, validity), written atomically when a batch of requests is done
  anything else      an ``EpisodeConfig`` field (``max_calls=3``, ``frame_resize=fit``, ``num_initial_frames=8``)
lmms-eval's own ``--device``/``--batch_size`` are accepted and not used: the policy spec decides where its
model runs (``policy_device=cuda`` for ``hf:`` policies) and requests are answered one episode at a time.
The answer returned is the option letter for multiple choice (what lmms-eval's scorers read), else the
``<answer>`` text.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from lmms_eval.api.model import lmms

from vidlab.errors import UserError
from vidlab.understanding.env import EpisodeConfig
from vidlab.understanding.evaluate import AGENT, QAWorker
from vidlab.understanding.lmms.requests import question_and_options, video_path

_EPISODE_KEYS = {f.name for f in dataclasses.fields(EpisodeConfig)}


def _qa_worker(settings: dict[str, Any], episode: dict[str, Any]) -> Any:
    """The eval-qa worker for these settings (the same code path as ``vidlab eval-qa``)."""
    from vidlab.config import from_dict
    from vidlab.understanding.config import QASettings

    return QAWorker(QASettings(**settings, episode=from_dict(EpisodeConfig, episode)))


class VideoBrainLMM(lmms):
    """One policy + (optionally) one CLIP model, loaded once; each request is one VideoBrain episode."""

    is_simple = True

    def __init__(
        self,
        policy: str = "toy:where",  # vidlab.understanding.policies.DEFAULT_POLICY
        clip_model: str | None = None,
        clip_sampling: str = "fps=1",
        clip_parity: bool = True,
        strategy: str = AGENT,
        cache_dir: str | None = None,
        trajectories: str | None = None,
        policy_device: str | None = None,
        batch_size: Any = None,
        max_batch_size: Any = None,
        device: Any = None,
        **episode: Any,
    ) -> None:
        super().__init__()
        unknown = sorted(set(episode) - _EPISODE_KEYS)
        if unknown:
            raise UserError(
                f"videobrain: unknown model_args {unknown}; known: policy, clip_model, clip_sampling, clip_parity, "
                f"strategy, cache_dir, trajectories, policy_device, and the episode fields {sorted(_EPISODE_KEYS)}"
            )
        from vidlab.understanding.policies import check_policy_spec

        check_policy_spec(str(policy))  # a typo is one line before any model loads
        policy_kwargs: dict[str, Any] = {}
        if policy_device:
            from vidlab.devices import require_device

            policy_kwargs["device"] = require_device(str(policy_device), "policy_device")
        settings = dict(
            policy=str(policy),
            policy_kwargs=policy_kwargs,
            strategy=str(strategy),
            clip_model=str(clip_model) if clip_model else None,
            clip_sampling=str(clip_sampling),
            clip_parity=bool(clip_parity),
            cache_dir=cache_dir,
        )
        self.worker = _qa_worker(settings, dict(episode))
        self.trajectories_path = trajectories
        self.records: list[dict[str, Any]] = []

    def answer(self, video: str, question: str, options: list[str] | None) -> tuple[str, Any]:
        """One episode on ``video``: (the text lmms-eval scores, the trajectory)."""
        from vidlab.video import open_video

        with open_video(video) as reader:
            traj = self.worker.trajectory(reader, question, options, video_path=video)
        if options:
            return traj.predicted or (traj.answer or ""), traj
        return traj.answer or "", traj

    def generate_until(self, requests: list[Any]) -> list[str]:
        out: list[str] = []
        for req in requests:
            context, _gen_kwargs, doc_to_visual, doc_id, task, split = req.args
            doc = self.task_dict[task][split][doc_id]
            video = video_path(doc_to_visual(doc), doc_id)
            question, options = question_and_options(doc, context)
            text, traj = self.answer(video, question, options)
            out.append(text)
            self.cache_hook.add_partial("generate_until", (context, _gen_kwargs), text)
            self.records.append(
                {
                    "task": task,
                    "doc_id": doc_id,
                    "video": video,
                    "question": question,
                    "options": options,
                    "response": text,
                    "answer": traj.answer,
                    "valid": traj.valid,
                    "invalid_reason": traj.invalid_reason,
                    "end_reason": traj.end_reason,
                    "frames_used": list(traj.frames_used),
                    "num_tool_calls": traj.num_tool_calls,
                    "tool_calls": traj.tool_calls,
                    "assistant_turns": list(traj.assistant_turns),
                    "policy": self.worker.policy_name,
                }
            )
        if self.trajectories_path:
            from vidlab.io import atomic_write_text

            atomic_write_text(
                self.trajectories_path, "".join(json.dumps(r, default=str) + "\n" for r in self.records)
            )
        return out

    def generate_until_multi_round(self, requests: list[Any]) -> list[str]:
        return self.generate_until(requests)

    def loglikelihood(self, requests: list[Any]) -> list[tuple[float, bool]]:
        raise UserError(
            "videobrain answers by generation (an episode of tool calls); use tasks with output_type generate_until"
        )
