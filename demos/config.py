"""The demo's settings: which models it serves and the caps that keep one request from taking the machine.

Resolved like every vidlab config: dataclass defaults <- ``--preset NAME|PATH`` (``configs/demo/*.yaml``)
<- ``key=value`` overrides. The defaults below are the one source of the demo's settings: ``vidlab demo`` and
``vidlab demo --preset default`` resolve to the same config (``configs/demo/default.yaml`` sets nothing). The generation model is itself a ``vidlab generate`` preset, so switching the demo
from the tiny random pipeline to a trained one (or to real Wan weights) is a preset change, not a code change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from vidlab.understanding.policies import DEFAULT_POLICY

# The largest seed the page takes: a browser's number holds integers exactly only up to 2**53 - 1, so a larger
# seed typed on the page would silently become another one (and torch's generator stops at 2**64 - 1).
MAX_SEED = 2**53 - 1


@dataclass
class DemoGenerationConfig:
    """The generation tab: model preset, defaults shown in the UI, and hard caps."""

    # a `vidlab generate` preset name or path (generate/toyworld-calibrated, tiny, wan2.1-t2v-1.3b, ...); the
    # default is the small Wan trained on the coloured-shapes world with Comp-Attn's strengths calibrated for it
    preset: str = "generate/toyworld-calibrated"
    prompt: str = "a red circle to the left of a blue square"  # the prompt the page opens with
    overrides: list[str] = field(default_factory=list)  # key=value applied to that preset
    planner: Literal["rule", "llm"] = "rule"  # fills in subjects and boxes from the prompt
    attention_maps: bool = True  # capture per-subject cross-attention maps (costs a little time)
    max_steps: int = field(default=50, metadata={"range": (1, 1000)})
    max_frames: int = field(default=81, metadata={"range": (1, 1000)})
    max_side: int = field(default=832, metadata={"range": (16, 4096)})  # pixels, height and width
    max_subjects: int = field(default=8, metadata={"range": (1, 64)})
    max_prompt_chars: int = field(default=1000, metadata={"range": (1, 100_000)})


@dataclass
class DemoQAConfig:
    """The QA tab: the policy and agents, the synthetic examples, and upload/video caps."""

    # policy spec as for `vidlab qa`: the default policy, toy:where (vidlab.understanding.policies.DEFAULT_POLICY; it serves
    # both toy worlds), or toy:shipped, pixel:red, hf:PATH, openai:URL@MODEL
    policy: str = DEFAULT_POLICY
    # CLIP model for clip_sample; "auto" = the toy policy's own toy CLIP for toy:* policies, else none
    # (None: only uniform_sample is offered)
    clip_model: str | None = "auto"
    frame_resize: Literal["fit", "reference"] = (
        "fit"  # fit (vidlab's aspect-keeping fit) | reference (the authors' exact 640x360)
    )
    clip_sampling: str = "fps=1"
    # how the page's frames are chosen when it opens: agent (the policy's episode) or a one-shot baseline over the
    # same frame index, answered by the same policy: uniform:K, clip:K, or a selector topk:K, aks:K, bolt:K;
    # the page offers these at 16 frames beside this one
    strategy: str = "agent"
    max_calls: int = field(default=5, metadata={"range": (0, 50)})
    synthetic_videos: int = field(default=4, metadata={"range": (0, 64)})  # needle examples made at start
    max_upload_mb: float = field(default=200.0, metadata={"range": (0.001, 100_000.0)})
    max_video_seconds: float = field(default=7200.0, metadata={"range": (0.1, 1e6)})
    max_video_frames: int = field(default=500_000, metadata={"range": (1, 10**9)})
    max_question_chars: int = field(default=2000, metadata={"range": (1, 100_000)})


@dataclass
class DemoConfig:
    """Server, work area and the two tabs."""

    PRESET_DIR: ClassVar[str] = "demo"  # `--preset tiny` finds configs/demo/tiny.yaml

    # None: $GRADIO_SERVER_NAME / $GRADIO_SERVER_PORT as every Gradio app honours them (Spaces sets both),
    # else 127.0.0.1:7860. --host/--port (or host=/port=) win over the environment.
    host: str | None = None
    port: int | None = field(default=None, metadata={"range": (0, 65535)})  # 0 = any free port
    queue_size: int = field(
        default=16, metadata={"range": (1, 10_000)}
    )  # waiting requests beyond this are refused
    work_dir: str | None = None  # where outputs are written (default: a fresh temporary folder)
    generation: DemoGenerationConfig = field(default_factory=DemoGenerationConfig)
    qa: DemoQAConfig = field(default_factory=DemoQAConfig)
