"""GPU presets on a machine without a GPU: `vidlab compbench generate` says so in one line and exits 2 before
Ray starts (it used to sit at 0/28 while Ray repeated "No available node types can fulfill {'GPU': 1.0}")."""

from __future__ import annotations

import pytest

from vidlab import devices
from vidlab.cli import main


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(devices, "cuda_device_count", lambda: 0)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)


def _ray_started() -> bool:
    try:
        import ray
    except ImportError:
        return False
    return bool(ray.is_initialized())


@pytest.mark.parametrize("preset", ["compbench/wan2.1-t2v-14b", "compbench/wan2.2-t2v-a14b"])
def test_gpu_preset_without_a_gpu_is_one_line(no_gpu, tmp_path, capsys, preset):
    out = tmp_path / "run"
    rc = main(["compbench", "generate", "--preset", preset, f"out={out}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert "run.gpus_per_worker=1" in err[0] and "no CUDA GPU" in err[0]
    assert not out.exists() and not _ray_started()


def test_device_cuda_without_a_gpu_names_generate_device(no_gpu, tmp_path, capsys):
    rc = main(
        [
            "compbench",
            "generate",
            "--preset",
            "compbench/tiny",
            f"out={tmp_path / 'r'}",
            "generate.device=cuda",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "generate.device='cuda'" in err[0]


def test_a_cluster_address_defers_to_the_cluster(no_gpu, monkeypatch):
    from vidlab.config import resolve
    from vidlab.generation.compbench.cli import check_devices
    from vidlab.generation.compbench.config import CompbenchConfig

    cfg = resolve(CompbenchConfig, "compbench/wan2.1-t2v-14b")
    with pytest.raises(devices.DeviceUnavailableError):
        check_devices(cfg)
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    check_devices(cfg)  # the cluster's nodes have the GPUs this machine lacks
