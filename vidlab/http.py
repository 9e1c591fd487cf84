"""The one OpenAI-compatible HTTP client (vLLM, SGLang, LMDeploy, llama.cpp, OpenAI): ``chat_completion``.

Built on ``httpcore`` (the transport under ``httpx``) rather than the ``openai`` SDK: the
three callers (LLM layout planner, OpenAI policy, endpoint judge) need only ``POST /chat/completions`` with
extra body fields (``n``, ``stop``, vendor options) and typed errors that name the URL.

**Deadlines.** ``timeout`` is one deadline for the whole request: connecting, sending and every read of
the reply together (each socket operation gets only what is left of it, so a server that drips its reply
one byte a second is cut off at the deadline, not after the whole reply). ``budget`` bounds the whole call,
every attempt and the backoff waits between them; ``None`` means ``timeout`` per attempt plus the waits.
A reply larger than ``max_reply_bytes`` is not read further.

One way to give the endpoint and key, read by :meth:`Endpoint.from_env` when the caller passes none:

========================  =====================================================================
``VIDLAB_OPENAI_BASE_URL``  base URL, e.g. ``http://127.0.0.1:8000/v1`` (fallback ``OPENAI_BASE_URL``)
``VIDLAB_OPENAI_API_KEY``   bearer key, optional for local servers (fallback ``OPENAI_API_KEY``)
========================  =====================================================================

Retried (exponential backoff: ``backoff``, 2x, 4x ... at most 16x seconds, or a longer ``Retry-After``):
connection errors, deadlines and the statuses in :data:`RETRY_STATUS` (429, 5xx...), up to ``max_retries``
more attempts while the budget lasts. Not retried: other 4xx (a wrong model name, a bad key) and a 200
whose body is not JSON. Errors are :class:`EndpointError` (a :class:`vidlab.errors.UserError`: the fix is
the endpoint's settings, so a command prints one line) and its subclasses :class:`EndpointTimeout`,
:class:`BadResponseError` and :class:`EndpointConfigError`. The message says what happened, e.g.
``no complete reply within 5 s (server sent 23 bytes, still sending)`` or
``gave up after 3 attempts in 14.2 s: ...``. HTTP(S) proxies come from the usual ``*_proxy`` variables
(never for a loopback host).

    from vidlab.http import Endpoint, chat_completion, chat_text
    ep = Endpoint.from_env(timeout=30)                      # or Endpoint("http://127.0.0.1:8000/v1")
    text = chat_text(ep, [{"role": "user", "content": "hi"}], model="qwen2.5-vl", temperature=0)
    body = chat_completion(ep, messages, model="m", n=4, stop=["</answer>"])   # the whole JSON reply
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from vidlab.errors import UserError

BASE_URL_ENV = "VIDLAB_OPENAI_BASE_URL"
API_KEY_ENV = "VIDLAB_OPENAI_API_KEY"
FALLBACK_BASE_URL_ENV = "OPENAI_BASE_URL"
FALLBACK_API_KEY_ENV = "OPENAI_API_KEY"
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_REPLY_BYTES = 64 * 1024 * 1024  # default cap on one reply body
_WRITE_CHUNK = 64 * 1024  # a large request is sent in pieces, each within what is left of the deadline


class EndpointError(UserError):
    """An OpenAI-compatible server failed: no connection, an error status (after retries where they help).

    ``attempts``/``elapsed`` are set on the error raised after more than one attempt (or when the budget
    ended the call): the message then starts with ``gave up after N attempts in S s``."""

    no_status = "no response: "  # what the message says where an HTTP status would be

    def __init__(
        self,
        url: str,
        reason: str,
        status: int | None = None,
        body: str = "",
        attempts: int | None = None,
        elapsed: float | None = None,
        note: str = "",
    ) -> None:
        self.url, self.reason, self.status, self.body = url, reason, status, body
        self.attempts, self.elapsed, self.note = attempts, elapsed, note
        where = f"HTTP {status}: " if status is not None else self.no_status
        given = ""
        if attempts is not None:
            tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
            given = f"gave up after {tries} in {elapsed or 0.0:.1f} s{note}: "
        super().__init__(f"{url}: {given}{where}{reason}" + (f" (body: {body[:300]})" if body else ""))

    def __reduce__(self) -> Any:  # picklable across Ray workers
        return (
            type(self),
            (self.url, self.reason, self.status, self.body, self.attempts, self.elapsed, self.note),
        )

    def given_up(self, attempts: int, elapsed: float, note: str = "") -> EndpointError:
        """The same error, as raised after ``attempts`` attempts in ``elapsed`` seconds."""
        return type(self)(self.url, self.reason, self.status, self.body, attempts, elapsed, note)


class EndpointTimeout(EndpointError):
    """The server did not give a complete reply within the deadline on any attempt."""

    no_status = ""  # the reason says what the server had sent by the deadline


class BadResponseError(EndpointError):
    """The server answered 200, but not with JSON (or not with a chat-completion shape), or too much."""


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
    """Where to send requests: ``base_url`` ends before ``/chat/completions`` (e.g. ``.../v1``).

    ``timeout``: seconds for one whole request (connect, send, the complete reply). ``budget``: seconds for
    the whole call with every retry and wait (``None``: no bound beyond ``timeout`` per attempt)."""

    base_url: str
    api_key: str | None = None
    timeout: float = 60.0
    max_retries: int = 3
    backoff: float = 0.5
    budget: float | None = None
    max_reply_bytes: int = MAX_REPLY_BYTES

    def __post_init__(self) -> None:
        url = self.base_url.rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise EndpointConfigError(url or "<empty>", "base URL must start with http:// or https://")
        if self.timeout <= 0 or self.max_retries < 0 or self.backoff < 0:
            raise EndpointConfigError(url, "need timeout > 0, max_retries >= 0 and backoff >= 0")
        if self.budget is not None and self.budget <= 0:
            raise EndpointConfigError(url, f"budget must be > 0 seconds (or None), got {self.budget}")
        if self.max_reply_bytes < 1:
            raise EndpointConfigError(url, f"max_reply_bytes must be >= 1, got {self.max_reply_bytes}")
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


# ---------------------------------------------------------------------------------------------- deadline
class _DeadlineHit(Exception):
    """Internal: the request's deadline passed before a socket operation could start."""


