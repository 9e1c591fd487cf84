"""Per-call state that the attn2 processors read: step, progress, cond/uncond pass, LAM targets, SCI plan.

``attention_kwargs`` never reach Wan's processors, so a forward pre-hook on each transformer feeds this
controller before every forward: it reads ``timestep`` (-> step index in the scheduler's timesteps) and
``encoder_hidden_states`` (-> cond or uncond pass), and on the cond pass swaps in the SCI-updated embeddings.
Processors stay stateless: they only ask the controller what to do for the current call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from generation.sci import SCIPlan, sci_weight

if TYPE_CHECKING:  # pragma: no cover
    from generation.attention_maps import AttentionMapStore
    from generation.comp_attn import CompAttnConfig
    from generation.lam import LamTargets


@dataclass
class CallState:
    """What one ``CompAttn.generate`` call carries into the denoising loop."""

    cond_ref: torch.Tensor | None = None  # the exact prompt_embeds object the pipeline passes on cond passes
    uncond_ref: torch.Tensor | None = None
    targets: LamTargets | None = None
    sci: SCIPlan | None = None
    maps: AttentionMapStore | None = None
    lam_log: list[dict[str, Any]] = field(default_factory=list)
    sci_weights: dict[int, float] = field(default_factory=dict)
    forwards: list[tuple[str, int, bool]] = field(default_factory=list)  # (transformer, step, is_cond)
    _device_targets: dict[torch.device, LamTargets] = field(default_factory=dict)


class Controller:
    """Tracks the current forward (which transformer, step, cond/uncond) and the active call's targets."""

    def __init__(self, config: CompAttnConfig, pipe: Any):
        self.config = config
        self.pipe = pipe
        self.call: CallState | None = None
        self.is_cond = False
        self.step = 0
        self.num_steps = 1
        self.progress = 0.0
        self.transformer = ""
        self._last_t: float | None = None
        self._forwards_at_t = 0
        self.expert2_start: int | None = None  # first step the low-noise expert (transformer_2) ran

    # ---- call lifecycle -------------------------------------------------------------------------
    def begin(self, call: CallState) -> None:
        """Start a generation call; processors become active for its cond passes."""
        self.call = call
        self._last_t = None
        self._forwards_at_t = 0
        self.expert2_start = None

    def end(self) -> CallState | None:
        """Finish the call and return its state (logs, maps); processors go back to pass-through."""
        call, self.call = self.call, None
        self.is_cond = False
        return call

    # ---- the forward pre-hook -------------------------------------------------------------------
    def pre_hook(self, tag: str):
        """A ``register_forward_pre_hook(with_kwargs=True)`` callable for the transformer named ``tag``."""

        def hook(module: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
            return self._pre_forward(tag, args, kwargs)

        return hook

    def _pre_forward(self, tag: str, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        self.transformer = tag
        call = self.call
        if call is None:
            self.is_cond = False
            return None
        ehs = kwargs["encoder_hidden_states"] if "encoder_hidden_states" in kwargs else args[2]
        t = kwargs["timestep"] if "timestep" in kwargs else args[1]
        t_val = float(t.flatten()[0])
        if t_val != self._last_t:
            self._last_t, self._forwards_at_t = t_val, 0
        self._forwards_at_t += 1
        if ehs is call.cond_ref:
            cond = True
        elif ehs is call.uncond_ref:
            cond = False
        else:  # embeddings replaced (e.g. by a user callback): the pipeline runs cond first at each step
            cond = self._forwards_at_t == 1
        self.step, self.num_steps = self._step_index(t_val)
        self.progress = self.step / max(self.num_steps, 1)
        if tag == "transformer_2" and self.expert2_start is None:
            self.expert2_start = self.step  # Wan2.2 switches experts once, at the boundary timestep
        self.is_cond = cond
        call.forwards.append((tag, self.step, cond))
        if not cond or call.sci is None or call.sci.is_noop:
            return None
        sc = self.config.sci
        w = sci_weight(self.progress, sc.strength, sc.start, sc.end, sc.decay)
        call.sci_weights[self.step] = w
        if w == 0.0:
            return None
        new = call.sci.apply(ehs, w)
        if "encoder_hidden_states" in kwargs:
            return args, {**kwargs, "encoder_hidden_states": new}
        return (*args[:2], new, *args[3:]), kwargs

    def _step_index(self, t_val: float) -> tuple[int, int]:
        """Step index of timestep ``t_val`` in the scheduler's current timesteps, and the step count."""
        ts = getattr(getattr(self.pipe, "scheduler", None), "timesteps", None)
        if ts is None or len(ts) == 0:
            return 0, 1
        ts = ts.detach().float().cpu()
        return int((ts - t_val).abs().argmin()), len(ts)

    # ---- what processors ask ------------------------------------------------------------------
    def in_lam_window(self) -> bool:
        """The current step lies in LAM's window for the expert that runs it.

        ``transformer`` (Wan2.1, and Wan2.2's high-noise expert): progress over the whole schedule
        < ``lam.step_fraction``. ``transformer_2`` (Wan2.2's low-noise expert): progress over that expert's own
        steps (from the step it takes over) < ``lam.step_fraction_2`` (default 0: LAM stays off there).
        """
        lam = self.config.lam
        if self.transformer == "transformer_2":
            start = self.expert2_start if self.expert2_start is not None else 0
            own = (self.step - start) / max(self.num_steps - start, 1)
            return own < lam.step_fraction_2
        return self.progress < lam.step_fraction

    def lam_active(self, block: int) -> bool:
        """LAM modulates this block in this forward: cond pass, within the step window, a selected block."""
        lam = self.config.lam
        call = self.call
        return bool(
            call is not None
            and self.is_cond
            and lam.enabled
            and call.targets is not None
            and self.in_lam_window()
            and (lam.blocks is None or block in lam.blocks)
        )

    def capture_active(self, block: int) -> bool:
        """Attention maps are captured from this block in this forward (cond passes only)."""
        call = self.call
        blocks = self.config.capture_blocks
        return bool(
            call is not None
            and self.is_cond
            and call.maps is not None
            and call.targets is not None
            and (blocks is None or block in blocks)
        )

    def targets_on(self, device: torch.device) -> LamTargets:
        """The call's LAM targets on ``device`` (moved once per device and cached)."""
        call = self.call
        assert call is not None and call.targets is not None
        if device not in call._device_targets:
            call._device_targets[device] = call.targets.to(device)
        return call._device_targets[device]

    def record_lam(self, block: int, iou: torch.Tensor, alpha: torch.Tensor) -> None:
        """Log one modulated call: IoU and alpha per subject group (batch-averaged)."""
        if self.call is None:
            return
        self.call.lam_log.append(
            {
                "transformer": self.transformer,
                "step": self.step,
                "block": block,
                "iou": [round(float(x), 6) for x in iou.float().mean(0)],
                "alpha": [round(float(x), 6) for x in alpha.float().mean(0)],
            }
        )

    def record_map(self, block: int, maps: torch.Tensor, biased: bool = False) -> None:
        """Hand one block's subject maps (B, G, S) to the call's map store, saying whether LAM biased them."""
        if self.call is not None and self.call.maps is not None:
            self.call.maps.add(self.step, maps, block=block, biased=biased, transformer=self.transformer)
