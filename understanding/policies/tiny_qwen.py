"""Tiny random Qwen2.5-VL / Qwen3-VL models + processors built entirely offline (tests, smoke runs, demos).

The tokenizer is a byte-level BPE with no merges (every text round-trips) plus the special tokens Qwen
uses; the image processor uses small min/max pixels so a frame is a handful of tokens; the chat template
renders images as ``<|vision_start|><|image_pad|><|vision_end|>`` like the released templates. The model
classes are transformers' own, so the policy code path is the one real checkpoints take.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for c in message['content'] %}"
    "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

KINDS = ("qwen2_5_vl", "qwen3_vl")


def tiny_tokenizer():
    """A byte-level tokenizer (256 byte tokens, no merges) with Qwen's special tokens appended."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIAL_TOKENS)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")


def build_tiny_qwen_vl(kind: str = "qwen2_5_vl", seed: int = 0) -> tuple[Any, Any]:
    """(model, processor) for a 2-layer, 32-wide random ``kind`` model; ``generate`` takes milliseconds."""
    import torch
    import transformers as tf

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    tok = tiny_tokenizer()
    ids = tok.convert_tokens_to_ids
    text = dict(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        bos_token_id=ids("<|endoftext|>"),
        eos_token_id=ids("<|im_end|>"),
        pad_token_id=ids("<|endoftext|>"),
    )
    tokens = dict(
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
        vision_end_token_id=ids("<|vision_end|>"),
    )
    vision = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=4, out_hidden_size=32)
    if kind == "qwen2_5_vl":
        patch = 14
        text["rope_parameters"] = {"rope_type": "default", "mrope_section": [1, 1, 2], "rope_theta": 10000.0}
        vision.update(fullatt_block_indexes=[1], window_size=56, patch_size=patch)
        config = tf.Qwen2_5_VLConfig(text_config=text, vision_config=vision, **tokens)
        model_cls, proc_cls, video_cls = (
            tf.Qwen2_5_VLForConditionalGeneration,
            tf.Qwen2_5_VLProcessor,
            tf.Qwen2VLVideoProcessor,
        )
    else:
        patch = 16
        text.update(head_dim=8)
        text["rope_parameters"] = {
            "rope_type": "default",
            "mrope_section": [1, 1, 2],
            "mrope_interleaved": True,
            "rope_theta": 10000.0,
        }
        vision.update(num_position_embeddings=16, deepstack_visual_indexes=[1], patch_size=patch)
        config = tf.Qwen3VLConfig(text_config=text, vision_config=vision, **tokens)
        model_cls, proc_cls, video_cls = (
            tf.Qwen3VLForConditionalGeneration,
            tf.Qwen3VLProcessor,
            tf.Qwen3VLVideoProcessor,
        )
    unit = (2 * patch) ** 2  # one merged 2x2 patch group
    image_processor = tf.Qwen2VLImageProcessor(min_pixels=unit, max_pixels=4 * unit, patch_size=patch)
    video_processor = video_cls(patch_size=patch)
    processor = proc_cls(
        image_processor=image_processor,
        video_processor=video_processor,
        tokenizer=tok,
        chat_template=CHAT_TEMPLATE,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config).eval()
    model.generation_config.eos_token_id = ids("<|im_end|>")
    model.generation_config.pad_token_id = ids("<|endoftext|>")
    return model, processor


def save_tiny_qwen_vl(out_dir: str | Path, kind: str = "qwen2_5_vl", seed: int = 0) -> Path:
    """Write a tiny model + processor as a loadable checkpoint dir (safetensors) for ``hf:<dir>`` specs."""
    out = Path(out_dir)
    model, processor = build_tiny_qwen_vl(kind, seed)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out
