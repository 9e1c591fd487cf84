"""VideoBrain's settings written once: QASettings (how a question is answered) travels from the config to the
worker; EvalConfig's `run:` block replaced four loose keys without changing a job's identity."""

from __future__ import annotations

import dataclasses

import pytest

from vidlab.config import ConfigDeprecationWarning, ConfigError, from_dict, resolve
from vidlab.distributed import RunConfig
from vidlab.understanding.config import (
    AGENT,
    ClassifyConfig,
    EvalConfig,
    QASettings,
    StrategyError,
    check_strategy,
)
from vidlab.understanding.env import EpisodeConfig
from vidlab.understanding.evaluate import QAWorker, eval_identity


def test_the_ten_answering_settings_are_declared_once_and_copied_out_whole():
    names = [f.name for f in dataclasses.fields(QASettings)]
    assert len(names) == 10
    assert [f.name for f in dataclasses.fields(EvalConfig)][:10] == names  # an EvalConfig *is* QASettings
    cfg = EvalConfig(policy="pixel:red", clip_model="vidlab-tiny", judge="rule:exact", strategy="uniform:4",
                     episode=EpisodeConfig(max_calls=2), strategies=("agent", "clip:8"))  # fmt: skip
    qa = cfg.qa_settings("clip:8")
    assert type(qa) is QASettings and qa.strategy == "clip:8" and cfg.strategy == "uniform:4"
    assert {n: getattr(qa, n) for n in names if n != "strategy"} == {
        n: getattr(cfg, n) for n in names if n != "strategy"
    }
    worker = QAWorker(qa)  # the worker reads the same object, not a dozen keywords
    assert worker.settings is qa and worker.episode.max_calls == 2 and worker.clip_spec == "vidlab-tiny"
    assert worker.baseline is not None and worker.policy_name  # clip:8 is a baseline, the policy loaded


def test_configs_check_themselves_on_construction():
    with pytest.raises(ConfigError, match=r"episode.max_calls: expected an int in \[0, 100\], got 101"):
        QASettings(episode=EpisodeConfig(max_calls=101))
    with pytest.raises(ConfigError, match=r"classify.k: expected an int in \[1, 256\], got 0"):
        EvalConfig(classify=ClassifyConfig(k=0))
    with pytest.raises(ConfigError, match="limit: expected an int or null >= 1, got 0"):
        EvalConfig(limit=0)
    with pytest.raises(ConfigError, match="strategies: expected at least one"):
        EvalConfig(strategies=())
    with pytest.raises(StrategyError, match="needs clip_model"):
        check_strategy("clip:4", None)
    assert check_strategy(AGENT, None) == AGENT


def test_old_run_keys_warn_map_to_run_and_keep_the_job_identity(tmp_path):
    data = tmp_path / "q.jsonl"
    data.write_text('{"id": "a"}\n')
    with pytest.warns(ConfigDeprecationWarning, match="num_workers is deprecated: write run.workers"):
        old = from_dict(EvalConfig, {"data": str(data), "backend": "ray", "num_workers": 3, "max_retries": 0})
    new = from_dict(EvalConfig, {"data": str(data), "run": {"backend": "ray", "workers": 3, "retries": 0}})
    assert old.run == new.run == RunConfig(backend="ray", workers=3, retries=0)
    # where a job runs is not what it answers: a folder made with other run settings resumes
    assert eval_identity(old) == eval_identity(new) == eval_identity(EvalConfig(data=str(data)))
    assert eval_identity(EvalConfig(data=str(data), policy="const:B")) != eval_identity(new)


def test_the_qa_preset_is_found_by_its_bare_name_for_these_commands():
    cfg = resolve(EvalConfig, "videobrain-qwen-vl")  # configs/qa/videobrain-qwen-vl.yaml
    assert cfg.policy.startswith("hf:Qwen/")
