"""The metric registry of ``vidlab compbench score``: pluggable per-video metrics, resolved by name.

A metric is a class with ``name``, ``description`` and::

    def __init__(self, cfg: ScoreConfig, suite: Suite) -> None      # load models once (per worker)
    def score(self, ctx: VideoContext) -> dict                      # one video -> {"score": float|None, ...}
    @classmethod
    def finalize(cls, cfg, results: dict[str, dict]) -> dict        # optional: run-wide step (calibration)

``score`` is the per-video value in [0, 1] that the report averages (None: not applicable to this video,
with a ``"reason"``). Register one with ``@register("name")``; third-party packages can register theirs
under the ``vidlab.compbench_metrics`` entry-point group (``name = "module:Class"``).

Built in (offline): ``clip_alignment``, ``clip_presence``, ``layout_faithfulness`` (adapter to the
non-circular attention measure in ``vidlab.generation.attention_measure``), ``toyworld_shapes`` (adapter to the
exact shape detector of ``vidlab.generation.toyworld``). Official-metric adapters: ``official_mllm``,
``official_grounding``, ``official_tracking`` (see ``generation/compbench/official``); the official
scripts' CSV outputs are merged with ``score.ingest=DIR`` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vidlab.errors import UserError

_REGISTRY: dict[str, str | type] = {
    "clip_alignment": "vidlab.generation.compbench.metrics.clip:ClipAlignment",
    "clip_presence": "vidlab.generation.compbench.metrics.clip:ClipPresence",
    "layout_faithfulness": "vidlab.generation.compbench.metrics.adapters:LayoutFaithfulness",
    "toyworld_shapes": "vidlab.generation.compbench.metrics.adapters:ToyworldShapes",
    "official_mllm": "vidlab.generation.compbench.official.mllm:OfficialMLLM",
    "official_grounding": "vidlab.generation.compbench.official.grounding:OfficialGrounding",
    "official_tracking": "vidlab.generation.compbench.official.tracking:OfficialTracking",
}


class MetricError(UserError):
    """An unknown metric, or one whose model/adapter is not available here (the message says what to do)."""


@dataclass
class VideoContext:
    """Everything a metric may look at for one generated video."""

    row: dict[str, Any]  # the manifest row (id, prompt_id, category, method, seed, video, layout, ...)
    prompt: Any  # suite.Prompt (text + official metadata)
    video: Path
    layout_file: Path | None
    num_frames: int = 16
    _frames: Any = field(default=None, repr=False)

    def frames(self) -> Any:
        """uint8 [n, H, W, 3]: the official sampling, ``linspace(0, total-1, 16)`` as int (all frames if fewer)."""
        if self._frames is None:
            self._frames = sample_frames(self.video, self.num_frames)
        return self._frames

    def layout(self) -> Any | None:
        from vidlab.generation.compbench.planning import load_layout

        return load_layout(self.layout_file) if self.layout_file else None


def official_indices(total: int, n: int = 16) -> list[int]:
    """Frame indices exactly as the official scripts pick them (``np.linspace(..., dtype=int)``)."""
    import numpy as np

    if total <= n:
        return list(range(total))
    return [int(i) for i in np.linspace(0, total - 1, n, dtype=int)]


def sample_frames(video: Path, n: int = 16) -> Any:
    from vidlab.video import open_video

    with open_video(video) as r:
        return r.get_frames(official_indices(r.num_frames, n))


def register(name: str) -> Callable[[type], type]:
    """Class decorator adding a metric to the registry under ``name``."""

    def deco(cls: type) -> type:
        _REGISTRY[name] = cls
        cls.name = name
        return cls

    return deco


def available() -> list[str]:
    _load_entry_points()
    return sorted(_REGISTRY)


def _load_entry_points() -> None:
    from importlib.metadata import entry_points

    for ep in entry_points(group="vidlab.compbench_metrics"):
        _REGISTRY.setdefault(ep.name, ep.value)


def get_metric(name: str) -> type:
    """The metric class registered as ``name`` (imported on first use)."""
    from importlib import import_module

    _load_entry_points()
    if name not in _REGISTRY:
        import difflib

        close = difflib.get_close_matches(name, list(_REGISTRY), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise MetricError(f"unknown metric {name!r}{hint}; registered: {', '.join(sorted(_REGISTRY))}")
    target = _REGISTRY[name]
    if isinstance(target, str):
        module, attr = target.split(":")
        target = getattr(import_module(module), attr)
        target.name = name
        _REGISTRY[name] = target
    return target


def build_backend(spec: str | None, what: str) -> Any:
    """Build a model backend from ``"module:factory"`` (called with no arguments), or explain what is missing."""
    from importlib import import_module

    if not spec:
        raise MetricError(
            f"the {what} adapter needs a backend: set score.{what}=module:factory (a callable returning an object "
            f"with the interface in generation/compbench/official/{what_file(what)}), or ingest the official "
            "scripts' CSV outputs with score.ingest=DIR"
        )
    if ":" not in spec:
        raise MetricError(f"score.{what}={spec!r} must look like module:factory")
    module, attr = spec.split(":", 1)
    try:
        factory = getattr(import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise MetricError(f"score.{what}={spec!r}: cannot import it ({e})") from e
    return factory()


def what_file(what: str) -> str:
    return {"mllm": "mllm.py", "detector": "grounding.py", "tracker": "tracking.py"}.get(what, "")
