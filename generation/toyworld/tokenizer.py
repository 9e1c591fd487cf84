"""A word-level T5-style tokenizer over the toy world's grammar vocabulary.

Ids follow T5 (pad 0, eos 1, unk 2), then one id per grammar word (``world.vocabulary()``); text is lower-cased
and split on whitespace and punctuation, and ``</s>`` is appended, so ``WanPipeline``'s prompt encoding (padding to
512, attention mask, offsets for Comp-Attn's subject tokens) works exactly as with UMT5's SentencePiece model.
It is a ``PreTrainedTokenizerFast``: saved with the pipeline as ``tokenizer/tokenizer.json`` and loaded back by
``WanPipeline.from_pretrained`` and ``AutoTokenizer.from_pretrained`` alike.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING

from vidlab.errors import UserError
from vidlab.generation.toyworld.world import vocabulary

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedTokenizerFast

PAD, EOS, UNK = "<pad>", "</s>", "<unk>"
MODEL_MAX_LENGTH = 512


def build_word_tokenizer(
    words: list[str] | None = None, model_max_length: int = MODEL_MAX_LENGTH
) -> PreTrainedTokenizerFast:
    """The word-level tokenizer over ``words`` (default: the grammar's vocabulary).

    ``model_max_length`` is saved with it and is the prompt length the pipeline's transformer was trained with:
    vidlab encodes prompts at that length (``vidlab.generation.subjects.model_text_length``).
    """
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
        model_max_length=model_max_length,
        padding_side="right",
    )


class UnknownWordsError(UserError, ValueError):
    """A prompt with words a word-level model never saw (checked before the model loads)."""


def unknown_words(prompt: str, tokenizer_file: str | os.PathLike) -> list[str] | None:
    """Words of ``prompt`` missing from a saved word-level ``tokenizer.json`` (None: not a word-level tokenizer).

    Reads the JSON only (no model, no transformers): NFKC + lower-case, then the ``Whitespace`` pre-tokenizer's
    split (``\\w+`` runs and punctuation runs), as the tokenizer itself does.
    """
    data = json.loads(Path(tokenizer_file).read_text(encoding="utf-8"))
    model = data.get("model") or {}
    if model.get("type") != "WordLevel":
        return None
    vocab = model.get("vocab") or {}
    text = unicodedata.normalize("NFKC", prompt).lower()
    seen: list[str] = []
    for w in re.findall(r"\w+|[^\w\s]+", text):
        if w not in vocab and w not in seen:
            seen.append(w)
    return seen


def check_prompt_words(prompt: str, pipeline_dir: str | os.PathLike, model: str = "") -> None:
    """Refuse, naming the unknown words, a prompt a word-level pipeline (the toy world's) cannot encode.

    Its tokenizer would map those words to ``<unk>`` and the model would draw something else; pipelines with
    a sub-word tokenizer (every real Wan) pass unchecked.
    """
    tok = Path(pipeline_dir) / "tokenizer" / "tokenizer.json"
    if not tok.is_file():
        return
    unknown = unknown_words(prompt, tok)
    if unknown:
        vocab = sorted(
            w for w in json.loads(tok.read_text(encoding="utf-8"))["model"]["vocab"] if w[:1] != "<"
        )
        raise UnknownWordsError(
            f"the prompt has words the {model or str(pipeline_dir)!r} model does not know: "
            f"{', '.join(repr(w) for w in unknown)} "
            f"(its whole vocabulary: {' '.join(vocab)})"
        )
