"""The verl GRPO recipe for VideoBrain: preset -> tool config, agent-loop config, and the exact launch command.

``VerlConfig`` defaults are the reference GRPO settings (authors' release, research note): rollout n = 8,
temperature 1.0, lr 1e-6, clip 0.2, low-var KL loss coef 0.001, entropy coef 0.001, batch 32, vision tower
frozen, 1 epoch, at most 6 assistant turns (5 calls + the answer). ``write_launch`` writes, into one folder:
``tools.yaml`` (verl's tool-config format, loaded by ``verl.tools.tool_registry``), ``agent_loop.yaml`` (the
``agent_loop_config_path`` that registers ``videobrain_agent``), ``launch.sh`` (the ``python -m
verl.trainer.main_ppo`` command with every override spelled out) and ``ray_job.sh`` (the same through
``ray job submit``, its ``--runtime-env-json`` a JSON object that ships vidlab's packages as ``py_modules``).

Both scripts run with the vidlab that is installed in the Python that runs them (no ``PYTHONPATH`` pointing
at a checkout) and check that first, saying how to install it. ``ray_job.sh`` then checks the cluster up front
and says in one line what to set: no dashboard at ``RAY_ADDRESS``, or a cluster that wants Ray's auth token
(Ray >= 2.52: ``ray start`` turns token auth on when a token exists, e.g. ``~/.ray/auth_token`` written by
``ray.init()`` or ``ray get-auth-token --generate``) and none was found or it was refused. It sends the token
Ray's own loader finds (``RAY_AUTH_TOKEN``, else the file ``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``)
by setting ``RAY_AUTH_MODE=token`` for ``ray job submit`` when the mode is unset; ``RAY_AUTH_MODE=disabled``
sends none. On the cluster the entrypoint checks vidlab (arrived as ``py_modules``), verl and the run's files
before verl starts; ``bash ray_job.sh --dry-run`` submits only those checks. verl always builds a validation
dataset, so ``data.val_files`` is a real validation parquet: ``val_data`` when given, else a held-out
``val_fraction`` of the training rows (:func:`hold_out_validation`), never the training file itself.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from vidlab.errors import UserError
from vidlab.understanding import protocol as P

REWARD_FILE = Path(__file__).with_name("verl_reward.py")


@dataclass
class ClipToolConfig:
    """How ``clip_sample`` is served on rollout workers (see ``vidlab.understanding.rl.tools``)."""

    enabled: bool = True
    model: str = "ViT-B-16:openai"  # the authors' training CLIP
    sampling: str = "fps=1"  # the FrameIndex grid built by `vidlab index`
    index_cache_dir: str | None = None  # default: the vidlab cache root
    parity: bool = True  # the reference's K linspace candidates (served from the index)
    device: str = "cpu"  # text embedding on the rollout worker's CPU keeps the GPUs for vLLM + FSDP


@dataclass
class VerlConfig:
    """Everything ``vidlab train-agent --engine verl`` needs; keys mirror verl's where they exist."""

    PRESET_DIR: ClassVar[str] = "train-agent"  # `--preset verl-qwen3-vl-8b` finds configs/train-agent/

    data: str = (
        ""  # a source for vidlab.understanding.rl.dataset (jsonl:PATH, benchmark:NAME:PATH, a .jsonl path)
    )
    video_root: str | None = (
        None  # relative video paths in data resolve here (default: the data file's folder)
    )
    val_data: str = ""  # validation source; "" = hold out val_fraction of the training rows
    val_fraction: float = (
        0.05  # share of training rows held out as val.parquet when val_data is "" (at least 1)
    )
    out: str = "runs/verl-videobrain"
    model: str = "Qwen/Qwen3-VL-8B-Instruct"
    limit: int | None = None  # convert at most this many rows
    # reference GRPO settings
    rollout_n: int = 8
    temperature: float = 1.0
    lr: float = 1e-6
    clip_ratio: float = 0.2
    kl_loss_coef: float = 0.001
    kl_loss_type: str = "low_var_kl"
    entropy_coeff: float = 0.001
    train_batch_size: int = 32
    ppo_mini_batch_size: int = 32
    micro_batch_size_per_gpu: int = 1
    freeze_vision_tower: bool = True
    total_epochs: int = 1
    max_turns: int = 6
    max_calls: int = 5
    # lengths: 16 + 5x8 = 56 frames at 640x360 -> ~300 visual tokens each for Qwen3-VL (16px patches, 2x2 merge)
    max_prompt_length: int = 8192  # system + question + 16 initial frames
    max_response_length: int = 24576  # 6 assistant turns + up to 40 observation frames
    max_tool_response_length: int = (
        4096  # chars of tool text kept by verl; the "no more calls" prefix is ~330
    )
    limit_images: int = 56  # vLLM images per prompt: 16 initial + 5 x 8
    # cluster
    n_gpus_per_node: int = 8
    nnodes: int = 1
    tensor_parallel: int = 2
    gpu_memory_utilization: float = 0.6
    agent_workers: int = 8
    rollout_engine: str = "vllm"
    project: str = "vidlab-videobrain"
    experiment: str = "qwen3-vl-8b-grpo"
    save_freq: int = 100
    clip: ClipToolConfig = field(default_factory=ClipToolConfig)
    extra_overrides: list[str] = field(default_factory=list)  # appended verbatim (hydra syntax)

    @property
    def tools(self) -> tuple[str, ...]:
        return P.TOOL_NAMES if self.clip.enabled else (P.UNIFORM,)


