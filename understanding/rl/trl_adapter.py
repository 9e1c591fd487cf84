"""VideoBrain on TRL's ``GRPOTrainer`` (TRL 1.x): rollouts drive ``vidlab.understanding.env.Episode`` turn by turn.

``VideoBrainGRPOTrainer`` overrides GRPOTrainer's ``_generate`` (the method that turns a batch's prompts into
token ids; TRL's public ``rollout_func`` has the same contract but cannot return the frames a tool call adds, and
TRL's own tool loop renders tool results as ``tool`` messages with images first). For each row of the batch:

1. ``Episode(video, question, options).reset()``: the system + user turn with 16 frames, tokenised by the
   processor (each image expanded into its pad tokens): the rollout's ``prompt_ids``;
2. per assistant turn, the trainer's own model samples (``temperature``, ``max_new_tokens`` per turn) with every
   frame shown so far; its tokens are appended with ``env_mask`` 1; ``Episode.step(text)`` applies the protocol;
3. an observation turn is appended with ``env_mask`` 0 (the chat-template delta: ``<|im_end|>\\n<|im_start|>user
   ...frame {idx}: <image>...<|im_end|>\\n<|im_start|>assistant\\n``), its frames added to the rollout's images.

TRL multiplies ``env_mask`` into the loss mask (``completion_mask * tool_mask``), so observation tokens never
carry loss; its VLM tool-image path feeds all images of a rollout (initial + observation frames) to the forward
pass. Rewards: ``videobrain_reward`` calls ``vidlab.understanding.reward.compute_score`` with the episode's frames.

``behaviour`` (optional) names a ``vidlab.understanding.policies`` spec (e.g. ``pixel:red``) that writes the turns of the
last ``round(behaviour_mix * G)`` rollouts of every group instead of the model: off-policy, a plumbing aid that
gives a random tiny model's groups a reward spread on CPU; real runs leave it unset.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from vidlab.errors import UserError
from vidlab.understanding.env import Episode, EpisodeConfig
from vidlab.understanding.policies.hf import to_hf_messages
from vidlab.understanding.reward import compute_score


class TrainConfigError(UserError, ValueError):
    """A TRL training setting that cannot work (named, with the reason)."""


@dataclass
class TrlEpisodeConfig:
    """Episode budgets during training (reference defaults)."""

    num_initial_frames: int = 16
    max_calls: int = 5
    max_turns: int = 6
    max_new_tokens: int = 512  # per assistant turn


@dataclass
class TrlConfig:
    """``vidlab train-agent --engine trl`` settings: model, data, GRPO hyper-parameters, output."""

    PRESET_DIR: ClassVar[str] = "train-agent"  # `--preset trl-tiny` finds configs/train-agent/

    model: str = "hf-tiny:qwen2_5_vl"  # hf-tiny:KIND (random, offline) | a local dir | a hub id
    data: str = ""  # jsonl:PATH | benchmark:NAME:PATH | a .jsonl path; empty = synthetic needle questions
    video_root: str | None = (
        None  # relative video paths in data resolve here (default: the data file's folder)
    )
    synthetic_questions: int = 4
    synthetic_frames: int = 120
    out: str = "runs/trl-videobrain"
    num_generations: int = 8  # GRPO group size (rollout n)
    per_device_train_batch_size: int = 8  # rollouts per device and step (a multiple of num_generations)
    gradient_accumulation_steps: int = 4  # 8 x 4 = 32 rollouts per step on one device
    max_steps: int = -1  # -1 = num_train_epochs over the data
    num_train_epochs: float = 1.0
    learning_rate: float = 1e-6
    temperature: float = 1.0
    epsilon: float = 0.2  # clip
    beta: float = 0.001  # KL coefficient (TRL's k3 estimator = verl's low_var_kl)
    entropy_coef: float = 0.001
    freeze_vision_tower: bool = True
    max_pixels: int | None = None  # per-frame pixel budget for the image processor
    clip_model: str | None = None  # enables clip_sample (e.g. ViT-B-16:openai); None = uniform_sample only
    clip_sampling: str = "fps=1"
    index_cache_dir: str | None = None
    behaviour: str | None = None  # plumbing aid, see module docstring
    behaviour_mix: float = 0.0
    dtype: str = "auto"  # model dtype for hub/dir models (bfloat16 on GPU)
    bf16: bool = False
    gradient_checkpointing: bool = False
    seed: int = 0
    torch_threads: int = 0  # 0 = torch's default; 1 is far faster for tiny models on a shared CPU
    logging_steps: int = 1
    save_model: bool = True
    episode: TrlEpisodeConfig = field(default_factory=TrlEpisodeConfig)

    def validate(self) -> None:
        if self.num_generations < 2:
            raise TrainConfigError(
                f"num_generations={self.num_generations}: GRPO needs a group of at least 2"
            )
        if self.per_device_train_batch_size % self.num_generations:
            raise TrainConfigError(
                f"per_device_train_batch_size={self.per_device_train_batch_size} must be a multiple of "
                f"num_generations={self.num_generations}"
            )
        if not 0.0 <= self.behaviour_mix <= 1.0:
            raise TrainConfigError(f"behaviour_mix={self.behaviour_mix} must lie in [0, 1]")
        if self.behaviour_mix > 0 and not self.behaviour:
            raise TrainConfigError(
                "behaviour_mix > 0 needs behaviour=<policy spec>, e.g. behaviour=pixel:red"
            )


# ------------------------------------------------------------------------------------------------- reward
def videobrain_reward(prompts: list[Any], completions: list[Any], **columns: Any) -> list[float]:
    """GRPOTrainer reward function: ``compute_score`` on each episode's assistant turns and frames."""
    del prompts
    scores = []
    for i, completion in enumerate(completions):
        text = completion if isinstance(completion, str) else completion[-1]["content"]

        def col(name: str, i: int = i) -> Any:
            values = columns.get(name)
            return values[i] if isinstance(values, list) and i < len(values) else None

        extra = {
            "classification": col("classification"),
            "question_type": col("question_type"),
            "options": col("options"),
            "question": col("question"),
            "frames_used": col("frames_used"),
            "initial_frame_indices": col("initial_frame_indices"),
        }
        scores.append(
            float(
                compute_score("trl", text, col("answer"), {k: v for k, v in extra.items() if v is not None})[
                    "score"
                ]
            )
        )
    return scores


