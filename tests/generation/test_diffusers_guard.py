"""Guards on every diffusers API Comp-Attn relies on, private ones included, and on the declared range.

If an upgrade renames or reshapes one of these, this file fails in the tests instead of in a user's run.
The floor in pyproject.toml is 0.40.0, the first release whose ``from_pretrained`` takes ``dtype=``
(diffusers commit 13a7bee, PR 14205; ``torch_dtype`` is deprecated since): generation/pipeline.py passes
``dtype=``, which an older release would ignore and load float32 weights. (0.35 cannot even import its Wan
pipeline next to transformers 5, and lacks the ``parallel_config`` keyword.)
"""

import inspect
import re
from pathlib import Path

import pytest
import torch

diffusers = pytest.importorskip("diffusers")
ROOT = Path(__file__).resolve().parents[2]


def _version(text):
    nums = [int(x) for x in re.findall(r"\d+", text)[:3]]
    return tuple(nums + [0] * (3 - len(nums)))


def test_installed_diffusers_is_inside_the_declared_range():
    text = (ROOT / "pyproject.toml").read_text()
    gen = re.search(r"^gen = \[(.*)\]$", text, re.MULTILINE).group(1)  # the generation extra
    spec = re.search(r'"(diffusers[^"]*)"', gen).group(1)
    lo = re.search(r">=\s*([\d.]+)", spec).group(1)
    hi = re.search(r"<\s*([\d.]+)", spec).group(1)
    assert _version(lo) >= (0, 40, 0), (
        f"{spec}: diffusers < 0.40 is not supported (see this file's docstring)"
    )
    assert _version(lo) <= _version(diffusers.__version__) < _version(hi), (spec, diffusers.__version__)


def test_from_pretrained_honours_dtype_without_a_deprecation():
    """generation/pipeline.py loads with ``dtype=``: the weights come in that dtype, with no warning."""
    import warnings

    from diffusers import AutoencoderKLWan

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vae = AutoencoderKLWan.from_pretrained(
            ROOT / "generation" / "toyworld" / "weights", subfolder="vae", dtype=torch.float64
        )
    assert {p.dtype for p in vae.parameters()} == {torch.float64}


def test_get_qkv_projections_is_there_and_returns_q_k_v():
    from diffusers.models.transformers.transformer_wan import _get_qkv_projections

    from vidlab.generation.tiny import build_tiny_transformer

    attn = build_tiny_transformer(0).blocks[0].attn2
    assert list(inspect.signature(_get_qkv_projections).parameters)[:3] == [
        "attn",
        "hidden_states",
        "encoder_hidden_states",
    ]
    hs, ehs = torch.randn(1, 8, attn.inner_dim), torch.randn(1, 5, attn.inner_dim)
    with torch.no_grad():
        q, k, v = _get_qkv_projections(attn, hs, ehs)
    assert q.shape == (1, 8, attn.inner_dim) and k.shape == v.shape == (1, 5, attn.inner_dim)


def test_attention_backend_registry_and_dispatch_signature():
    from diffusers.models.attention_dispatch import _AttentionBackendRegistry, dispatch_attention_fn

    name, fn = _AttentionBackendRegistry.get_active_backend()
    assert callable(fn) and str(getattr(name, "value", name))
    assert callable(
        _AttentionBackendRegistry.set_active_backend
    )  # tests restore it after set_attention_backend
    params = inspect.signature(dispatch_attention_fn).parameters
    for kw in ("attn_mask", "dropout_p", "is_causal", "backend", "parallel_config"):
        assert kw in params, f"dispatch_attention_fn lost {kw!r}"
    q = torch.randn(1, 6, 2, 8)
    k = v = torch.randn(1, 4, 2, 8)
    mask = torch.zeros(1, 1, 6, 4)
    out = dispatch_attention_fn(q, k, v, attn_mask=mask, backend=None, parallel_config=None)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    )
    torch.testing.assert_close(out, ref.transpose(1, 2))  # (B, S, H, D) in and out


def test_backends_that_reject_masks_are_the_ones_lam_routes_around():
    """processor.mask_backend reads the registry (``_backends``, ``AttentionBackendName.NATIVE``) and classifies
    backends by name: every registered backend whose code refuses ``attn_mask`` must be classified mask-less (a new
    one in a diffusers upgrade fails here), and SDPA must be there to take the masked calls."""
    import re

    from diffusers.models.attention_dispatch import AttentionBackendName, _AttentionBackendRegistry

    from vidlab.generation.processor import mask_backend, takes_float_mask

    assert AttentionBackendName.NATIVE in _AttentionBackendRegistry._backends
    assert mask_backend("flash") is AttentionBackendName.NATIVE and takes_float_mask(
        AttentionBackendName.NATIVE
    )
    refuse = re.compile(r"attn_mask.{0,40}not supported|does not support.{0,20}attn_mask")
    rejecting = [
        name.value
        for name, fn in _AttentionBackendRegistry._backends.items()
        if refuse.search(inspect.getsource(fn))
    ]
    assert "flash" in rejecting and "sage" in rejecting  # the pattern still finds the known ones
    assert [n for n in rejecting if takes_float_mask(n)] == []
    from diffusers import (
        WanTransformer3DModel,
    )  # regional compilation (compile_repeated_blocks) finds Wan's block

    assert WanTransformer3DModel._repeated_blocks == ["WanTransformerBlock"]
    assert callable(WanTransformer3DModel.compile_repeated_blocks)


