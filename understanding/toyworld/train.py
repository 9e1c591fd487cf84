"""The toy world's training pipeline, stage by stage, each resumable: world -> CLIP -> SFT -> classify -> GRPO.

``run(cfg)`` writes under ``cfg.out``::

    data/{train,val,test}/   videos (mp4) + questions.jsonl (test is an lmms-eval-style benchmark)
    clip/                    the toy CLIP (open_clip config + safetensors), loads with vidlab.clip.load_model
    sft/                     policy after cold-start SFT (policy.safetensors + policy.json)
    labels.jsonl             vidlab.understanding.classify labels of the RL rows, made with the SFT policy
    grpo/                    ckpt.safetensors (net + optimizer + step, written every ``checkpoint_every`` steps),
                             log.jsonl (one line per step), curves.png, policy.safetensors + policy.json
    config.yaml              the resolved config

A killed run continues from the last finished stage / GRPO checkpoint when started again with the same config.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from vidlab.holds import GRPO, hold_at
from vidlab.understanding.toyworld.clip_train import ClipTrainConfig
from vidlab.understanding.toyworld.world import WorldConfig


@dataclass
class SFTConfig:
    steps: int = 300
    batch_size: int = 64
    lr: float = 3e-3
    video_fraction: float = 0.25  # share of the training videos whose questions get teacher trajectories
    reader_views: tuple[int, ...] = (16, 56)  # extra no-tools answering examples from uniform views
    evidence_views: bool = True  # and from the ground-truth frames, alone and after the 16 initial frames
    reading_batch: int = 256  # per-frame reading examples per step (0: none)
    reading_videos: int = 60  # extra training-range seeds whose rendered frames teach reading (no questions)
    # weight of the action token at the teacher's later turns (its answer after the one call it plans): 1 teaches
    # "answer after one call"; the where preset uses 0, so the cold start teaches no stopping rule either and
    # GRPO finds out how many looks a question needs
    later_action_weight: float = 1.0


@dataclass
class GRPOConfig:
    steps: int = 60
    questions_per_step: int = 8
    group_size: int = 8  # reference rollout n
    lr: float = 1e-3  # the reference's 1e-6 is for an 8B model; this net has ~4k parameters
    clip_eps: float = 0.2
    kl_coef: float = 0.001
    entropy_coef: float = 0.001
    epochs: int = 2  # gradient steps per batch (the clip only matters after the first)
    temperature: float = 1.0
    reward: str = "behaviour"  # "behaviour" (classification labels + bonus) or "acc-only" (the ablation)
    # guard against call creep: every tool call after the first costs this much reward (both rewards; the paper
    # has no such term, and then nothing stops a policy from calling five times where one call answers)
    extra_call_cost: float = 0.1
    free_calls: int = 1  # calls before the guard charges (the where preset: 2, a coarse call and a zoom)
    # count questions apart (None: as above): their own guard, and their share of each step's questions (0: drawn
    # like the others; brief circles are a few percent of all questions, too weak a signal for the quarters)
    count_free_calls: int | None = None
    count_call_cost: float | None = None
    count_share: float = 0.0
    checkpoint_every: int = 4


@dataclass
class ToyTrainConfig:
    PRESET_DIR: ClassVar[str] = "train-agent"

    out: str = "runs/toyworld"
    seed: int = 0
    train_videos: int = 40
    val_videos: int = 8
    test_videos: int = 24
    world: WorldConfig = field(default_factory=WorldConfig)
    clip: ClipTrainConfig = field(default_factory=ClipTrainConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    classify_k: int = 4
    # initial views per question in classification (vidlab.understanding.classify ``initial_views``): the reference's
    # 16-frame grid plus shifted copies; Direct only if every view answers right, so a lucky guess from the exact
    # 16 frames is not Direct (label_noise.json reports the noise)
    classify_views: int = 4
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    # the policy's action set: "basic" (answer / clip_sample / uniform_sample, arguments by rule) or "where"
    # (seven tool-with-argument actions, vidlab.understanding.toyworld.where)
    actions: str = "basic"
    threads: int = 1  # torch threads (on a shared 2-core machine, 1 is much faster in wall-clock time than 2)
    progress: bool = True


class Logger:
    """Appends JSON lines (flushed) and echoes a short line through tqdm."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, rec: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(rec) + "\n")


