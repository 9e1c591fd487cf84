"""Per-call state that the attn2 processors read: step, progress, cond/uncond pass, LAM targets, SCI plan.

``attention_kwargs`` never reach Wan's processors, so the controller learns where the denoising loop is from
the pipeline itself, **outside** the transformer's forward: ``WanPipeline`` wraps every denoiser call in
``transformer.cache_context("cond" | "uncond")`` right after setting ``pipe._current_timestep``. Comp-Attn
installs a thin ``cache_context`` on each transformer (``CompAttn``) that calls ``on_forward`` first: it reads
the step index from the scheduler's timesteps, decides whether LAM / map capture are on for this forward, and
prepares the SCI-updated conditional embeddings. Inside the forward (which ``torch.compile`` traces) only
plain flags and tensors are read: a forward pre-hook swaps in the prepared embeddings, the processors ask
``lam_active(block)`` / ``capture_active(block)`` and append their tensors to the current forward's record.
Nothing there calls ``.item()``/``float()`` on a tensor, so a compiled transformer has no graph break; the
logs are turned into numbers when the call ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from vidlab.generation.sci import SCIPlan, sci_weight

if TYPE_CHECKING:  # pragma: no cover
    from vidlab.generation.attention_maps import AttentionMapStore
    from vidlab.generation.config import CompAttnConfig
    from vidlab.generation.lam import LamTargets


@dataclass
class ForwardRecord:
    """One transformer forward of a call: which expert, step and pass, and what the processors recorded."""

    transformer: str
    step: int
    cond: bool
    lam: list[tuple[int, torch.Tensor, torch.Tensor]] = field(default_factory=list)  # (block, iou, alpha)
    maps: list[tuple[int, bool, torch.Tensor]] = field(default_factory=list)  # (block, biased, maps)


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
    records: list[ForwardRecord] = field(default_factory=list)

    def finish(self) -> None:
        """Turn the finished forwards' tensor records into the plain logs (``lam_log``) and the map store.

        Called outside the forward (before the next one starts, and when the call ends)."""
        for rec in self.records:
            for block, iou, alpha in rec.lam:
                self.lam_log.append(_lam_entry(rec.transformer, rec.step, block, iou, alpha))
            if self.maps is not None:
                for block, biased, maps in rec.maps:
                    self.maps.add(rec.step, maps, block=block, biased=biased, transformer=rec.transformer)
        self.records = []


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
        self.expert2_start: int | None = None  # first step the low-noise expert (transformer_2) ran
        # read inside the (possibly compiled) forward: plain flags and tensors, set by on_forward
        self.lam_now = False
        self.capture_now = False
        self.embeds: torch.Tensor | None = None  # SCI-updated cond embeddings for this forward, or None
        self.record: ForwardRecord | None = None
        # the processors this controller drives (each registers itself): their ``pending`` records of a compiled
        # forward are moved into the forward's record outside the graph (``_drain``)
        self.processors: list[Any] = []

    # ---- call lifecycle -------------------------------------------------------------------------
    def begin(self, call: CallState) -> None:
        """Start a generation call; processors become active for its cond passes."""
        self.call = call
        self.expert2_start = None
        self._idle()

    def end(self) -> CallState | None:
        """Finish the call and return its state (logs, maps); processors go back to pass-through."""
        self._drain()
        call, self.call = self.call, None
        self._idle()
        if call is not None:
            call.finish()
        return call

    def _idle(self) -> None:
        self.is_cond = False
        self.lam_now = self.capture_now = False
        self.embeds = None
        self.record = None

    # ---- outside the forward: the pipeline's cache_context("cond" | "uncond") ----------------------
    def on_forward(self, tag: str, name: str | None) -> None:
        """Called before each denoiser forward with the transformer's name and the pass (``cond``/``uncond``)."""
        self.transformer = tag
        call = self.call
        if call is None:
            self._idle()
            return
        cond = name == "cond"
        t = getattr(self.pipe, "_current_timestep", None)
        self.step, self.num_steps = self._step_index(
            None if t is None else float(torch.as_tensor(t).flatten()[0])
        )
        self.progress = self.step / max(self.num_steps, 1)
        if tag == "transformer_2" and self.expert2_start is None:
            self.expert2_start = self.step  # Wan2.2 switches experts once, at the boundary timestep
        self.is_cond = cond
        self._drain()
        call.finish()  # the previous forward's records, now that it has run
        call.forwards.append((tag, self.step, cond))
        self.record = ForwardRecord(tag, self.step, cond)
        call.records.append(self.record)
        lam = self.config.lam
        self.lam_now = bool(cond and lam.enabled and call.targets is not None and self.in_lam_window())
        self.capture_now = bool(cond and call.maps is not None and call.targets is not None)
        self.embeds = None
        if not cond or call.sci is None or call.sci.is_noop or call.cond_ref is None:
            return
        sc = self.config.sci
        w = sci_weight(self.progress, sc.strength, sc.start, sc.end, sc.decay)
        call.sci_weights[self.step] = w
        if w != 0.0:
            self.embeds = call.sci.apply(call.cond_ref, w)

    def _drain(self) -> None:
        """Move what the processors recorded inside a compiled forward (``pending``) into that forward's record.

        Each processor appends to its own list, empty when its block runs, so a block compiled on its own
        (``transformer.compile_repeated_blocks()``) sees the same guards in every block: one graph for all of them."""
        rec = self.record
        for proc in self.processors:
            if not proc.pending:
                continue
            if rec is not None:
                for kind, first, second in proc.pending:
                    (rec.lam if kind == "lam" else rec.maps).append((proc.block, first, second))
            proc.pending.clear()

    def _step_index(self, t_val: float | None) -> tuple[int, int]:
        """Step index of timestep ``t_val`` in the scheduler's current timesteps, and the step count."""
        ts = getattr(getattr(self.pipe, "scheduler", None), "timesteps", None)
        if t_val is None or ts is None or len(ts) == 0:
            return 0, 1
        ts = ts.detach().float().cpu()
        return int((ts - t_val).abs().argmin()), len(ts)

    # ---- inside the forward (traced by torch.compile) -------------------------------------------
    def pre_hook(self, tag: str):
        """A ``register_forward_pre_hook(with_kwargs=True)`` callable: swaps in the SCI-updated embeddings."""

        def hook(module: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
            new = self.embeds
            if new is None:
                return None
            if "encoder_hidden_states" in kwargs:
                return args, {**kwargs, "encoder_hidden_states": new}
            return (*args[:2], new, *args[3:]), kwargs

        return hook

    def in_lam_window(self) -> bool:
        """The current step lies in LAM's window for the expert that runs it.

        ``transformer`` (Wan2.1, and Wan2.2's high-noise expert): progress over the whole schedule
        < ``lam.step_fraction``. ``transformer_2`` (Wan2.2's low-noise expert): progress over that expert's own
        steps (from the step it takes over) < ``lam.step_fraction_2`` (default 0: LAM stays off there).
        ``lam.rule="ts_attn"``: TS-Attn's window, the first ``int(ts_step_fraction x steps)`` steps of the whole
        schedule, whichever expert runs them.
        """
        lam = self.config.lam
        if lam.rule == "ts_attn":
            from vidlab.generation.ts_attn import in_window

            return in_window(self.step, self.num_steps, lam.ts_step_fraction)
        if self.transformer == "transformer_2":
            start = self.expert2_start if self.expert2_start is not None else 0
            own = (self.step - start) / max(self.num_steps - start, 1)
            return own < lam.step_fraction_2
        return self.progress < lam.step_fraction

    def lam_active(self, block: int) -> bool:
        """LAM modulates this block in this forward: cond pass, within the step window, a selected block
        (``lam.blocks``; with ``lam.rule="ts_attn"``: ``lam.ts_blocks``, None = the odd-indexed blocks)."""
        if not self.lam_now:
            return False
        lam = self.config.lam
        if lam.rule == "ts_attn":
            return block % 2 == 1 if lam.ts_blocks is None else block in lam.ts_blocks
        return lam.blocks is None or block in lam.blocks

    def capture_active(self, block: int) -> bool:
        """Attention maps are captured from this block in this forward (cond passes only)."""
        blocks = self.config.capture_blocks
        return self.capture_now and (blocks is None or block in blocks)

    def targets_on(self, device: torch.device) -> LamTargets:
        """The call's LAM targets on ``device`` (placed on the execution device when the call begins)."""
        call = self.call
        assert call is not None and call.targets is not None
        t = call.targets
        return t if t.cols.device == device else t.to(device)

    def record_lam(
        self, block: int, iou: torch.Tensor, alpha: torch.Tensor, pending: list | None = None
    ) -> None:
        """Log one modulated call: IoU and alpha per subject group (batch-averaged).

        Eager: logged at once. Under ``torch.compile`` the tensors are kept (on the calling processor's
        ``pending`` list, else on the forward's record) and made into numbers outside the graph (before the next
        forward / when the call ends): no graph break."""
        call = self.call
        if call is None:
            return
        if torch.compiler.is_compiling():
            if pending is not None:
                pending.append(("lam", iou.detach(), alpha.detach()))
            elif self.record is not None:
                self.record.lam.append((block, iou.detach(), alpha.detach()))
            return
        call.lam_log.append(_lam_entry(self.transformer, self.step, block, iou, alpha))

    def record_map(
        self, block: int, maps: torch.Tensor, biased: bool = False, pending: list | None = None
    ) -> None:
        """Hand one block's subject maps (B, G, S) to the call's map store, saying whether LAM biased them
        (under ``torch.compile``: kept as ``record_lam`` keeps its tensors and stored outside the graph)."""
        call = self.call
        if call is None or call.maps is None:
            return
        if torch.compiler.is_compiling():
            if pending is not None:
                pending.append(("map", biased, maps.detach()))
            elif self.record is not None:
                self.record.maps.append((block, biased, maps.detach()))
            return
        call.maps.add(self.step, maps, block=block, biased=biased, transformer=self.transformer)


def _lam_entry(transformer: str, step: int, block: int, iou: torch.Tensor, alpha: torch.Tensor) -> dict:
    return {
        "transformer": transformer,
        "step": step,
        "block": block,
        "iou": [round(float(x), 6) for x in iou.float().mean(0)],
        "alpha": [round(float(x), 6) for x in alpha.float().mean(0)],
    }
