"""Typed errors for policies: a bad spec, an unreachable or misbehaving endpoint, a model that cannot load."""

from __future__ import annotations


class PolicyError(RuntimeError):
    """Base class: a policy could not produce an assistant turn."""


class PolicySpecError(PolicyError, ValueError):
    """A ``--policy`` spec string that names no known backend or is malformed."""

    def __init__(self, spec: str, reason: str):
        self.spec, self.reason = spec, reason
        super().__init__(f"bad policy spec {spec!r}: {reason}")


class EndpointError(PolicyError):
    """An OpenAI-compatible server answered with an error status (after retries where retrying helps)."""

    def __init__(self, url: str, reason: str, status: int | None = None, body: str = ""):
        self.url, self.reason, self.status, self.body = url, reason, status, body
        where = f"HTTP {status}" if status is not None else "no response"
        super().__init__(f"{url}: {where}: {reason}" + (f" (body: {body[:300]})" if body else ""))


class EndpointTimeout(EndpointError):
    """The server did not answer within the timeout on any attempt."""


class BadResponseError(EndpointError):
    """The server answered 200 but not with a chat-completion shaped JSON body."""
