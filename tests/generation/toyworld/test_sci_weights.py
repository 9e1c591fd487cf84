"""The second toy-world folder, ``weights_trained_te``: the shipped weights fine-tuned with the text encoder trained.

It is the SCI study's model (benchmarks/sci_study.py, docs/results/sci-study.md); the shipped ``weights`` stay the
default. Checked here without sampling: what it was made from, that it is small safetensors, its gates.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vidlab.generation.toyworld.model import WEIGHTS_DIR

TRAINED_TE = WEIGHTS_DIR.parent / "weights_trained_te"

pytestmark = pytest.mark.skipif(
    not TRAINED_TE.is_dir(), reason="generation/toyworld/weights_trained_te not built"
)


def _load(folder: Path, part: str) -> dict:
    from safetensors.torch import load_file

    return load_file(next((folder / part).glob("*.safetensors")))


def test_the_folder_is_small_safetensors_fine_tuned_from_the_shipped_weights_with_the_encoder_trained():
    from vidlab.generation.toyworld.train import init_digest

    files = [p for p in TRAINED_TE.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 12 * 2**20
    assert not [p for p in files if p.suffix in (".bin", ".pt", ".pth", ".pkl", ".ckpt")]
    meta = json.loads((TRAINED_TE / "toyworld.json").read_text())
    assert meta["config"]["train_text_encoder"] is True
    assert meta["init_from"]["digest"] == init_digest(WEIGHTS_DIR), "not made from the shipped weights"
    assert "jointly" in meta["text_encoder"]
    # the VAE is the shipped one, as it is; the text encoder moved
    shipped, tuned = _load(WEIGHTS_DIR, "vae"), _load(TRAINED_TE, "vae")
    assert all((shipped[k] == tuned[k]).all() for k in shipped)
    te0, te1 = _load(WEIGHTS_DIR, "text_encoder"), _load(TRAINED_TE, "text_encoder")
    num = sum(float((te1[k] - te0[k]).pow(2).sum()) for k in te0)
    den = sum(float(te0[k].pow(2).sum()) for k in te0)
    assert (num / den) ** 0.5 > 0.05, "the text encoder barely changed"


def test_the_folder_passes_the_shipped_models_gates():
    meta = json.loads((TRAINED_TE / "toyworld.json").read_text())
    gates = meta.get("gates")
    assert gates, "gates not recorded: python benchmarks/sci_study.py --measure-gates"
    assert gates["vae_roundtrip"]["passed"] and gates["vae_roundtrip"]["min"] >= 0.9
    assert gates["single_presence"]["passed"] and gates["single_presence"]["presence"] >= 0.8
