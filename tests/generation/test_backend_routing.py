"""LAM on a mask-less attention backend: with flash (here a stand-in registered in diffusers' own registry, which
rejects masks as flash-attn does) set on the transformer, attn1 and every unmodulated attn2 call stay on it, only
the masked call of a modulated attn2 goes to PyTorch SDPA, and the output equals the all-SDPA run bit for bit.
The refusal remains only where no mask-capable backend is registered."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from vidlab.generation.comp_attn import apply_comp_attn
from vidlab.generation.config import CompAttnConfig
from vidlab.generation.errors import CompAttnBackendError
from vidlab.generation.layout import Layout, SubjectLayout
from vidlab.generation.processor import mask_backend, takes_float_mask
from vidlab.generation.tiny import build_tiny_pipeline

PROMPT = "a red cat on the left and a blue dog on the right"
KW = dict(height=32, width=32, num_frames=9, num_inference_steps=4, output_type="latent")
LAYOUT = Layout(
    PROMPT,
    [
        SubjectLayout("red cat", [(0.0, (0.0, 0.0, 0.5, 1.0))]),
        SubjectLayout("blue dog", [(0.0, (0.5, 0.0, 1.0, 1.0))]),
    ],
)


class Dispatch:
    """Which backend each attention call of the pipeline ran on, per module (``blocks.i.attn1``/``attn2``)."""

    def __init__(self) -> None:
        self.module: str | None = None
        self.calls: list[tuple[str | None, str, bool]] = []  # (module, backend, with a mask)

    def count(self, backend: str, kind: str, masked: bool | None = None) -> Counter:
        return Counter(
            m
            for m, b, mk in self.calls
            if b == backend and m is not None and m.endswith(kind) and (masked is None or mk == masked)
        )

    def watch(self, pipe) -> list:
        """Forward hooks on every attn1/attn2 that name the module the next backend calls belong to."""
        handles = []
        for tname in ("transformer", "transformer_2"):
            tr = getattr(pipe, tname, None)
            if tr is None:
                continue
            for i, block in enumerate(tr.blocks):
                for kind in ("attn1", "attn2"):
                    mod, name = getattr(block, kind), f"{tname}.blocks.{i}.{kind}"
                    handles.append(
                        mod.register_forward_pre_hook(lambda m, a, n=name: setattr(self, "module", n))
                    )
                    handles.append(mod.register_forward_hook(lambda m, a, o: setattr(self, "module", None)))
        return handles


@pytest.fixture
def stand_in(monkeypatch):
    """A stand-in ``flash`` backend (SDPA inside, masks rejected like flash-attn 2's) and a counting wrapper of
    ``native``, both real registrations in diffusers' registry; the registry is restored after the test."""
    from diffusers.models import attention_dispatch as AD

    reg = AD._AttentionBackendRegistry
    flash, native = AD.AttentionBackendName.FLASH, AD.AttentionBackendName.NATIVE
    for table in (
        "_backends",
        "_constraints",
        "_supported_arg_names",
    ):  # copies: the originals come back after
        monkeypatch.setattr(reg, table, dict(getattr(reg, table)))
    monkeypatch.setattr(reg, "_active_backend", reg._active_backend)
    real_requirements = AD._check_attention_backend_requirements
    monkeypatch.setattr(  # flash-attn itself need not be installed for the stand-in
        AD,
        "_check_attention_backend_requirements",
        lambda b: None if b == flash else real_requirements(b),
    )
    seen = Dispatch()
    real_native = reg._backends[native]

    @reg.register(flash, constraints=[AD._check_device, AD._check_shape])
    def _stand_in_flash(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        if attn_mask is not None:
            raise ValueError("`attn_mask` is not supported for flash-attn 2.")
        seen.calls.append((seen.module, "flash", False))
        q, k, v = (x.permute(0, 2, 1, 3) for x in (query, key, value))
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout_p, is_causal=is_causal, scale=scale
        )
        return out.permute(0, 2, 1, 3)

    @reg.register(native, constraints=[AD._check_device, AD._check_shape], supports_context_parallel=True)
    def _counted_native(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        seen.calls.append((seen.module, "native", attn_mask is not None))
        return real_native(
            query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale
        )

    return seen


def _run(variant: str, seen: Dispatch, backend: str | None, cfg: CompAttnConfig | None = None):
    pipe = build_tiny_pipeline(variant)
    for name in ("transformer", "transformer_2"):
        tr = getattr(pipe, name, None)
        if tr is not None and backend is not None:
            tr.set_attention_backend(backend)
    handles = seen.watch(pipe)
    seen.calls.clear()
    comp = apply_comp_attn(pipe, cfg or CompAttnConfig())
    try:
        res = comp.generate(PROMPT, layout=LAYOUT, generator=torch.Generator().manual_seed(0), **KW)
    finally:
        comp.remove()
        for h in handles:
            h.remove()
    return res, list(seen.calls), pipe


@pytest.mark.parametrize("variant", ["wan2.1", "wan2.2"])
def test_only_modulated_attn2_calls_leave_flash_and_the_output_equals_all_sdpa(stand_in, variant):
    ref, ref_calls, _ = _run(variant, stand_in, None)  # diffusers' default: native SDPA everywhere
    assert {b for _, b, _ in ref_calls} == {"native"}
    res, calls, pipe = _run(variant, stand_in, "flash")
    assert torch.equal(torch.as_tensor(res.frames), torch.as_tensor(ref.frames))  # bit for bit
    assert res.lam_log == ref.lam_log and len(res.lam_log) > 0
    stand_in.calls = calls
    # attn1: every call on flash, none on SDPA
    assert (
        stand_in.count("native", "attn1") == Counter() and sum(stand_in.count("flash", "attn1").values()) > 0
    )
    # attn2: SDPA gets exactly one call per modulated call (LAM's log: transformer, block), always with the mask
    modulated = Counter(f"{e['transformer']}.blocks.{e['block']}.attn2" for e in res.lam_log)
    assert stand_in.count("native", "attn2", masked=True) == modulated
    assert stand_in.count("native", "attn2", masked=False) == Counter()
    # ... and every unmodulated attn2 call, plus LAM's unmasked probe, stays on flash
    forwards = Counter()
    for tname, _step, _cond in res.forwards:
        for i in range(len(getattr(pipe, tname).blocks)):
            forwards[f"{tname}.blocks.{i}.attn2"] += 1
    assert (
        stand_in.count("flash", "attn2") == forwards
    )  # one flash call per attn2 forward (probe or the call)
    assert all(m is not None for m, _, _ in calls)  # every backend call was inside an attention module
    if variant == "wan2.2":
        assert {e["transformer"] for e in res.lam_log} == {
            "transformer"
        }  # step_fraction_2 = 0: expert 2 plain


def test_reweight_keeps_every_call_on_flash(stand_in):
    cfg = CompAttnConfig()
    cfg.lam.apply = "reweight"
    res, calls, _ = _run("wan2.1", stand_in, "flash", cfg)
    assert res.lam_log and {b for _, b, _ in calls} == {"flash"}
    ref, _, _ = _run("wan2.1", stand_in, None, cfg)
    torch.testing.assert_close(torch.as_tensor(res.frames), torch.as_tensor(ref.frames))


def test_refused_only_where_no_mask_capable_backend_is_registered(stand_in, monkeypatch):
    from diffusers.models import attention_dispatch as AD

    assert (
        not takes_float_mask("flash")
        and not takes_float_mask("sage")
        and not takes_float_mask("_native_flash")
    )
    assert takes_float_mask("native") and takes_float_mask("flex") and takes_float_mask("xformers")
    assert mask_backend("flex") == "flex" and mask_backend("flash") == AD.AttentionBackendName.NATIVE
    pipe = build_tiny_pipeline()
    pipe.transformer.set_attention_backend("flash")
    apply_comp_attn(pipe, CompAttnConfig()).remove()  # SDPA is there: accepted
    monkeypatch.delitem(AD._AttentionBackendRegistry._backends, AD.AttentionBackendName.NATIVE)
    with pytest.raises(CompAttnBackendError, match="'flash'.*no mask-capable backend"):
        apply_comp_attn(pipe, CompAttnConfig())
    cfg = CompAttnConfig()
    cfg.lam.enabled = False
    apply_comp_attn(pipe, cfg).remove()  # SCI alone needs no mask
    cfg = CompAttnConfig()
    cfg.lam.apply = "reweight"
    apply_comp_attn(pipe, cfg).remove()  # nor does LAM's exact reweighting
