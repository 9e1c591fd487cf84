"""Comp-Attn's settings as dataclasses: ``SCIConfig``, ``LAMConfig`` and ``CompAttnConfig``.

They sit apart from ``comp_attn.py`` (the install/generate handle), ``controller.py`` and ``processor.py`` so
those import the configs downward and never each other in a circle. Every config checks its own fields
(types and ``metadata["range"]``) on construction through ``vidlab.config.validate``, whether it is built in
Python or from a preset, and then its cross-field rules. Importing this module needs no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from vidlab.config import in_range as _range
from vidlab.config import validate


@dataclass
class SCIConfig:
    """SCI settings (reconstruction; docs/guides/comp-attn.md): schedule ``w(t)`` and saliency temperature."""

    enabled: bool = True
    strength: float = field(default=0.5, metadata=_range(0.0, None))  # peak w(t); 0 makes SCI a no-op
    start: float = field(default=0.0, metadata=_range(0.0, 1.0))  # progress (0 = first step) where SCI starts
    end: float = field(default=0.5, metadata=_range(0.0, 1.0))  # progress where it stops
    decay: Literal["constant", "linear", "cosine"] = "cosine"  # shape of w over [start, end)
    tau: float = field(default=0.2, metadata=_range(1e-6, None))  # saliency softmax temperature
    rescale: bool = True  # rescale delta_i to the mean norm of the subject's token embeddings

    def __post_init__(self) -> None:
        validate(self)
        if self.start > self.end:
            raise ValueError(f"start={self.start} must be <= end={self.end}")


@dataclass
class LAMConfig:
    """LAM settings (reconstruction; docs/guides/comp-attn.md): IoU-guided strength, step window, blocks,
    rules."""

    enabled: bool = True
    # strength when the attention region already matches the box (IoU 1) / does not overlap at all (IoU 0)
    alpha_min: float = field(default=0.25, metadata=_range(0.0, None))
    alpha_max: float = field(default=1.0, metadata=_range(0.0, None))
    # modulate steps with progress < this share of the whole schedule (Wan2.1; Wan2.2's high-noise expert)
    step_fraction: float = field(default=0.3, metadata=_range(0.0, 1.0))
    # Wan2.2's low-noise expert (transformer_2): share of ITS OWN steps to modulate; 0 = LAM off there
    step_fraction_2: float = field(default=0.0, metadata=_range(0.0, 1.0))
    blocks: list[int] | None = None  # transformer block indices to modulate; None = all
    threshold: Literal["top_half_mean", "mean", "fixed"] = "top_half_mean"  # region rule per latent frame
    # threshold for rule "fixed" (on per-frame max-normalised attention)
    threshold_value: float = field(default=0.5, metadata=_range(0.0, 1.0))
    spread: Literal["max_min", "std"] = "max_min"  # bias scale: max-mean inside, min-mean outside | +-std
    apply: Literal["mask", "reweight"] = "mask"  # additive float mask | exact rescale of the output, no mask
    probe: Literal["fused", "logsumexp"] = "fused"  # how subject-column probabilities are found
    # logsumexp probe: logits per chunk when computing the normaliser
    chunk_elements: int = field(default=16_777_216, metadata=_range(1, None))
    separate_instances: bool = True  # counted phrase: tokens two instance boxes cover get the outside bias
    # where LAM pushes a subject: "box" = its layout box (the paper's rule, default); "fused" = the box
    # combined with the model's own cross-attention region for the subject (v1 / MagicComp-style; see the guide)
    mask_source: Literal["box", "fused"] = "box"
    # which rule modulates the cross-attention: "comp_attn" (LAM above: layout boxes, IoU-guided strength; the
    # default) or "ts_attn" (TS-Attn, generation/ts_attn.py: no layout; each subject's own attention region gets
    # its tokens raised and the other subjects' lowered). The ts_* settings below are read only by "ts_attn";
    # their defaults are the published code's (Hong-yu-Zhang/TS-Attn, configs/TS-Attn_t2v.yaml and the model code)
    rule: Literal["comp_attn", "ts_attn"] = "comp_attn"
    # TS-Attn: modulate the steps with index < int(ts_step_fraction x steps) of the whole schedule, whichever
    # expert runs them (the yaml's time_step_ratio 0.2)
    ts_step_fraction: float = field(default=0.2, metadata=_range(0.0, 1.0))
    # TS-Attn's dynamic strength per query and key: alpha = min + (max - min) x (1 - p_hat) (get_dynamic_alpha)
    ts_alpha_min: float = field(default=1.0, metadata=_range(0.0, None))
    ts_alpha_max: float = field(default=1.5, metadata=_range(0.0, None))
    ts_erode: bool = True  # drop region tokens with no 3x3 neighbour in the region (the yaml's use_erode)
    # blocks TS-Attn biases; None = the odd-indexed ones (the code's use_control = i % 2 != 0)
    ts_blocks: list[int] | None = None
    # whose bias is applied when a prompt names several subjects: "all" (every subject's, summed; our reading) or
    # "last" (parity with the published code, whose per-subject list is reset inside its loop, so only the last
    # subject's bias survives)
    ts_subjects: Literal["all", "last"] = "all"

    def __post_init__(self) -> None:
        validate(self)
        if self.alpha_min > self.alpha_max:
            raise ValueError(f"alpha_min={self.alpha_min} must be <= alpha_max={self.alpha_max}")
        if self.ts_alpha_min > self.ts_alpha_max:
            raise ValueError(f"ts_alpha_min={self.ts_alpha_min} must be <= ts_alpha_max={self.ts_alpha_max}")


@dataclass
class CompAttnConfig:
    """Everything Comp-Attn does, as config values (defaults <- preset ``comp_attn:`` <- overrides)."""

    enabled: bool = True
    sci: SCIConfig = field(default_factory=SCIConfig)
    lam: LAMConfig = field(default_factory=LAMConfig)
    capture_attention: bool = False  # keep per-step subject cross-attention maps (costs time)
    capture_blocks: list[int] | None = None  # blocks to average maps over; None = all
    # prompt tokens, zero-padded; None: the model's own (Wan's 512, or less where its tokenizer's
    # model_max_length says so: the toy world's model is trained with 16)
    max_sequence_length: int | None = field(default=None, metadata=_range(1, None))

    def __post_init__(self) -> None:
        validate(self)
