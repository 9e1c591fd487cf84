"""The QA tab: a video (uploaded or synthetic), a question, and the agent's trajectory as it unfolds.

``QAService`` loads the configured policy once and drives a real ``Episode`` turn by turn
(``vidlab.understanding.env.iter_episode``), so what the page shows is exactly what ``vidlab qa`` would do:
each turn's thinking, each tool call, the frames it looked at (with frame numbers and timestamps), the
answer, and the tallies of frames used and calls made.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vidlab.demos.config import DemoQAConfig
from vidlab.demos.work import WorkArea
from vidlab.errors import UserError


class QAInputError(UserError):
    """A QA request the demo refuses (no video, too long, too large, no question, bad options)."""


class QAService:
    """The policy (loaded once), the synthetic examples, validation, and the streamed episode."""

    def __init__(self, config: DemoQAConfig, work: WorkArea):
        from vidlab.understanding.config import QASettings
        from vidlab.understanding.env import EpisodeConfig
        from vidlab.understanding.evaluate import QAWorker, resolve_clip_model

        self.config = config
        self.work = work
        settings = QASettings(
            policy=config.policy,
            episode=EpisodeConfig(max_calls=int(config.max_calls), frame_resize=config.frame_resize),
            clip_model=resolve_clip_model(config.clip_model, config.policy),
            clip_sampling=config.clip_sampling,
            cache_dir=str(work.root / "frame_index"),
        )
        self.worker = QAWorker(settings)
        self.strategies = self.strategy_choices()  # a bad qa.strategy fails here, before the page is built
        self._lock = threading.Lock()
        self._examples: dict[str, dict[str, Any]] | None = None

    @property
    def policy_name(self) -> str:
        return str(self.worker.policy_name)

    def model_note(self) -> str:
        """What the page says about the policy and its CLIP: random weights and scripted policies said plainly."""
        from vidlab.clip.models import TINY_MODEL
        from vidlab.understanding.evaluate import resolve_clip_model

        policy = self.config.policy
        scheme = policy.partition(":")[0]
        text = f"Policy: `{policy}`"  # as configured (toy:where), not the folder it resolves to
        clip = resolve_clip_model(self.config.clip_model, policy)
        if clip is None:
            text += " · no CLIP model: the agent has uniform_sample only"
        elif self.config.clip_model == "auto":
            text += " · CLIP: the policy's own (qa.clip_model=auto), for clip_sample"
        else:
            text += f" · CLIP: `{Path(clip).name or clip}`, for clip_sample"
        if scheme == "hf-tiny":
            text += (
                "\n\n**Random weights**: this tiny Qwen-VL was never trained; its answers are noise. It shows "
                "the episode machinery, not VideoBrain."
            )
        elif scheme in ("pixel", "const", "replay"):
            text += (
                f"\n\nA scripted policy (`{scheme}`), not a model: it shows the episode machinery, "
                "not a trained VideoBrain."
            )
        if clip == TINY_MODEL:
            text += (
                "\n\n**Random weights** in the CLIP model (`vidlab-tiny`): clip_sample retrieves at random."
            )
        return text

    def strategy_choices(self) -> list[str]:
        """What the page offers: the configured strategy first, then the agent and the baselines at 16 frames
        (the CLIP ones only with a CLIP model)."""
        from vidlab.understanding.config import check_strategy

        clip = self.worker.clip_spec
        offered = [self.config.strategy, "agent", "uniform:16"]
        if clip:
            offered += ["clip:16", "topk:16", "aks:16", "bolt:16"]
        for s in offered:
            check_strategy(s, clip)  # StrategyError (a UserError): one line naming the spec
        return list(dict.fromkeys(offered))

    # ---- synthetic examples --------------------------------------------------------------------------
    def examples(self) -> dict[str, dict[str, Any]]:
        """name -> {video, question, options, answer}: synthetic videos written once into the work area, from
        the toy long-video world for toy policies (the world they were trained on), else needle videos."""
        with self._lock:
            if self._examples is None:
                self._examples = {}
                n = int(self.config.synthetic_videos)
                if n > 0:
                    if self.config.policy.startswith("toy:"):
                        from vidlab.understanding.toyworld.world import build_split, world_config

                        # toy:where (the default policy) plays the where-to-look world (a coarse call, then a
                        # zoom); toy:shipped and toy:DIR the default world
                        world = "where" if self.config.policy in ("toy:where", "toy:default") else "default"
                        split = build_split(
                            self.work.root / ("toyworld" if world == "default" else "toyworld-where"),
                            "test",
                            n,
                            world_config(world),
                        )
                        rows = [dict(r, video=str(Path(split.root) / r["video"])) for r in split.rows]
                    else:
                        from vidlab.understanding.benchmarks.synthetic import write_needle_benchmark

                        path = write_needle_benchmark(self.work.root / "synthetic", n=n)
                        rows = []
                        for line in Path(path).read_text().splitlines():
                            row = json.loads(line)
                            video = Path(row["video"])
                            rows.append(
                                {
                                    **row,
                                    "video": str(video if video.is_absolute() else Path(path).parent / video),
                                }
                            )
                    for row in rows:
                        self._examples[f"{row['id']} ({row.get('category') or 'question'})"] = row
            return self._examples

    # ---- validation ---------------------------------------------------------------------------------
    def check(self, video: str | None, question: str, options_text: str) -> tuple[Any, str, list[str] | None]:
        """Open and cap-check the video; parse the options (one per line; none = open-ended)."""
        from vidlab.video import open_video

        cfg = self.config
        if not video:
            raise QAInputError("upload a video or pick a synthetic one")
        size = os.path.getsize(video)
        if size > cfg.max_upload_mb * 1e6:
            raise QAInputError(
                f"the video is {size / 1e6:.1f} MB; this demo accepts at most {cfg.max_upload_mb:g} MB"
            )
        question = (question or "").strip()
        if not question:
            raise QAInputError("enter a question")
        if len(question) > cfg.max_question_chars:
            raise QAInputError(
                f"the question has {len(question)} characters; at most {cfg.max_question_chars}"
            )
        options = [o.strip() for o in (options_text or "").splitlines() if o.strip()] or None
        if options is not None and not 2 <= len(options) <= 6:
            raise QAInputError(
                f"give 2 to 6 options, one per line (got {len(options)}), or none for open-ended"
            )
        reader = open_video(video)  # VideoReadError (a UserError) names the file and the reason
        if reader.duration > cfg.max_video_seconds:
            raise QAInputError(
                f"the video lasts {reader.duration:.0f} s; this demo accepts at most {cfg.max_video_seconds:g} s"
            )
        if reader.num_frames > cfg.max_video_frames:
            raise QAInputError(f"the video has {reader.num_frames} frames; at most {cfg.max_video_frames}")
        return reader, question, options

    # ---- the episode, streamed -----------------------------------------------------------------------
    def run(
        self,
        video: str,
        question: str,
        options_text: str,
        truth: str | None = None,
        strategy: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Yield the trajectory's state after the opening view and after every assistant turn; with a known
        ``truth`` (the example's answer letter) the final answer carries a check or a cross and the right option.
        ``strategy`` (default: the configured one) is ``agent`` or a baseline such as ``aks:16`` (one turn)."""
        from vidlab.understanding.env import Episode, iter_episode

        strategy = strategy or self.config.strategy
        if strategy not in self.strategies:
            raise QAInputError(f"strategy must be one of {', '.join(self.strategies)}, got {strategy!r}")
        reader, question, options = self.check(video, question, options_text)
        frames_dir = self.work.new_dir(
            "qa"
        )  # this request's frame files, each written once (see render_state)
        if strategy == "agent":
            episode = Episode(
                reader, question, options, self.worker.episode, self.worker.agents(reader, video)
            )
            for _ in iter_episode(self.worker.policy, episode):
                yield render_state(episode, frames_dir)
            traj = episode.trajectory()
            state = render_state(episode, frames_dir)
        else:
            from vidlab.understanding.policies.baselines import run_baseline

            agents = self.worker.agents(reader, video)
            traj = run_baseline(
                strategy,
                self.worker.policy,
                reader,
                question,
                options,
                clip_agent=agents.get("clip_sample"),
                config=self.worker.episode,
            )
            state = render_state(_Shown(traj), frames_dir)
        state["answer"] = judged_answer(traj.predicted, traj.answer, options, truth)
        state["final"] = {
            "reply": traj.answer,
            "predicted": traj.predicted,
            "predicted_option": option_of(traj.predicted, options),
            **(
                {
                    "truth": truth,
                    "truth_option": option_of(truth, options),
                    "correct": traj.predicted == truth,
                }
                if truth and options
                else {}
            ),
            "valid": traj.valid,
            "invalid_reason": traj.invalid_reason,
            "end_reason": traj.end_reason,
            "frames_used": traj.num_frames_used,
            "frame_indices": traj.frames_used,
            "tool_calls": traj.num_tool_calls,
            "calls": traj.tool_calls,
        }
        yield state


