"""``CompbenchConfig``: one config for generate, score, report and export (defaults <- preset <- key=value).

Presets live in ``configs/compbench/`` (``--preset compbench/tiny``, ``compbench/wan2.1-t2v-14b``,
``compbench/wan2.2-t2v-a14b``). ``generate.*`` is a full :class:`vidlab.generation.pipeline.GenerateConfig` (model,
size, steps, ``comp_attn``); the method decides which of SCI/LAM is on (see :data:`METHODS`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import ClassVar

from vidlab.config import ConfigError, in_range
from vidlab.distributed.config import RunConfig as BaseRunConfig
from vidlab.generation.config import CompAttnConfig
from vidlab.generation.pipeline import GenerateConfig

# method -> (Comp-Attn enabled, SCI enabled, LAM enabled). baseline is diffusers' own attention, same seed.
# ts_attn: TS-Attn, the published sibling method (generation/ts_attn.py), run through the same processor with
# lam.rule=ts_attn and its own settings (lam.ts_*; the layout is not used), SCI off.
METHODS: dict[str, tuple[bool, bool, bool]] = {
    "baseline": (False, False, False),
    "sci": (True, True, False),
    "lam": (True, False, True),
    "both": (True, True, True),
    "ts_attn": (True, False, True),
}


@dataclass
class RunConfig(BaseRunConfig):
    """Where generation runs: vidlab's ``run:`` block (backend, workers, cpus/gpus_per_worker, retries; each
    worker loads the pipeline once; gpus_per_worker=1 on a GPU cluster) plus the planning threads and the
    progress bar. Not part of the job identity: more workers still resume the same job. The old names
    (num_workers, num_gpus_per_worker, ...) work for one release with a warning."""

    plan_threads: int = field(
        default=4, metadata=in_range(1, 256)
    )  # planning (the LLM planner is network bound)
    progress: bool = True


@dataclass
class ScoreConfig:
    """Offline metrics and official-metric adapters (see generation/compbench/metrics)."""

    metrics: list[str] = field(default_factory=lambda: ["clip_alignment", "clip_presence"])
    clip_model: str = "vidlab-tiny"  # any vidlab.clip spec: ViT-B-32:openai, hf-hub:..., a local dir
    device: str = "auto"
    num_frames: int = 16  # frames sampled per video, as the official scripts do (linspace over the clip)
    presence_threshold: float | None = None  # None: calibrated on this run (own vs other prompts' phrases)
    ingest: str | None = None  # folder of the official scripts' CSV outputs to merge into the report
    mllm: str | None = None  # "module:factory" building an MLLM backend (see official/mllm.py)
    detector: str | None = None  # "module:factory" building a GroundingDINO backend (official/grounding.py)
    tracker: str | None = None  # "module:factory" building a point-tracking backend (official/tracking.py)


@dataclass
class ReportConfig:
    """Tables and chart: paired bootstrap over prompts."""

    bootstrap: int = 2000
    ci: float = 0.95
    seed: int = 0
    primary_metric: str = "clip_alignment"  # the one the bar chart shows


@dataclass
class CompbenchConfig:
    """A whole T2V-CompBench run: suite selection, seeds x methods, generation settings, scoring, report."""

    data: str = ""  # benchmark folder; "" = ../shared/data/t2v-compbench next to the repository
    out: str = "outputs/compbench/run"
    categories: list[str] | None = None  # None = all 7
    prompts_per_category: int | None = None  # None = all 100
    prompt_ids: list[str] | None = None  # exact ids (consistent_attr-0001 ...) instead of the two above
    seeds: list[int] = field(default_factory=lambda: [0])
    methods: list[str] = field(default_factory=lambda: list(METHODS))
    planner: str = "rule"  # rule | llm (planned once, before generation, cached)
    measure_layout: bool = False  # capture attention in generation for the layout_faithfulness metric
    export_root: str = ""  # "" = <out>/official
    export_seed: int | None = None  # which seed the official layout holds; None = the first
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    run: RunConfig = field(default_factory=RunConfig)
    score: ScoreConfig = field(default_factory=ScoreConfig)
    report: ReportConfig = field(default_factory=ReportConfig)

    PRESET_DIR: ClassVar[str] = "compbench"  # `--preset tiny` reads configs/compbench/tiny.yaml

    def check(self) -> CompbenchConfig:
        """Validate what a model load would only find out later; returns self."""
        bad = [m for m in self.methods if m not in METHODS]
        if bad or not self.methods:
            raise ConfigError(f"methods {self.methods} must be a non-empty subset of {list(METHODS)}")
        if len(set(self.methods)) != len(self.methods) or len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"methods {self.methods} and seeds {self.seeds} must not repeat")
        if not self.seeds:
            raise ConfigError("seeds must list at least one seed")
        if self.planner not in ("rule", "llm"):
            raise ConfigError(f"planner {self.planner!r} must be rule or llm")
        g = self.generate
        if g.seed != 0 or g.planner != "rule" or g.num_videos != 1:
            raise ConfigError(
                "generate.seed / generate.planner / generate.num_videos are not used by compbench: "
                "set seeds=[...] and planner=... at the top level (one video per prompt x seed x method)"
            )
        if self.prompts_per_category is not None and self.prompts_per_category < 1:
            raise ConfigError(f"prompts_per_category must be >= 1, got {self.prompts_per_category}")
        return self


def method_comp_attn(base: CompAttnConfig, method: str, capture: bool = False) -> CompAttnConfig:
    """The Comp-Attn config of ``method``: the preset's settings with SCI/LAM switched as the method says.

    With ``capture`` (``measure_layout``) every method captures attention maps; the baseline then runs with
    Comp-Attn installed but inert (SCI and LAM off), which gives diffusers' output bit for bit (tested in
    tests/generation/test_exactness.py) plus the maps the layout-faithfulness measure reads."""
    enabled, sci, lam = METHODS[method]
    cfg = copy.deepcopy(base)
    cfg.enabled = enabled or capture
    cfg.capture_attention = capture
    cfg.sci.enabled = sci
    cfg.lam.enabled = lam
    cfg.lam.rule = "ts_attn" if method == "ts_attn" else "comp_attn"
    return cfg
