"""Up-front device checks: a GPU setting on a machine without one is a one-line UserError naming the setting."""

from __future__ import annotations

import pytest

from vidlab import devices
from vidlab.devices import DeviceUnavailableError, require_device, require_local_gpus
from vidlab.errors import UserError


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(devices, "cuda_device_count", lambda: 0)


@pytest.fixture
def two_gpus(monkeypatch):
    monkeypatch.setattr(devices, "cuda_device_count", lambda: 2)


def test_cpu_and_auto_always_pass(no_gpu):
    assert require_device("cpu") == "cpu"
    assert require_device("auto") == "auto"
    assert require_device(None) == "auto"


def test_cuda_without_a_gpu_names_the_setting(no_gpu):
    with pytest.raises(DeviceUnavailableError) as e:
        require_device("cuda", setting="generate.device")
    assert isinstance(e.value, UserError)
    msg = str(e.value)
    assert "generate.device='cuda'" in msg and "no CUDA GPU" in msg and "generate.device=cpu" in msg


def test_cuda_index_beyond_the_count(two_gpus):
    assert require_device("cuda:1") == "cuda:1"
    with pytest.raises(DeviceUnavailableError, match=r"has 2 CUDA GPU\(s\)"):
        require_device("cuda:2")


def test_malformed_names(no_gpu):
    for bad in ("gpu", "cuda:x", "cpu:0", ""):
        with pytest.raises(DeviceUnavailableError):
            require_device(bad)


def test_the_real_machine_agrees_with_torch():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        assert require_device("cuda") == "cuda"
    else:
        with pytest.raises(DeviceUnavailableError):
            require_device("cuda")


def test_gpus_per_worker_locally_vs_on_a_cluster(no_gpu, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    require_local_gpus(0, "run.num_gpus_per_worker")
    with pytest.raises(DeviceUnavailableError, match=r"run.num_gpus_per_worker=1 asks for a GPU"):
        require_local_gpus(1, "run.num_gpus_per_worker")
    monkeypatch.setenv(
        "RAY_ADDRESS", "ray://head:10001"
    )  # the cluster's nodes decide; nothing is refused here
    require_local_gpus(1, "run.num_gpus_per_worker")
