"""Typed errors for policies: a bad spec, an unreachable or misbehaving endpoint, a model that cannot load.

Endpoint errors are the project's one HTTP client's (:mod:`vidlab.http`), re-exported here; all of these
are :class:`vidlab.errors.UserError`, so a command reports them in one line.
"""

from __future__ import annotations

from vidlab.errors import UserError
from vidlab.http import BadResponseError, EndpointConfigError, EndpointError, EndpointTimeout

__all__ = [
    "BadResponseError",
    "EndpointConfigError",
    "EndpointError",
    "EndpointTimeout",
    "PolicyError",
    "PolicySpecError",
]


class PolicyError(UserError, RuntimeError):
    """Base class: a policy could not be built or could not produce an assistant turn."""


class PolicySpecError(PolicyError, ValueError):
    """A ``--policy`` spec string that names no known backend or is malformed."""

    def __init__(self, spec: str, reason: str):
        self.spec, self.reason = spec, reason
        super().__init__(f"bad policy spec {spec!r}: {reason}")

    def __reduce__(self):  # picklable across Ray workers
        return (type(self), (self.spec, self.reason))