def test_wan_attention_processor_contract():
    from vidlab.generation.tiny import build_tiny_transformer

    tr = build_tiny_transformer(0)
    attn2 = tr.blocks[0].attn2
    proc = attn2.processor
    assert type(proc).__name__ == "WanAttnProcessor"
    params = list(inspect.signature(proc.__call__).parameters)
    assert params[:5] == ["attn", "hidden_states", "encoder_hidden_states", "attention_mask", "rotary_emb"]
    assert hasattr(proc, "_attention_backend") and hasattr(proc, "_parallel_config")
    for name in ("norm_q", "norm_k", "heads", "to_out", "add_k_proj", "set_processor"):
        assert hasattr(attn2, name), f"WanAttention lost {name!r}"
    assert hasattr(tr, "set_attention_backend") and hasattr(tr, "blocks")


def test_wan_pipeline_pieces_comp_attn_uses():
    from diffusers import WanPipeline
    from diffusers.pipelines.wan.pipeline_wan import prompt_clean

    assert prompt_clean("  a   cat ") == "a cat"
    enc = inspect.signature(WanPipeline.encode_prompt).parameters
    for kw in (
        "prompt",
        "negative_prompt",
        "do_classifier_free_guidance",
        "num_videos_per_prompt",
        "max_sequence_length",
        "device",
    ):
        assert kw in enc, f"WanPipeline.encode_prompt lost {kw!r}"
    call = inspect.signature(WanPipeline.__call__).parameters
    for kw in (
        "prompt_embeds",
        "negative_prompt_embeds",
        "num_videos_per_prompt",
        "guidance_scale_2",
        "max_sequence_length",
        "num_frames",
    ):
        assert kw in call, f"WanPipeline.__call__ lost {kw!r}"
    assert "prompt_embeds" in WanPipeline._callback_tensor_inputs
    assert hasattr(WanPipeline, "_execution_device")


def test_transformer_forward_takes_timestep_and_encoder_hidden_states_by_keyword():
    from diffusers import WanTransformer3DModel

    params = list(inspect.signature(WanTransformer3DModel.forward).parameters)
    assert params[1:4] == ["hidden_states", "timestep", "encoder_hidden_states"]  # the pre-hook reads these


def test_the_denoising_loop_announces_each_pass_outside_the_forward():
    """Comp-Attn's controller learns the step and the cond/uncond pass from ``pipe._current_timestep`` and
    ``transformer.cache_context(name)``, which WanPipeline sets/enters right before each denoiser call."""
    from diffusers import WanPipeline, WanTransformer3DModel

    src = inspect.getsource(WanPipeline.__call__)
    assert "self._current_timestep = t" in src
    cond, uncond, call = (
        src.find('cache_context("cond"'),
        src.find('cache_context("uncond"'),
        src.find("current_model("),
    )
    assert 0 <= cond < call and uncond > cond, (
        "WanPipeline no longer wraps its denoiser calls in cache_context"
    )
    assert callable(getattr(WanTransformer3DModel, "cache_context", None))
    # the same, observed: every denoiser forward of a real call comes inside cache_context("cond"|"uncond")
    from vidlab.generation.tiny import build_tiny_pipeline

    pipe = build_tiny_pipeline()
    tr, seen, current = pipe.transformer, [], []
    original = type(tr).cache_context

    import contextlib

    @contextlib.contextmanager
    def spy(name, *a, **k):
        current.append((name, float(pipe._current_timestep)))
        with original(tr, name, *a, **k):
            yield
        current.pop()

    tr.cache_context = spy
    hook = tr.register_forward_pre_hook(lambda *_: seen.append(current[-1] if current else None))
    try:
        with torch.no_grad():
            pipe("a cat", height=32, width=32, num_frames=5, num_inference_steps=2, output_type="latent")
    finally:
        hook.remove()
        del tr.cache_context
    steps = [float(t) for t in pipe.scheduler.timesteps]
    assert seen == [(name, t) for t in steps for name in ("cond", "uncond")]