class World:
    """The three splits on disk plus per-video readers, frame indices and agents (built lazily, cached)."""

    def __init__(self, root: Path, cfg: ToyTrainConfig):
        from vidlab.understanding.toyworld.world import build_split

        self.cfg = cfg
        self.splits = {
            name: build_split(root, name, n, cfg.world, cfg.seed, progress=cfg.progress)
            for name, n in (("train", cfg.train_videos), ("val", cfg.val_videos), ("test", cfg.test_videos))
        }
        self._readers: dict[str, Any] = {}
        self._agents: dict[tuple[str, str], Any] = {}

    def video_path(self, split: str, row: dict[str, Any]) -> Path:
        return self.splits[split].root / row["video"]

    def reader(self, path: Path) -> Any:
        from vidlab.understanding.toyworld.world import MemoryReader

        key = str(path)
        if key not in self._readers:
            if len(self._readers) > 64:
                self._readers.clear()
            self._readers[key] = MemoryReader(path)
        return self._readers[key]

    def agents(self, path: Path, clip: Any, cache_dir: Path) -> dict[str, Any]:
        """uniform_sample + clip_sample over the cached FrameIndex (fp32 rescoring of near-ties)."""
        from vidlab.clip import FrameIndex, Sampling
        from vidlab.understanding.agents import UniformAgent
        from vidlab.understanding.toyworld.clip_agent import RescoringClipAgent

        key = (str(path), clip.tag)
        if key not in self._agents:
            reader = self.reader(path)
            idx = FrameIndex.build(path, clip, Sampling.fps(reader.fps), cache_dir=cache_dir, progress=False)
            self._agents[key] = {
                "uniform_sample": UniformAgent(reader, resize="fit"),
                "clip_sample": RescoringClipAgent(idx, clip, parity=True, reader=reader, resize="fit"),
            }
        return self._agents[key]


def _specs(split: Any, cfg: ToyTrainConfig) -> list[Any]:
    from vidlab.understanding.toyworld.world import video_spec

    return [video_spec(s, cfg.world) for s in split.seeds]


def stage_clip(world: World, out: Path, cfg: ToyTrainConfig, log: Logger) -> Any:
    from vidlab.clip import load_model
    from vidlab.understanding.toyworld.clip_train import save_clip, train_clip

    d = out / "clip"
    if not (d / "open_clip_config.json").is_file():
        tr = world.splits["train"]
        videos = [(s, tr.root / f"videos/{s.seed:06d}.mp4") for s in _specs(tr, cfg)]
        clip = train_clip(videos, cfg.clip, log=log, progress=cfg.progress)
        save_clip(clip, d)
    return load_model(d, device="cpu", precision="fp32")


def split_train_rows(world: World, cfg: ToyTrainConfig) -> tuple[list[dict], list[dict]]:
    """Training rows split by video: the first ``sft.video_fraction`` of videos for SFT, the rest for RL."""
    rows = world.splits["train"].rows
    seeds = world.splits["train"].seeds
    n_sft = max(1, int(round(len(seeds) * cfg.sft.video_fraction)))
    sft_videos = {f"videos/{s:06d}.mp4" for s in seeds[:n_sft]}
    return [r for r in rows if r["video"] in sft_videos], [r for r in rows if r["video"] not in sft_videos]


def _spec(world: World, row: dict[str, Any]) -> Any:
    from vidlab.understanding.toyworld.world import seed_of, video_spec

    return video_spec(seed_of(row), world.cfg.world)


