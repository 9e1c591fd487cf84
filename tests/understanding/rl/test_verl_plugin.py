"""The verl plug-in against the installed verl: tools through verl's loader, one full agent-loop episode through
verl's own AgentLoopWorker (tiny random Qwen2.5-VL standing in for the rollout server), verl's reward manager on
its output, the converted dataset read back with verl's RLHFDataset, and the launch overrides composed by hydra."""

from __future__ import annotations

import asyncio
import json
import os

import numpy as np
import pytest

from vidlab.understanding import protocol as P
from vidlab.understanding.agents import ClipAgent, UniformAgent, initial_indices

verl = pytest.importorskip("verl")

CLIP_SPEC = "vidlab-tiny"

SCRIPT = [
    '<thinking>Look at the first half.</thinking><tool_call>{"name": "uniform_sample", "arguments": {"start_frame": 0, "end_frame": 60}}</tool_call>',
    '<thinking>Search for it.</thinking><tool_call>{"name": "clip_sample", "arguments": {"start_frame": 0, "end_frame": 120, "prompt": "red square"}}</tool_call>',
    '<thinking>Second half.</thinking><tool_call>{"name": "uniform_sample", "arguments": {"start_frame": 60, "end_frame": 120}}</tool_call>',
    '<thinking>Another look.</thinking><tool_call>{"name": "clip_sample", "arguments": {"start_frame": 30, "end_frame": 90, "prompt": "a square"}}</tool_call>',
    '<thinking>Middle.</thinking><tool_call>{"name": "uniform_sample", "arguments": {"start_frame": 20, "end_frame": 100}}</tool_call>',
    "<thinking>I saw it.</thinking><answer>A</answer>",
]


@pytest.fixture(scope="module")
def verl_out(rl_root, needles, tiny_dir):
    """Converted parquet + tool/agent-loop configs + verl's composed trainer config for the tiny model."""
    from hydra import compose, initialize_config_dir

    from vidlab.understanding.rl import dataset as D
    from vidlab.understanding.rl.verl_launch import ClipToolConfig, VerlConfig, hydra_overrides, write_launch

    out = rl_root / "verl"
    report = D.convert(f"jsonl:{needles}", out / "train.parquet", progress=False)
    cfg = VerlConfig(
        data=str(needles),
        out=str(out),
        model=str(tiny_dir),
        clip=ClipToolConfig(model=CLIP_SPEC, device="cpu", index_cache_dir=str(rl_root / "index")),
        max_prompt_length=4096,
        max_response_length=8192,
    )
    # a separate validation file, as verl reads it
    val = D.convert(f"jsonl:{needles}", out / "val.parquet", progress=False)
    paths = write_launch(cfg, out, report.path, val.path)
    overrides = hydra_overrides(cfg, report.path, val.path, paths["tools"], paths["agent_loop"])
    cfg_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=cfg_dir, version_base=None):
        trainer_cfg = compose(config_name="ppo_trainer", overrides=overrides)
    return {"report": report, "paths": paths, "trainer_cfg": trainer_cfg, "cfg": cfg}


def test_launch_overrides_are_verl_keys_with_the_reference_settings(verl_out):
    c = verl_out["trainer_cfg"]  # hydra rejected any key verl does not have
    a, r = c.actor_rollout_ref.actor, c.actor_rollout_ref.rollout
    assert c.algorithm.adv_estimator == "grpo" and r.n == 8 and r.temperature == 1.0
    assert a.optim.lr == 1e-6 and a.clip_ratio == 0.2 and a.use_kl_loss and a.kl_loss_coef == 0.001
    assert a.kl_loss_type == "low_var_kl" and a.entropy_coeff == 0.001 and a.freeze_vision_tower
    assert c.data.train_batch_size == 32 and c.trainer.total_epochs == 1
    assert r.multi_turn.max_assistant_turns == 6 and r.agent.default_agent_loop == "videobrain_agent"
    assert r.multi_turn.max_tool_response_length > len(P.observation_text(5, True))
    assert c.reward.custom_reward_function.name == "compute_score"
    launch = open(verl_out["paths"]["launch"]).read()
    assert "verl.trainer.main_ppo" in launch and "actor_rollout_ref.rollout.n=8" in launch
    assert "ray job submit" in open(verl_out["paths"]["ray_job"]).read()