# ----------------------------------------------------------------------------------------------- tool stubs
def uniform_sample(start_frame: int, end_frame: int) -> str:
    """Uniformly sample 8 frames between start_frame and end_frame.

    Args:
        start_frame: Start frame index.
        end_frame: End frame index.

    Returns:
        The frames, shown to the model as an observation turn.
    """
    raise RuntimeError(
        "VideoBrain tools run inside vidlab.understanding.env.Episode, not through TRL's tool loop"
    )


def clip_sample(start_frame: int, end_frame: int, prompt: str) -> str:
    """Sample 4 frames within the frame range based on semantic relevance to a text prompt.

    Args:
        start_frame: Start frame.
        end_frame: End frame.
        prompt: Text prompt guiding semantic relevance.

    Returns:
        The frames, shown to the model as an observation turn.
    """
    raise RuntimeError(
        "VideoBrain tools run inside vidlab.understanding.env.Episode, not through TRL's tool loop"
    )


# ------------------------------------------------------------------------------------------------ trainer
def _trainer_base():
    from trl import GRPOTrainer

    return GRPOTrainer


class _Rollout:
    """One episode's token stream: prompt ids, completion ids with their env mask, and every image shown."""

    def __init__(self) -> None:
        self.prompt_ids: list[int] = []
        self.completion_ids: list[int] = []
        self.env_mask: list[int] = []
        self.images: list[Any] = []

    def add(self, ids: list[int], mask: int) -> None:
        self.completion_ids += list(ids)
        self.env_mask += [mask] * len(ids)


