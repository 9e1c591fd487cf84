"""The user API: apply / generate / remove, what SCI and LAM touch, layouts and subjects, clear errors."""

from functools import lru_cache

import numpy as np
import pytest
import torch

from vidlab.generation.comp_attn import CompAttnError, apply_comp_attn
from vidlab.generation.config import CompAttnConfig
from vidlab.generation.layout import Layout, SubjectLayout
from vidlab.generation.tiny import build_tiny_pipeline

PROMPT = "a red cat on the left and a blue dog on the right"
KW = dict(height=64, width=64, num_frames=9, num_inference_steps=4, output_type="latent")
LAYOUT = Layout(
    PROMPT,
    [
        SubjectLayout("red cat", [(0.0, (0.0, 0.0, 0.5, 1.0)), (1.0, (0.0, 0.25, 0.5, 1.0))]),
        SubjectLayout("blue dog", [(0.0, (0.5, 0.0, 1.0, 1.0))]),
    ],
)


@lru_cache(maxsize=2)
def _pipe(variant="wan2.1"):
    return build_tiny_pipeline(variant)


def _gen(cfg, layout=LAYOUT, pipe=None, **kw):
    comp = apply_comp_attn(pipe or _pipe(), cfg)
    try:
        return comp.generate(
            PROMPT, layout=layout, generator=torch.Generator().manual_seed(0), **{**KW, **kw}
        )
    finally:
        comp.remove()


def test_only_attn2_processors_change_and_remove_restores_everything():
    pipe = _pipe("wan2.2")
    trs = [pipe.transformer, pipe.transformer_2]
    attn1 = [b.attn1.processor for t in trs for b in t.blocks]
    attn2 = [b.attn2.processor for t in trs for b in t.blocks]
    comp = apply_comp_attn(pipe, CompAttnConfig())
    assert [b.attn1.processor for t in trs for b in t.blocks] == attn1
    new = [b.attn2.processor for t in trs for b in t.blocks]
    assert all(type(p).__name__ == "CompAttnProcessor" and p.original is o for p, o in zip(new, attn2))
    assert all(len(t._forward_pre_hooks) == 1 for t in trs)
    with pytest.raises(CompAttnError, match="already applied"):
        apply_comp_attn(pipe, CompAttnConfig())
    comp.remove()
    assert all(a is b for a, b in zip([b.attn2.processor for t in trs for b in t.blocks], attn2))
    assert all(len(t._forward_pre_hooks) == 0 for t in trs)
    apply_comp_attn(pipe).remove()  # can be applied again after remove()


def test_image_conditioned_transformers_are_refused():
    from types import SimpleNamespace

    from vidlab.generation.tiny import build_tiny_transformer

    tr = build_tiny_transformer(added_kv_proj_dim=24, image_dim=16)
    with pytest.raises(CompAttnError, match="image"):
        apply_comp_attn(SimpleNamespace(transformer=tr, scheduler=None), CompAttnConfig())
    assert type(tr.blocks[0].attn2.processor).__name__ == "WanAttnProcessor"


def test_sci_touches_only_cond_subject_tokens_inside_its_window_and_never_uncond():
    pipe = _pipe()
    seen = []
    comp = apply_comp_attn(pipe, CompAttnConfig())
    hook = pipe.transformer.register_forward_pre_hook(
        lambda m, a, k: seen.append(k["encoder_hidden_states"].clone()), with_kwargs=True
    )
    try:
        res = comp.generate(PROMPT, layout=LAYOUT, generator=torch.Generator().manual_seed(0), **KW)
    finally:
        hook.remove()
        comp.remove()
    with torch.no_grad():
        cond, uncond = pipe.encode_prompt(PROMPT, max_sequence_length=512)
    subject_rows = sorted(t for idx in res.token_indices for t in idx)
    assert len(subject_rows) >= 2
    for i, e in enumerate(seen):
        step, is_cond = i // 2, i % 2 == 0
        if not is_cond:
            assert torch.equal(e, uncond)  # negative embeddings never touched
            continue
        diff = (e - cond)[0].abs().sum(-1)
        changed = torch.nonzero(diff).flatten().tolist()
        if res.sci_weights.get(step, 0.0) > 0:
            assert changed and set(changed) <= set(subject_rows)
        else:
            assert changed == []
    assert res.sci_weights[0] == pytest.approx(0.5) and res.sci_weights[3] == 0.0
    assert res.sci["pairwise_cosine_after_w1"] < res.sci["pairwise_cosine_before"]