def tool_config(cfg: VerlConfig) -> dict[str, Any]:
    """verl's tool-config YAML content: one entry per tool, OpenAI function schemas from the protocol."""

    def common() -> dict[str, Any]:  # fresh objects per tool: no YAML anchors in the written file
        return {"type": "native", "max_calls": cfg.max_calls, "max_size": [640, 360]}

    tools = [
        {
            "class_name": "vidlab.understanding.rl.tools.UniformSampleTool",
            "config": {**common(), "num_frames": 8, "min_uniform_range": 8},
            "tool_schema": P.TOOL_SCHEMAS[P.UNIFORM],
        }
    ]
    if cfg.clip.enabled:
        c = cfg.clip
        tools.append(
            {
                "class_name": "vidlab.understanding.rl.tools.ClipSampleTool",
                "config": {
                    **common(),
                    "num_frames": 4,
                    "clip_model": c.model,
                    "clip_sampling": c.sampling,
                    "index_cache_dir": c.index_cache_dir,
                    "parity": c.parity,
                    "device": c.device,
                },
                "tool_schema": P.TOOL_SCHEMAS[P.CLIP],
            }
        )
    return {"tools": tools}


def agent_loop_config(cfg: VerlConfig) -> list[dict[str, Any]]:
    """The ``agent_loop_config_path`` content: registers ``videobrain_agent`` with its budgets."""
    return [
        {
            "name": "videobrain_agent",
            "_target_": "vidlab.understanding.rl.agent_loop.VideoBrainAgentLoop",
            "max_calls": cfg.max_calls,
            "max_turns": cfg.max_turns,
        }
    ]


class LaunchError(UserError, ValueError):
    """A launch that cannot be written as asked (e.g. no validation data and too few rows to hold some out)."""


def hold_out_validation(
    train_file: str | os.PathLike, val_file: str | os.PathLike, fraction: float, seed: int = 0
) -> tuple[int, int]:
    """Move a seeded random ``fraction`` (at least one row) of ``train_file``'s rows into ``val_file``.

    Both parquet files are written atomically; returns ``(train_rows, val_rows)``. A file of one row cannot
    be split (:class:`LaunchError`: pass validation data instead).
    """
    import numpy as np
    import pyarrow.parquet as pq

    from vidlab.io import atomic_tmp_path, commit_tmp

    if not 0.0 < fraction < 1.0:
        raise LaunchError(f"val_fraction must lie strictly between 0 and 1, got {fraction}")
    table = pq.read_table(str(train_file))
    n = table.num_rows
    if n < 2:
        raise LaunchError(
            f"{train_file} holds {n} row(s): too few to hold out a validation split; pass val_data=SOURCE "
            "(verl always builds a validation dataset)"
        )
    k = min(n - 1, max(1, round(n * fraction)))
    order = np.random.default_rng(seed).permutation(n)
    val_idx, train_idx = np.sort(order[:k]), np.sort(order[k:])
    for rows, path in ((val_idx, val_file), (train_idx, train_file)):
        tmp = atomic_tmp_path(Path(path))
        pq.write_table(table.take(rows), str(tmp))
        commit_tmp(tmp, Path(path))
    return len(train_idx), len(val_idx)


