"""The settings of VideoBrain's commands, written once: how a question is answered (:class:`QASettings`), how a
training row is labelled (:class:`ClassifyConfig`), and ``vidlab qa`` / ``eval-qa`` / ``classify`` as a whole
(:class:`EvalConfig`: one preset serves all three, found in ``configs/qa/``).

``QASettings`` travels as one object from the config to the worker that answers
(``vidlab.understanding.evaluate.QAWorker``), into ``evaluate_items``, the demo's QA tab and the lmms-eval plug-in.
Every config checks itself on construction (``vidlab.config.validate``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from vidlab.config import ConfigError, in_range, validate
from vidlab.distributed import RunConfig
from vidlab.distributed.config import TOP_LEVEL_RUN_KEYS
from vidlab.errors import UserError
from vidlab.understanding.env import EpisodeConfig

AGENT = "agent"


class StrategyError(UserError, ValueError):
    """A strategy spec that is not agent, uniform:K, clip:K or a selector (topk:K, aks:K, bolt:K), or one the
    config cannot run."""


def strategy_label(strategy: str) -> str:
    """Folder/legend name of a strategy: ``agent``, ``uniform-32``, ``clip-8``, ``bolt-16``."""
    if strategy == AGENT:
        return AGENT
    from vidlab.understanding.policies.baselines import BaselineSpec

    return BaselineSpec.parse(strategy).label


def check_strategy(strategy: str, clip_model: str | None) -> str:
    """Validate a strategy (``agent``, ``uniform:K``, ``clip:K``, ``topk:K``, ``aks:K``, ``bolt:K``) against the
    config; returns its label."""
    try:
        label = strategy_label(strategy)
    except ValueError as e:
        raise StrategyError(str(e)) from e
    from vidlab.understanding.policies.baselines import BaselineSpec

    if label != AGENT and BaselineSpec.parse(strategy).needs_clip and not clip_model:
        raise StrategyError(f"strategy {strategy!r} needs clip_model (e.g. --clip-model ViT-B-16:openai)")
    return label


@dataclass
class QASettings:
    """How one question is answered: the policy, the strategy (the agent, or a uniform/CLIP baseline), the
    episode's budgets, the judge of open-ended answers and the CLIP model behind ``clip_sample``."""

    policy: str = "const:A"
    policy_kwargs: dict[str, Any] = field(default_factory=dict)  # e.g. max_pixels, dtype, api_key, timeout
    strategy: str = AGENT
    episode: EpisodeConfig = field(default_factory=EpisodeConfig)
    judge: str = "rule"  # open-ended scoring: rule | rule:exact | openai:URL@MODEL
    clip_model: str | None = None  # e.g. ViT-B-16:openai; None = no clip_sample tool and no clip:K baseline
    clip_sampling: str = "fps=1"
    clip_parity: bool = True
    cache_dir: str | None = None  # frame-index cache of the CLIP model
    # decoded, resized frames kept in memory for every question and strategy of a video (MB; None: a sixteenth
    # of the machine's memory, 256-4096; 0: off). Changes speed and memory, never an answer.
    frame_cache_mb: int | None = field(default=None, metadata=in_range(0))

    def __post_init__(self) -> None:
        validate(self)

    def qa_settings(self, strategy: str | None = None) -> QASettings:
        """Just the answering settings (of a larger config too), with another ``strategy`` if given."""
        names = [f.name for f in dataclasses.fields(QASettings)]
        values = {n: getattr(self, n) for n in names}
        if strategy is not None:
            values["strategy"] = strategy
        return QASettings(**values)


@dataclass
class ClassifyConfig:
    """How the two views are built and sampled, and the labelling thresholds."""

    k: int = field(default=4, metadata=in_range(1, 256))  # samples per view
    temperature: float = field(default=1.0, metadata=in_range(0.0, 10.0))
    max_new_tokens: int = field(default=512, metadata=in_range(1))
    seed: int = field(default=0, metadata=in_range(0))
    num_initial_frames: int = field(default=16, metadata=in_range(1, 1024))
    rich_uniform_frames: int = field(
        default=32, metadata=in_range(1, 1024)
    )  # the richer view: uniform frames ...
    # ... plus the top CLIP frames for the question (0 disables; needs a CLIP model)
    rich_clip_frames: int = field(default=8, metadata=in_range(0, 1024))
    # the initial view plus ``initial_views - 1`` shifted copies of its frame grid (same count, moved by v/V of
    # the stride); Direct needs ``direct_min`` in every one, so an answer that only the exact 16 frames give (a
    # lucky guess from incidental content) is not Direct. 1: the initial view alone.
    initial_views: int = field(default=1, metadata=in_range(1, 64))
    direct_min: float = field(default=0.75, metadata=in_range(0.0, 1.0))
    active_gain: float = field(default=0.5, metadata=in_range(0.0, 1.0))
    drop_filtered: bool = False  # keep filtered rows (labelled "filtered") unless asked to drop them

    def __post_init__(self) -> None:
        validate(self, "classify.")


@dataclass
class EvalConfig(QASettings):
    """Settings of ``vidlab eval-qa`` (and of ``qa`` / ``classify``: one preset serves all three commands).

    Written next to the results as ``config.yaml``. The answering settings are :class:`QASettings`'
    (``strategy`` is ``vidlab qa``'s single strategy); ``run`` says where the job runs; ``video_root`` and
    ``classify`` are ``vidlab classify``'s.
    """

    PRESET_DIR: ClassVar[str] = "qa"
    # before the one `run:` block (they work for one release, with a warning)
    LEGACY_KEYS: ClassVar[dict[str, str]] = TOP_LEVEL_RUN_KEYS

    benchmark: str = "jsonl"
    data: str = ""
    split: str | None = None
    video_dir: str | None = None
    limit: int | None = field(default=None, metadata=in_range(1))
    strategies: tuple[str, ...] = (AGENT,)
    out: str = "outputs/eval-qa"
    run: RunConfig = field(default_factory=RunConfig)
    video_root: str | None = None
    classify: ClassifyConfig = field(default_factory=ClassifyConfig)

    def __post_init__(self) -> None:
        validate(self)
        if not self.strategies:
            raise ConfigError(
                "strategies: expected at least one of agent, uniform:K, clip:K, topk:K, aks:K, bolt:K, got []"
            )