class _Shown:
    """A one-turn baseline's trajectory seen as the finished episode :func:`render_state` draws."""

    def __init__(self, traj: Any):
        self.messages = traj.messages
        self.call_records: list[Any] = []
        self.shown = traj.frames_used
        self.total_frames = traj.total_frames
        self.done = True
        self.end_reason = traj.end_reason
        self.answer = traj.answer


def option_of(letter: str | None, options: list[str] | None) -> str | None:
    """The option text a letter names (None when it names none)."""
    k = ord(letter) - 65 if letter and len(letter) == 1 else -1
    return options[k] if options and 0 <= k < len(options) else None


def judged_answer(
    predicted: str | None, reply: str | None, options: list[str] | None, truth: str | None
) -> str:
    """The answer as shown: "C. blue", and with a known truth "C. blue ✗ (right answer: A. magenta)" or
    "A. magenta ✓"."""
    text = option_of(predicted, options)
    shown = f"{predicted}. {text}" if text is not None else (reply or "").strip() or "(no answer)"
    if not truth or not options:
        return shown
    if predicted == truth:
        return f"{shown} ✓"
    return f"{shown} ✗ (right answer: {truth}. {option_of(truth, options)})"


def example_truth(row: dict[str, Any] | None, uploaded: Any, question: str, options_text: str) -> str | None:
    """The picked example's answer letter, while its video, question and options are the ones being asked."""
    if row is None or uploaded or not row.get("answer") or not row.get("options"):
        return None
    opts = [o.strip() for o in (options_text or "").splitlines() if o.strip()]
    if (question or "").strip() != row["question"] or opts != list(row["options"]):
        return None
    return str(row["answer"])