def reading_set(
    world: World,
    policy: Any,
    seeds: list[int],
    rng: np.random.Generator,
    rendered: list[int] | None = None,
    per_video: int = 200,
    where: bool = False,
) -> Any:
    """The cold start's per-frame reading examples (ground truth from the spec): event frames read as "<colour>
    <shape>" among 4 colours (the true one + 3 others), frames read for the border colour, and "does this frame
    show <subject>" for the right and a wrong subject. Frames: the decoded mp4 frames of the training videos
    ``seeds`` plus frames rendered (``world.render_frame``, no mp4) from the specs of the ``rendered`` seeds.
    ``where``: the where world's shapes too (the star, the cross; a grey triangle is read as "not the triangle":
    it is the unlit region around the flash, and has no option colour)."""
    rendered = list(rendered or [])
    import torch

    from vidlab.understanding.toyworld.rl import ReadingSet
    from vidlab.understanding.toyworld.world import (
        COLOURS,
        GREY,
        SHAPES,
        WHERE_SHAPES,
        render_frame,
        video_spec,
    )

    names = sorted(COLOURS)
    subjects = [*(WHERE_SHAPES if where else SHAPES), "border"]
    rare_shapes = ("triangle", "plus", "star", "cross") if where else ("triangle", "plus")
    emb = policy.embedder
    texts = torch.from_numpy(np.asarray(emb.texts(subjects), np.float32))
    none = torch.from_numpy(np.asarray(emb.texts(["no shape"]), np.float32))
    opt_emb = {
        (c, sj): torch.from_numpy(np.asarray(e, np.float32))
        for sj in subjects
        for c, e in zip(names, emb.texts([f"{c} {sj}" for c in names]))
    }
    xs, subj, opts, target, shows = [], [], [], [], []

    def add(x: Any, sj: str, colour: str | None, shown: bool) -> None:
        pick = [c for c in rng.permutation(names) if c != colour][:3]
        options = [colour, *pick] if colour else [*pick, str(rng.choice([c for c in names if c not in pick]))]
        order = rng.permutation(4)
        options = [options[k] for k in order]
        xs.append(x)
        subj.append(subjects.index(sj))
        opts.append(torch.stack([opt_emb[(c, sj)] for c in options]))
        target.append(options.index(colour) if colour else -1)
        shows.append(float(shown))

    for seed in [*seeds, *rendered]:
        spec = video_spec(seed, world.cfg.world)
        if seed in rendered:
            n = spec.num_frames

            def frame(t: int, spec: Any = spec) -> np.ndarray:
                return render_frame(spec, t)
        else:
            reader = world.reader(world.splits["train"].root / f"videos/{seed:06d}.mp4")
            n, frame = reader.num_frames, reader.get_frame
        shape = [e.shape if e is not None else None for e in (spec.event_at(t) for t in range(n))]
        rare = [t for t in range(n) if shape[t] in rare_shapes]
        ev_t = [t for t in range(n) if shape[t] in ("circle", "square")]
        bg_t = [t for t in range(n) if shape[t] is None]
        take = rare  # every frame of the rare shapes (one triangle and one plus per video)
        take += list(rng.choice(ev_t, min(len(ev_t), per_video * 3 // 4), replace=False)) if ev_t else []
        take += list(rng.choice(bg_t, min(len(bg_t), per_video // 4), replace=False)) if bg_t else []
        x = emb.images([frame(int(t)) for t in take])
        x = torch.from_numpy(np.asarray(x / np.linalg.norm(x, axis=1, keepdims=True), np.float32))
        for xi, t in zip(x, take):
            ev = spec.event_at(int(t))
            if ev is not None and ev.colour == GREY:
                add(xi, ev.shape, None, False)
                add(xi, str(rng.choice([sh for sh in subjects[:-1] if sh != ev.shape])), None, False)
            elif ev is not None and ev.shape == "cross":  # a tilted plus is not "the upright plus"
                add(xi, "plus", None, False)
            elif ev is not None:
                add(xi, ev.shape, ev.colour, True)
                add(xi, str(rng.choice([sh for sh in subjects[:-1] if sh != ev.shape])), None, False)
            else:
                add(xi, str(rng.choice(subjects[:-1])), None, False)
            add(xi, "border", spec.border, True)
    return ReadingSet(
        torch.stack(xs),
        torch.tensor(subj),
        texts,
        none[0],
        torch.stack(opts),
        torch.tensor(target),
        torch.tensor(shows),
    )


def stage_sft(world: World, clip: Any, out: Path, cfg: ToyTrainConfig, log: Logger) -> Any:
    """Cold start that teaches the format and the reading, not *when* to call.

    Per SFT question: one teacher trajectory per first action (answer now, ``clip_sample``, ``uniform_sample``),
    each ending in the right letter, through the real Episode; plus no-tools answering views (uniform 16 / 56
    frames, the ground-truth frames alone and after the 16 initial frames), and per-frame reading examples from
    the SFT videos and from frames rendered for ``sft.reading_videos`` more training-range seeds (``reading_set``;
    never the RL videos). The letter token's loss counts only where the frames in view show the
    answer (``world.evidence_in_view``): a colour the frames cannot show teaches nothing about reading. Count
    questions are the exception in the default world: every count view counts, so that the reader learns how far
    a count from few frames inside the interval can be trusted (its learned ``trust``); the where policy's are
    gated like the others. A plan not possible as a first action (a zoom) gets no trajectory; the action token of
    the teacher's later turns weighs ``sft.later_action_weight``.
    """
    import torch
    from tqdm.auto import tqdm

    from vidlab.understanding import protocol as P
    from vidlab.understanding.agents import decode_frames, linspace_frames
    from vidlab.understanding.toyworld.nets import load_toy_policy, new_net
    from vidlab.understanding.toyworld.policy import PolicyNetConfig, ToyPolicy, observe, subject
    from vidlab.understanding.toyworld.rl import rollout, sft_step, teacher_decide
    from vidlab.understanding.toyworld.where import anchor_of
    from vidlab.understanding.toyworld.world import evidence_frames, evidence_in_view, shows_subject

    d = out / "sft"
    if (d / "policy.safetensors").is_file():
        return load_toy_policy(d)
    torch.manual_seed(cfg.seed)
    policy = ToyPolicy(new_net(PolicyNetConfig(embed_dim=clip.dim, actions=cfg.actions)), clip)
    where = cfg.actions == "where"
    sft_rows, _ = split_train_rows(world, cfg)
    cache = out / "index_cache"
    examples: list[tuple[Any, ...]] = []
    for row in tqdm(sft_rows, desc="teacher trajectories", disable=not cfg.progress):
        path = world.video_path("train", row)
        agents = world.agents(path, clip, cache)
        spec, kind, gt = _spec(world, row), row["category"], ord(row["answer"]) - 65
        subj = subject(row["question"])

        anchor = anchor_of(row["question"])
        # count views teach the reader's trust even without the evidence; the where world gates them on it (one
        # uniform call over its interval misses circles: counting those views would teach miscounts)
        count_all = kind == "count" and not where

        def target(f: Any, spec: Any = spec, subj: str = subj, anchor: str | None = anchor) -> Any:
            if f.anchor is not None:  # the where policy's reader also learns the anchor's presence
                f.anchor_target = torch.tensor(
                    [float(bool(anchor) and shows_subject(spec, str(anchor), t)) for t in f.labels]
                )
            return torch.tensor([float(shows_subject(spec, subj, t)) for t in f.labels])

        for plan in policy.actions:
            teacher = teacher_decide(policy, row, plan)
            r = rollout(policy, row, agents, decide=teacher)
            if policy.actions[r.decisions[0].action] != plan:
                continue  # not possible as a first action (a zoom needs a previous call): no trajectory
            for i, (dd, labels) in enumerate(zip(r.decisions, teacher.views)):
                w = float(evidence_in_view(spec, kind, labels) or count_all) if dd.letter >= 0 else 0.0
                dd.features.frame_target = target(dd.features)
                examples.append(
                    (dd.features, dd.action, dd.letter, w, 1.0 if i == 0 else cfg.sft.later_action_weight)
                )
        reader = world.reader(path)
        n = reader.num_frames
        views = [linspace_frames(0, n, k) for k in cfg.sft.reader_views]
        if cfg.sft.evidence_views:
            ev = evidence_frames(spec, kind)
            views += [ev, sorted(set(linspace_frames(0, n, 16)) | set(ev))]
        for idx in views:
            frames = decode_frames(reader, idx, resize="fit")
            msgs = P.build_initial_messages(row["question"], frames, n, reader.fps, row["options"], tools=())
            f = policy.featurize(observe(msgs))
            f.frame_target = target(f)
            examples.append((f, 0, gt, float(evidence_in_view(spec, kind, idx) or count_all)))
    rng = np.random.default_rng(cfg.seed)
    # reading is taught on the SFT videos' frames and on frames rendered from more training-range seeds that no
    # split uses (never on the RL videos: the classification of their questions must not have seen their frames)
    seeds = sorted({int(Path(r["video"]).stem) for r in sft_rows})
    extra = list(range(50_000 + 1000 * cfg.seed, 50_000 + 1000 * cfg.seed + cfg.sft.reading_videos))
    reading = reading_set(world, policy, seeds, rng, extra, where=where) if cfg.sft.reading_batch else None
    opt = torch.optim.Adam(policy.net.parameters(), lr=cfg.sft.lr)
    for step in tqdm(range(cfg.sft.steps), desc="SFT", disable=not cfg.progress):
        pick = rng.choice(len(examples), min(cfg.sft.batch_size, len(examples)), replace=False)
        loss = sft_step(policy, opt, [examples[i] for i in pick], reading, cfg.sft.reading_batch)
        if step % 20 == 0 or step == cfg.sft.steps - 1:
            log({"stage": "sft", "step": step, "loss": round(loss, 4), "examples": len(examples)})
    policy.save(d, clip_dir="../clip")
    return load_toy_policy(d)


def single_view_labels(labelled: list[dict], config: Any) -> list[dict]:
    """The labels the one-initial-view rule gives the same rows: view 0 is the reference's initial view with the
    same samples (``acc_initial_views[0]``), so no policy call is needed (rows labelled with one view: unchanged).
    """
    from vidlab.understanding.classify import label_from_accuracy

    out = []
    for r in labelled:
        info = r.get("classification_info") or {}
        views = info.get("acc_initial_views")
        if views and r.get("classification") in ("direct", "adaptive", "active", "filtered"):
            label, _ = label_from_accuracy(float(views[0]), float(info["acc_rich"]), config)
            r = {**r, "classification": label}
        out.append(r)
    return out


def label_noise(world: World, labelled: list[dict], num_initial: int = 16) -> dict[str, Any]:
    """How often the classification labels disagree with the ground truth of what the initial view shows.

    Per kind and label: how many rows; ``direct_without_evidence``: rows labelled Direct although the 16 initial
    frames do not show the answer (a lucky guess); ``direct_with_evidence``: Direct because the answer was visible
    in the initial frames; ``active_with_evidence``: Active although the initial frames showed the answer;
    ``not_direct_with_evidence``: any label but Direct although they showed it. ``direct_noise``: the share of
    Direct labels that were lucky guesses (per kind, and over all kinds under ``"all"``).
    """
    from vidlab.understanding.agents import linspace_frames
    from vidlab.understanding.toyworld.world import evidence_in_view

    out: dict[str, Any] = {}
    for r in labelled:
        spec = _spec(world, r)
        init = linspace_frames(0, spec.num_frames, num_initial)
        seen = evidence_in_view(spec, r["category"], init)
        k = out.setdefault(
            r["category"],
            {
                "n": 0,
                "labels": {},
                "direct_without_evidence": 0,
                "direct_with_evidence": 0,
                "active_with_evidence": 0,
                "not_direct_with_evidence": 0,
            },
        )
        lab = r.get("classification")
        k["n"] += 1
        k["labels"][lab] = k["labels"].get(lab, 0) + 1
        if lab == "direct":
            k["direct_with_evidence" if seen else "direct_without_evidence"] += 1
        elif seen:
            k["not_direct_with_evidence"] += 1
        if lab == "active" and seen:
            k["active_with_evidence"] += 1
    looks_noise(world, labelled, out)
    total = {"n": 0, "direct_with_evidence": 0, "direct_without_evidence": 0, "not_direct_with_evidence": 0}
    for k in out.values():
        direct = k["direct_with_evidence"] + k["direct_without_evidence"]
        k["direct_noise"] = round(k["direct_without_evidence"] / direct, 4) if direct else 0.0
        for key in total:
            total[key] += k[key]
    direct = total["direct_with_evidence"] + total["direct_without_evidence"]
    out["all"] = {
        **total,
        "direct_noise": round(total["direct_without_evidence"] / direct, 4) if direct else 0.0,
    }
    return out


# The where policy's look probes for classification: one look = one coarse call; two looks = a coarse call and
# the zoom it leads to (arguments by the action templates, from what the SFT reader sees; never the ground truth)
ONE_LOOK = ("clip_subject", "clip_anchor", "uniform_all", "uniform_split")
TWO_LOOKS = (
    ("clip_subject", "zoom_around"),
    ("clip_anchor", "zoom_before"),
    ("uniform_split", "uniform_split"),
    # count with circles shorter than the halves' stride: the four quarters (a denser look, not a zoom; counted
    # with the two-look probes because the union of the probes is the rich view)
    ("uniform_quarter",) * 4,
)


def probe_frames(
    policy: Any, row: dict[str, Any], agents: dict[str, Any], script: tuple[str, ...]
) -> list[int]:
    """The frames shown by the initial view plus the calls of ``script`` (action names of ``policy``), each with the
    arguments the policy's action templates give on what its reader saw; an action not possible then is skipped."""
    from vidlab.understanding.env import Episode
    from vidlab.understanding.toyworld.policy import observe
    from vidlab.understanding.toyworld.rl import TOY_EPISODE

    ep = Episode(None, row["question"], row["options"], TOY_EPISODE, agents)
    msgs = ep.reset()
    for name in script:
        obs = observe(msgs)
        f = policy.featurize(obs)
        a = policy.actions.index(name)
        if not bool(f.action_mask[a]):
            continue
        ep.step(policy.render(obs, f, a, None))
        if ep.done:
            break
        msgs = ep.messages
    return sorted(ep.shown)


def classify_looks(world: World, policy: Any, clip: Any, out: Path, cfg: ToyTrainConfig) -> list[dict]:
    """Label the RL rows with ``vidlab.understanding.classify.label_from_looks``: the SFT policy answers (no tools, ``k``
    samples, temperature 1) from the ``classify_views`` initial views, from each one-look view (``ONE_LOOK``) and
    from the two-look view (the union of ``TWO_LOOKS``' frames). Written to ``labels.jsonl`` (reused when there)."""
    from vidlab.io import atomic_write_text
    from vidlab.understanding import protocol as P
    from vidlab.understanding.agents import decode_frames
    from vidlab.understanding.classify import ClassifyConfig, initial_view_indices, label_from_looks

    path = out / "labels.jsonl"
    if path.is_file():
        return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    _, rl_rows = split_train_rows(world, cfg)
    ccfg = ClassifyConfig(k=cfg.classify_k, seed=cfg.seed, initial_views=cfg.classify_views)
    cache = out / "index_cache"
    labelled = []
    for i, row in enumerate(rl_rows):
        agents = world.agents(world.video_path("train", row), clip, cache)
        reader = agents["uniform_sample"].reader
        n = reader.num_frames
        gt = row["answer"]

        def acc(
            idx: list[int], seed: int, row: dict = row, reader: Any = reader, n: int = n, gt: str = gt
        ) -> float:
            frames = decode_frames(reader, idx, resize="fit")
            msgs = P.build_initial_messages(row["question"], frames, n, reader.fps, row["options"], tools=())
            texts = policy.generate(msgs, num_samples=ccfg.k, temperature=ccfg.temperature, seed=seed)
            return sum(P.parse_assistant_turn(t).answer == gt for t in texts) / ccfg.k

        seed = cfg.seed * 100_003 + i * 17
        init = initial_view_indices(n, ccfg.num_initial_frames, ccfg.initial_views)
        per_view = [acc(v, seed + j) for j, v in enumerate(init)]
        one = {a: probe_frames(policy, row, agents, (a,)) for a in ONE_LOOK}
        one = {a: v for a, v in one.items() if len(v) > len(init[0])}  # the call was possible
        p_one = {a: acc(v, seed + 7 + j) for j, (a, v) in enumerate(one.items())}
        two: set[int] = set()
        for pair in TWO_LOOKS:
            two.update(probe_frames(policy, row, agents, pair))
        p_two = acc(sorted(two), seed + 13)
        label, why, looks = label_from_looks(per_view, max(p_one.values(), default=0.0), p_two, ccfg)
        p0 = sum(per_view) / len(per_view)
        labelled.append(
            {
                **row,
                "classification": label,
                "classification_info": {
                    "acc_initial": round(p0, 4),
                    "acc_initial_views": [round(p, 4) for p in per_view],
                    "acc_one_look": {a: round(p, 4) for a, p in p_one.items()},
                    "acc_two_looks": round(p_two, 4),
                    "acc_rich": round(max(p_two, *p_one.values()) if p_one else p_two, 4),
                    "looks": looks,
                    "why": why,
                    "k": ccfg.k,
                    # the views' frames, for the label-noise report (classification itself never sees truth)
                    "one_look_frames": one,
                    "two_look_frames": sorted(two),
                },
            }
        )
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in labelled))
    return labelled


def looks_noise(world: World, labelled: list[dict], out: dict[str, Any]) -> None:
    """For labels made with looks (``classify_looks``), per kind in ``out``: how many rows need 0 / 1 / 2 looks
    (``looks``), ``one_look_without_evidence``: rows labelled one look although no one-look view showed the answer
    (a lucky one-look reading), and ``two_looks_with_evidence``: rows whose two-look view showed it."""
    from vidlab.understanding.toyworld.world import evidence_in_view

    for r in labelled:
        info = r.get("classification_info") or {}
        if "one_look_frames" not in info:
            continue
        spec = _spec(world, r)
        k = out[r["category"]]
        looks = str(info.get("looks"))
        k.setdefault("looks", {})[looks] = k.setdefault("looks", {}).get(looks, 0) + 1
        shown = any(evidence_in_view(spec, r["category"], v) for v in info["one_look_frames"].values())
        k["one_look_without_evidence"] = k.get("one_look_without_evidence", 0) + int(
            looks == "1" and not shown
        )
        two = evidence_in_view(spec, r["category"], info["two_look_frames"])
        k["two_looks_with_evidence"] = k.get("two_looks_with_evidence", 0) + int(two)


def stage_classify(world: World, sft_policy: Any, clip: Any, out: Path, cfg: ToyTrainConfig) -> list[dict]:
    """Label the RL rows Direct / Adaptive / Active / filtered with the SFT policy (vidlab.understanding.classify); the
    where policy labels with one-look and two-look views (``classify_looks``)."""
    from vidlab.io import atomic_write_json
    from vidlab.understanding.classify import ClassifyConfig, classify_rows

    _, rl_rows = split_train_rows(world, cfg)
    ccfg = ClassifyConfig(k=cfg.classify_k, seed=cfg.seed, initial_views=cfg.classify_views)
    if cfg.actions == "where":
        labelled = classify_looks(world, sft_policy, clip, out, cfg)
    else:
        labelled = classify_rows(
            rl_rows,
            sft_policy,
            config=ccfg,
            clip_model=clip,
            index_cache_dir=out / "index_cache",
            out_path=out / "labels.jsonl",
            video_root=world.splits["train"].root,
            progress=cfg.progress,
        )
    noise = label_noise(world, labelled)
    # the same rows under the one-view rule (the labels before ``classify_views``), for the before/after report
    noise["single_view"] = label_noise(world, single_view_labels(labelled, ccfg))
    noise["initial_views"] = cfg.classify_views
    atomic_write_json(out / "label_noise.json", noise)
    return labelled


def _guard_of(g: GRPOConfig, row: dict) -> tuple[float, int]:
    """The creep guard's (cost per call, free calls) for this question (count questions may have their own)."""
    if row.get("category") == "count":
        cost = g.extra_call_cost if g.count_call_cost is None else g.count_call_cost
        free = g.free_calls if g.count_free_calls is None else g.count_free_calls
        return float(cost), int(free)
    return float(g.extra_call_cost), int(g.free_calls)


def _grpo_batch(rows: list[dict], g: GRPOConfig, rng: np.random.Generator) -> list[dict]:
    """One step's questions: ``questions_per_step`` drawn without replacement; with ``count_share`` > 0, that
    share of them (rounded) drawn from the count questions and the rest from the others."""
    k = min(g.questions_per_step, len(rows))
    if g.count_share <= 0:
        return [rows[i] for i in rng.choice(len(rows), k, replace=False)]
    counts = [r for r in rows if r.get("category") == "count"]
    others = [r for r in rows if r.get("category") != "count"]
    n_count = min(len(counts), int(round(g.count_share * k)))
    n_other = min(len(others), k - n_count)
    pick = [counts[i] for i in rng.choice(len(counts), n_count, replace=False)] if n_count else []
    pick += [others[i] for i in rng.choice(len(others), n_other, replace=False)] if n_other else []
    return pick


def stage_grpo(
    world: World,
    sft_dir: Path,
    clip: Any,
    labelled: list[dict],
    out: Path,
    cfg: ToyTrainConfig,
    name: str = "grpo",
) -> Any:
    """GRPO from the SFT policy; with ``reward == "acc-only"``: no labels, no behaviour bonus (the ablation)."""
    import torch
    from tqdm.auto import tqdm

    from vidlab.io import load_checkpoint, save_checkpoint
    from vidlab.understanding.toyworld.nets import load_toy_policy
    from vidlab.understanding.toyworld.rl import (
        all_tied,
        group_advantages,
        grpo_update,
        guard_calls,
        rollout,
    )

    g = cfg.grpo
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    if (d / "policy.safetensors").is_file() and (d / "done.json").is_file():
        return load_toy_policy(d)
    policy = load_toy_policy(sft_dir)
    ref = load_toy_policy(sft_dir).net
    for p in ref.parameters():
        p.requires_grad_(False)
    opt = torch.optim.Adam(policy.net.parameters(), lr=g.lr)
    start = 0
    ckpt = d / "ckpt.safetensors"
    if ckpt.is_file():
        state = load_checkpoint(ckpt)
        policy.net.load_state_dict(state["net"])
        opt.load_state_dict(state["opt"])
        start = int(state["step"])
    log_path = d / "log.jsonl"
    if log_path.is_file():  # keep only the steps the checkpoint covers
        keep = [
            ln for ln in log_path.read_text().splitlines() if ln.strip() and json.loads(ln)["step"] < start
        ]
        log_path.write_text("".join(k + "\n" for k in keep))
    log = Logger(log_path)
    if g.reward == "acc-only":
        _, rows = split_train_rows(world, cfg)
        labels: dict[str, str | None] = {r["id"]: None for r in rows}
    elif g.reward == "behaviour":
        rows = [r for r in labelled if r.get("classification") in ("direct", "adaptive", "active")]
        labels = {r["id"]: r["classification"] for r in rows}
    else:
        raise ValueError(f"grpo.reward must be 'behaviour' or 'acc-only', got {g.reward!r}")
    cache = out / "index_cache"
    bar = tqdm(
        range(start, g.steps),
        desc=f"GRPO ({g.reward})",
        initial=start,
        total=g.steps,
        disable=not cfg.progress,
    )
    for step in bar:
        # a test seam (vidlab.holds): a test kills the run here, before this step; unset, no wait
        hold_at(GRPO, step)
        t0 = time.perf_counter()
        rng = np.random.default_rng([cfg.seed, step, 17])
        batch = _grpo_batch(rows, g, rng)
        gen = torch.Generator().manual_seed(int(rng.integers(2**31)))
        rollouts, advs = [], []
        ties = 0
        for row in batch:
            agents = world.agents(world.video_path("train", row), clip, cache)
            group = [
                rollout(
                    policy,
                    row,
                    agents,
                    temperature=g.temperature,
                    generator=gen,
                    classification=labels[row["id"]],
                )
                for _ in range(g.group_size)
            ]
            cost, free = _guard_of(g, row)
            for r in group:  # the creep guard: calls after the first cost reward
                r.reward["score"] = guard_calls(r.reward["score"], r.trajectory.num_tool_calls, cost, free)
            rewards = [r.reward["score"] for r in group]
            ties += int(all_tied(rewards))
            rollouts.extend(group)
            advs.extend(group_advantages(rewards).tolist())
        stats = grpo_update(
            policy,
            ref,
            opt,
            rollouts,
            advs,
            epochs=g.epochs,
            clip_eps=g.clip_eps,
            kl_coef=g.kl_coef,
            entropy_coef=g.entropy_coef,
        )
        rec = {
            "step": step,
            "reward": float(np.mean([r.reward["score"] for r in rollouts])),
            "acc": float(np.mean([r.reward.get("acc", 0.0) for r in rollouts])),
            "format": float(np.mean([r.reward.get("format", 0.0) for r in rollouts])),
            "bonus": float(np.mean([r.reward.get("bonus", 0.0) for r in rollouts])),
            "tool_calls": float(np.mean([r.trajectory.num_tool_calls for r in rollouts])),
            "frames": float(np.mean([r.trajectory.num_frames_used for r in rollouts])),
            "valid": float(np.mean([r.trajectory.valid for r in rollouts])),
            "tied_groups": ties / len(batch),
            "seconds": round(time.perf_counter() - t0, 2),
            **{k: round(v, 5) for k, v in stats.items()},
        }
        log(rec)
        bar.set_postfix(
            reward=f"{rec['reward']:.2f}", acc=f"{rec['acc']:.2f}", calls=f"{rec['tool_calls']:.2f}"
        )
        if (step + 1) % g.checkpoint_every == 0 or step + 1 == g.steps:
            save_checkpoint({"net": policy.net.state_dict(), "opt": opt.state_dict(), "step": step + 1}, ckpt)
    policy.save(d, clip_dir="../clip")
    plot_curves(log_path, d / "curves.png", title=f"GRPO ({g.reward})")
    from vidlab.io import atomic_write_json

    atomic_write_json(d / "done.json", {"steps": g.steps})
    return load_toy_policy(d)


def plot_curves(log_path: Path, png: Path, title: str = "GRPO") -> Path:
    """Reward components, accuracy, tool calls and frames per step (PNG, written atomically)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from vidlab.io import atomic_path

    recs = [json.loads(ln) for ln in log_path.read_text().splitlines() if ln.strip()]
    steps = [r["step"] for r in recs]
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.2))
    for k in ("reward", "acc", "bonus", "format"):
        axes[0].plot(steps, [r[k] for r in recs], label=k)
    axes[0].set_title("reward components")
    axes[0].legend(fontsize=7)
    axes[1].plot(steps, [r["tool_calls"] for r in recs], color="C4")
    axes[1].set_title("tool calls / episode")
    axes[2].plot(steps, [r["frames"] for r in recs], color="C5")
    axes[2].set_title("frames / episode")
    axes[3].plot(steps, [r.get("tied_groups", float("nan")) for r in recs], color="C6")
    axes[3].set_title("share of all-tied groups")
    axes[3].set_ylim(-0.05, 1.05)
    for ax in axes:
        ax.set_xlabel("GRPO step")
    fig.suptitle(title)
    fig.tight_layout()
    with atomic_path(png) as tmp:
        fig.savefig(tmp, format="png", dpi=90)
    plt.close(fig)
    return png


STAGES = ("world", "clip", "sft", "classify", "grpo", "grpo-acc-only")


def _timed(out: Path, name: str, marker: Path, fn: Any) -> Any:
    """Run ``fn``; when the stage was not finished before (``marker`` absent), add its wall and CPU seconds (this
    process, all threads) to ``OUT/timing.json``, so a stage resumed after a kill sums its parts."""
    from vidlab.io import atomic_write_json

    pending = not marker.exists()
    t0, c0 = time.perf_counter(), time.process_time()
    result = fn()
    if pending:
        path = out / "timing.json"
        timing = json.loads(path.read_text()) if path.is_file() else {}
        rec = timing.setdefault(name, {"wall_s": 0.0, "cpu_s": 0.0, "runs": 0})
        rec["wall_s"] = round(rec["wall_s"] + time.perf_counter() - t0, 1)
        rec["cpu_s"] = round(rec["cpu_s"] + time.process_time() - c0, 1)
        rec["runs"] += 1
        atomic_write_json(path, timing)
    return result


def run(cfg: ToyTrainConfig, stages: tuple[str, ...] = ("grpo",), upto: str | None = None) -> dict[str, Any]:
    """Run the pipeline up to GRPO (behaviour reward, plus ``acc-only`` when ``"grpo-acc-only"`` is in stages);
    ``upto`` (``world``, ``clip``, ``sft``, ``classify``) stops after that stage. Each stage's wall and CPU time,
    when it ran, goes to ``OUT/timing.json``."""
    import torch

    from vidlab.config import save_resolved

    if upto is not None and upto not in STAGES[:4]:
        raise ValueError(f"upto must be one of {STAGES[:4]}, got {upto!r}")
    torch.set_num_threads(max(1, int(cfg.threads)))
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    save_resolved(cfg, out)
    log = Logger(out / "log.jsonl")
    world = _timed(out, "world", out / "data" / "test" / "world.json", lambda: World(out / "data", cfg))
    result: dict[str, Any] = {"world": world}
    if upto == "world":
        return result
    clip = _timed(
        out, "clip", out / "clip" / "open_clip_config.json", lambda: stage_clip(world, out, cfg, log)
    )
    result["clip"] = clip
    if upto == "clip":
        return result
    sft = _timed(
        out, "sft", out / "sft" / "policy.safetensors", lambda: stage_sft(world, clip, out, cfg, log)
    )
    result["sft"] = sft
    if upto == "sft":
        return result
    labelled = _timed(
        out, "classify", out / "label_noise.json", lambda: stage_classify(world, sft, clip, out, cfg)
    )
    result["labels"] = labelled
    if upto == "classify":
        return result
    if "grpo" in stages:
        result["grpo"] = _timed(
            out,
            "grpo",
            out / "grpo" / "done.json",
            lambda: stage_grpo(world, out / "sft", clip, labelled, out, cfg, "grpo"),
        )
    if "grpo-acc-only" in stages:
        import dataclasses

        abl = dataclasses.replace(cfg, grpo=dataclasses.replace(cfg.grpo, reward="acc-only"))
        result["grpo-acc-only"] = _timed(
            out,
            "grpo-acc-only",
            out / "grpo-acc-only" / "done.json",
            lambda: stage_grpo(world, out / "sft", clip, labelled, out, abl, "grpo-acc-only"),
        )
    return result


def config_dict(cfg: ToyTrainConfig) -> dict[str, Any]:
    return asdict(cfg)


def export_weights(out: str | Path, dest: str | Path, policy: str = "grpo") -> Path:
    """Copy ``OUT/clip`` and ``OUT/<policy>/policy.*`` to ``dest`` (the layout ``toy:DIR`` loads), atomically."""
    from vidlab.io import atomic_write_bytes, atomic_write_json

    src, d = Path(out), Path(dest)
    (d / "clip").mkdir(parents=True, exist_ok=True)
    for f in (src / "clip").iterdir():
        if f.suffix in (".json", ".safetensors"):
            atomic_write_bytes(d / "clip" / f.name, f.read_bytes())
    atomic_write_bytes(d / "policy.safetensors", (src / policy / "policy.safetensors").read_bytes())
    meta = json.loads((src / policy / "policy.json").read_text())
    meta["clip"] = "clip"
    cfg_path = src / "config.yaml"
    meta["source"] = {"stage": policy, "config": cfg_path.read_text() if cfg_path.is_file() else None}
    atomic_write_json(d / "policy.json", meta)
    return d
