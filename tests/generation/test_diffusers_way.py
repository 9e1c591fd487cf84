"""Comp-Attn the diffusers way: after ``apply_comp_attn`` a plain ``pipe(prompt=...)`` runs it, bit for bit as
``comp.generate``; ``remove``/``with`` restore the very same objects; torch.compile, offload hooks, ``.to()``."""

import warnings

import pytest
import torch

from vidlab.generation.comp_attn import CompAttnSkippedWarning, apply_comp_attn
from vidlab.generation.config import CompAttnConfig
from vidlab.generation.layout import Layout, SubjectLayout
from vidlab.generation.tiny import build_tiny_pipeline

PROMPT = "a red cat on the left and a blue dog on the right"
KW = dict(height=32, width=32, num_frames=9, num_inference_steps=4, output_type="latent")
SWAPPED = Layout(
    PROMPT,
    [
        SubjectLayout("red cat", [(0.0, (0.5, 0.0, 1.0, 1.0))]),
        SubjectLayout("blue dog", [(0.0, (0.0, 0.0, 0.5, 1.0))]),
    ],
)


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def _attn2(pipe):
    return [
        b.attn2.processor
        for n in ("transformer", "transformer_2")
        if getattr(pipe, n, None)
        for b in getattr(pipe, n).blocks
    ]


def _plain(pipe, **kw):
    with torch.no_grad():
        return pipe(PROMPT, generator=_g(), **{**KW, **kw}).frames


@pytest.mark.parametrize("variant", ["wan2.1", "wan2.2"])
def test_plain_pipe_call_is_comp_attn_bit_for_bit_as_generate(variant):
    pipe = build_tiny_pipeline(variant)
    plain = _plain(pipe)
    cases = [
        dict(),
        dict(num_videos_per_prompt=2),
        dict(negative_prompt="blurry, low quality"),
    ]
    with apply_comp_attn(pipe, CompAttnConfig()) as comp:
        for extra in cases:
            want = comp.generate(PROMPT, generator=_g(), **{**KW, **extra})
            got = pipe(prompt=PROMPT, generator=_g(), **{**KW, **extra}).frames
            assert torch.equal(torch.as_tensor(got), torch.as_tensor(want.output.frames)), extra
            assert comp.last_result is not None and comp.last_result.lam_log == want.lam_log
        # a list of one prompt and positional arguments mean the same call
        listed = pipe([PROMPT], generator=_g(), **KW).frames
        single = comp.generate(PROMPT, generator=_g(), **KW).output.frames
        assert torch.equal(torch.as_tensor(listed), torch.as_tensor(single))
        # and it is not diffusers' plain output: Comp-Attn really ran (LAM and SCI)
        assert not torch.allclose(torch.as_tensor(listed), torch.as_tensor(plain), atol=1e-4)
        res = comp.last_result
        assert res.lam_log and res.sci_weights and res.subjects == ["red cat", "blue dog"]
        if variant == "wan2.2":  # both experts ran under the controller
            assert {t for t, _, _ in res.forwards} == {"transformer", "transformer_2"}
    assert torch.equal(torch.as_tensor(_plain(pipe)), torch.as_tensor(plain))  # removed: diffusers' own again


def test_set_layout_is_the_one_way_to_give_a_layout_to_plain_calls():
    pipe = build_tiny_pipeline()
    comp = apply_comp_attn(pipe, CompAttnConfig())
    try:
        planned = pipe(PROMPT, generator=_g(), **KW).frames
        assert comp.last_result.layout.planner == "rule"
        comp.set_layout(SWAPPED)
        swapped = pipe(PROMPT, generator=_g(), **KW).frames
        assert comp.last_result.layout is SWAPPED
        assert torch.equal(
            torch.as_tensor(swapped),
            torch.as_tensor(comp.generate(PROMPT, layout=SWAPPED, generator=_g(), **KW).output.frames),
        )
        assert not torch.allclose(torch.as_tensor(swapped), torch.as_tensor(planned), atol=1e-5)
        comp.set_layout(None)  # back to planning from the prompt
        assert torch.equal(
            torch.as_tensor(pipe(PROMPT, generator=_g(), **KW).frames), torch.as_tensor(planned)
        )
        with pytest.raises(Exception, match="set_layout takes a Layout"):
            comp.set_layout({"not": "a layout"})
    finally:
        comp.remove()


def test_comp_attn_off_or_no_subjects_is_diffusers_own_output_through_pipe_call():
    pipe = build_tiny_pipeline()
    plain = _plain(pipe)
    off = CompAttnConfig(enabled=False)
    with apply_comp_attn(pipe, off):
        assert torch.equal(torch.as_tensor(pipe(PROMPT, generator=_g(), **KW).frames), torch.as_tensor(plain))
    empty = Layout(PROMPT, [])
    with apply_comp_attn(pipe, CompAttnConfig(), layout=empty), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.equal(torch.as_tensor(pipe(PROMPT, generator=_g(), **KW).frames), torch.as_tensor(plain))


def test_prompt_embeds_without_text_warns_and_runs_plain():
    pipe = build_tiny_pipeline()
    with torch.no_grad():
        cond, uncond = pipe.encode_prompt(PROMPT, max_sequence_length=512)
    plain = pipe(prompt_embeds=cond, negative_prompt_embeds=uncond, generator=_g(), **KW).frames
    with apply_comp_attn(pipe, CompAttnConfig()):
        with pytest.warns(CompAttnSkippedWarning, match="prompt_embeds"):
            out = pipe(prompt_embeds=cond, negative_prompt_embeds=uncond, generator=_g(), **KW).frames
    assert torch.equal(torch.as_tensor(out), torch.as_tensor(plain))