def frame_file(frames_dir: Path, index: int, image: Any) -> str:
    """The frame as a PNG in ``frames_dir``, written once (atomically) and never rewritten.

    Why not hand Gradio the arrays: it encodes an array gallery item on every update and rewrites the same
    content-hashed cache file in place (``processing_utils.save_pil_to_cache``: ``write_bytes``, no exists
    check), so while a trajectory streams, a frame the browser is still fetching from an earlier update is
    truncated under it: "Too little data for declared Content-Length" / ERR_CONTENT_LENGTH_MISMATCH. A path
    goes through Gradio's file cache instead, which copies once under a temporary name and renames."""
    import numpy as np
    from PIL import Image

    from vidlab.io import atomic_open

    arr = np.asarray(image)
    path = frames_dir / f"frame_{int(index):07d}_{arr.shape[1]}x{arr.shape[0]}.png"
    if not path.exists():
        with atomic_open(path, "wb") as fh:
            Image.fromarray(arr.astype(np.uint8, copy=False)).save(fh, format="PNG")
    return str(path)


def render_state(episode: Any, frames_dir: Path | None = None) -> dict[str, Any]:
    """The episode so far as markdown turns, a frame gallery (image, caption) and tallies; with ``frames_dir``
    the gallery holds file paths (see :func:`frame_file`), else the arrays."""
    from vidlab.understanding import protocol as P

    lines, gallery = [], []
    for k, msg in enumerate(episode.messages):
        frames = msg.frames
        if msg.role == "assistant":
            turn = P.parse_assistant_turn(msg.text)
            n = sum(1 for m in episode.messages[: k + 1] if m.role == "assistant")
            lines.append(f"**Turn {n}**")
            if turn.thinking:
                lines.append(f"> thinking: {turn.thinking.strip()}")
            if turn.tool_call is not None:
                lines.append(f"- tool call: `{turn.tool_call.name}` {json.dumps(turn.tool_call.args)}")
            if turn.answer is not None:
                lines.append(f"- answer: **{turn.answer.strip()}**")
            if turn.error:
                lines.append(f"- breaks the protocol: {turn.error}")
        elif frames:
            where = (
                "initial view"
                if not any(m.role == "assistant" for m in episode.messages[:k])
                else "observation"
            )
            lines.append(f"*{where}: {len(frames)} frames ({', '.join(str(f.index) for f in frames)})*")
            for f in frames:
                image = f.image if frames_dir is None else frame_file(frames_dir, f.index, f.image)
                gallery.append((image, f"{where}: frame {f.index} at {f.timestamp:.2f} s"))
    calls = len(episode.call_records)
    tallies = f"frames used: **{len(episode.shown)}** of {episode.total_frames} · tool calls: **{calls}**"
    if episode.done:
        tallies += f" · ended: {episode.end_reason}"
    return {
        "markdown": "\n\n".join(lines),
        "gallery": gallery,
        "tallies": tallies,
        "answer": episode.answer or "",
    }