def make_trainer_class():
    """``VideoBrainGRPOTrainer`` (built lazily so importing this module does not import TRL)."""
    base = _trainer_base()

    class VideoBrainGRPOTrainer(base):
        """GRPOTrainer whose rollouts are VideoBrain episodes (see the module docstring)."""

        def __init__(
            self,
            *args: Any,
            episode_config: TrlEpisodeConfig | None = None,
            agents_factory: Any = None,
            behaviour: Any = None,
            behaviour_mix: float = 0.0,
            **kwargs: Any,
        ):
            super().__init__(*args, **kwargs)
            self.episode_config = episode_config or TrlEpisodeConfig()
            self.agents_factory = agents_factory
            self.behaviour = behaviour
            self.behaviour_mix = float(behaviour_mix)
            # Truthy tool list: GRPOTrainer then feeds the rollout's images (initial + observation frames) to the
            # forward pass through its VLM tool-image path. The functions are the schemas; calls run in Episode.
            self.tools = [uniform_sample, clip_sample]
            self.episodes: list[dict[str, Any]] = []  # per rollout of the latest batch (tests, logging)
            self.last_batch: dict[str, Any] | None = None
            self.last_rewards: Any = None
            self._batch_rows: list[dict[str, Any]] = []
            self.rollout_log: list[dict[str, Any]] = []
            self._gen_model: Any = None

        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            self._batch_rows = list(inputs)
            out = super()._generate_and_score_completions(inputs)
            self.last_batch = out
            self._record(out, len(inputs))
            return out

        def _record(self, out: dict[str, Any], n: int) -> None:
            """Per rollout: reward, and which tokens carry loss (what ``train`` writes to rollouts.jsonl)."""
            cm, ids = out["completion_mask"], out["completion_ids"]
            tm = out.get("tool_mask")
            loss = cm * tm if tm is not None else cm
            tok = self.processing_class.tokenizer
            pad = tok.convert_tokens_to_ids("<|image_pad|>")
            offset = self.accelerator.process_index * n
            for i, ep in enumerate(self.episodes):
                r = self.last_rewards[offset + i] if self.last_rewards is not None else None
                ep.update(
                    step=int(self.state.global_step),
                    reward=float(r.nansum()) if r is not None else None,
                    completion_tokens=int(cm[i].sum()),
                    loss_tokens=int(loss[i].sum()),
                    observation_tokens=int(((cm[i] == 1) & (loss[i] == 0)).sum()),
                    image_tokens_in_loss=int(((ids[i] == pad) & (loss[i] == 1)).sum()),
                    loss_text=tok.decode(ids[i][loss[i].bool()], skip_special_tokens=False),
                    batch_loss_tokens=int(out["num_items_in_batch"]),  # TRL's loss normaliser for this batch
                )
            self.rollout_log.extend(dict(e) for e in self.episodes)

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            self.last_rewards = rewards.detach().cpu().clone()
            return rewards

        # ----------------------------------------------------------------------------------- rollouts
        def _generate(self, prompts: list[Any]):
            rows = self._batch_rows
            if len(rows) != len(prompts):
                raise RuntimeError(f"{len(prompts)} prompts for {len(rows)} batch rows")
            g = int(self.num_generations)
            k = int(round(self.behaviour_mix * g)) if self.behaviour is not None else 0
            rollouts: list[_Rollout] = []
            completions: list[Any] = []
            extra: dict[str, list[Any]] = {"frames_used": [], "initial_frame_indices": []}
            self.episodes = []
            played = []
            with self._generation_model():
                for i, row in enumerate(rows):
                    use_behaviour = k > 0 and (i % g) >= g - k
                    played.append((row, use_behaviour, *self._play(row, use_behaviour)))
            for row, use_behaviour, ro, traj in played:
                rollouts.append(ro)
                completions.append([{"role": "assistant", "content": traj.assistant_text}])
                extra["frames_used"].append(list(traj.frames_used))
                extra["initial_frame_indices"].append(list(traj.initial_frames))
                self.episodes.append(
                    {
                        "id": row.get("id"),
                        "behaviour": use_behaviour,
                        "assistant_turns": list(traj.assistant_turns),
                        "assistant_text": traj.assistant_text,
                        "frames_used": list(traj.frames_used),
                        "initial_frames": list(traj.initial_frames),
                        "num_tool_calls": traj.num_tool_calls,
                        "end_reason": traj.end_reason,
                        "num_images": len(ro.images),
                    }
                )
            mode = "train" if self.model.training else "eval"
            n_calls = sum(e["num_tool_calls"] for e in self.episodes) / max(1, len(self.episodes))
            self._metrics[mode]["videobrain/tool_calls"].append(n_calls)
            self._metrics[mode]["videobrain/frames_used"].append(
                sum(len(e["frames_used"]) for e in self.episodes) / max(1, len(self.episodes))
            )
            return (
                [r.prompt_ids for r in rollouts],
                [r.completion_ids for r in rollouts],
                [r.env_mask for r in rollouts],
                completions,
                None,
                extra,
                [r.images for r in rollouts],
                [r.images for r in rollouts],
            )

        def _render(self, messages: list[Any], generation_prompt: bool) -> tuple[str, list[Any]]:
            hf, images = to_hf_messages(messages)
            text = self.processing_class.apply_chat_template(
                hf, add_generation_prompt=generation_prompt, tokenize=False
            )
            return text, images

        def _encode(self, text: str, images: list[Any]) -> list[int]:
            kw: dict[str, Any] = {"text": [text], "return_tensors": "pt"}
            if images:
                kw["images"] = images
            return self.processing_class(**kw)["input_ids"][0].tolist()

        def _play(self, row: dict[str, Any], use_behaviour: bool):
            ec = self.episode_config
            cfg = EpisodeConfig(
                num_initial_frames=ec.num_initial_frames,
                max_calls=ec.max_calls,
                max_turns=ec.max_turns,
                temperature=float(self.temperature),
                max_new_tokens=ec.max_new_tokens,
            )
            agents = self.agents_factory(row["video"]) if self.agents_factory else None
            ep = Episode(row["video"], row["question"], row.get("options") or None, cfg, agents)
            messages = ep.reset()
            ro = _Rollout()
            text, images = self._render(messages, True)
            ro.prompt_ids = self._encode(text, images)
            ro.images = list(images)
            tok = self.processing_class.tokenizer
            eos = tok.convert_tokens_to_ids("<|im_end|>")
            while not ep.done:
                if use_behaviour:
                    reply = self.behaviour.generate(list(ep.messages), temperature=0.0)[0]
                    ids = tok.encode(reply, add_special_tokens=False) + [eos]
                    ro.add(ids, 1)
                else:
                    ids = self._sample(ro)
                    if ids and ids[-1] == eos:
                        ro.add(ids, 1)
                    else:  # hit max_new_tokens: close the turn with a boundary token that carries no loss
                        ro.add(ids, 1)
                        ro.add([eos], 0)
                    reply = tok.decode(ids, skip_special_tokens=True)
                before, _ = self._render(ep.messages + [_assistant(reply)], False)
                result = ep.step(reply)
                if result.observation is None:
                    break
                after, obs_images = self._render(ep.messages, True)
                if not after.startswith(before):
                    raise RuntimeError(
                        "the chat template is not prefix-preserving; cannot append observations"
                    )
                # the assistant ids end at <|im_end|>; the template's newline after it starts the delta
                delta = (
                    "\n" + after[len(before) :] if before.endswith("<|im_end|>\n") else after[len(before) :]
                )
                new_images = obs_images[len(ro.images) :]
                ro.add(self._encode(delta, new_images), 0)
                ro.images += new_images
            return ro, ep.trajectory()

        @contextlib.contextmanager
        def _generation_model(self):
            """The policy as generate() needs it, as GRPOTrainer's own transformers path does: unwrapped from
            DDP, DeepSpeed ZeRO-3 parameters gathered, FSDP parameters summoned (no-ops on one CPU process)."""
            import torch
            from trl.models import unwrap_model_for_generation

            with (
                unwrap_model_for_generation(
                    self.model_wrapped,
                    self.accelerator,
                    gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                    gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
                ) as unwrapped,
                torch.no_grad(),
                self._dist.summon_full_params(self.model_wrapped, recurse=False),
            ):
                self._gen_model = unwrapped
                try:
                    yield unwrapped
                finally:
                    self._gen_model = None

        def _sample(self, ro: _Rollout) -> list[int]:
            import torch

            model = (
                self._gen_model if self._gen_model is not None else self.accelerator.unwrap_model(self.model)
            )
            ids = torch.tensor([ro.prompt_ids + ro.completion_ids], device=model.device)
            kw: dict[str, Any] = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
            if ro.images:
                pix = self.processing_class.image_processor(images=ro.images, return_tensors="pt")
                kw["pixel_values"] = pix["pixel_values"].to(model.device, model.dtype)
                kw["image_grid_thw"] = pix["image_grid_thw"].to(model.device)
            tok = self.processing_class.tokenizer
            temperature = float(self.temperature)
            with torch.no_grad():
                out = model.generate(
                    **kw,
                    max_new_tokens=int(self.episode_config.max_new_tokens),
                    do_sample=temperature > 0,
                    temperature=temperature if temperature > 0 else None,
                    eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
                    pad_token_id=tok.pad_token_id,
                )
            return out[0, ids.shape[1] :].tolist()

    return VideoBrainGRPOTrainer


