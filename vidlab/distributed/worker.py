"""The worker contract both backends share: a worker's result is a JSON-able dict, and a worker that
cannot be built is a :class:`WorkerInitError` (nothing was processed)."""

from __future__ import annotations

import json
from typing import Any


class WorkerInitError(RuntimeError):
    """The worker class could not be constructed (e.g. its model failed to load); nothing was processed."""


def checked_result(result: Any) -> dict[str, Any]:
    """``result`` when it is a JSON-serialisable dict; else TypeError (recorded as the item's failure)."""
    if not isinstance(result, dict):
        raise TypeError(f"worker.process must return a dict, got {type(result).__name__}")
    json.dumps(result)  # TypeError here if not JSON-serialisable: recorded as the item's failure
    return result
