"""Fail fast on a Hugging Face hub id that cannot be fetched, before any library starts retrying.

Without a network, transformers, diffusers and open_clip each retry a hub id for a minute or more before
they give up. :func:`require_hub` answers in at most a few seconds instead: a copy in the local hub cache
is used as it is; otherwise, when ``HF_HUB_OFFLINE`` is set or one short TCP probe of the hub endpoint
(``HF_ENDPOINT``, no retries) fails, it raises :class:`HubUnavailableError` (a ``UserError``: one line,
exit 2) saying how to point the setting at a local folder instead.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Sequence
from urllib.parse import urlparse

from vidlab.errors import UserError

DEFAULT_ENDPOINT = "https://huggingface.co"
PROBE_TIMEOUT_S = 3.0  # DNS + TCP connect, total; VIDLAB_HUB_PROBE_TIMEOUT overrides
_TRUE = ("1", "true", "yes", "on")
_probe_cache: dict[tuple[str, int], str | None] = {}

__all__ = ["HubUnavailableError", "hub_offline", "probe_hub", "require_hub", "cached_file"]


class HubUnavailableError(UserError, OSError):
    """A hub id was asked for, no cached copy exists, and the hub cannot be reached (or is switched off)."""


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` (or the older ``TRANSFORMERS_OFFLINE``) is set to a true value now."""
    return any(
        os.environ.get(k, "").strip().lower() in _TRUE for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def endpoint() -> str:
    """The hub endpoint the libraries will use (``HF_ENDPOINT``, read now, else huggingface.co)."""
    return os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or DEFAULT_ENDPOINT


def probe_hub(url: str | None = None, timeout: float | None = None) -> str | None:
    """One TCP connection attempt to the hub's host (name lookup included) within ``timeout`` seconds.

    Returns None when the host accepted the connection, else the reason in a few words. No HTTP request is
    sent and nothing is retried; a result is remembered for the process (per host and port).
    """
    u = urlparse(url or endpoint())
    host = u.hostname or ""
    port = u.port or (443 if u.scheme == "https" else 80)
    if not host:
        return f"no host in the hub endpoint {url or endpoint()!r}"
    key = (host, port)
    if key in _probe_cache:
        return _probe_cache[key]
    if timeout is None:
        try:
            timeout = float(os.environ.get("VIDLAB_HUB_PROBE_TIMEOUT", PROBE_TIMEOUT_S))
        except ValueError:
            timeout = PROBE_TIMEOUT_S
    result: list[str | None] = []

    def attempt() -> None:  # in a thread: a name lookup has no timeout of its own
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result.append(None)
        except OSError as e:
            result.append(f"{type(e).__name__}: {e}".rstrip(": "))

    t = threading.Thread(target=attempt, name="vidlab-hub-probe", daemon=True)
    t.start()
    t.join(timeout)
    reason = result[0] if result else f"no answer within {timeout:g} s"
    _probe_cache[key] = reason
    return reason


def cached_file(repo_id: str, filenames: Sequence[str], repo_type: str = "model") -> str | None:
    """The path of the first of ``filenames`` already in the local hub cache for ``repo_id``, else None."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - every extra that loads from the hub brings huggingface_hub
        return None
    cache_dir = os.environ.get("HF_HUB_CACHE") or None
    for name in filenames:
        try:
            hit = try_to_load_from_cache(repo_id, name, cache_dir=cache_dir, repo_type=repo_type)
        except Exception:  # noqa: BLE001 - a malformed id is the caller's error to report, not the cache's
            return None
        if isinstance(hit, str):
            return hit
    return None


def require_hub(
    repo_id: str,
    *,
    what: str = "model",
    setting: str = "model",
    markers: Sequence[str] = ("config.json",),
    repo_type: str = "model",
    use: str | None = None,
    download_args: str = "",
) -> str:
    """Check, in seconds, that ``repo_id`` can be loaded: ``"cached"`` or ``"online"``, else raise.

    ``markers`` are files whose presence in the local hub cache means a copy was downloaded before
    (``model_index.json`` for a diffusers pipeline, ``config.json`` for transformers, ``open_clip_config.json``
    for open_clip). ``what`` names the thing; ``use`` says how to pass a folder instead (default
    ``{setting}=DIR``); ``download_args`` go into the suggested ``huggingface-cli download`` line.
    """
    if cached_file(repo_id, markers, repo_type):
        return "cached"
    if hub_offline():
        why = "HF_HUB_OFFLINE is set"
    else:
        reason = probe_hub()
        if reason is None:
            return "online"
        why = f"the hub ({endpoint()}) cannot be reached: {reason}"
    raise HubUnavailableError(
        f"{what} {repo_id!r} is not in the local Hugging Face cache and {why}. Download it where there is a "
        f"network (huggingface-cli download {repo_id} {download_args + ' ' if download_args else ''}--local-dir DIR), copy DIR here and pass "
        f"{use or setting + '=DIR'} (a local folder needs no network)"
    )