def hydra_overrides(
    cfg: VerlConfig, train_file: str, val_file: str, tool_path: str, loop_path: str
) -> list[str]:
    """``main_ppo`` overrides for the reference GRPO recipe (verl 0.9 key names)."""
    if not val_file:
        raise LaunchError("verl needs a validation parquet (data.val_files); see hold_out_validation")
    if Path(val_file).resolve() == Path(train_file).resolve():
        raise LaunchError(f"data.val_files would be the training file {train_file}; hold out a split instead")
    a, r = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"
    o = [
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=false",
        f"data.train_files={train_file}",
        f"data.val_files={val_file}",
        f"data.train_batch_size={cfg.train_batch_size}",
        f"data.max_prompt_length={cfg.max_prompt_length}",
        f"data.max_response_length={cfg.max_response_length}",
        "data.filter_overlong_prompts=true",
        "data.truncation=error",
        "data.image_key=images",
        "data.return_raw_chat=true",
        f"actor_rollout_ref.model.path={cfg.model}",
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        "actor_rollout_ref.model.use_remove_padding=true",
        f"{a}.optim.lr={cfg.lr}",
        f"{a}.ppo_mini_batch_size={cfg.ppo_mini_batch_size}",
        f"{a}.ppo_micro_batch_size_per_gpu={cfg.micro_batch_size_per_gpu}",
        f"{a}.clip_ratio={cfg.clip_ratio}",
        f"{a}.clip_ratio_low={cfg.clip_ratio}",
        f"{a}.clip_ratio_high={cfg.clip_ratio}",
        f"{a}.use_kl_loss=true",
        f"{a}.kl_loss_coef={cfg.kl_loss_coef}",
        f"{a}.kl_loss_type={cfg.kl_loss_type}",
        f"{a}.entropy_coeff={cfg.entropy_coeff}",
        f"{a}.freeze_vision_tower={str(cfg.freeze_vision_tower).lower()}",
        f"{a}.fsdp_config.param_offload=false",
        f"{a}.fsdp_config.optimizer_offload=false",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={cfg.micro_batch_size_per_gpu}",
        f"{r}.name={cfg.rollout_engine}",
        f"{r}.mode=async",
        f"{r}.n={cfg.rollout_n}",
        f"{r}.temperature={cfg.temperature}",
        f"{r}.tensor_model_parallel_size={cfg.tensor_parallel}",
        f"{r}.gpu_memory_utilization={cfg.gpu_memory_utilization}",
        f"{r}.log_prob_micro_batch_size_per_gpu={cfg.micro_batch_size_per_gpu}",
        f"+{r}.limit_images={cfg.limit_images}",  # a RolloutConfig field the yaml omits
        f"{r}.multi_turn.enable=true",
        f"{r}.multi_turn.format=hermes",
        f"{r}.multi_turn.max_assistant_turns={cfg.max_turns}",
        f"{r}.multi_turn.max_user_turns={cfg.max_calls}",
        f"{r}.multi_turn.max_tool_response_length={cfg.max_tool_response_length}",
        f"{r}.multi_turn.tool_config_path={tool_path}",
        f"{r}.agent.num_workers={cfg.agent_workers}",
        f"{r}.agent.default_agent_loop=videobrain_agent",
        f"{r}.agent.agent_loop_config_path={loop_path}",
        f"reward.custom_reward_function.path={REWARD_FILE}",
        "reward.custom_reward_function.name=compute_score",
        f"trainer.n_gpus_per_node={cfg.n_gpus_per_node}",
        f"trainer.nnodes={cfg.nnodes}",
        f"trainer.total_epochs={cfg.total_epochs}",
        f"trainer.project_name={cfg.project}",
        f"trainer.experiment_name={cfg.experiment}",
        f"trainer.save_freq={cfg.save_freq}",
        "trainer.test_freq=-1",
        f"trainer.val_before_train={'true' if cfg.val_data else 'false'}",
        "trainer.logger=[console]",
        f"trainer.default_local_dir={Path(cfg.out).resolve() / 'checkpoints'}",
    ]
    return o + list(cfg.extra_overrides)


def _shell(lines: list[str], overrides: list[str]) -> str:
    body = " \\\n    ".join(shlex.quote(x) for x in overrides)
    return "\n".join(lines) + f"\n    {body}\n"


def runtime_env(cfg: VerlConfig) -> dict[str, Any]:
    """The Ray job's runtime_env: vidlab's own packages as ``py_modules`` (from wherever this Python imports
    them, a checkout or site-packages), so a cluster whose image has verl but not vidlab runs the same code."""
    import vidlab.understanding

    modules = [Path(str(m.__file__)).resolve().parent for m in (vidlab, vidlab.understanding)]
    # installed, the area lies inside vidlab/; in a checkout it is the folder beside it and travels too
    modules = [modules[0]] + [m for m in modules[1:] if modules[0] not in m.parents]
    return {
        "py_modules": [str(m) for m in modules],
        "env_vars": {"HYDRA_FULL_ERROR": "1", "VLLM_USE_V1": "1"},
    }


