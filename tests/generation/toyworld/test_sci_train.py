"""Fine-tuning a saved toy-world Wan (``init_from``) with its text encoder trained jointly (``train_text_encoder``).

The SCI study's model is the shipped folder fine-tuned this way; these tests use a tiny random folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")


def _weights(folder: Path, part: str) -> dict:
    from safetensors.torch import load_file

    return load_file(next((folder / part).glob("*.safetensors")))


def _max_diff(a: dict, b: dict) -> float:
    assert set(a) == set(b)
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def test_init_from_starts_from_the_folder_and_the_joint_encoder_trains_at_its_own_rate(tiny_train, tmp_path):
    from vidlab.generation.toyworld.train import init_digest, train

    init = tiny_train.folder(tmp_path / "init", seed=123)
    # a learning rate of ~0: the result is the folder's weights (not the from-scratch initialisation)
    still = train(
        tiny_train.cfg(tmp_path / "ck0", f"init_from={init}", "dit_lr=1e-12", "train_text_encoder=true"),
        tmp_path / "still",
        progress=False,
    )
    for part in ("transformer", "text_encoder", "vae"):
        assert _max_diff(_weights(init, part), _weights(still, part)) < 1e-6, part
    meta = json.loads((still / "toyworld.json").read_text())
    assert meta["init_from"]["digest"] == init_digest(init) and "jointly" in meta["text_encoder"]
    assert len(meta["dit_losses"]) == 2
    # the saved VAE's normalisation travels unchanged (not re-estimated from the re-encoded clips)
    vae_cfg = json.loads((still / "vae" / "config.json").read_text())
    assert vae_cfg["latents_mean"] == [0.1] * 4 and vae_cfg["latents_std"] == [0.9] * 4

    # trained jointly: both parts move; the encoder at 100x the rate moves far more than at 1x
    def moved(*extra: str) -> tuple[float, float]:
        name = "_".join(e.split("=")[1] for e in extra)
        out = train(
            tiny_train.cfg(tmp_path / f"ck_{name}", f"init_from={init}", "dit_lr=1e-4", *extra),
            tmp_path / f"out_{name}",
            progress=False,
        )
        return (
            _max_diff(_weights(init, "transformer"), _weights(out, "transformer")),
            _max_diff(_weights(init, "text_encoder"), _weights(out, "text_encoder")),
        )

    tr1, te1 = moved("train_text_encoder=true")
    tr100, te100 = moved("train_text_encoder=true", "dit_te_lr_scale=100")
    tr_frozen, te_frozen = moved("train_text_encoder=false")
    assert tr1 > 0 and te1 > 0 and tr_frozen > 0
    assert te_frozen == 0.0, "a frozen encoder changed"
    assert te100 > 5 * te1


def test_an_init_from_checkpoint_resumes_exactly_and_refuses_another_start(tiny_train, tmp_path):
    from vidlab.generation.toyworld.train import TrainStateError, train
    from vidlab.io import load_checkpoint

    a, b = tiny_train.folder(tmp_path / "a", seed=1), tiny_train.folder(tmp_path / "b", seed=2)
    opts = (f"init_from={a}", "train_text_encoder=true", "dit_te_lr_scale=3", "dit_lr=1e-3")
    train(tiny_train.cfg(tmp_path / "ck", *opts), tmp_path / "two", progress=False)
    longer = train(tiny_train.cfg(tmp_path / "ck", *opts, "dit_steps=3"), tmp_path / "three", progress=False)
    direct = train(
        tiny_train.cfg(tmp_path / "ck_direct", *opts, "dit_steps=3"), tmp_path / "direct", progress=False
    )
    for part in ("transformer", "text_encoder"):
        assert _max_diff(_weights(longer, part), _weights(direct, part)) == 0.0, part
    assert load_checkpoint(tmp_path / "ck" / "dit.safetensors")["step"] == 3
    # the same checkpoint folder with another starting folder (other weights) is refused, naming the setting
    with pytest.raises(TrainStateError, match="init_from"):
        train(
            tiny_train.cfg(tmp_path / "ck", f"init_from={b}", *opts[1:], "dit_steps=4"),
            tmp_path / "x",
            progress=False,
        )


@pytest.mark.parametrize(
    "bad, says",
    [
        ("init_from={missing}", "not a toy-world pipeline folder"),
        ("dit_te_lr_scale=0", "dit_te_lr_scale=0"),
    ],
)
def test_a_bad_start_folder_or_encoder_rate_is_refused_in_one_line(tiny_train, tmp_path, bad, says):
    from vidlab.errors import UserError
    from vidlab.generation.toyworld.train import check_config

    with pytest.raises(UserError, match=says):
        check_config(tiny_train.cfg(tmp_path, bad.format(missing=tmp_path / "nothing")))


def test_a_start_folder_of_another_model_size_is_one_clear_error(tiny_train, tmp_path):
    from vidlab.errors import UserError
    from vidlab.generation.toyworld.train import load_init

    init = tiny_train.folder(tmp_path / "init", seed=0)
    cfg = tiny_train.cfg(tmp_path / "ck", f"init_from={init}", "model.layers=2")
    with pytest.raises(UserError, match="its transformer does not fit"):
        load_init(cfg, 29)
