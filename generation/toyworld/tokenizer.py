"""A word-level T5-style tokenizer over the toy world's grammar vocabulary.

Ids follow T5 (pad 0, eos 1, unk 2), then one id per grammar word (``world.vocabulary()``); text is lower-cased
and split on whitespace and punctuation, and ``</s>`` is appended, so ``WanPipeline``'s prompt encoding (padding to
512, attention mask, offsets for Comp-Attn's subject tokens) works exactly as with UMT5's SentencePiece model.
It is a ``PreTrainedTokenizerFast``: saved with the pipeline as ``tokenizer/tokenizer.json`` and loaded back by
``WanPipeline.from_pretrained`` and ``AutoTokenizer.from_pretrained`` alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from generation.toyworld.world import vocabulary

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedTokenizerFast

PAD, EOS, UNK = "<pad>", "</s>", "<unk>"
MODEL_MAX_LENGTH = 512


def build_word_tokenizer(words: list[str] | None = None) -> PreTrainedTokenizerFast:
    """The word-level tokenizer over ``words`` (default: the grammar's vocabulary)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {PAD: 0, EOS: 1, UNK: 2}
    for w in words if words is not None else vocabulary():
        vocab.setdefault(w.lower(), len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single=f"$A {EOS}", pair=f"$A {EOS} $B {EOS}", special_tokens=[(EOS, 1)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        model_max_length=MODEL_MAX_LENGTH,
        padding_side="right",
    )
