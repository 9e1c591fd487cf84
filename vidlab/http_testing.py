"""A chat-completions server on 127.0.0.1 that misbehaves on purpose, for tests and failure-path benchmarks.

Every behaviour answers under its own path: ``server.url("drip")`` is ``http://127.0.0.1:PORT/drip/v1``, so
one server plays a good endpoint, a drip and a 500 at once. The server records each request (path, headers,
size, JSON body), counts requests per behaviour and, when a client leaves before the reply is complete,
how many bytes it had sent by then (:attr:`HostileServer.dropped`): a deadline that holds shows as a drip
cut off after a few bytes, whatever the machine's load. ``close()`` (or leaving the ``with`` block) stops
every handler, also one that is dripping or hanging, and joins its thread.

    from vidlab.http_testing import HostileServer, chat, drip, garbage, status, sequence
    with HostileServer({"good": chat("hi"), "drip": drip(chat_body("hi"), per_byte=0.25)}) as srv:
        chat_text(Endpoint(srv.url("drip"), timeout=2, max_retries=0), msgs, model="m")  # EndpointTimeout

Behaviours are callables ``(request, n) -> Reply`` (``n``: the how-manyth request to that path, from 1);
the factories below build the usual ones: :func:`chat` (a good reply), :func:`drip`, :func:`garbage`,
:func:`status`, :func:`truncated`, :func:`hang`, :func:`endless` and :func:`sequence` (one after another).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Drop",
    "HostileServer",
    "Reply",
    "Request",
    "chat",
    "chat_body",
    "drip",
    "endless",
    "garbage",
    "hang",
    "sequence",
    "status",
    "truncated",
]


@dataclass
class Request:
    """One request as the server saw it."""

    mode: str
    path: str
    headers: dict[str, str]
    size: int  # bytes of the request body
    body: Any  # the decoded JSON body, None if it was not JSON


@dataclass
class Reply:
    """What to send. ``drip``: seconds between single bytes (of the body, or of everything with
    ``drip_head``); ``declared``: a Content-Length to claim instead of the real one (a truncated reply);
    ``hang``: send nothing until the server stops; ``stream``: bytes sent over and over until the client
    leaves (no Content-Length)."""

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)
    drip: float | None = None
    drip_head: bool = False
    declared: int | None = None
    hang: bool = False
    stream: bytes | None = None


@dataclass
class Drop:
    """A client left before the reply was complete: ``sent`` of ``total`` bytes had gone out."""

    mode: str
    sent: int
    total: int | None


Behaviour = Callable[[Request, int], Reply]


def chat_body(content: str, n: int = 1) -> bytes:
    """A chat-completion JSON body with ``n`` choices of ``content``."""
    choices = [
        {"index": i, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        for i in range(n)
    ]
    return json.dumps({"object": "chat.completion", "choices": choices}).encode()


def chat(content: str | Callable[[Request, int], str]) -> Behaviour:
    """A good reply whose text is ``content`` (or ``content(request, n)``)."""
    return lambda req, n: Reply(body=chat_body(content(req, n) if callable(content) else content))


def drip(body: bytes | str, per_byte: float = 1.0, head_too: bool = False) -> Behaviour:
    """A reply sent one byte every ``per_byte`` seconds (with ``head_too``, the status line and headers too).
    ``body`` is the raw body; a str is taken as the text of a chat completion."""
    raw = chat_body(body) if isinstance(body, str) else body
    return lambda req, n: Reply(body=raw, drip=per_byte, drip_head=head_too)


def garbage(nbytes: int, status_code: int = 200, byte: bytes = b"x") -> Behaviour:
    """``nbytes`` of non-JSON."""
    raw = (byte * nbytes)[:nbytes]
    return lambda req, n: Reply(status=status_code, body=raw, headers=(("Content-Type", "text/plain"),))


def status(code: int, retry_after: float | None = None, body: bytes = b'{"error": "scripted"}') -> Behaviour:
    """An error status (with a ``Retry-After`` header when given)."""
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "application/json"),)
    if retry_after is not None:
        headers += (("Retry-After", f"{retry_after:g}"),)
    return lambda req, n: Reply(status=code, body=body, headers=headers)


def truncated(body: bytes | str, keep: float = 0.5) -> Behaviour:
    """A reply that claims its full length and sends only ``keep`` of it, then closes."""
    raw = chat_body(body) if isinstance(body, str) else body
    return lambda req, n: Reply(body=raw[: int(len(raw) * keep)], declared=len(raw))


def hang() -> Behaviour:
    """Reads the request, answers nothing until the server stops."""
    return lambda req, n: Reply(hang=True)


def endless(chunk: bytes = b"x" * 65536) -> Behaviour:
    """A 200 that never ends: ``chunk`` again and again, as fast as the client reads."""
    return lambda req, n: Reply(stream=chunk, headers=(("Content-Type", "application/json"),))


def sequence(*behaviours: Behaviour) -> Behaviour:
    """The n-th request gets the n-th behaviour; the last one repeats."""
    return lambda req, n: behaviours[min(n, len(behaviours)) - 1](req, n)


class _Handler(BaseHTTPRequestHandler):
    server: HostileServer._HTTPServer

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:
        owner = self.server.owner
        parts = self.path.strip("/").split("/")
        mode = parts[0] if parts and parts[0] else ""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        req = Request(mode, self.path, dict(self.headers), len(raw), body)
        with owner.lock:
            owner.requests.append(req)
            owner.counts[mode] += 1
            n = owner.counts[mode]
        behaviour = owner.behaviours.get(mode)
        self.close_connection = True
        if behaviour is None:
            self._write_all(Reply(status=404, body=f'{{"error": "no behaviour {mode!r}"}}'.encode()), mode)
            return
        self._write_all(behaviour(req, n), mode)

    def _head(self, reply: Reply, length: int | None) -> bytes:
        lines = [f"HTTP/1.1 {reply.status} {self.responses.get(reply.status, ('Status',))[0]}"]
        lines += [f"{k}: {v}" for k, v in reply.headers]
        if length is not None:
            lines.append(f"Content-Length: {length}")
        lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _write_all(self, reply: Reply, mode: str) -> None:
        owner = self.server.owner
        stop = owner.stopping
        if reply.hang:
            stop.wait()
            return
        sent = 0
        total: int | None = None
        try:
            if reply.stream is not None:
                self.wfile.write(self._head(reply, None))
                while not stop.is_set():
                    self.wfile.write(reply.stream)
                    sent += len(reply.stream)
                return
            head = self._head(reply, reply.declared if reply.declared is not None else len(reply.body))
            total = len(head) + (reply.declared if reply.declared is not None else len(reply.body))
            if reply.drip is None:
                self.wfile.write(head + reply.body)
                sent = len(head) + len(reply.body)
                return
            at_once, dripped = (b"", head + reply.body) if reply.drip_head else (head, reply.body)
            if at_once:
                self.wfile.write(at_once)
                sent += len(at_once)
            for i in range(len(dripped)):
                if stop.wait(reply.drip):
                    return
                self.wfile.write(dripped[i : i + 1])
                sent += 1
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            with owner.lock:
                owner.dropped.append(Drop(mode, sent, total))


class HostileServer:
    """The server (see the module docstring); ``behaviours`` maps a path name to a behaviour."""

    class _HTTPServer(ThreadingHTTPServer):
        daemon_threads = False  # server_close() joins every handler thread
        block_on_close = True
        owner: HostileServer

    def __init__(self, behaviours: Mapping[str, Behaviour] | None = None) -> None:
        self.behaviours: dict[str, Behaviour] = dict(behaviours or {})
        self.requests: list[Request] = []
        self.counts: Counter[str] = Counter()
        self.dropped: list[Drop] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.httpd = self._HTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.owner = self
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def add(self, name: str, behaviour: Behaviour) -> str:
        """Register ``behaviour`` under ``name``; its base URL."""
        self.behaviours[name] = behaviour
        return self.url(name)

    def url(self, name: str) -> str:
        """The base URL (ending in ``/v1``) that reaches behaviour ``name``."""
        return f"http://127.0.0.1:{self.port}/{name}/v1"

    def of(self, name: str) -> list[Request]:
        """The requests behaviour ``name`` got, in order."""
        with self.lock:
            return [r for r in self.requests if r.mode == name]

    def drops(self, name: str) -> list[Drop]:
        with self.lock:
            return [d for d in self.dropped if d.mode == name]

    def close(self) -> None:
        """Stop serving, end every handler (dripping or hanging ones too) and join the threads."""
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(10)

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
