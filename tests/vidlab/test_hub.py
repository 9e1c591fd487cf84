"""Fail fast on hub ids: HF_HUB_OFFLINE or an unreachable endpoint is one line within seconds, a cached copy
passes, and the loaders that take hub ids (CLIP, Qwen-VL policy) go through it before any download starts.
No test reaches the network: the probe targets 127.0.0.1 ports opened or closed by the test."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from vidlab import hub
from vidlab.errors import UserError
from vidlab.hub import HubUnavailableError, probe_hub, require_hub


@pytest.fixture(autouse=True)
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    hub._probe_cache.clear()
    yield
    hub._probe_cache.clear()


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: a connection is refused at once
    return port


def test_offline_env_refuses_at_once_and_says_how_to_use_a_folder(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailableError) as e:
        require_hub(
            "Wan-AI/Wan2.1-T2V-14B-Diffusers",
            what="Wan pipeline",
            setting="model",
            markers=("model_index.json",),
        )
    msg = str(e.value)
    assert isinstance(e.value, UserError)
    assert "HF_HUB_OFFLINE is set" in msg and "model=DIR" in msg and "--local-dir" in msg
    assert "Wan-AI/Wan2.1-T2V-14B-Diffusers" in msg


def test_unreachable_endpoint_is_probed_once_without_retries(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    calls = []
    real = socket.create_connection

    def counting(*a, **kw):
        calls.append(a[0])
        return real(*a, **kw)

    monkeypatch.setattr(socket, "create_connection", counting)
    with pytest.raises(HubUnavailableError, match="cannot be reached: ConnectionRefusedError"):
        require_hub("org/model")
    with pytest.raises(HubUnavailableError):
        require_hub("org/other")  # the probe's answer is remembered: still one connection attempt
    assert len(calls) == 1


def test_reachable_endpoint_passes(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{srv.getsockname()[1]}")
        assert probe_hub() is None
        assert require_hub("org/model") == "online"
    finally:
        srv.close()


def test_a_cached_copy_passes_even_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    snap = Path(tmp_path / "hub" / "models--org--cached" / "snapshots" / ("a" * 40))
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    refs = snap.parent.parent / "refs"
    refs.mkdir()
    (refs / "main").write_text("a" * 40)
    assert require_hub("org/cached") == "cached"
    with pytest.raises(HubUnavailableError):
        require_hub("org/cached", markers=("model_index.json",))


def test_clip_hub_spec_fails_fast_offline(monkeypatch):
    pytest.importorskip("open_clip")
    from vidlab.clip import load_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailableError, match="hf-hub:|laion/CLIP-nothing"):
        load_model("hf-hub:laion/CLIP-nothing-here")
    # a pretrained tag whose weights live on the hub, not cached here
    with pytest.raises(HubUnavailableError, match="ViT-B-32:openai|timm/"):
        load_model("ViT-B-32:openai", device="cpu")


def test_hf_policy_fails_fast_offline(monkeypatch):
    pytest.importorskip("transformers")
    from vidlab.understanding.policies import load_policy

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubUnavailableError, match="hf:DIR|policy=hf:DIR|--policy hf:DIR"):
        load_policy("hf:Qwen/Qwen2.5-VL-7B-Instruct")