def _agent_data(video: str, total: int, fps: float):
    from verl.experimental.agent_loop.tool_agent_loop import AgentData

    from vidlab.understanding.rl.tools import SESSION_KEY, new_session

    ad = AgentData([], [], None, None, {}, {}, "req", {})
    ad.extra_fields[SESSION_KEY] = new_session(video, total, fps, initial_indices(total), max_calls=5)
    return ad


def test_tools_load_through_verl_config_loader_and_return_real_tool_responses(
    verl_out, question_rows, rl_root
):
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import ToolResponse
    from verl.tools.tool_registry import initialize_tools_from_config

    from vidlab.clip import FrameIndex, load_model
    from vidlab.understanding.rl.tools import SESSION_KEY

    tools = {t.name: t for t in initialize_tools_from_config(verl_out["paths"]["tools"])}
    assert set(tools) == {"uniform_sample", "clip_sample"} and all(
        isinstance(t, BaseTool) for t in tools.values()
    )
    assert tools["clip_sample"].tool_schema.function.parameters.required == [
        "start_frame",
        "end_frame",
        "prompt",
    ]
    video = question_rows[0]["video"]
    ad = _agent_data(video, 120, 10.0)

    async def call(name, args):
        iid, _ = await tools[name].create(create_kwargs={"video": video})
        try:
            return await tools[name].execute(iid, args, agent_data=ad)
        finally:
            await tools[name].release(iid)

    resp, reward, m = asyncio.run(call("uniform_sample", {"start_frame": 0, "end_frame": 60}))
    assert isinstance(resp, ToolResponse) and reward == 0.0 and m["error"] is None
    assert m["frames"] == UniformAgent(video).indices(0, 60) and len(resp.image) == 8
    assert resp.text == P.observation_text(1, final=False)
    expected = [f.image for f in UniformAgent(video).sample(0, 60)]
    assert all(np.array_equal(np.asarray(im), ex) for im, ex in zip(resp.image, expected))
    # the duplicate rule reads the history verl keeps in agent_data across tool instances
    resp, _, m = asyncio.run(call("uniform_sample", {"start_frame": 1, "end_frame": 61}))
    assert m["error"] and "repeated uniform_sample" in m["error"] and resp.image is None
    assert ad.extra_fields[SESSION_KEY]["num_calls"] == 1
    resp, _, m = asyncio.run(call("uniform_sample", {"start_frame": 200, "end_frame": 300}))
    assert "outside the video" in m["error"]
    resp, _, m = asyncio.run(
        call("clip_sample", {"start_frame": 0, "end_frame": 120, "prompt": "red square"})
    )
    model = load_model(CLIP_SPEC, device="cpu")
    index = FrameIndex.build(video, model, "fps=1", cache_dir=str(rl_root / "index"), progress=False)
    assert m["frames"] == ClipAgent(index, model, reader=video).indices(0, 120, "red square")
    assert len(resp.image) == 4 and m["frames"] == sorted(m["frames"])
    for args in ({"start_frame": 60, "end_frame": 120}, {"start_frame": 10, "end_frame": 50}):
        asyncio.run(call("uniform_sample", args))
    resp, _, m = asyncio.run(call("clip_sample", {"start_frame": 0, "end_frame": 60, "prompt": "blue"}))
    assert m["num_calls"] == 5 and m["final"] and resp.text == P.observation_text(5, final=True)
    resp, _, m = asyncio.run(call("uniform_sample", {"start_frame": 70, "end_frame": 110}))
    assert "call budget (5)" in m["error"]