# ----------------------------------------------------------------------------------------------------- UI
def build_qa_tab(service: QAService, max_upload_mb: float) -> None:
    """Lay out the tab's components and wire its events (call inside a ``gr.Blocks``)."""
    import gradio as gr

    examples = service.examples()
    with gr.Row():
        with gr.Column(scale=2):
            upload = gr.Video(
                label=f"Upload a video (at most {max_upload_mb:g} MB)",
                sources=["upload"],
                elem_id="qa-upload",
            )
            example = gr.Dropdown(
                choices=list(examples), value=None, label="...or pick a synthetic video", elem_id="qa-example"
            )
            question = gr.Textbox(label="Question", elem_id="qa-question")
            options = gr.Textbox(
                label="Options, one per line (leave empty for open-ended)", lines=4, elem_id="qa-options"
            )
            strategy = gr.Dropdown(
                choices=service.strategies,
                value=service.strategies[0],
                label="How frames are chosen (agent: the policy calls tools; the others pick frames once)",
                elem_id="qa-strategy",
            )
            gr.Markdown(service.model_note(), elem_id="qa-model")
            run_btn = gr.Button("Ask", variant="primary", elem_id="qa-run")
        with gr.Column(scale=3):
            tallies = gr.Markdown(elem_id="qa-tallies")
            answer = gr.Textbox(label="Answer", interactive=False, elem_id="qa-answer")
            turns = gr.Markdown(label="Trajectory", elem_id="qa-turns")
            gallery = gr.Gallery(
                label="Frames the agent looked at", columns=6, height=300, elem_id="qa-frames"
            )
            final = gr.JSON(label="Result")
    chosen = gr.State(None)

    def on_example(name):
        row = examples.get(name or "")
        if row is None:
            return None, gr.update(), gr.update()
        return name, row["question"], "\n".join(row.get("options") or [])

    def on_run(video, picked, q, opts, how=None):
        path = video if video else (examples[picked]["video"] if picked in examples else None)
        truth = example_truth(examples.get(picked or ""), video, q, opts)
        try:
            for state in service.run(path, q, opts, truth, how):
                yield (
                    state["tallies"],
                    state["answer"],
                    state["markdown"],
                    state["gallery"],
                    state.get("final"),
                )
        except UserError as exc:
            raise gr.Error(str(exc)) from None

    example.change(on_example, [example], [chosen, question, options], api_name=False)
    run_btn.click(
        on_run,
        [upload, chosen, question, options, strategy],
        [tallies, answer, turns, gallery, final],
        api_name="qa",
        concurrency_limit=1,
        concurrency_id="qa-policy",
    )