class _Clock:
    """One request's deadline and what happened before it: connected, bytes sent, bytes received."""

    def __init__(self, seconds: float, of_budget: float | None = None) -> None:
        self.seconds = seconds
        self.of_budget = of_budget  # the attempt got only what was left of this budget
        self.start = time.monotonic()
        self.end = self.start + seconds
        self.connected = False
        self.sent = 0
        self.received = 0
        self.last_byte = self.start

    def cap(self, timeout: float | None) -> float:
        """``timeout`` limited to what is left of the deadline; _DeadlineHit when nothing is left."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise _DeadlineHit()
        return left if timeout is None else min(timeout, left)

    def expired(self) -> bool:
        return time.monotonic() >= self.end

    def describe(self) -> str:
        """What the server had done when the deadline passed, in words."""
        within = f"within {self.seconds:.3g} s"
        if self.of_budget is not None:
            within += f" (what was left of the {self.of_budget:g} s budget)"
        if not self.connected:
            return f"could not connect {within}"
        if self.received == 0:
            if self.sent == 0:
                return f"could not send the request {within}"
            return f"no reply {within} (request sent, the server sent nothing)"
        quiet = time.monotonic() - self.last_byte
        doing = "still sending" if quiet < 2.0 else f"then nothing for {quiet:.1f} s"
        return f"no complete reply {within} (server sent {self.received} bytes, {doing})"


def _deadline_backend(clock: _Clock) -> Any:
    """An httpcore network backend whose every connect, write and read gets only what is left of ``clock``."""
    import httpcore

    class Stream(httpcore.NetworkStream):
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            data = self.inner.read(max_bytes, clock.cap(timeout))
            if data:
                clock.received += len(data)
                clock.last_byte = time.monotonic()
            return data

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            for i in range(0, len(buffer), _WRITE_CHUNK):
                piece = buffer[i : i + _WRITE_CHUNK]
                self.inner.write(piece, clock.cap(timeout))
                clock.sent += len(piece)

        def close(self) -> None:
            self.inner.close()

        def start_tls(
            self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
        ) -> Any:
            return Stream(self.inner.start_tls(ssl_context, server_hostname, clock.cap(timeout)))

        def get_extra_info(self, info: str) -> Any:
            return self.inner.get_extra_info(info)

    class Backend(httpcore.NetworkBackend):
        def __init__(self) -> None:
            self.inner = httpcore.SyncBackend()

        def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Iterable[Any] | None = None,
        ) -> Any:
            stream = Stream(
                self.inner.connect_tcp(host, port, clock.cap(timeout), local_address, socket_options)
            )
            clock.connected = True
            return stream

        def connect_unix_socket(
            self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
        ) -> Any:  # pragma: no cover - not used for http(s) URLs
            stream = Stream(self.inner.connect_unix_socket(path, clock.cap(timeout), socket_options))
            clock.connected = True
            return stream

        def sleep(self, seconds: float) -> None:  # pragma: no cover - httpcore's own connect retries are off
            time.sleep(min(seconds, max(clock.end - time.monotonic(), 0.0)))

    return Backend()


def _pool(url: str, clock: _Clock) -> Any:
    """A one-request httpcore pool on the deadline backend (through the ``*_proxy`` proxy if one applies)."""
    import ssl
    import urllib.parse
    import urllib.request

    import httpcore

    backend = _deadline_backend(clock)
    ctx = ssl.create_default_context() if url.startswith("https://") else None
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    loopback = host == "localhost" or host == "::1" or host.startswith("127.")
    proxy = None if loopback else urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        return httpcore.HTTPProxy(proxy_url=proxy, ssl_context=ctx, network_backend=backend)
    return httpcore.ConnectionPool(ssl_context=ctx, network_backend=backend)


@dataclass
class _Reply:
    status: int
    reason: str
    headers: dict[str, str]
    body: bytes


class _TooLarge(Exception):
    def __init__(self, status: int, head: bytes) -> None:
        super().__init__(status)
        self.status, self.head = status, head


def _one_request(
    url: str, data: bytes, headers: list[tuple[str, str]], clock: _Clock, max_bytes: int
) -> _Reply:
    """POST ``data``; the whole reply, all of it within ``clock``'s deadline (httpcore errors propagate)."""
    with _pool(url, clock) as pool:
        t = clock.cap(None)
        timeouts = {"connect": t, "read": t, "write": t, "pool": t}
        with pool.stream(
            "POST", url, headers=headers, content=data, extensions={"timeout": timeouts}
        ) as resp:
            chunks: list[bytes] = []
            size = 0
            for chunk in resp.iter_stream():
                chunks.append(chunk)
                size += len(chunk)
                if size > max_bytes:
                    raise _TooLarge(resp.status, b"".join(chunks)[:300])
                if clock.expired():
                    raise _DeadlineHit()
            reason = resp.extensions.get("reason_phrase", b"")
            return _Reply(
                resp.status,
                reason.decode("latin-1", "replace") if isinstance(reason, bytes) else str(reason),
                {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in resp.headers},
                b"".join(chunks),
            )


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds from a numeric ``Retry-After`` header (an HTTP date is ignored)."""
    try:
        v = float(headers.get("retry-after", ""))
    except ValueError:
        return None
    return v if v >= 0 else None


def _text(b: bytes, n: int = 2000) -> str:
    return b[:n].decode("utf-8", "replace")


def post_json(
    url: str,
    payload: Mapping[str, Any],
    *,
    api_key: str | None = None,
    timeout: float = 60.0,
    max_retries: int = 3,
    backoff: float = 0.5,
    budget: float | None = None,
    max_reply_bytes: int = MAX_REPLY_BYTES,
) -> dict[str, Any]:
    """POST ``payload`` as JSON to ``url``; the decoded JSON body (see the module docstring for the deadline,
    the budget and retries)."""
    import httpcore

    headers = [("Content-Type", "application/json"), ("Accept", "application/json")]
    if api_key:
        headers.append(("Authorization", f"Bearer {api_key}"))
    data = json.dumps(dict(payload)).encode("utf-8")
    start = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        left = None if budget is None else budget - (time.monotonic() - start)
        clock = _Clock(timeout) if left is None or left >= timeout else _Clock(left, budget)
        wait_hint: float | None = None
        try:
            reply = _one_request(url, data, headers, clock, max_reply_bytes)
        except (_DeadlineHit, httpcore.TimeoutException):
            err: EndpointError = EndpointTimeout(url, clock.describe())
        except _TooLarge as e:
            raise BadResponseError(
                url,
                f"reply larger than {max_reply_bytes} bytes, stopped reading",
                e.status,
                _text(e.head, 300),
            ) from None
        except httpcore.ConnectError as e:
            err = EndpointError(url, f"cannot connect: {e or type(e).__name__}")
        except (httpcore.NetworkError, httpcore.ProtocolError) as e:
            what = "the connection broke" if clock.received or clock.sent else "cannot connect"
            err = EndpointError(url, f"{what}: {e or type(e).__name__} (after {clock.received} reply bytes)")
        else:
            if reply.status >= 400:
                err = EndpointError(url, reply.reason or "error status", reply.status, _text(reply.body))
                if reply.status not in RETRY_STATUS:
                    raise err
                wait_hint = _retry_after(reply.headers)
            else:
                try:
                    body = json.loads(reply.body)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    raise BadResponseError(
                        url, "body is not JSON", reply.status, _text(reply.body, 300)
                    ) from None
                if not isinstance(body, dict):
                    raise BadResponseError(
                        url, "body is not a JSON object", reply.status, _text(reply.body, 300)
                    )
                return body
        # a retryable failure: wait and try again while attempts and the budget last
        elapsed = time.monotonic() - start
        if attempts > max_retries:
            raise (err.given_up(attempts, elapsed) if attempts > 1 else err)
        wait = min(backoff * 2 ** (attempts - 1), backoff * 16)
        if wait_hint is not None:
            wait = max(wait, wait_hint)
        if budget is not None and elapsed + wait >= budget - 0.01:
            raise err.given_up(attempts, elapsed, f" (the {budget:g} s budget is spent)")
        time.sleep(wait)


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
        budget=ep.budget,
        max_reply_bytes=ep.max_reply_bytes,
    )
    completion_texts(body, ep.chat_url)  # shape check: a BadResponseError now, not a KeyError later
    return body


def completion_texts(body: Mapping[str, Any], url: str = "<reply>") -> list[str]:
    """The ``choices[i].message.content`` strings of a chat-completion reply (``None`` content -> "")."""
    try:
        choices = body["choices"]
        if not isinstance(choices, list) or not choices:
            raise KeyError("choices")
        texts = [c["message"].get("content") or "" for c in choices]
        if not all(isinstance(t, str) for t in texts):
            raise TypeError("message.content is not text")
        return texts
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
