"""A policy served by an OpenAI-compatible chat-completions endpoint (vLLM, SGLang, LMDeploy, OpenAI).

Frames are sent as base64 data URLs (``image_url`` parts) in the order they appear in each message, so
the ``frame {idx}: `` text the protocol puts before every frame stays interleaved with it. The transport is
the project's one client, :mod:`vidlab.http`: ``timeout`` is one deadline for each whole request (connect,
send and the complete reply, so a server dripping its reply is cut off at it), ``budget`` bounds every
attempt and backoff wait of one request together (None: ``timeout`` per attempt plus the waits); connection
errors, deadlines, 429 and 5xx are retried ``max_retries`` times; errors are typed and name the URL. The key is the ``api_key`` argument, else ``VIDLAB_OPENAI_API_KEY``
(fallback ``OPENAI_API_KEY``), as for every other client in the project.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from vidlab.http import RETRY_STATUS, BadResponseError, Endpoint, EndpointError, EndpointTimeout, post_json
from vidlab.understanding.messages import Frame, Message
from vidlab.understanding.policies.images import to_data_url

__all__ = [
    "RETRY_STATUS",
    "BadResponseError",
    "EndpointError",
    "EndpointTimeout",
    "OpenAIPolicy",
    "post_json",
]


@dataclass
class OpenAIPolicy:
    """Chat completions against ``{base_url}/chat/completions`` with model ``model``.

    ``n`` samples are asked for in one request; servers that return fewer choices are asked again
    until ``num_samples`` texts are collected. ``stop`` strings are passed through; because such servers
    drop the matched stop string, an unclosed ``<tool_call>``/``<answer>`` block gets its closing tag back.
    """

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 120.0  # seconds for one whole request: connect, send and the complete reply
    max_retries: int = 3
    backoff: float = 0.5
    budget: float | None = None  # seconds for one request with all its retries and waits (None: no cap)
    max_reply_bytes: int = 64 * 1024 * 1024
    image_format: str = "jpeg"
    jpeg_quality: int = 90
    stop: list[str] | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        self.endpoint = Endpoint.from_env(
            self.base_url,
            self.api_key,
            timeout=float(self.timeout),
            max_retries=int(self.max_retries),
            backoff=float(self.backoff),
            budget=None if self.budget is None else float(self.budget),
            max_reply_bytes=int(self.max_reply_bytes),
        )  # EndpointConfigError (one line) for a URL that is not http(s)
        self.base_url, self.api_key = self.endpoint.base_url, self.endpoint.api_key
        self.name = self.name or f"openai:{self.model}"

    @property
    def url(self) -> str:
        return self.endpoint.chat_url

    def to_openai_messages(self, messages: list[Message]) -> list[dict[str, Any]]:
        """Our messages as OpenAI chat messages; text-only turns stay plain strings."""
        out: list[dict[str, Any]] = []
        for m in messages:
            if not m.frames:
                out.append({"role": m.role, "content": m.text})
                continue
            parts: list[dict[str, Any]] = []
            for p in m.content:
                if isinstance(p, Frame):
                    url = to_data_url(p.image, self.image_format, self.jpeg_quality)
                    parts.append({"type": "image_url", "image_url": {"url": url}})
                elif p:
                    parts.append({"type": "text", "text": p})
            out.append({"role": m.role, "content": parts})
        return out

    def generate(
        self,
        messages: list[Message],
        *,
        num_samples: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = 512,
        seed: int | None = None,
    ) -> list[str]:
        """``num_samples`` completions of the next assistant turn."""
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": self.to_openai_messages(messages),
            "temperature": float(temperature),
            "max_tokens": int(max_new_tokens),
        }
        if seed is not None:
            payload["seed"] = int(seed)
        if self.stop:
            payload["stop"] = list(self.stop)
        payload.update(self.extra_body)
        texts: list[str] = []
        while len(texts) < num_samples:
            payload["n"] = num_samples - len(texts)
            got = self._choices(self._post(payload))
            if not got:
                raise BadResponseError(self.url, "response has no choices", 200)
            texts.extend(got)
            if seed is not None:  # a seeded retry for the missing samples must not repeat the same ones
                payload["seed"] = int(payload["seed"]) + 1
        return texts[:num_samples]

    def _choices(self, body: dict[str, Any]) -> list[str]:
        try:
            choices = body["choices"]
            texts = []
            for ch in choices:
                text = ch["message"]["content"] or ""
                if not isinstance(text, str):
                    raise TypeError(f"message.content is {type(text).__name__}, not text")
                if self.stop and ch.get("finish_reason") == "stop":
                    text = _reclose(text)
                texts.append(text)
            return texts
        except (KeyError, TypeError, AttributeError) as e:
            raise BadResponseError(
                self.url, f"not a chat completion ({e!r})", 200, json.dumps(body)[:300]
            ) from e

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        ep = self.endpoint
        return post_json(
            ep.chat_url,
            payload,
            api_key=ep.api_key,
            timeout=ep.timeout,
            max_retries=ep.max_retries,
            backoff=ep.backoff,
            budget=ep.budget,
            max_reply_bytes=ep.max_reply_bytes,
        )


def _reclose(text: str) -> str:
    """Give back the closing tag a server-side stop string removed (``<tool_call>{..}`` -> ``...</tool_call>``)."""
    for tag in ("tool_call", "answer"):
        if text.rfind(f"<{tag}>") > text.rfind(f"</{tag}>"):
            return text + f"</{tag}>"
    return text
