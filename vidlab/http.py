"""The one OpenAI-compatible HTTP client (vLLM, SGLang, LMDeploy, llama.cpp, OpenAI): ``chat_completion``.

Built on ``httpx`` with retries from ``tenacity`` (exponential backoff) rather than the ``openai`` SDK:
the three callers (LLM layout planner, OpenAI policy, endpoint judge) need only ``POST
/chat/completions`` with extra body fields (``n``, ``stop``, vendor options) and typed errors that name
the URL, and httpx is already installed with the Gradio demo, so no new heavy dependency.

One way to give the endpoint and key, read by :meth:`Endpoint.from_env` when the caller passes none:

========================  =====================================================================
``VIDLAB_OPENAI_BASE_URL``  base URL, e.g. ``http://127.0.0.1:8000/v1`` (fallback ``OPENAI_BASE_URL``)
``VIDLAB_OPENAI_API_KEY``   bearer key, optional for local servers (fallback ``OPENAI_API_KEY``)
========================  =====================================================================

Retried: connection errors, timeouts and the statuses in :data:`RETRY_STATUS` (429, 5xx...), up to
``max_retries`` more attempts. Not retried: other 4xx (a wrong model name, a bad key) and a 200 whose
body is not JSON. Errors are :class:`EndpointError` (a :class:`vidlab.errors.UserError`: the fix is
the endpoint's settings, so a command prints one line) and its subclasses :class:`EndpointTimeout`,
:class:`BadResponseError` and :class:`EndpointConfigError`.

    from vidlab.http import Endpoint, chat_completion, chat_text
    ep = Endpoint.from_env(timeout=30)                      # or Endpoint("http://127.0.0.1:8000/v1")
    text = chat_text(ep, [{"role": "user", "content": "hi"}], model="qwen2.5-vl", temperature=0)
    body = chat_completion(ep, messages, model="m", n=4, stop=["</answer>"])   # the whole JSON reply
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from vidlab.errors import UserError

BASE_URL_ENV = "VIDLAB_OPENAI_BASE_URL"
API_KEY_ENV = "VIDLAB_OPENAI_API_KEY"
FALLBACK_BASE_URL_ENV = "OPENAI_BASE_URL"
FALLBACK_API_KEY_ENV = "OPENAI_API_KEY"
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class EndpointError(UserError):
    """An OpenAI-compatible server failed: no connection, an error status (after retries where they help)."""

    def __init__(self, url: str, reason: str, status: int | None = None, body: str = "") -> None:
        self.url, self.reason, self.status, self.body = url, reason, status, body
        where = f"HTTP {status}" if status is not None else "no response"
        super().__init__(f"{url}: {where}: {reason}" + (f" (body: {body[:300]})" if body else ""))

    def __reduce__(self) -> Any:  # picklable across Ray workers
        return (type(self), (self.url, self.reason, self.status, self.body))


class EndpointTimeout(EndpointError):
    """The server did not answer within the timeout on any attempt."""


class BadResponseError(EndpointError):
    """The server answered 200, but not with JSON (or not with a chat-completion shape)."""


class EndpointConfigError(EndpointError):
    """No base URL given, or one that is not http(s)."""


def _env(*names: str) -> str | None:
    for n in names:
        v = os.environ.get(n)
        if v:
            return v
    return None


@dataclass(frozen=True)
class Endpoint:
    """Where to send requests: ``base_url`` ends before ``/chat/completions`` (e.g. ``.../v1``)."""

    base_url: str
    api_key: str | None = None
    timeout: float = 60.0
    max_retries: int = 3
    backoff: float = 0.5

    def __post_init__(self) -> None:
        url = self.base_url.rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise EndpointConfigError(url or "<empty>", "base URL must start with http:// or https://")
        if self.timeout <= 0 or self.max_retries < 0 or self.backoff < 0:
            raise EndpointConfigError(url, "need timeout > 0, max_retries >= 0 and backoff >= 0")
        object.__setattr__(self, "base_url", url)

    @classmethod
    def from_env(cls, base_url: str | None = None, api_key: str | None = None, **kw: Any) -> Endpoint:
        """Explicit arguments first, then ``VIDLAB_OPENAI_BASE_URL``/``VIDLAB_OPENAI_API_KEY``, then the
        ``OPENAI_*`` fallbacks (see module docstring)."""
        url = base_url or _env(BASE_URL_ENV, FALLBACK_BASE_URL_ENV)
        if not url:
            raise EndpointConfigError(
                "<unset>",
                f"no endpoint: pass a base URL or set {BASE_URL_ENV} (e.g. http://127.0.0.1:8000/v1)",
            )
        key = api_key if api_key is not None else _env(API_KEY_ENV, FALLBACK_API_KEY_ENV)
        return cls(url, key, **kw)

    @property
    def chat_url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def with_(self, **changes: Any) -> Endpoint:
        return replace(self, **changes)


class _Retry(Exception):
    """Internal: an attempt that may be retried, carrying the typed error to raise if none is left."""

    def __init__(self, error: EndpointError) -> None:
        super().__init__(str(error))
        self.error = error


def post_json(
    url: str,
    payload: Mapping[str, Any],
    *,
    api_key: str | None = None,
    timeout: float = 60.0,
    max_retries: int = 3,
    backoff: float = 0.5,
) -> dict[str, Any]:
    """POST ``payload`` as JSON to ``url``; the decoded JSON body (see module docstring for retries)."""
    import httpx
    import tenacity

    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"

    def attempt() -> dict[str, Any]:
        try:
            resp = httpx.post(url, json=dict(payload), headers=headers, timeout=timeout)
        except httpx.TimeoutException as e:
            raise _Retry(EndpointTimeout(url, f"no answer within {timeout:g}s")) from e
        except httpx.TransportError as e:
            raise _Retry(EndpointError(url, f"cannot connect: {e}")) from e
        if resp.status_code >= 400:
            err = EndpointError(url, resp.reason_phrase or "error status", resp.status_code, resp.text[:2000])
            if resp.status_code in RETRY_STATUS:
                raise _Retry(err)
            raise err
        try:
            body = resp.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise BadResponseError(url, "body is not JSON", resp.status_code, resp.text[:300]) from e
        if not isinstance(body, dict):
            raise BadResponseError(url, "body is not a JSON object", resp.status_code, resp.text[:300])
        return body

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(_Retry),
        stop=tenacity.stop_after_attempt(max_retries + 1),
        wait=tenacity.wait_exponential(multiplier=backoff, min=0, max=max(backoff * 16, 0.0)),
        reraise=True,
    )
    try:
        return retrying(attempt)
    except _Retry as r:
        err = r.error
        err.args = (f"{err.args[0]} [after {max_retries + 1} attempts]",)
        raise err from r.__cause__


def chat_completion(
    endpoint: Endpoint | str,
    messages: Sequence[Mapping[str, Any]],
    *,
    model: str,
    **params: Any,
) -> dict[str, Any]:
    """One ``POST {base_url}/chat/completions``; the whole JSON reply. ``params`` go into the body as
    is (``temperature``, ``max_tokens``, ``n``, ``stop``, ``seed``, vendor extras)."""
    ep = endpoint if isinstance(endpoint, Endpoint) else Endpoint.from_env(endpoint)
    body = post_json(
        ep.chat_url,
        {"model": model, "messages": list(messages), **params},
        api_key=ep.api_key,
        timeout=ep.timeout,
        max_retries=ep.max_retries,
        backoff=ep.backoff,
    )
    completion_texts(body, ep.chat_url)  # shape check: a BadResponseError now, not a KeyError later
    return body


def completion_texts(body: Mapping[str, Any], url: str = "<reply>") -> list[str]:
    """The ``choices[i].message.content`` strings of a chat-completion reply (``None`` content -> "")."""
    try:
        choices = body["choices"]
        if not isinstance(choices, list) or not choices:
            raise KeyError("choices")
        return [str(c["message"].get("content") or "") for c in choices]
    except (KeyError, TypeError, AttributeError) as e:
        raise BadResponseError(
            url, f"not a chat completion (missing {e})", 200, json.dumps(body, default=str)[:300]
        ) from e


def chat_text(
    endpoint: Endpoint | str, messages: Sequence[Mapping[str, Any]], *, model: str, **params: Any
) -> str:
    """The first choice's text of :func:`chat_completion`."""
    ep = endpoint if isinstance(endpoint, Endpoint) else Endpoint.from_env(endpoint)
    return completion_texts(chat_completion(ep, messages, model=model, **params), ep.chat_url)[0]