def test_lam_window_and_blocks_follow_the_config():
    cfg = CompAttnConfig()
    cfg.lam.step_fraction = 0.5
    cfg.lam.blocks = [1]
    res = _gen(cfg)
    assert {e["step"] for e in res.lam_log} == {0, 1}
    assert {e["block"] for e in res.lam_log} == {1}
    assert all(0.25 <= a <= 1.0 for e in res.lam_log for a in e["alpha"])
    with pytest.raises(CompAttnError, match="outside"):
        cfg.lam.blocks = [7]
        apply_comp_attn(_pipe(), cfg)


def test_biased_step_share_is_circular_so_the_effect_measure_reads_unbiased_maps():
    """On the steps LAM biased, the in-box share is read from the probabilities LAM wrote: a placebo layout
    (boxes contradicting the prompt) "follows" just as well. That figure only checks the mechanism; the
    effect measure, ``layout_faithfulness``, reads maps LAM did not bias and reports the placebo beside."""
    from vidlab.generation.attention_measure import layout_faithfulness, placebo_layout

    base = CompAttnConfig(capture_attention=True)
    base.lam.enabled = False
    on = CompAttnConfig(capture_attention=True)  # step_fraction 0.3 of 4 steps: progress 0, 0.25 biased
    placebo = placebo_layout(LAYOUT)
    off_res, real_res, placebo_res = _gen(base), _gen(on), _gen(on, layout=placebo)
    assert (
        off_res.maps.biased_steps == []
        and real_res.maps.biased_steps == placebo_res.maps.biased_steps == [0, 1]
    )
    off_real = np.array(off_res.maps.mean_inside_share([0, 1]))
    off_placebo = np.array([layout_faithfulness(off_res.maps, steps=[0, 1]).placebo_share])
    real = np.array(real_res.maps.mean_inside_share([0, 1]))
    fake = np.array(placebo_res.maps.mean_inside_share([0, 1]))  # share inside the placebo boxes it followed
    assert (real > off_real + 0.2).all() and (fake.mean() > off_placebo + 0.2).all(), (off_real, real, fake)
    f = layout_faithfulness(real_res.maps)
    assert not f.biased and f.steps == [2, 3] and f.n_maps == 2 * 2  # after the window, both blocks
    assert f.placebo_share is not None and 0 < f.chance < 1


def test_attention_maps_are_captured_per_step_and_saved(tmp_path):
    res = _gen(CompAttnConfig(capture_attention=True), num_inference_steps=2)
    maps = res.maps
    assert maps.steps == [0, 1] and maps.map(0).shape == (2, 3, 4, 4)
    assert np.all(maps.map(1) >= 0)
    paths = maps.save_png(tmp_path)
    assert len(paths) == 2 and all(p.stat().st_size > 0 and p.suffix == ".png" for p in paths)


def test_layout_from_file_planned_layout_and_subject_selection(tmp_path):
    path = LAYOUT.save(tmp_path / "layout.json")
    res = _gen(CompAttnConfig(), layout=str(path), subjects=["blue dog"], num_inference_steps=1)
    assert res.subjects == ["blue dog"] and len(res.token_indices) == 1
    planned = _gen(CompAttnConfig(), layout=None, num_inference_steps=1)
    assert len(planned.subjects) >= 2 and planned.layout is not None
    from vidlab.generation.subjects import SubjectNotFoundError

    with pytest.raises(SubjectNotFoundError, match="'green frog' not found in prompt"):
        _gen(CompAttnConfig(), subjects=["green frog"], num_inference_steps=1)
    with pytest.raises(SubjectNotFoundError, match=r"\['left'\] have no box in the layout"):
        _gen(CompAttnConfig(), subjects=["left"], num_inference_steps=1)


