"""A policy served by an OpenAI-compatible chat-completions endpoint (vLLM, SGLang, LMDeploy, OpenAI).

Frames are sent as base64 data URLs (``image_url`` parts) in the order they appear in each message, so
the ``frame {idx}: `` text the protocol puts before every frame stays interleaved with it. Uses only the
standard library (``urllib``), retries connection errors, timeouts, 429 and 5xx with exponential backoff,
and raises typed errors (``EndpointError``, ``EndpointTimeout``, ``BadResponseError``) naming the URL.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from understanding.messages import Frame, Message
from understanding.policies.errors import BadResponseError, EndpointError, EndpointTimeout
from understanding.policies.images import to_data_url

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


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
    timeout: float = 120.0
    max_retries: int = 3
    backoff: float = 0.5
    image_format: str = "jpeg"
    jpeg_quality: int = 90
    stop: list[str] | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {self.base_url!r}")
        if self.api_key is None:
            self.api_key = os.environ.get("OPENAI_API_KEY")
        self.name = self.name or f"openai:{self.model}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

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
                if self.stop and ch.get("finish_reason") == "stop":
                    text = _reclose(text)
                texts.append(text)
            return texts
        except (KeyError, TypeError) as e:
            raise BadResponseError(
                self.url, f"not a chat completion ({e!r})", 200, json.dumps(body)[:300]
            ) from e

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        return post_json(
            self.url,
            payload,
            api_key=self.api_key,
            timeout=self.timeout,
            max_retries=self.max_retries,
            backoff=self.backoff,
        )


def post_json(
    url: str,
    payload: dict[str, Any],
    *,
    api_key: str | None = None,
    timeout: float = 120.0,
    max_retries: int = 3,
    backoff: float = 0.5,
) -> dict[str, Any]:
    """POST ``payload`` to an OpenAI-compatible ``url``; the decoded JSON body.

    Connection errors, timeouts and ``RETRY_STATUS`` answers are retried ``max_retries`` times with
    exponential backoff; other error statuses raise at once. Errors are typed: ``EndpointError`` (with the
    status), ``EndpointTimeout``, ``BadResponseError`` (a 200 whose body is not JSON).
    """
    data = json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    last: EndpointError | None = None
    for attempt in range(max_retries + 1):
        if attempt:
            time.sleep(backoff * 2 ** (attempt - 1))
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            body = e.read().decode("utf-8", "replace")
            last = EndpointError(url, e.reason or "error status", e.code, body)
            if e.code in RETRY_STATUS:
                continue
            raise last from e
        except TimeoutError:
            last = EndpointTimeout(url, f"no answer within {timeout:g}s")
            continue
        except urllib.error.URLError as e:
            if isinstance(e.reason, TimeoutError):
                last = EndpointTimeout(url, f"no answer within {timeout:g}s")
            else:
                last = EndpointError(url, f"cannot connect: {e.reason}")
            continue
        except (ConnectionError, OSError) as e:
            last = EndpointError(url, f"connection failed: {e}")
            continue
        try:
            return json.loads(raw)
        except json.JSONDecodeError as e:
            raise BadResponseError(url, "body is not JSON", 200, raw[:300].decode("utf-8", "replace")) from e
    assert last is not None
    last.args = (f"{last.args[0]} [after {max_retries + 1} attempts]",)
    raise last


def _reclose(text: str) -> str:
    """Give back the closing tag a server-side stop string removed (``<tool_call>{..}`` -> ``...</tool_call>``)."""
    for tag in ("tool_call", "answer"):
        if text.rfind(f"<{tag}>") > text.rfind(f"</{tag}>"):
            return text + f"</{tag}>"
    return text