def _assistant(text: str) -> Any:
    from vidlab.understanding.messages import Message

    return Message("assistant", [text])


# ---------------------------------------------------------------------------------------------- building
def load_model_and_processor(
    spec: str, dtype: str = "auto", seed: int = 0, work_dir: str | Path | None = None
) -> tuple[Any, Any]:
    """``hf-tiny:qwen2_5_vl|qwen3_vl`` (random, built offline and saved under ``work_dir/base-model`` so the KL
    reference model loads from a path like any checkpoint) or a local dir / hub id via transformers."""
    from vidlab.understanding.policies.hf import HFPolicy

    path = spec.removeprefix("hf:")
    if spec.startswith("hf-tiny:"):
        from vidlab.understanding.policies.tiny_qwen import KINDS, save_tiny_qwen_vl

        kind = spec.split(":", 1)[1] or "qwen2_5_vl"
        if kind not in KINDS:
            raise TrainConfigError(f"model={spec!r}: tiny kinds are {list(KINDS)}")
        path = str(save_tiny_qwen_vl(Path(work_dir or ".") / "base-model", kind, seed=seed))
    policy = HFPolicy.from_pretrained(path, dtype=dtype)
    return policy.model.train(), policy.processor


def freeze_vision_tower(model: Any) -> int:
    """``requires_grad=False`` on the vision encoder (and its merger); returns how many tensors were frozen."""
    n = 0
    for name, p in model.named_parameters():
        if "visual" in name.split("."):
            p.requires_grad_(False)
            n += 1
    return n