def test_remove_and_with_restore_the_very_same_objects():
    pipe = build_tiny_pipeline("wan2.2")
    cls, before = type(pipe), _attn2(pipe)
    hooks = [dict(t._forward_pre_hooks) for t in (pipe.transformer, pipe.transformer_2)]
    with apply_comp_attn(pipe, CompAttnConfig()) as comp:
        assert type(pipe) is not cls and isinstance(pipe, cls) and type(pipe).__name__ == cls.__name__
        assert all(type(p).__name__ == "CompAttnProcessor" for p in _attn2(pipe))
        assert "cache_context" in vars(pipe.transformer)
    assert type(pipe) is cls
    assert all(a is b for a, b in zip(_attn2(pipe), before, strict=True))
    assert [dict(t._forward_pre_hooks) for t in (pipe.transformer, pipe.transformer_2)] == hooks
    assert "cache_context" not in vars(pipe.transformer) and "cache_context" not in vars(pipe.transformer_2)
    assert getattr(pipe, "_comp_attn", None) is None
    comp.remove()  # twice is harmless
    assert type(pipe) is cls
    apply_comp_attn(pipe).remove()  # can be applied again


@pytest.mark.parametrize("variant,backend", [("wan2.1", "eager"), ("wan2.2", "aot_eager")])
def test_torch_compile_fullgraph_with_comp_attn_on_has_no_graph_break_and_equal_output(variant, backend):
    import torch._dynamo
    from torch._dynamo.utils import counters

    pipe = build_tiny_pipeline(variant)
    cfg = CompAttnConfig(capture_attention=True)
    cfg.lam.step_fraction = cfg.lam.step_fraction_2 = 0.5  # LAM on in both experts of Wan2.2
    comp = apply_comp_attn(pipe, cfg)
    names = [n for n in ("transformer", "transformer_2") if getattr(pipe, n, None) is not None]
    originals = {n: getattr(pipe, n) for n in names}
    try:
        eager = comp.generate(PROMPT, generator=_g(), **KW)
        torch._dynamo.reset()
        counters.clear()
        for n in names:
            setattr(pipe, n, torch.compile(originals[n], fullgraph=True, backend=backend))
        try:
            compiled = pipe(PROMPT, generator=_g(), **KW).frames
            res = comp.last_result
        finally:
            for n in names:
                setattr(pipe, n, originals[n])
        breaks = sum(counters["graph_break"].values())
        assert breaks == 0, dict(counters["graph_break"])
        assert counters["stats"]["unique_graphs"] >= 1  # it really compiled
        torch.testing.assert_close(
            torch.as_tensor(compiled), torch.as_tensor(eager.output.frames), rtol=0, atol=1e-6
        )
        # the logs made outside the graph are the eager ones
        assert [(e["step"], e["block"]) for e in res.lam_log] == [
            (e["step"], e["block"]) for e in eager.lam_log
        ]
        assert res.lam_log and len(res.maps.entries()) == len(eager.maps.entries())
    finally:
        comp.remove()
        torch._dynamo.reset()


def test_regional_compile_compiles_one_graph_per_mode_whatever_the_block_count():
    """``transformer.compile_repeated_blocks()`` (diffusers' regional compilation: one block compiled, reused by
    every block) keeps one graph per mode with Comp-Attn on: the processors record into lists of their own, so no
    block's guards differ from another's (they did: one graph per block, past dynamo's recompile limit on Wan)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    from vidlab.generation.tiny import build_tiny_transformer

    pipe = build_tiny_pipeline()
    pipe.transformer = build_tiny_transformer(num_layers=6)
    comp = apply_comp_attn(pipe, CompAttnConfig(capture_attention=True))
    try:
        eager = comp.generate(PROMPT, layout=SWAPPED, generator=_g(), **KW)
        torch._dynamo.reset()
        counters.clear()
        pipe.transformer.compile_repeated_blocks(fullgraph=True, backend="eager")
        compiled = comp.generate(PROMPT, layout=SWAPPED, generator=_g(), **KW)
        assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
        # uncond pass-through, cond with LAM + capture, cond with capture only: 3 graphs for 6 blocks
        assert counters["stats"]["unique_graphs"] == 3
        torch.testing.assert_close(
            torch.as_tensor(compiled.frames), torch.as_tensor(eager.frames), rtol=0, atol=1e-6
        )
        assert compiled.lam_log == eager.lam_log and len(eager.lam_log) == 2 * 6  # steps 0-1, every block
        key = [(e.step, e.block, e.biased) for e in eager.maps.entries()]
        assert [(e.step, e.block, e.biased) for e in compiled.maps.entries()] == key and len(key) == 6 * 4
    finally:
        comp.remove()
        torch._dynamo.reset()


def test_model_cpu_offload_and_to_after_apply():
    pipe = build_tiny_pipeline()
    comp = apply_comp_attn(pipe, CompAttnConfig())
    try:
        want = comp.generate(PROMPT, generator=_g(), **KW).output.frames
        # diffusers' own enable_model_cpu_offload (accelerate's cpu_offload_with_hook on every model), with the
        # CPU as the execution device: the hooks and the device moves are the real ones
        pipe.enable_model_cpu_offload(device="cpu")
        assert pipe._all_hooks and hasattr(pipe.transformer, "_hf_hook")
        got = pipe(PROMPT, generator=_g(), **KW).frames
        assert torch.equal(torch.as_tensor(got), torch.as_tensor(want))
        assert comp.last_result.lam_log  # Comp-Attn ran under the hooks
        pipe.remove_all_hooks()
        pipe.to("cpu")
        assert torch.equal(torch.as_tensor(pipe(PROMPT, generator=_g(), **KW).frames), torch.as_tensor(want))
    finally:
        comp.remove()