def test_converted_rows_read_back_with_verl_rlhf_dataset_and_bad_rows_are_reported(
    verl_out, question_rows, rl_root
):
    from vidlab.understanding.policies.tiny_qwen import build_tiny_qwen_vl
    from vidlab.understanding.rl import dataset as D

    _, processor = build_tiny_qwen_vl("qwen2_5_vl")
    ds = D.read_back(verl_out["report"].path, processor)
    assert len(ds) == 2
    row = ds[0]
    user = row["raw_prompt"][1]["content"]
    images = [b for b in user if b["type"] == "image"]
    labels = [b["text"] for b in user if b["type"] == "text"]
    idx = initial_indices(120)
    assert len(images) == 16 and labels[0].endswith(f"\nframe {idx[0]}: ")
    assert labels[1:] == [f"\nframe {i}: " for i in idx[1:]]
    assert [b["text"] for b in row["raw_prompt"][0]["content"]] == [P.system_prompt(P.TOOL_NAMES, 16)]
    ex = row["extra_info"]
    assert ex["classification"] is None and ex["question_type"] == "mc" and ex["options"] == ["yes", "no"]
    assert row["tools_kwargs"]["uniform_sample"]["create_kwargs"]["total_frames"] == 120
    assert (
        row["reward_model"]["ground_truth"] == question_rows[0]["answer"]
        and row["data_source"] == "videobrain"
    )
    bad = [
        {**question_rows[0], "id": "missing", "video": str(rl_root / "nope.mp4")},
        {**question_rows[0], "id": "letter", "answer": "Z"},
        {**question_rows[0], "id": "placeholder", "question": "what is <image>?"},
        {**question_rows[0], "id": "cls", "classification": "sometimes"},
    ]
    rep = D.convert(question_rows + bad, rl_root / "mixed.parquet", progress=False)
    assert rep.rows == 2 and [b["id"] for b in rep.bad] == ["missing", "letter", "placeholder", "cls"]
    lines = [json.loads(x) for x in open(rep.problems_path).read().splitlines()]
    assert "not found" in lines[0]["reason"] and "option letters" in lines[1]["reason"]
    assert "placeholder" in lines[2]["reason"] and "classification" in lines[3]["reason"]
    assert D.read_back(rep.path, processor)[1]["extra_info"]["classification"] == "active"


def _run_worker(verl_out, tiny_dir, script, n_rows=1):
    """verl's AgentLoopWorker (not a Ray actor) over the first dataset rows with a local server."""
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.utils.dataset.rl_dataset import collate_fn

    from vidlab.understanding.policies.hf import HFPolicy
    from vidlab.understanding.rl import dataset as D
    from vidlab.understanding.rl.local_server import LocalHFServer

    policy = HFPolicy.from_pretrained(str(tiny_dir))
    server = LocalHFServer(policy.model, policy.processor, script=script, max_new_tokens=12)
    worker = AgentLoopWorker(verl_out["trainer_cfg"], llm_client=server)
    ds = D.read_back(verl_out["report"].path, policy.processor)
    batch = DataProto.from_single_dict(collate_fn([ds[i] for i in range(n_rows)]))
    out = asyncio.run(worker.generate_sequences(batch))
    return out, worker, server, batch


def _reward(verl_out, worker, out, batch):
    """verl's own reward path: get_custom_reward_fn(config) inside the naive reward manager."""
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    from verl.trainer.ppo.reward import get_custom_reward_fn

    fn = get_custom_reward_fn(verl_out["trainer_cfg"])
    manager = NaiveRewardManager(verl_out["trainer_cfg"], worker.tokenizer, fn)
    data = out.union(batch.select(non_tensor_batch_keys=["data_source", "reward_model", "extra_info"]))
    if "tool_extra_fields" not in data.non_tensor_batch:  # what verl's trainer passes alongside
        data.non_tensor_batch["tool_extra_fields"] = np.array(
            [
                {k: data.non_tensor_batch[k][i] for k in ("frames_used", "initial_frame_indices")}
                for i in range(len(data))
            ],
            dtype=object,
        )
    return manager.loop.run_until_complete(
        manager.run_single(data[0:1])
    )  # verl binds the manager to its loop