PREFLIGHT = (
    '"$PYTHON" -c "import vidlab.understanding.rl.verl_launch" 2>/dev/null || {{ echo "{script}: vidlab is not '
    "installed in $PYTHON: pip install 'vidlab[rl]' (in a checkout: pip install -e '.[rl]'), or set "
    'PYTHON=/path/to/python" >&2; exit 2; }}'
)

# ray_job.sh's check of the cluster, before anything is submitted (stdlib only; argv: the dashboard address).
# One line and exit 2 for: no dashboard there, a cluster that wants a token and got none, or refused the one sent.
RAY_PROBE = r"""
import os, sys, urllib.error, urllib.request
from pathlib import Path
addr = sys.argv[1].rstrip("/")
if not addr.startswith(("http://", "https://")):
    sys.exit(0)  # "auto", ray:// ...: left to `ray job submit`
token, where = None, None
if os.environ.get("RAY_AUTH_MODE", "").lower() != "disabled":
    if os.environ.get("RAY_AUTH_TOKEN"):
        token, where = os.environ["RAY_AUTH_TOKEN"].strip(), "RAY_AUTH_TOKEN"
    else:
        path = Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
        if path.is_file():
            token, where = path.read_text().strip() or None, str(path)
req = urllib.request.Request(addr + "/api/jobs/", headers={"Authorization": "Bearer " + token} if token else {})
fix = "set RAY_AUTH_TOKEN to the head's token (`ray get-auth-token` on the head) or RAY_AUTH_TOKEN_PATH to a file with it"
try:
    urllib.request.urlopen(req, timeout=15).close()
except urllib.error.HTTPError as e:
    if e.code == 401 and os.environ.get("RAY_AUTH_MODE", "").lower() == "disabled":
        sys.exit(f"ray_job.sh: the Ray cluster at {addr} requires an auth token and RAY_AUTH_MODE=disabled sends none: unset it")
    if e.code == 401:
        sys.exit(f"ray_job.sh: the Ray cluster at {addr} requires an auth token and none was found: {fix}")
    if e.code == 403:
        sys.exit(f"ray_job.sh: the Ray cluster at {addr} refused the auth token from {where}: {fix}")
    sys.exit(f"ray_job.sh: the Ray dashboard at {addr} answered HTTP {e.code} to a job listing")
except (urllib.error.URLError, OSError) as e:
    why = getattr(e, "reason", e)
    sys.exit(f"ray_job.sh: no Ray dashboard answers at {addr} ({why}): start one (`ray start --head`) or set RAY_ADDRESS=http://HEAD:8265")
"""

# The job's entrypoint on the cluster: `bash -c REMOTE PYTHON DRY FILE_COUNT FILE... OVERRIDE...`. It checks
# vidlab (the py_modules), verl and the run's files there, then runs verl (or stops: a dry run).
RAY_REMOTE = r"""
py=$0; dry=$1; n=$2; shift 2
files=("${@:1:$n}"); shift "$n"
say() { echo "ray_job.sh (on the cluster): $*" >&2; exit 2; }
err=$("$py" -c "import vidlab.understanding.rl.verl_launch" 2>&1 >/dev/null) || say "vidlab does not import in $py (its packages travel as runtime_env py_modules): ${err##*$'
'}"
err=$("$py" -c "import verl" 2>&1 >/dev/null) || say "verl does not import in $py: install vidlab[rl]'s dependencies in the cluster's image, or set RAY_PYTHON: ${err##*$'
'}"
for f in "${files[@]}"; do [ -r "$f" ] || say "cannot read $f on the cluster: the run folder must be on a file system the cluster shares"; done
if [ "$dry" = 1 ]; then echo "ray_job.sh: dry run OK on the cluster: vidlab, verl and the run's ${#files[@]} files are there ($py)"; exit 0; fi
exec "$py" -m verl.trainer.main_ppo "$@"
""".strip()


