"""vidlab.clip.models: built-in configs, seeded loading, embedding contract, safetensors round trip, bad specs."""

import json
import warnings

import numpy as np
import pytest

from vidlab.clip import (
    TINY_MODEL,
    MissingWeightsError,
    ModelLoadError,
    QueryTruncatedWarning,
    UnknownModelError,
    load_model,
)


@pytest.fixture(scope="module")
def model():
    return load_model(TINY_MODEL)


@pytest.fixture(scope="module")
def frames():
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, size=(6, 48, 64, 3), dtype=np.uint8)


def test_builtin_configs_registered_through_open_clip(model):
    import open_clip

    assert TINY_MODEL in open_clip.list_models()
    assert "vidlab-small" in open_clip.list_models()
    assert model.tag == "vidlab-tiny:seed0"
    assert model.dim == 64 and model.device == "cpu" and model.precision == "fp32"


def test_image_embeddings_are_unit_float32_and_batch_invariant(model, frames):
    e = model.embed_images(frames)
    assert e.dtype == np.float32 and e.shape == (6, 64)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    e_small_batches = model.embed_images(frames, batch_size=4)
    np.testing.assert_allclose(e, e_small_batches, atol=1e-5)
    # distinct images give distinct embeddings
    assert not np.allclose(e[0], e[1], atol=1e-4)


def test_list_input_of_mixed_sizes_matches_per_image(model, frames):
    other = np.full((30, 50, 3), 200, np.uint8)
    e = model.embed_images([frames[0], other, frames[1]])
    np.testing.assert_allclose(e[0], model.embed_images(frames[:1])[0], atol=1e-5)
    np.testing.assert_allclose(e[1], model.embed_images(other[None])[0], atol=1e-5)


def test_text_embeddings(model):
    e = model.embed_texts(["a red circle", "a blue square", "a red circle"])
    assert e.shape == (3, 64) and e.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(e[0], e[2], atol=1e-6)
    assert not np.allclose(e[0], e[1])


def test_same_seed_same_weights_other_seed_differs(model, frames):
    again = load_model(TINY_MODEL)
    np.testing.assert_array_equal(again.embed_images(frames), model.embed_images(frames))
    other = load_model("vidlab-tiny:seed1")
    assert other.tag == "vidlab-tiny:seed1"
    assert not np.allclose(other.embed_images(frames), model.embed_images(frames), atol=1e-3)


def test_safetensors_round_trip(model, frames, tmp_path):
    d = model.save(tmp_path / "m")
    assert (d / "open_clip_model.safetensors").is_file()
    cfg = json.loads((d / "open_clip_config.json").read_text())
    assert cfg["model_cfg"]["embed_dim"] == 64
    loaded = load_model(d)
    np.testing.assert_array_equal(loaded.embed_images(frames), model.embed_images(frames))
    np.testing.assert_array_equal(loaded.embed_texts(["x y"]), model.embed_texts(["x y"]))
    assert loaded.tag.startswith("vidlab-tiny@")
    # a weights file given after the colon loads the same weights
    by_file = load_model(f"vidlab-tiny:{d / 'open_clip_model.safetensors'}")
    np.testing.assert_array_equal(by_file.embed_images(frames), model.embed_images(frames))


def test_retrained_weights_get_a_new_tag(tmp_path):
    import torch

    m = load_model(TINY_MODEL)
    before = m.tag
    with torch.no_grad():
        m.model.logit_scale.add_(1.0)
    assert m.refresh_tag() != before
    m.save(tmp_path / "a")
    load_model(TINY_MODEL).save(tmp_path / "b")
    assert load_model(tmp_path / "a").tag != load_model(tmp_path / "b").tag


def test_unknown_model_lists_close_names():
    with pytest.raises(UnknownModelError) as e:
        load_model("ViT-B-33:openai")
    assert "ViT-B-32" in str(e.value)
    with pytest.raises(UnknownModelError, match="vidlab-tiny"):
        load_model("vidlab-tiyn")


def test_unknown_pretrained_tag_lists_tags():
    with pytest.raises(UnknownModelError) as e:
        load_model("ViT-B-32:opena1")
    assert "openai" in str(e.value)


