"""An in-process Hugging Face VLM standing in for verl's rollout server (vLLM/SGLang) in tests and debugging.

``LocalHFServer(model, processor).generate(request_id=..., prompt_ids=..., sampling_params=..., image_data=...)``
has the signature of verl's ``LLMServerClient.generate`` and returns verl's ``TokenOutput``. It runs the real
model on the token ids the agent loop built, with the images' pixel values from the processor, so a prompt whose
image pad tokens do not match its images fails here exactly as it would on the server. ``script`` (a list of
assistant turns) makes it return those turns' tokens instead of sampling, with the model's own log-probabilities
of them (teacher forcing), so a full multi-turn episode can be played with a random tiny model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from verl.workers.rollout.replica import TokenOutput


class LocalHFServer:
    """Generate (or teacher-force scripted turns) with a local model; records every request it served."""

    def __init__(
        self, model: Any, processor: Any, script: Sequence[str] | None = None, max_new_tokens: int = 64
    ):
        self.model = model
        self.processor = processor
        self.script = list(script) if script is not None else None
        self.max_new_tokens = max_new_tokens
        self.requests: list[dict[str, Any]] = []
        self.eos_id = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")

    def _inputs(self, prompt_ids: list[int], images: list[Any] | None) -> dict[str, Any]:
        import torch

        kw: dict[str, Any] = {"input_ids": torch.tensor([prompt_ids], dtype=torch.long)}
        kw["attention_mask"] = torch.ones_like(kw["input_ids"])
        if images:
            pix = self.processor.image_processor(images=list(images), return_tensors="pt")
            kw["pixel_values"] = pix["pixel_values"].to(self.model.dtype)
            kw["image_grid_thw"] = pix["image_grid_thw"]
        return kw

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
        **kwargs: Any,
    ) -> TokenOutput:
        import torch

        kw = self._inputs(list(prompt_ids), image_data)
        turn = sum(1 for r in self.requests if r["request_id"] == request_id)
        self.requests.append(
            {"request_id": request_id, "prompt_ids": list(prompt_ids), "num_images": len(image_data or [])}
        )
        with torch.inference_mode():
            if self.script is not None:
                if turn >= len(self.script):
                    raise RuntimeError(
                        f"script has {len(self.script)} turns; request {turn + 1} asked for more"
                    )
                new = self.processor.tokenizer.encode(self.script[turn], add_special_tokens=False) + [
                    self.eos_id
                ]
                full = dict(kw)
                full["input_ids"] = torch.cat([kw["input_ids"], torch.tensor([new])], dim=1)
                full["attention_mask"] = torch.ones_like(full["input_ids"])
                logits = self.model(**full).logits[0, len(prompt_ids) - 1 : -1].float()
                logp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(new)[:, None])[:, 0]
                return TokenOutput(token_ids=new, log_probs=logp.tolist(), stop_reason="completed")
            temperature = float(sampling_params.get("temperature", 1.0))
            gen = self.model.generate(
                **kw,
                max_new_tokens=int(sampling_params.get("max_tokens", self.max_new_tokens)),
                do_sample=temperature > 0,
                temperature=temperature if temperature > 0 else None,
                eos_token_id=self.eos_id,
                output_scores=True,
                return_dict_in_generate=True,
            )
            new = gen.sequences[0, len(prompt_ids) :].tolist()
            logp = [float(torch.log_softmax(s[0].float(), -1)[t]) for s, t in zip(gen.scores, new)]
        return TokenOutput(token_ids=new, log_probs=logp, stop_reason="completed")