def write_launch(
    cfg: VerlConfig, out_dir: str | os.PathLike, train_file: str, val_file: str
) -> dict[str, str]:
    """Write tools.yaml, agent_loop.yaml, launch.sh, ray_job.sh and config.yaml into ``out_dir``; return their paths."""
    from vidlab.io import atomic_write_text

    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    tool_path, loop_path = out / "tools.yaml", out / "agent_loop.yaml"
    atomic_write_text(tool_path, yaml.safe_dump(tool_config(cfg), sort_keys=False))
    atomic_write_text(loop_path, yaml.safe_dump(agent_loop_config(cfg), sort_keys=False))
    overrides = hydra_overrides(cfg, train_file, val_file, str(tool_path), str(loop_path))
    env = [
        "#!/usr/bin/env bash",
        f"# VideoBrain GRPO on upstream verl: {cfg.model}, {cfg.nnodes} node(s) x {cfg.n_gpus_per_node} GPUs.",
        "# Written by `vidlab train-agent --engine verl`; edit the overrides or rerun that command.",
        "# Runs with the vidlab installed in $PYTHON (default python3): its workers import vidlab.understanding.rl.*.",
        "set -euo pipefail",
        'PYTHON="${PYTHON:-python3}"',
        PREFLIGHT.format(script="launch.sh"),
        "export VLLM_USE_V1=1 HYDRA_FULL_ERROR=1",
        '"$PYTHON" -m verl.trainer.main_ppo \\',
    ]
    launch = out / "launch.sh"
    atomic_write_text(launch, _shell(env, overrides))
    launch.chmod(0o755)
    files = [str(Path(train_file).resolve()), str(Path(val_file).resolve()), str(tool_path), str(loop_path)]
    files.append(str(REWARD_FILE))
    ray = [
        "#!/usr/bin/env bash",
        "# The same run submitted to a running Ray cluster (RAY_ADDRESS, e.g. http://HEAD:8265). vidlab's packages",
        "# travel as runtime_env py_modules; the data, config and reward paths below must be readable on the",
        "# cluster (a shared file system), and its image needs verl (vidlab[rl]'s other dependencies).",
        "# Ray's token auth (on by default for clusters that `ray start` finds a token for): the token is",
        "# RAY_AUTH_TOKEN, else the file RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token (`ray get-auth-token` on the",
        "# head prints it); RAY_AUTH_MODE=disabled sends none. The cluster is checked before anything is submitted.",
        "# `bash ray_job.sh --dry-run` submits only the checks that run on the cluster (vidlab, verl, these files).",
        "# PYTHON: the local Python with vidlab (default python3); RAY_PYTHON: the cluster's (default python3).",
        "set -euo pipefail",
        'PYTHON="${PYTHON:-python3}"',
        'RAY_PYTHON="${RAY_PYTHON:-python3}"',
        'ADDRESS="${RAY_ADDRESS:-http://127.0.0.1:8265}"',
        'DRY=0; if [ "${1:-}" = "--dry-run" ]; then DRY=1; elif [ $# -gt 0 ]; then '
        'echo "ray_job.sh: unknown argument $1 (the only one is --dry-run)" >&2; exit 2; fi',
        PREFLIGHT.format(script="ray_job.sh"),
        "command -v ray >/dev/null || { echo \"ray_job.sh: no 'ray' command on PATH: pip install 'ray[default]' "
        '(or activate the environment that has it)" >&2; exit 2; }',
        'if [ -z "${RAY_AUTH_MODE:-}" ] && { [ -n "${RAY_AUTH_TOKEN:-}" ] || '
        '[ -s "${RAY_AUTH_TOKEN_PATH:-$HOME/.ray/auth_token}" ]; }; then export RAY_AUTH_MODE=token; fi',
        f'"$PYTHON" -c {shlex.quote(RAY_PROBE)} "$ADDRESS" || exit 2',
        'ray job submit --address="$ADDRESS" \\',
        f"    --runtime-env-json={shlex.quote(json.dumps(runtime_env(cfg), sort_keys=True))} \\",
        f'    -- bash -c {shlex.quote(RAY_REMOTE)} "$RAY_PYTHON" "$DRY" {len(files)} \\',
        "    " + " ".join(shlex.quote(f) for f in files) + " \\",
    ]
    ray_job = out / "ray_job.sh"
    atomic_write_text(ray_job, _shell(ray, overrides))
    ray_job.chmod(0o755)
    from vidlab.config import save_resolved

    save_resolved(cfg, out)
    return {
        "tools": str(tool_path),
        "agent_loop": str(loop_path),
        "launch": str(launch),
        "ray_job": str(ray_job),
        "config": str(out / "config.yaml"),
    }


def as_dict(cfg: VerlConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)