def test_counted_subjects_share_tokens_and_get_the_union_of_boxes():
    prompt = "three cats on the grass"
    layout = Layout(
        prompt,
        [
            SubjectLayout("cats", [(0.0, (0.1 + 0.3 * i, 0.3, 0.3 + 0.3 * i, 0.7))], count_index=i)
            for i in range(3)
        ],
    )
    comp = apply_comp_attn(_pipe(), CompAttnConfig(capture_attention=True))
    try:
        res = comp.generate(
            prompt,
            layout=layout,
            generator=torch.Generator().manual_seed(0),
            **{**KW, "num_inference_steps": 1},
        )
    finally:
        comp.remove()
    assert res.token_indices[0] == res.token_indices[1] == res.token_indices[2]
    assert len(res.maps.names) == 1 and res.sci_weights == {}  # one distinct subject: SCI is a no-op


def test_bad_inputs_are_clear_errors():
    with pytest.raises(ValueError, match="4k\\+1"):
        _gen(CompAttnConfig(), num_frames=10)
    with pytest.raises(ValueError, match="multiples of 16"):
        _gen(CompAttnConfig(), height=40)
    with pytest.raises(ValueError, match="prompt_embeds"):
        _gen(CompAttnConfig(), prompt_embeds=torch.zeros(1, 512, 32))
    from vidlab.generation.subjects import SubjectNotFoundError

    bad = Layout("a green frog", [SubjectLayout("green frog", [(0.0, (0.1, 0.1, 0.5, 0.5))])])
    with pytest.raises(SubjectNotFoundError, match="green frog"):
        _gen(CompAttnConfig(), layout=bad)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_flex_backend_runs_lam_and_matches_native():
    """diffusers' flex backend takes LAM's additive mask too; it must agree with native SDPA."""
    from diffusers.models.attention_dispatch import _AttentionBackendRegistry

    outs = {}
    # set_attention_backend also sets diffusers' process-wide active backend: put it back afterwards, or every
    # later model in this process (e.g. a training run, where flex has no CPU backward) silently uses flex
    previous = _AttentionBackendRegistry.get_active_backend()[0]
    try:
        for backend in ("native", "flex"):
            pipe = build_tiny_pipeline("wan2.1")
            pipe.transformer.set_attention_backend(backend)
            outs[backend] = torch.as_tensor(_gen(CompAttnConfig(), pipe=pipe, num_inference_steps=2).frames)
    finally:
        _AttentionBackendRegistry.set_active_backend(previous)
    assert _AttentionBackendRegistry.get_active_backend()[0] == previous
    assert outs["native"].shape == outs["flex"].shape
    torch.testing.assert_close(outs["flex"], outs["native"], rtol=0, atol=1e-4)


def test_prompts_are_encoded_at_the_models_own_text_length_unless_the_config_says_otherwise():
    # the toy world's model is trained with 16 prompt rows (its tokenizer's model_max_length); Wan's with 512
    pipe = build_tiny_pipeline()
    seen: list[int] = []
    hook = pipe.transformer.register_forward_pre_hook(
        lambda m, a, k: seen.append(k["encoder_hidden_states"].shape[1]), with_kwargs=True
    )
    try:
        for model_max, setting, want in ((512, None, 512), (16, None, 16), (16, 64, 64)):
            pipe.tokenizer.model_max_length = model_max
            for enabled in (True, False):
                cfg = CompAttnConfig(enabled=enabled, max_sequence_length=setting)
                seen.clear()
                _gen(cfg, pipe=pipe, num_inference_steps=1)
                assert seen and set(seen) == {want}, (model_max, setting, enabled, seen)
    finally:
        hook.remove()
        pipe.tokenizer.model_max_length = 512