def load_rows(cfg: TrlConfig, failures: list[dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """Training rows (id, video, question, options, answer, classification, question_type).

    A row that cannot be used (no question or answer, a video that is not there) is left out and appended to
    ``failures`` as ``{"id", "path", "reason"}``; no usable row at all is a ``NoUsableRowsError`` listing them."""
    from vidlab.understanding.rl.dataset import NoUsableRowsError, is_filtered, iter_source

    if cfg.data:
        source: Any = cfg.data
    else:
        from vidlab.understanding.benchmarks.synthetic import write_needle_benchmark

        source = f"jsonl:{write_needle_benchmark(Path(cfg.out) / 'data', n=cfg.synthetic_questions, num_frames=cfg.synthetic_frames)}"
    rows: list[dict[str, Any]] = []
    bad: list[dict[str, str]] = []
    for n, r in enumerate(iter_source(source, cfg.video_root), 1):
        d = dataclasses.asdict(r) if dataclasses.is_dataclass(r) and not isinstance(r, type) else dict(r)
        if "__problem__" in d:
            bad.append({"id": f"row {n}", "path": "", "reason": str(d["__problem__"])})
            continue
        if is_filtered(d):  # no learning signal: left out by design, as verl's conversion does
            continue
        video = d.get("video") or d.get("video_path")
        options = d.get("options")
        why = (
            "no video field"
            if not video
            else "no question"
            if not d.get("question")
            else "no answer"
            if d.get("answer") in (None, "")
            else "video not found"
            if not Path(str(video)).is_file()
            else None
        )
        if why is not None:
            bad.append({"id": str(d.get("id") or f"row {n}"), "path": str(video or ""), "reason": why})
            continue
        rows.append(
            {
                "id": str(d.get("id")),
                "video": str(video),
                "question": str(d["question"]),
                "options": [str(o) for o in options] if options else None,
                "answer": str(d["answer"]),
                "classification": d.get("classification"),
                "question_type": d.get("question_type") or ("mc" if options else "oe"),
                "prompt": [{"role": "user", "content": str(d["question"])}],
            }
        )
    if failures is not None:
        failures.extend(bad)
    if not rows:
        first = f"; first problem: {bad[0]['id']}: {bad[0]['path']}: {bad[0]['reason']}" if bad else ""
        raise NoUsableRowsError(f"no usable training rows in {source!r}{first}", bad)
    return rows


def build_trainer(
    cfg: TrlConfig,
    rows: list[dict[str, Any]] | None = None,
    model: Any = None,
    processor: Any = None,
    behaviour: Any = None,
):
    """A ready ``VideoBrainGRPOTrainer`` for ``cfg`` (model, processor, dataset, GRPOConfig, reward, agents)."""
    import torch
    from datasets import Dataset
    from trl import GRPOConfig

    cfg.validate()
    if cfg.torch_threads > 0:
        torch.set_num_threads(cfg.torch_threads)
    rows = rows if rows is not None else load_rows(cfg)
    if model is None:
        model, processor = load_model_and_processor(cfg.model, cfg.dtype, cfg.seed, cfg.out)
    if cfg.max_pixels:
        processor.image_processor.max_pixels = int(cfg.max_pixels)
    if cfg.freeze_vision_tower:
        freeze_vision_tower(model)
    if behaviour is None and cfg.behaviour:
        from vidlab.understanding.policies import load_policy

        behaviour = load_policy(cfg.behaviour)
    agents_factory = None
    if cfg.clip_model:
        agents_factory = _clip_agents_factory(cfg)
    args = GRPOConfig(
        output_dir=str(Path(cfg.out) / "trainer"),
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        num_generations=cfg.num_generations,
        max_steps=cfg.max_steps if cfg.max_steps > 0 else -1,
        num_train_epochs=cfg.num_train_epochs,
        learning_rate=cfg.learning_rate,
        temperature=cfg.temperature,
        epsilon=cfg.epsilon,
        beta=cfg.beta,
        entropy_coef=cfg.entropy_coef,
        logging_steps=cfg.logging_steps,
        save_strategy="no",
        report_to=[],
        seed=cfg.seed,
        bf16=cfg.bf16,
        use_cpu=not torch.cuda.is_available(),
        gradient_checkpointing=cfg.gradient_checkpointing,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        disable_tqdm=False,
    )
    trainer_cls = make_trainer_class()
    return trainer_cls(
        model=model,
        reward_funcs=[videobrain_reward],
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=processor,
        episode_config=cfg.episode,
        agents_factory=agents_factory,
        behaviour=behaviour,
        behaviour_mix=cfg.behaviour_mix,
    )


def _clip_agents_factory(cfg: TrlConfig):
    from vidlab.understanding.rl.tools import WORKER_AGENTS

    model = str(cfg.clip_model)

    def make(video: str) -> list[Any]:
        return [
            WORKER_AGENTS.uniform(video),
            WORKER_AGENTS.clip(video, model, cfg.clip_sampling, cfg.index_cache_dir, True),
        ]

    return make


def train(cfg: TrlConfig) -> dict[str, Any]:
    """Train and (``save_model``) save model + processor to ``OUT/final`` (loadable as ``hf:OUT/final``)."""
    from vidlab.config import save_resolved
    from vidlab.io import atomic_write_json, atomic_write_text

    failures: list[dict[str, str]] = []
    rows = load_rows(cfg, failures)
    trainer = build_trainer(cfg, rows=rows)
    save_resolved(cfg, cfg.out)
    result = trainer.train()
    summary: dict[str, Any] = {
        "global_step": int(trainer.state.global_step),
        "train_loss": float(result.training_loss),
        "log_history": trainer.state.log_history,
    }
    if cfg.save_model:
        final = Path(cfg.out) / "final"
        trainer.save_model(str(final))
        trainer.processing_class.save_pretrained(str(final))
        summary["model_dir"] = str(final)
    atomic_write_text(
        Path(cfg.out) / "rollouts.jsonl",
        "".join(json.dumps(r, default=str) + "\n" for r in trainer.rollout_log),
    )
    summary["rollouts"] = str(Path(cfg.out) / "rollouts.jsonl")
    # the data rows left out, each with its path and reason (the command names them and exits 3)
    from vidlab.outcome import Failure, write_failures

    summary["data_rows"] = len(rows) + len(failures)
    summary["data_failures"] = failures
    path = write_failures(
        Path(cfg.out) / DATA_FAILURES, [Failure(f["id"], f["reason"], f["path"]) for f in failures]
    )
    summary["data_failures_file"] = str(path) if path else None
    atomic_write_json(Path(cfg.out) / "summary.json", summary)
    return summary


DATA_FAILURES = "data_failures.jsonl"  # OUT/: the training rows that could not be used


__all__ = [
    "TrainConfigError",
    "TrlConfig",
    "TrlEpisodeConfig",
    "build_trainer",
    "freeze_vision_tower",
    "load_model_and_processor",
    "load_rows",
    "make_trainer_class",
    "train",
    "videobrain_reward",
]
