"""The text tower over each prompt's own tokens equals the full padded pass (1,000 prompts, four kinds of tower),
and ClipModel keeps a bounded text-embedding cache that never serves an embedding of older weights."""

from __future__ import annotations

import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")
open_clip = pytest.importorskip("open_clip")

from vidlab.clip.text_tower import encode_by_length, text_encoder  # noqa: E402

WORDS = (
    "a the red green blue yellow circle square triangle appears before after between frame minute how many "
    "what colour was shape number moving left right fast slow video question answer 3 17 2024 , . ? ! "
    "naïve café über 東京 emoji 🙂 it's don't co-operate"
).split()


def prompts(n: int = 1000, seed: int = 0) -> list[str]:
    """Varied prompts: empty, short questions, long ones, and some past the 77-token context."""
    rng = random.Random(seed)
    out = ["", "a", "What colour was the triangle?"]
    while len(out) < n:
        k = rng.choice([rng.randint(1, 12), rng.randint(1, 12), rng.randint(12, 40), rng.randint(60, 120)])
        out.append(" ".join(rng.choice(WORDS) for _ in range(k)))
    return out


def _tokens(texts: list[str]):
    return open_clip.get_tokenizer("ViT-B-32")(texts)


def _cosines(a, b) -> np.ndarray:
    return torch.nn.functional.cosine_similarity(a.float(), b.float(), dim=-1).numpy()


def _check_equal_to_full(module, ids, batch_size: int = 64) -> list[int]:
    tower = text_encoder(module)
    assert tower is not None
    seen: list[int] = []
    features = tower.features

    def recording(x):
        seen.append(int(x.shape[1]))
        return features(x)

    tower.features = recording
    with torch.inference_mode():
        cut = encode_by_length(tower, ids, batch_size)
        full = tower.full(ids)
    cos = _cosines(cut, full)
    assert cos.min() >= 0.99999, (tower.kind, float(cos.min()))
    return seen


def _tiny_open_clip(custom_text: bool = False, **text_overrides):
    import json

    from vidlab.clip.models import BUILTIN_DIR

    cfg = json.loads((BUILTIN_DIR / "vidlab-tiny.json").read_text())
    cfg["text_cfg"].update(text_overrides)
    torch.manual_seed(0)
    cls = open_clip.model.CustomTextCLIP if custom_text else open_clip.model.CLIP
    return cls(cfg["embed_dim"], cfg["vision_cfg"], cfg["text_cfg"]).eval()


def test_open_clip_towers_equal_the_full_pass_on_1000_prompts():
    texts = prompts()
    ids = _tokens(texts)
    for module in (_tiny_open_clip(), _tiny_open_clip(custom_text=True)):
        seen = _check_equal_to_full(module, ids)
        assert min(seen) < 12 and max(seen) == ids.shape[1]  # short batches ran short; the longest ran full
        assert sum(seen) < 0.6 * len(seen) * ids.shape[1]


def test_hugging_face_towers_equal_the_full_pass_on_1000_prompts():
    transformers = pytest.importorskip("transformers")
    from open_clip.hf_model import HFTextEncoder

    texts = prompts(seed=1)
    ids = _tokens(texts)
    torch.manual_seed(0)
    clip_cfg = transformers.CLIPTextConfig(
        vocab_size=49408, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=77, projection_dim=16, bos_token_id=49406, eos_token_id=49407, pad_token_id=0,
    )  # fmt: skip
    clip_text = transformers.CLIPTextModelWithProjection(clip_cfg).eval()
    seen = _check_equal_to_full(clip_text, ids)
    assert min(seen) < 12
    # its legacy configs (eos_token_id 2) pool at the largest id: the end token of CLIP's vocabulary
    legacy = transformers.CLIPTextModel(
        transformers.CLIPTextConfig(**{**clip_cfg.to_dict(), "eos_token_id": 2})
    )
    _check_equal_to_full(legacy.eval(), ids)
    bert_cfg = transformers.BertConfig(
        vocab_size=49408, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=80, pad_token_id=0,
    )  # fmt: skip
    for pooler in ("mean_pooler", "cls_pooler"):  # (open_clip's max_pooler fails on any input)
        torch.manual_seed(0)
        enc = HFTextEncoder("tiny-bert", 16, config=bert_cfg, pooler_type=pooler, proj_type="linear",
                            pretrained=False).eval()  # fmt: skip
        module = open_clip.model.CustomTextCLIP.__new__(open_clip.model.CustomTextCLIP)
        torch.nn.Module.__init__(module)
        module.text = enc
        _check_equal_to_full(module, ids)


def test_towers_where_cutting_is_not_exact_keep_the_full_pass():
    assert text_encoder(_tiny_open_clip(custom_text=True, no_causal_mask=True)) is None
    assert text_encoder(_tiny_open_clip(custom_text=True, pool_type="last")) is None
    assert text_encoder(_tiny_open_clip(custom_text=True, embed_cls=True)) is None


@pytest.mark.filterwarnings("ignore::vidlab.clip.models.QueryTruncatedWarning")
def test_clip_model_embeds_over_own_tokens_and_caches(monkeypatch):
    from vidlab.clip import load_model

    model = load_model("vidlab-tiny", device="cpu")
    assert model.text_tower() is not None
    texts = prompts(200, seed=2)
    got = model.embed_texts(texts, batch_size=16)
    with torch.inference_mode():
        full = torch.nn.functional.normalize(model.model.encode_text(model.tokenizer(texts)).float(), dim=-1)
    assert _cosines(torch.from_numpy(got), full).min() >= 0.99999
    # asked again: served from the cache, identical, the tower not run
    calls = []
    monkeypatch.setattr(model, "encode_tokens", lambda *a, **k: calls.append(1))
    again = model.embed_texts(list(reversed(texts)))
    assert not calls and np.array_equal(again, got[::-1])
    monkeypatch.undo()
    # an in-place weight update (as an optimiser step makes) empties the cache: no stale embedding
    with torch.no_grad():
        model.model.text_projection.mul_(-1.0)
    flipped = model.embed_texts(texts[:5])
    np.testing.assert_allclose(flipped, -got[:5], atol=1e-5)


def test_text_cache_is_bounded_and_least_recently_used_goes_first():
    from vidlab.clip import load_model

    model = load_model("vidlab-tiny", device="cpu")
    model.text_cache.size = 3
    model.embed_texts(["a", "b", "c"])
    model.embed_texts(["a"])  # "a" is now the most recent
    model.embed_texts(["d"])  # "b" goes
    assert len(model.text_cache) == 3
    hits = model.text_cache.hits
    model.embed_texts(["a", "c", "d"])
    assert model.text_cache.hits == hits + 3
    model.embed_texts(["b"])
    assert model.text_cache.hits == hits + 3  # a miss: it had been evicted
    off = load_model("vidlab-tiny", device="cpu")
    off.text_cache.size = 0
    off.embed_texts(["a", "a"])
    assert len(off.text_cache) == 0