@pytest.mark.slow
def test_agent_loop_plays_one_full_episode_as_verl_trainer_consumes_it(
    verl_out, tiny_dir, question_rows, rl_root
):
    from vidlab.clip import FrameIndex, load_model
    from vidlab.understanding.env import EpisodeConfig, run_episode
    from vidlab.understanding.policies.replay import ReplayPolicy
    from vidlab.understanding.reward import compute_score

    out, worker, server, batch = _run_worker(verl_out, tiny_dir, SCRIPT)
    tok = worker.tokenizer
    resp = out.batch["responses"][0]
    mask = out.batch["response_mask"][0].bool()
    valid = out.batch["attention_mask"][0, out.batch["prompts"].shape[1] :].bool()
    assert (
        out.non_tensor_batch["end_reason"][0] == "answered" and out.non_tensor_batch["num_tool_calls"][0] == 5
    )
    assert out.non_tensor_batch["__num_turns__"][0] == 6 + 5 + 1
    # the loss mask covers exactly the assistant turns (each closed by <|im_end|>)
    assert tok.decode(resp[mask], skip_special_tokens=False) == "".join(t + "<|im_end|>" for t in SCRIPT)
    obs_text = tok.decode(resp[valid & ~mask], skip_special_tokens=True)
    assert (
        obs_text.count(P.observation_text(1, False)) == 4 and obs_text.count(P.observation_text(5, True)) == 1
    )
    # the same episode through vidlab.understanding.env.Episode shows the same frames with the same labels
    video = question_rows[0]["video"]
    model = load_model(CLIP_SPEC, device="cpu")
    index = FrameIndex.build(video, model, "fps=1", cache_dir=str(rl_root / "index"), progress=False)
    traj = run_episode(
        ReplayPolicy(SCRIPT),
        video,
        question_rows[0]["question"],
        question_rows[0]["options"],
        EpisodeConfig(),
        agents=[UniformAgent(video), ClipAgent(index, model, reader=video)],
    )
    # byte-exact: verl's whole token sequence (image pads collapsed) == the chat template over Episode's messages
    from vidlab.understanding.policies.hf import to_hf_messages

    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    ids = out.batch["input_ids"][0][out.batch["attention_mask"][0].bool()].tolist()
    collapsed = [t for i, t in enumerate(ids) if not (t == pad and i > 0 and ids[i - 1] == pad)]
    want = worker.processor.apply_chat_template(to_hf_messages(traj.messages)[0], tokenize=False)
    assert tok.decode(collapsed, skip_special_tokens=False) == want.removesuffix("\n")
    assert [c["frames"] for c in out.non_tensor_batch["tool_calls"][0]] == [
        c["frames"] for c in traj.tool_calls
    ]
    assert sorted(out.non_tensor_batch["frames_used"][0]) == traj.frames_used
    # images: 16 initial + 8 + 4 + 8 + 4 + 8, and their pad tokens match the pixel features verl will feed
    n_images = 16 + sum(len(c["frames"]) for c in traj.tool_calls)
    mmi = out.non_tensor_batch["multi_modal_inputs"][0]
    assert mmi["image_grid_thw"].shape[0] == n_images
    merge = worker.processor.image_processor.merge_size**2
    assert int((out.batch["input_ids"][0] == pad).sum()) == int(mmi["image_grid_thw"].prod(-1).sum()) // merge
    assert out.batch["position_ids"].shape[1] == 4  # text + 3 M-RoPE rows, as verl builds them for Qwen-VL
    assert server.requests[-1]["num_images"] == n_images  # the answer turn saw every frame shown
    # the reward, through verl's custom-reward-function config and reward manager
    result = _reward(verl_out, worker, out, batch)
    expected = compute_score(
        "videobrain",
        traj.assistant_text,
        question_rows[0]["answer"],
        {"classification": None, "question_type": "mc", "options": ["yes", "no"], **traj.reward_extra_info()},
    )
    assert result["reward_score"] == pytest.approx(expected["score"]) and expected["score"] == pytest.approx(
        1.05
    )
    assert result["reward_extra_info"]["frames_used"] == len(traj.frames_used)


@pytest.mark.slow
def test_agent_loop_with_the_model_sampling_ends_and_scores_zero(verl_out, tiny_dir):
    out, worker, server, batch = _run_worker(verl_out, tiny_dir, None)
    mask = out.batch["response_mask"][0]
    valid = out.batch["attention_mask"][0, out.batch["prompts"].shape[1] :]
    assert out.non_tensor_batch["invalid_reason"][0] and out.non_tensor_batch["num_tool_calls"][0] == 0
    assert int(mask.sum()) == int(valid.sum()) > 0  # one assistant turn, no observation tokens
    assert _reward(verl_out, worker, out, batch)["reward_score"] == 0.0


def test_fork_wrapper_returns_four_numbers_for_vl_agent():
    from vidlab.understanding.rl.verl_reward import compute_score, compute_score_vl_agent

    text = "<thinking>t</thinking><answer>A</answer>"
    extra = {"classification": "direct", "options": ["x", "y"]}
    assert compute_score_vl_agent("vl_agent", text, "A", extra) == (1.55, 1.0, 0.05, 0.5)
    assert compute_score_vl_agent("other", text, "B", extra) == pytest.approx(0.05)
    assert compute_score("x", text, "A", {"options": np.array(["x", "y"], dtype=object)})["acc"] == 1.0
