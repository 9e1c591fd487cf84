"""A CLIP text tower run over each prompt's own tokens, not over the whole padded context.

A tokenizer pads every prompt to the context length (77 for CLIP), and ``encode_text`` runs the transformer over
all of it, although a question fills about ten positions. In a causal text transformer the feature read at the end
token depends only on the positions up to it, so the positions after it can be dropped: the result is the same
up to float rounding (cosine >= 0.99999, tested on 1,000 prompts). Prompts are grouped by the length they need,
so that a batch of short prompts is not padded to its longest member's context.

:func:`text_encoder` recognises the towers where this is exact and returns None for the others (a bidirectional
tower, a class token appended at the end, last-position pooling), which keep the full pass:

- open_clip's own text transformer, inside ``CLIP`` or as ``CustomTextCLIP.text`` (causal mask; pooled at the end
  token by ``argmax``/``eos``, or at the first position);
- a Hugging Face text model: open_clip's ``HFTextEncoder`` (any transformer that masks padding by attention mask:
  positions after the last non-padding token are dropped, keeping one, which is the end token when it doubles as
  the padding token) and ``transformers``' ``CLIPTextModel`` / ``CLIPTextModelWithProjection`` (cut after the
  token its pooling reads: the first ``eos_token_id``, or the largest id in its legacy configs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TextEncoder", "encode_by_length", "text_encoder"]


@dataclass
class TextEncoder:
    """How to run one text tower on a prefix of its tokens.

    ``lengths(ids)`` -> the positions each row needs (int64 [B]); ``features(ids)`` -> unnormalised features
    [B, D] of ids cut to any length at least the largest of those; ``full(ids)`` -> the tower's own full pass.
    """

    kind: str
    lengths: Callable[[Any], Any] = field(repr=False)
    features: Callable[[Any], Any] = field(repr=False)
    full: Callable[[Any], Any] = field(repr=False)


def _pool_lengths(pool: str, eos_id: int | None) -> Callable[[Any], Any] | None:
    """Positions needed per row for open_clip's pooling kinds that read a token at or before the end token."""
    if pool == "argmax":  # the end token has the largest id in CLIP's vocabulary
        return lambda ids: ids.argmax(dim=-1) + 1
    if pool == "eos" and eos_id is not None:
        return lambda ids: (ids == eos_id).int().argmax(dim=-1) + 1
    if pool == "first":
        return lambda ids: ids.new_ones(ids.shape[0])
    return None  # "last" reads the final (padding) position, which sees every position before it


def _open_clip_causal(
    token_embedding: Any,
    positional_embedding: Any,
    transformer: Any,
    ln_final: Any,
    text_projection: Any,
    attn_mask: Any,
    pool: str,
    eos_id: int | None,
) -> Callable[[Any], Any]:
    """open_clip's ``encode_text`` on a prefix: the positional embedding and the causal mask cut to its length."""
    from open_clip.transformer import text_global_pool
    from torch import nn

    def features(ids: Any) -> Any:
        n = ids.shape[1]
        cast = transformer.get_cast_dtype()
        x = token_embedding(ids).to(cast) + positional_embedding[:n].to(cast)
        x = transformer(x, attn_mask=attn_mask[:n, :n])
        x = ln_final(x)
        x = text_global_pool(x, ids, pool, eos_token_id=eos_id)
        if text_projection is not None:
            x = text_projection(x) if isinstance(text_projection, nn.Linear) else x @ text_projection
        return x

    return features


def _open_clip_tower(
    owner: Any, pool: str, eos_id: int | None, full: Callable[[Any], Any]
) -> TextEncoder | None:
    if getattr(owner, "attn_mask", None) is None or getattr(owner, "cls_emb", None) is not None:
        return None  # bidirectional, or a class token appended after the padding (CoCa)
    if getattr(owner, "use_pad_mask", False):
        return None
    lengths = _pool_lengths(pool, eos_id)
    if lengths is None:
        return None
    features = _open_clip_causal(
        owner.token_embedding,
        owner.positional_embedding,
        owner.transformer,
        owner.ln_final,
        owner.text_projection,
        owner.attn_mask,
        pool,
        eos_id,
    )
    return TextEncoder("open_clip", lengths, features, full)


def _hf_clip_lengths(eos_id: int | None) -> Callable[[Any], Any]:
    """Positions a ``transformers`` CLIP text model needs: up to the token its pooled output reads."""
    if eos_id == 2 or eos_id is None:  # its legacy configs pool at the largest id (the end token)
        return lambda ids: ids.argmax(dim=-1) + 1
    return lambda ids: (ids == eos_id).int().argmax(dim=-1) + 1


def _hf_clip_model(module: Any) -> TextEncoder | None:
    """``transformers``' CLIPTextModel / CLIPTextModelWithProjection (causal, pooled at the end token)."""
    cfg = module.config
    eos = getattr(cfg, "eos_token_id", None)
    with_projection = hasattr(module, "text_projection")

    def full(ids: Any) -> Any:
        out = module(input_ids=ids)
        return out.text_embeds if with_projection else out.pooler_output

    return TextEncoder("transformers-clip", _hf_clip_lengths(eos), full, full)


def _hf_text_encoder(module: Any) -> TextEncoder:
    """open_clip's ``HFTextEncoder``: padding is masked out of attention, so trailing padding can go."""
    pad = module.config.pad_token_id

    def lengths(ids: Any) -> Any:
        import torch

        keep = ids != pad
        pos = torch.arange(1, ids.shape[1] + 1, device=ids.device)
        last = (keep * pos).amax(dim=-1)  # 1 + the last non-padding position (0 for an all-padding row)
        return (last + 1).clamp(max=ids.shape[1])  # and one more: the end token when it is the padding token

    return TextEncoder("hf-text-encoder", lengths, module, module)


def text_encoder(module: Any) -> TextEncoder | None:
    """The prefix-runnable text tower of ``module`` (an open_clip model or a ``transformers`` CLIP text model),
    or None when cutting the padding would change its output (then use the full pass)."""
    from open_clip.hf_model import HFTextEncoder
    from open_clip.transformer import TextTransformer

    model_type = getattr(getattr(module, "config", None), "model_type", None)
    if model_type == "clip_text_model":
        return _hf_clip_model(module)
    text = getattr(module, "text", None)
    if isinstance(text, TextTransformer):
        return _open_clip_tower(text, text.pool_type, getattr(text, "eos_id", None), text)
    if isinstance(text, HFTextEncoder):
        return _hf_text_encoder(text)
    if all(
        hasattr(module, a) for a in ("transformer", "token_embedding", "positional_embedding", "ln_final")
    ):
        return _open_clip_tower(
            module,
            getattr(module, "text_pool_type", "argmax"),
            getattr(module, "text_eos_id", None),
            module.encode_text,
        )
    return None


def encode_by_length(encoder: TextEncoder, ids: Any, batch_size: int) -> Any:
    """Unnormalised features [N, D] of token ids [N, context], in input order: rows sorted by the length they
    need, in batches of at most ``batch_size``, each run over its longest row's positions only."""
    import torch

    need = encoder.lengths(ids).clamp(min=1, max=ids.shape[1])
    order = torch.argsort(need, stable=True)
    out: Any = None
    for s in range(0, len(order), batch_size):
        rows = order[s : s + batch_size]
        n = int(need[rows].max())
        feats = encoder.features(ids[rows, :n])
        if out is None:
            out = feats.new_empty((ids.shape[0], feats.shape[-1]))
        out[rows] = feats
    if out is None:
        raise ValueError("encode_by_length: no token rows")
    return out
