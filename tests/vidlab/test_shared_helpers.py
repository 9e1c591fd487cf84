"""The shared helpers every area builds on: a dataclass config that checks itself on construction
(vidlab.config.validate), renamed config keys that keep working one release, RunConfig (the one `run:`
block), read_job (the one way to read a job's records), one-line warnings in commands, and the
safetensors-only training checkpoint (vidlab.io.save_checkpoint / load_checkpoint)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import pytest

from vidlab.config import ConfigDeprecationWarning, ConfigError, from_dict, in_range, resolve, validate
from vidlab.distributed import RunConfig, error_text, read_job, run_job
from vidlab.distributed.config import legacy_run_keys


@dataclass
class _Inner:
    alpha: float = field(default=0.5, metadata=in_range(0.0, 1.0))

    def __post_init__(self) -> None:
        validate(self, "inner.")


@dataclass
class _Job:
    steps: int = field(default=4, metadata=in_range(1))
    mode: Literal["a", "b"] = "a"
    blocks: tuple[int, ...] = (0, 1)
    inner: _Inner = field(default_factory=_Inner)
    run: RunConfig = field(default_factory=RunConfig)

    LEGACY_KEYS: ClassVar[dict[str, str]] = {"n_steps": "steps", **legacy_run_keys(num_workers="workers")}

    def __post_init__(self) -> None:
        validate(self)


def test_a_config_built_in_python_is_checked_like_an_override():
    with pytest.raises(ConfigError) as built:
        _Job(steps=0)
    with pytest.raises(ConfigError) as parsed:
        resolve(_Job, overrides=["steps=0"])
    assert str(built.value) == str(parsed.value) == "steps: expected an int >= 1, got 0"
    with pytest.raises(ConfigError, match=r"mode: expected one of \['a', 'b'\], got 'c'"):
        _Job(mode="c")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"inner.alpha: expected a number in \[0.0, 1.0\], got 2"):
        _Inner(alpha=2)
    with pytest.raises(ConfigError, match="run.workers: expected an int >= 1, got 0"):
        RunConfig(workers=0)
    job = _Job(blocks=[2, 3])  # type: ignore[arg-type]
    assert job.blocks == (2, 3) and isinstance(job.blocks, tuple)  # normalised as from_dict does


def test_renamed_keys_work_one_release_with_one_warning():
    with pytest.warns(ConfigDeprecationWarning) as caught:
        cfg = from_dict(_Job, {"n_steps": 7, "num_workers": 3, "run": {"backend": "ray"}})
    assert cfg.steps == 7 and cfg.run.workers == 3 and cfg.run.backend == "ray"
    messages = sorted(str(w.message) for w in caught)
    assert messages == [
        "config key n_steps is deprecated: write steps (the old key works for one release)",
        "config key num_workers is deprecated: write run.workers (the old key works for one release)",
    ]
    with pytest.warns(ConfigDeprecationWarning, match="run.max_retries is deprecated: write run.retries"):
        assert from_dict(_Job, {"run": {"max_retries": 0}}).run.retries == 0  # nested RunConfig's own names
    with pytest.raises(ConfigError, match="n_steps is the old name of steps; set only steps"):
        from_dict(_Job, {"n_steps": 7, "steps": 8})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new keys warn about nothing
        assert from_dict(_Job, {"steps": 2, "run": {"workers": 2}}).run.workers == 2


class _Half:
    def process(self, item):
        if item["id"] == "b":
            raise ValueError("no b here")
        return {"v": item["v"] * 2}


def test_read_job_splits_ok_and_failed_and_keeps_only_the_asked_ids(tmp_path):
    items = [{"id": k, "v": i} for i, k in enumerate("abc")]
    s = run_job(items, _Half, tmp_path, run=RunConfig(retries=1), progress=False)
    assert (s.done, s.failed) == (2, 1)
    recs = read_job(tmp_path)
    assert recs.ok == {"a": {"v": 0}, "c": {"v": 4}}
    assert list(recs.failed) == ["b"] and error_text(recs.failed["b"]) == "ValueError: no b here"
    assert recs.failed["b"]["item"] == items[1] and recs.attempts == {"a": 1, "b": 2, "c": 1}
    assert "traceback" not in recs.failed["b"]
    only = read_job(tmp_path, ids=["c", "zz"])
    assert only.ok == {"c": {"v": 4}} and only.failed == {}


def test_commands_show_warnings_and_job_log_lines_once(tmp_path, capsys):
    from vidlab.errors import run_command

    def body(_args):
        warnings.warn("old key", ConfigDeprecationWarning, stacklevel=1)
        (tmp_path / "results.jsonl").write_text("garbage{\n")
        run_job([{"id": "a", "v": 1}], _Half, tmp_path, progress=False)
        return run_command("inner", lambda _a: 0, [])  # a command run from within another

    assert run_command("vidlab demo-cmd", body, []) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "vidlab demo-cmd: warning: old key"
    assert len(err) == 2 and err[1].startswith("vidlab demo-cmd: warning: ") and "torn or non-JSON" in err[1]


def test_checkpoint_round_trip_is_safetensors_with_optimizer_state(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors import safe_open

    from vidlab.io import CheckpointError, load_checkpoint, save_checkpoint

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 3))
    net[1].weight = torch.nn.Parameter(net[0].weight.T)  # tied (shared memory) weights
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2)
    net(torch.randn(5, 3)).pow(2).mean().backward()
    opt.step()
    state = {"model": net.state_dict(), "opt": opt.state_dict(), "step": 7, "losses": [0.5, float("nan")],
             "captions": ["a red cube"], "latents": [torch.ones(2, 2)], "betas": (0.9, 0.99), "none": None}  # fmt: skip
    path = save_checkpoint(state, tmp_path / "ckpt.safetensors")
    with safe_open(str(path), framework="pt") as f:  # a plain safetensors file
        assert len(list(f.keys())) >= 6
    back = load_checkpoint(path)
    assert back["step"] == 7 and back["captions"] == ["a red cube"] and back["betas"] == (0.9, 0.99)
    assert back["losses"][0] == 0.5 and back["losses"][1] != back["losses"][1] and back["none"] is None
    assert torch.equal(back["latents"][0], torch.ones(2, 2))
    for k, v in state["model"].items():
        assert torch.equal(back["model"][k], v)
    assert sorted(back["opt"]["state"]) == sorted(state["opt"]["state"])  # int parameter ids stay ints
    opt2 = torch.optim.AdamW(net.parameters(), lr=1.0)
    opt2.load_state_dict(back["opt"])
    assert opt2.param_groups[0]["lr"] == 1e-2
    assert torch.equal(opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])

    pickled = tmp_path / "old.pt"
    torch.save({"x": torch.ones(1)}, pickled)
    with pytest.raises(CheckpointError, match="not a safetensors checkpoint.*never unpickles"):
        load_checkpoint(pickled)
    with pytest.raises(CheckpointError, match="at thing is a object"):
        save_checkpoint({"thing": object()}, tmp_path / "bad.safetensors")
    assert not (tmp_path / "bad.safetensors").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporaries left


def test_presets_are_grouped_by_command_and_old_names_still_resolve(tmp_path, monkeypatch):
    from vidlab.config import PRESET_RENAMES, config_dir, preset_path

    folder = config_dir()
    for old, new in PRESET_RENAMES.items():  # every renamed preset is where the table says
        assert (folder / f"{new}.yaml").is_file(), new
        with pytest.warns(
            ConfigDeprecationWarning, match=f"preset name '{old}' is deprecated: write '{new}'"
        ):
            assert preset_path(old) == folder / f"{new}.yaml"
    assert sorted(p.name for p in folder.glob("*.yaml")) == []  # nothing left at the top level
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert preset_path("tiny", "generate") == folder / "generate" / "tiny.yaml"
        assert preset_path("tiny", "compbench") == folder / "compbench" / "tiny.yaml"
        assert preset_path("generate/toyworld") == folder / "generate" / "toyworld.yaml"

    @dataclass
    class _Gen:
        PRESET_DIR: ClassVar[str] = "mine"
        steps: int = 1

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "fast.yaml").write_text("steps: 3\n")
    monkeypatch.setenv("VIDLAB_CONFIG_DIR", str(tmp_path))
    assert resolve(_Gen, "fast").steps == 3  # the class's folder: the bare name is enough
    with pytest.raises(ConfigError, match=r"unknown preset 'slow'.*\['mine/fast'\]"):
        resolve(_Gen, "slow")