def test_missing_weights_file(tmp_path):
    with pytest.raises(MissingWeightsError, match="does not exist"):
        load_model(f"vidlab-tiny:{tmp_path / 'nope.safetensors'}")
    with pytest.raises(MissingWeightsError, match="does not exist"):
        load_model(str(tmp_path / "no_such_dir"))
    d = load_model(TINY_MODEL).save(tmp_path / "m")
    (d / "open_clip_model.safetensors").unlink()
    (d / "pytorch_model.bin").write_bytes(b"x")
    with pytest.raises(MissingWeightsError, match="convert them to safetensors"):
        load_model(d)


def test_pickle_weights_refused(tmp_path):
    p = tmp_path / "w.bin"
    p.write_bytes(b"not really")
    with pytest.raises(ModelLoadError, match="never unpickles"):
        load_model(f"vidlab-tiny:{p}")


def test_long_query_truncated_with_warning(model):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.embed_texts(["short query"])  # no warning
    long = "a red ball " * 60
    with pytest.warns(QueryTruncatedWarning, match="truncated"):
        e = model.embed_texts([long])
    assert e.shape == (1, 64)
    # truncation keeps the first context_length tokens: the overflow does not change the embedding
    with pytest.warns(QueryTruncatedWarning):
        e2 = model.embed_texts([long + " green square purple"])
    np.testing.assert_allclose(e, e2, atol=1e-6)


def test_low_precision_refused_on_cpu():
    with pytest.raises(ValueError, match="GPU"):
        load_model(TINY_MODEL, device="cpu", precision="bf16")


def test_bad_frames_are_typed_errors(model):
    with pytest.raises(ValueError, match="uint8"):
        model.embed_images(np.zeros((2, 8, 8, 3), np.float32))
    with pytest.raises(ValueError, match=r"frames\[None\]"):
        model.embed_images(np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(TypeError, match="list of strings"):
        model.embed_texts("a single string")


def _bin_beside(d, other_model):
    """open_clip's preferred name for a pickled checkpoint, holding *other* weights than the safetensors."""
    import torch

    torch.save(other_model.model.state_dict(), d / "open_clip_pytorch_model.bin")


def test_local_folder_loads_exactly_the_file_it_fingerprints(model, frames, tmp_path):
    """open_clip alone prefers open_clip_pytorch_model.bin over model.safetensors: the tag would hash one file
    while the model ran on another. vidlab refuses the folder instead of guessing."""
    import open_clip

    from vidlab.clip.models import AmbiguousWeightsError
    from vidlab.errors import UserError

    d = model.save(tmp_path / "m")
    (d / "open_clip_model.safetensors").rename(d / "model.safetensors")
    other = load_model("vidlab-tiny:seed5")
    _bin_beside(d, other)
    # the defect this guards against: open_clip's own pick is the .bin (other weights)
    oc = open_clip.create_model(f"local-dir:{d}")
    oc_emb = oc.encode_image(model.preprocess(frames[:1])).detach()
    other_emb = other.model.encode_image(other.preprocess(frames[:1])).detach()
    assert np.allclose(oc_emb.numpy(), other_emb.numpy(), atol=1e-5)
    with pytest.raises(AmbiguousWeightsError, match="several weight files") as e:
        load_model(d)
    assert isinstance(e.value, UserError) and "open_clip_pytorch_model.bin" in str(e.value)
    (d / "open_clip_pytorch_model.bin").unlink()
    loaded = load_model(d)  # now unambiguous: the safetensors, whatever its name
    np.testing.assert_array_equal(loaded.embed_images(frames), model.embed_images(frames))
    from vidlab.identity import file_fingerprint

    assert loaded.tag == f"vidlab-tiny@{file_fingerprint(d / 'model.safetensors')[:16]}"


def test_local_folder_with_two_safetensors_is_ambiguous(model, tmp_path):
    from vidlab.clip.models import AmbiguousWeightsError

    d = model.save(tmp_path / "m")
    load_model("vidlab-tiny:seed2").save(tmp_path / "n")
    (tmp_path / "n" / "open_clip_model.safetensors").rename(d / "open_clip_pytorch_model.safetensors")
    with pytest.raises(AmbiguousWeightsError, match="open_clip_pytorch_model.safetensors"):
        load_model(d)
    with pytest.raises(AmbiguousWeightsError, match="exactly one"):
        model.save(d)  # saving into it would leave it ambiguous too


def test_save_is_atomic_and_leaves_no_temporaries(model, tmp_path):
    d = model.save(tmp_path / "m")
    assert sorted(p.name for p in d.iterdir()) == ["open_clip_config.json", "open_clip_model.safetensors"]
    model.save(d)  # overwriting its own file is fine
    assert load_model(d).tag.startswith("vidlab-tiny@")
