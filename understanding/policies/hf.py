"""A Hugging Face VLM policy: Qwen2.5-VL and Qwen3-VL (or any image-text-to-text model with a chat template).

Each ``Frame`` becomes an ``{"type": "image"}`` part in place, so the processor's chat template emits
``<|vision_start|><|image_pad|><|vision_end|>`` right after the protocol's ``frame {idx}: `` text, and the
pixels go to the processor's image processor in the same order (what Qwen's processors expect).
Sampling: ``temperature == 0`` is greedy (all samples identical); otherwise ``num_samples`` sequences are
drawn in one ``generate`` call under a forked, seeded torch RNG so a seed reproduces its samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vidlab.understanding.messages import Frame, Message
from vidlab.understanding.policies.errors import PolicyError
from vidlab.understanding.policies.images import to_pil


def require_hub_or_folder(path: str) -> None:
    """A hub id must be cached or the hub reachable (seconds, not transformers' minutes of retries)."""
    from pathlib import Path

    if Path(path).expanduser().is_dir():
        return
    from vidlab.hub import require_hub

    require_hub(path, what="Hugging Face VLM", markers=("config.json",), use="--policy hf:DIR")


def to_hf_messages(messages: list[Message]) -> tuple[list[dict[str, Any]], list[Any]]:
    """Our messages -> (chat-template messages with image placeholders, PIL images in order)."""
    hf: list[dict[str, Any]] = []
    images: list[Any] = []
    for m in messages:
        if not m.frames:  # plain strings: every released Qwen template accepts them for every role
            hf.append({"role": m.role, "content": m.text})
            continue
        parts: list[dict[str, Any]] = []
        for p in m.content:
            if isinstance(p, Frame):
                parts.append({"type": "image"})
                images.append(to_pil(p.image))
            elif p:
                parts.append({"type": "text", "text": p})
        hf.append({"role": m.role, "content": parts})
    return hf, images


@dataclass
class HFPolicy:
    """Wraps a loaded model + processor; ``from_pretrained`` loads both from a local dir or a hub id."""

    model: Any
    processor: Any
    name: str = "hf"
    stop_strings: list[str] | None = None
    image_size: dict[str, int] | None = None  # e.g. {"shortest_edge": 3136, "longest_edge": 230400} (pixels)
    generate_kwargs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_pretrained(
        cls,
        path: str,
        *,
        dtype: str = "auto",
        device: str | None = None,
        device_map: str | None = None,
        attn_implementation: str | None = None,
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        stop_strings: list[str] | None = None,
        **generate_kwargs: Any,
    ) -> HFPolicy:
        """Load ``AutoProcessor`` + ``AutoModelForImageTextToText`` (Qwen2.5-VL / Qwen3-VL resolve by config)."""
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        require_hub_or_folder(path)
        try:
            processor = AutoProcessor.from_pretrained(path)
            kw: dict[str, Any] = {"dtype": getattr(torch, dtype) if dtype != "auto" else "auto"}
            if device_map:
                kw["device_map"] = device_map
            if attn_implementation:
                kw["attn_implementation"] = attn_implementation
            model = AutoModelForImageTextToText.from_pretrained(path, **kw)
        except (OSError, ValueError) as e:
            raise PolicyError(f"cannot load a Hugging Face VLM from {path!r}: {e}") from e
        if device and not device_map:
            model = model.to(device)
        model.eval()
        size = None
        if min_pixels is not None or max_pixels is not None:
            base = dict(getattr(processor.image_processor, "size", None) or {})
            size = {
                "shortest_edge": int(
                    min_pixels if min_pixels is not None else base.get("shortest_edge", 3136)
                ),
                "longest_edge": int(
                    max_pixels if max_pixels is not None else base.get("longest_edge", 12845056)
                ),
            }
        return cls(
            model,
            processor,
            name=f"hf:{path}",
            stop_strings=stop_strings,
            image_size=size,
            generate_kwargs=generate_kwargs,
        )

    def prompt_text(self, messages: list[Message]) -> str:
        """The exact prompt string the chat template renders (with the assistant generation prompt)."""
        hf, _ = to_hf_messages(messages)
        return self.processor.apply_chat_template(hf, add_generation_prompt=True, tokenize=False)

    def encode(self, messages: list[Message]) -> Any:
        """Tokenised prompt + pixel tensors on the model's device."""
        hf, images = to_hf_messages(messages)
        text = self.processor.apply_chat_template(hf, add_generation_prompt=True, tokenize=False)
        kw: dict[str, Any] = {"text": [text], "return_tensors": "pt"}
        if images:
            kw["images"] = images
            if self.image_size:
                kw["size"] = dict(self.image_size)
        inputs = self.processor(**kw)
        inputs = inputs.to(self.model.device)
        if "pixel_values" in inputs:
            inputs["pixel_values"] = inputs["pixel_values"].to(self.model.dtype)
        return inputs

    def generate(
        self,
        messages: list[Message],
        *,
        num_samples: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = 512,
        seed: int | None = None,
    ) -> list[str]:
        """``num_samples`` decoded continuations (special tokens removed, tags kept)."""
        import torch

        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        inputs = self.encode(messages)
        greedy = temperature <= 0
        kw: dict[str, Any] = {"max_new_tokens": int(max_new_tokens), **self.generate_kwargs}
        if greedy:
            kw.update(do_sample=False, num_return_sequences=1)
        else:
            kw.update(do_sample=True, temperature=float(temperature), num_return_sequences=num_samples)
        if self.stop_strings:
            kw.update(stop_strings=list(self.stop_strings), tokenizer=self.processor.tokenizer)
        dev = self.model.device
        devices = [dev.index or 0] if dev.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), torch.inference_mode():
            if seed is not None:
                torch.manual_seed(int(seed))
            out = self.model.generate(**inputs, **kw)
        new = out[:, inputs["input_ids"].shape[1] :]
        texts = self.processor.batch_decode(new, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return texts * num_samples if greedy else list(texts)
