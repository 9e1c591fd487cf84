"""The toy world: coloured-shapes videos, an exact detector, and a small Wan trained on them on CPU.

``world`` (scenes, grammar captions, renderer), ``detect`` (learning-free per-frame boxes per colour and shape),
``metrics`` (presence / relation / count / layout IoU per video, bootstrap CIs), ``tokenizer`` (word-level T5-style),
``model`` + ``train`` (AutoencoderKLWan, then WanTransformer3DModel + UMT5 with flow matching; resumable),
``splits`` (held-out test / validation prompts), ``evaluate`` (generation with or without Comp-Attn, scored).
"""
