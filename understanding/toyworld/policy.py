"""The toy policy: a frame reader and an action head over CLIP embeddings that play VideoBrain's real protocol.

What it reads: only the conversation (``list[Message]``) the ``Episode`` gives it -- the system turn (which tools
are offered), the user turn (question, ``A. text`` options, ``Total frames``), each frame's pixels after its
``frame {idx}: `` label, its own previous turns, and whether the last observation forbids more calls. Pixels go
through the toy CLIP's image tower, the question and options through its text tower. It never sees ground
truth, a video path, ``Frame.index``/``timestamp`` metadata, or the frame-index code.

Architecture (``ToyPolicyNet``, ~6k parameters): a reader plus an action head.
  Reader. Frames (one per ``frame {idx}:`` label, sorted by it) -> unit CLIP image embeddings x_f. Presence of the
  question's subject ("triangle", "circle", "border") in frame f: p_f = a (cos(x_f, "<subject>") - cos(x_f,
  "no shape")) + b. Each option is read with the text the CLIP was trained on, "<option> <subject>" ("red
  triangle", "cyan border"): colour logit_j = alpha sum_f softmax_f(tau p_f) cos(x_f + R x_f, t_j), i.e. frames
  weighted by how much they show the subject. "How many" questions count instead: the runs of consecutive frames
  inside the asked interval with sigmoid(p_f) high, n = sum_f s_f (1 - s_{f-1}); logit_j = -beta g(k) (n - value_j)^2
  where g(k) = softplus(w k + c) is how far a count from k frames inside the interval can be trusted.
  x_f in the presence term is x_f + S x_f. Learned: a, b, tau, alpha, beta and the residual projections R and S
  (32x32 each, start at 0); the cold start also supervises p_f with the teacher's "this frame shows the subject".
  Action head: MLP([question emb, call-state features, what the reader found: max presence, answer confidence,
  frames inside the interval, n]) -> {answer, clip_sample, uniform_sample} (impossible actions masked).
Each decision renders to protocol text (``<thinking>...</thinking><tool_call>{json}</tool_call>`` or
``<answer>X</answer>``) that the real parser reads. Tool arguments follow a fixed rule over the question text:
``clip_sample(0, total, subject)`` where the subject is the question's noun ("triangle", "circle");
``uniform_sample`` over the frame interval the question names (else the whole video), then its halves,
quarters, ... on later calls.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vidlab.understanding import protocol as P
from vidlab.understanding.messages import Frame, Message

ACTIONS = ("answer", P.CLIP, P.UNIFORM)
STATE_DIM = 8
_OPTION = re.compile(r"(?m)^([A-Z])\. (.*)$")
_TOTAL = re.compile(r"Total frames: (\d+)")
_LABEL = re.compile(r"frame (\d+): $")
_INTERVAL = re.compile(r"between frame (\d+) and frame (\d+)")


@dataclass
class PolicyNetConfig:
    embed_dim: int = 32
    hidden: int = 64
    # "basic": the three actions above (answer / clip_sample / uniform_sample, arguments by rule); "where": the
    # where-to-look policy's seven tool-with-argument actions (``vidlab.understanding.toyworld.where``)
    actions: str = "basic"


def subject(question: str) -> str:
    """The CLIP prompt for a question: its subject noun, singular ("How many circles ..." -> "circle")."""
    q = question.lower().replace(" upright ", " ")  # "the upright plus": the noun is "plus"
    m = (
        re.search(r"how many (\w+)", q)
        or re.search(r"colou?r (?:is|was|did) the (\w+)", q)
        or re.search(r"the (\w+)(?: of the video)?\?", q)
    )
    if not m:
        return " ".join(q.split()[:4]) or "object"
    w = m.group(1)
    return w[:-1] if w.endswith("s") and not w.endswith("us") and len(w) > 3 else w


def uniform_ranges(lo: int, hi: int, total: int, min_len: int = 8) -> list[tuple[int, int]]:
    """The uniform_sample ranges in the order the policy uses them: [lo, hi), its halves, quarters, ..."""
    out: list[tuple[int, int]] = []
    hi = min(hi, total)
    for level in range(6):
        parts = 2**level
        for p in range(parts):
            s = lo + (hi - lo) * p // parts
            e = lo + (hi - lo) * (p + 1) // parts
            if e - s >= min_len and all(abs(s - a) > 1 or abs(e - b) > 1 for a, b in out):
                out.append((s, e))
    return out


@dataclass
class Observation:
    """What the policy parsed out of the conversation (text and pixels only)."""

    question: str
    options: list[str]
    total: int
    tools: tuple[str, ...]
    frames: list[tuple[int, np.ndarray]]  # (label index, pixels), in conversation order
    last_frames: int  # how many frames the latest user turn showed
    calls: list[P.ToolCall]
    final: bool

    @property
    def interval(self) -> tuple[int, int] | None:
        m = _INTERVAL.search(self.question)
        return (int(m.group(1)), int(m.group(2))) if m else None


def observe(messages: list[Message]) -> Observation:
    """Parse the conversation the way a model reads it: texts, labelled frames, own turns."""
    system = next((m.text for m in messages if m.role == "system"), "")
    users = [m for m in messages if m.role == "user"]
    first = users[0].text if users else ""
    qline = first.split("Question: ", 1)[-1]
    question = qline.split("\n", 1)[0].strip()
    opts_block = qline.split("\n# Video Information", 1)[0]
    options = [t.strip() for _, t in _OPTION.findall(opts_block)]
    m = _TOTAL.search(first)
    total = int(m.group(1)) if m else 0
    tools = tuple(t for t in P.TOOL_NAMES if f'"name": "{t}"' in system)
    frames: list[tuple[int, np.ndarray]] = []
    last = 0
    for u in users:
        label: int | None = None
        count = 0
        for part in u.content:
            if isinstance(part, str):
                lm = _LABEL.search(part)
                label = int(lm.group(1)) if lm else None
            elif isinstance(part, Frame) and label is not None:
                frames.append((label, part.image))
                count += 1
                label = None
        last = count
    calls = []
    for a in messages:
        if a.role == "assistant":
            parsed = P.parse_assistant_turn(a.text)
            if parsed.tool_call is not None:
                calls.append(parsed.tool_call)
    final = bool(users) and "Further tool calls are prohibited" in users[-1].text
    return Observation(question, options, total, tools, frames, last, calls, final)


def next_uniform(obs: Observation) -> tuple[int, int] | None:
    lo, hi = obs.interval or (0, obs.total)
    done = [(c.args["start_frame"], c.args["end_frame"]) for c in obs.calls if c.name == P.UNIFORM]
    for s, e in uniform_ranges(lo, hi, obs.total):
        if all(abs(s - a) > 1 or abs(e - b) > 1 for a, b in done):
            return s, e
    return None


def action_mask(obs: Observation, max_calls: int = 5) -> list[bool]:
    can_call = not obs.final and len(obs.calls) < max_calls and obs.total > 0
    clip_ok = can_call and P.CLIP in obs.tools and not any(c.name == P.CLIP for c in obs.calls)
    uni_ok = can_call and P.UNIFORM in obs.tools and next_uniform(obs) is not None
    return [True, clip_ok, uni_ok]


def render(obs: Observation, action: int, letter: str | None) -> str:
    """A decision as protocol text."""
    n = len(obs.frames)
    if ACTIONS[action] == "answer":
        return f"<thinking>From the {n} frames I have seen, the answer is {letter}.</thinking><answer>{letter}</answer>"
    if ACTIONS[action] == P.CLIP:
        args = {"start_frame": 0, "end_frame": obs.total, "prompt": subject(obs.question)}
        why = f"The {n} frames may have missed the {args['prompt']}; retrieve frames that show it."
    else:
        s, e = next_uniform(obs)  # type: ignore[misc]
        args = {"start_frame": s, "end_frame": e}
        why = f"I need a denser look at frames {s}-{e}."
    return f"<thinking>{why}</thinking><tool_call>{json.dumps({'name': ACTIONS[action], 'arguments': args})}</tool_call>"


# ---------------------------------------------------------------------------------------------- network
def _torch():
    import torch

    return torch


NO_SHAPE = "no shape"  # the CLIP's caption of a frame without an event
_NUMBERS = {w: i for i, w in enumerate("zero one two three four five six seven eight".split())}
_HOW_MANY = re.compile(r"\bhow many\b", re.I)


def option_value(option: str) -> float:
    """The number an option names ("two" or "2" -> 2.0); -1 when it names none."""
    w = option.strip().lower()
    if w in _NUMBERS:
        return float(_NUMBERS[w])
    return float(w) if w.isdigit() else -1.0


def option_text(option: str, subj: str) -> str:
    """The text an option is read with: the caption form the toy CLIP was trained on ("red triangle")."""
    return f"{option.strip()} {subj}".strip()


class ToyPolicyNet(_torch().nn.Module):  # type: ignore[misc]
    """The reader + the action head (see the module docstring); inputs are a padded batch (``Features.collate``)."""

    ACTIONS: tuple[str, ...] = ACTIONS

    def __init__(self, cfg: PolicyNetConfig | None = None):
        torch = _torch()
        nn = torch.nn
        super().__init__()
        self.cfg = cfg or PolicyNetConfig()
        D, H = self.cfg.embed_dim, self.cfg.hidden
        # reader: presence of the subject per frame, option read-out, counting
        # scale, bias on cos(subject) - cos(no shape); residual projection for presence (starts at identity)
        self.presence = nn.Parameter(torch.tensor([20.0, -1.0]))
        self.see = nn.Linear(D, D, bias=False)
        nn.init.zeros_(self.see.weight)
        self.log_focus = nn.Parameter(torch.tensor(0.0))  # softmax sharpness of the subject weighting
        # residual projection of image embeddings for the option read-out (starts at identity)
        self.read = nn.Linear(D, D, bias=False)
        nn.init.zeros_(self.read.weight)
        self.log_alpha = nn.Parameter(torch.tensor(3.0))  # colour read-out logit scale
        self.log_beta = nn.Parameter(torch.tensor(1.0))  # count read-out sharpness
        # how far to trust a count made from k frames inside the interval: softplus(w k + c) (learned)
        self.trust = nn.Parameter(torch.tensor([1.0, -2.0]))
        # action head over the question, the call state and what the reader found
        E = D + STATE_DIM + EVIDENCE_DIM
        self.action_head = nn.Sequential(nn.Linear(E, H), nn.Tanh(), nn.Linear(H, 3))

    def presence_logits(self, b: dict[str, Any]) -> Any:
        """[B, N] logits that each frame shows the question's subject."""
        torch = _torch()
        img = b["img"]
        x = torch.nn.functional.normalize(img + self.see(img), dim=-1)
        cs = (x * b["subj"][:, None, :]).sum(-1)
        cn = (x * b["none"][:, None, :]).sum(-1)
        return self.presence[0] * (cs - cn) + self.presence[1]

    def read_one(self, x: Any, subj: Any, none: Any, opts: Any) -> tuple[Any, Any]:
        """Single frames: ``x`` [B, D], texts ``subj``/``none`` [B, D], ``opts`` [B, K, D] -> (option logits [B, K],
        presence logit [B]) (what the cold start's per-frame reading loss trains)."""
        b = {"img": x[:, None, :], "subj": subj, "none": none}
        pres = self.presence_logits(b)[:, 0]
        proj = _torch().nn.functional.normalize(x + self.read(x), dim=-1)
        return self.log_alpha.exp() * (proj[:, None, :] * opts).sum(-1), pres

    def read_frames(self, b: dict[str, Any]) -> tuple[Any, Any]:
        """-> (answer logits [B, K] masked, evidence features [B, EVIDENCE_DIM])."""
        torch = _torch()
        img, pos, lengths = b["img"], b["pos"], b["lengths"]
        B, N, D = img.shape
        valid = torch.arange(N)[None, :] < lengths[:, None]
        pres = self.presence_logits(b)  # [B, N] logit "this frame shows the subject"
        w = (pres * self.log_focus.exp()).masked_fill(~valid, -1e9).softmax(-1)
        proj = torch.nn.functional.normalize(img + self.read(img), dim=-1)
        e = torch.einsum("bnd,bkd->bnk", proj, b["opts"])  # cos(frame, "<option> <subject>")
        colour = self.log_alpha.exp() * (w[..., None] * e).sum(1)
        # frames inside the asked interval only (contiguous once sorted by label)
        p = torch.sigmoid(pres) * valid * pos[..., 1]
        prev = torch.cat([torch.zeros_like(p[:, :1]), p[:, :-1]], 1)
        n = (p * (1 - prev)).sum(1)  # soft number of runs of subject frames = events counted
        inside = (pos[..., 1] * valid).sum(1)
        trust = torch.nn.functional.softplus(self.trust[0] * inside + self.trust[1])
        count = -(self.log_beta.exp() * trust)[:, None] * (n[:, None] - b["opt_val"]) ** 2
        ans = torch.where(b["is_count"][:, None] > 0, count, colour).masked_fill(~b["opt_mask"], -1e9)
        ps = torch.sigmoid(pres).masked_fill(~valid, 0.0)
        conf = ans.softmax(-1).max(-1).values
        evidence = torch.stack([ps.max(1).values, conf, (inside / 8).clamp(max=2), n / 4], -1)
        return ans, evidence

    def forward(self, b: dict[str, Any]) -> tuple[Any, Any]:
        """-> (action logits [B, 3] masked, answer logits [B, K] masked)."""
        torch = _torch()
        ans, evidence = self.read_frames(b)
        z = torch.cat([b["q"], b["state"], evidence.detach()], -1)
        act = self.action_head(z).masked_fill(~b["action_mask"], -1e9)
        return act, ans

    # ---- the policy's side: what the network is shown, and its decisions as text ------------------------
    def featurize(self, obs: Observation, emb: Embedder, max_calls: int = 5) -> Features:
        return featurize(obs, emb, max_calls)

    def render(self, obs: Observation, f: Features, action: int, letter: str | None) -> str:
        return render(obs, action, letter)


EVIDENCE_DIM = 4


@dataclass
class Features:
    """One decision point as tensors (what the network sees)."""

    img: Any  # [N, D] unit image embeddings of the frames, sorted by label, one per label
    pos: Any  # [N, 2] label / total, inside the question's interval
    q: Any  # [D] question text embedding
    subj: Any  # [D] subject text embedding ("triangle")
    none: Any  # [D] "no shape"
    opts: Any  # [K, D] "<option> <subject>" text embeddings
    opt_val: Any  # [K] the number each option names (-1: none)
    is_count: float  # the question asks "how many"
    state: Any  # [STATE_DIM]
    action_mask: Any  # [3] bool
    n_obs: int  # frames in the latest observation (their tokens are masked out of the loss)
    labels: list[int] = field(default_factory=list)  # the frames' labels, in the order of ``img``
    frame_target: Any = None  # [N] teacher's "shows the subject" per frame (cold start only; -1 unknown)
    # the where-to-look policy's extras (``where.where_featurize``; None for the basic policy)
    anchor: Any = None  # [D] the anchor's text embedding ("star"; "no shape" when the question names none)
    has_anchor: float = 0.0
    latest: Any = None  # [N] 1 for frames of the latest observation
    plan: Any = None  # ``where.Plan``: each action's arguments
    anchor_target: Any = None  # [N] teacher's "shows the anchor" (cold start only; -1 unknown)

    @staticmethod
    def collate(items: list[Features], max_options: int = 4) -> dict[str, Any]:
        torch = _torch()
        B = len(items)
        D = items[0].q.shape[0]
        N = max(1, max(f.img.shape[0] for f in items))
        K = max(max_options, max(f.opts.shape[0] for f in items))
        img = torch.zeros(B, N, D)
        pos = torch.zeros(B, N, 2)
        opts = torch.zeros(B, K, D)
        opt_val = torch.full((B, K), -1.0)
        opt_mask = torch.zeros(B, K, dtype=torch.bool)
        target = torch.full((B, N), -1.0)
        for i, f in enumerate(items):
            if f.frame_target is not None:
                target[i, : f.img.shape[0]] = f.frame_target
            img[i, : f.img.shape[0]] = f.img
            pos[i, : f.pos.shape[0]] = f.pos
            opts[i, : f.opts.shape[0]] = f.opts
            opt_val[i, : f.opts.shape[0]] = f.opt_val
            opt_mask[i, : f.opts.shape[0]] = True
        return {
            "img": img,
            "pos": pos,
            "lengths": torch.tensor([f.img.shape[0] for f in items]),
            "q": torch.stack([f.q for f in items]),
            "subj": torch.stack([f.subj for f in items]),
            "none": torch.stack([f.none for f in items]),
            "opts": opts,
            "opt_val": opt_val,
            "opt_mask": opt_mask,
            "is_count": torch.tensor([f.is_count for f in items]),
            "state": torch.stack([f.state for f in items]),
            "action_mask": torch.stack([f.action_mask for f in items]),
            "frame_target": target,
            **(Features._where_extras(items, N) if items[0].anchor is not None else {}),
        }

    @staticmethod
    def _where_extras(items: list[Features], N: int) -> dict[str, Any]:
        torch = _torch()
        B = len(items)
        latest = torch.zeros(B, N)
        anchor_target = torch.full((B, N), -1.0)
        for i, f in enumerate(items):
            latest[i, : f.latest.shape[0]] = f.latest
            if f.anchor_target is not None:
                anchor_target[i, : f.img.shape[0]] = f.anchor_target
        return {
            "anchor": torch.stack([f.anchor for f in items]),
            "has_anchor": torch.tensor([f.has_anchor for f in items]),
            "latest": latest,
            "anchor_target": anchor_target,
        }


def _key(im: np.ndarray) -> bytes:
    """Content key of a frame's pixels (shape + bytes)."""
    a = np.ascontiguousarray(im)
    return hashlib.blake2b(a.tobytes(), digest_size=16, person=str(a.shape).encode()[:16]).digest()


class Embedder:
    """CLIP embeddings of pixels and texts, memoised by content (pixel bytes / text)."""

    def __init__(self, clip: Any):
        self.clip = clip
        self._img: dict[bytes, np.ndarray] = {}
        self._txt: dict[str, np.ndarray] = {}

    def images(self, images: list[np.ndarray]) -> np.ndarray:
        keys = [_key(im) for im in images]
        todo = [i for i, k in enumerate(keys) if k not in self._img]
        if todo:
            shapes = {images[i].shape for i in todo}
            for shp in shapes:
                sel = [i for i in todo if images[i].shape == shp]
                emb = self.clip.embed_images(np.stack([images[i] for i in sel]), progress=False)
                for i, e in zip(sel, emb):
                    self._img[keys[i]] = e
        if len(self._img) > 200_000:
            self._img.clear()
        return np.stack([self._img[k] for k in keys]) if keys else np.zeros((0, self.clip.dim), np.float32)

    def texts(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self._txt]
        if todo:
            for t, e in zip(todo, self.clip.embed_texts(todo, progress=False)):
                self._txt[t] = e
        return np.stack([self._txt[t] for t in texts])


def frame_inputs(obs: Observation, emb: Embedder) -> tuple[list[int], np.ndarray, list[list[float]]]:
    """The frames a network reads: one per label (the first shown), sorted; their unit CLIP image embeddings;
    and each one's position (label / total, inside the asked interval or not)."""
    first: dict[int, np.ndarray] = {}
    for lab, im in obs.frames:
        first.setdefault(lab, im)
    labels = sorted(first)
    img = emb.images([first[lab] for lab in labels])
    img = img / np.maximum(np.linalg.norm(img, axis=-1, keepdims=True), 1e-6) if len(labels) else img
    total = max(1, obs.total)
    iv = obs.interval
    pos = [[lab / total, float(iv is not None and iv[0] <= lab < iv[1])] for lab in labels]
    return labels, img, pos


def featurize(obs: Observation, emb: Embedder, max_calls: int = 5) -> Features:
    """The network's inputs: frames (one per label, sorted), their CLIP embeddings, and the texts it reads with."""
    torch = _torch()
    labels, img, pos = frame_inputs(obs, emb)
    iv = obs.interval
    subj = subject(obs.question)
    q, s_emb, none = emb.texts([obs.question or "?", subj, NO_SHAPE])
    options = obs.options or ["?"]
    opts = emb.texts([option_text(o, subj) for o in options])
    mask = action_mask(obs, max_calls)
    n_clip = sum(c.name == P.CLIP for c in obs.calls)
    n_uni = sum(c.name == P.UNIFORM for c in obs.calls)
    state = [
        len(obs.calls) / max_calls,
        float(n_clip > 0),
        n_uni / max_calls,
        float(P.UNIFORM in obs.tools),
        float(P.CLIP in obs.tools),
        float(obs.final),
        len(obs.frames) / 56.0,
        float(iv is not None),
    ]
    return to_features(obs, labels, img, pos, (q, s_emb, none, opts), options, state, torch.tensor(mask))


def to_features(
    obs: Observation,
    labels: list[int],
    img: np.ndarray,
    pos: list[list[float]],
    texts: tuple[Any, Any, Any, Any],
    options: list[str],
    state: list[float],
    action_mask: Any,
) -> Features:
    """The network's inputs as tensors: the frames' embeddings and positions, the question, subject, "no shape"
    and option text embeddings ``texts``, the options' values, the call state and the action mask."""
    torch = _torch()
    q, s_emb, none, opts = texts
    f32 = torch.float32
    return Features(
        img=torch.from_numpy(np.asarray(img, np.float32)).reshape(len(labels), -1),
        pos=torch.tensor(pos, dtype=f32).reshape(len(labels), 2),
        q=torch.from_numpy(np.asarray(q, np.float32)),
        subj=torch.from_numpy(np.asarray(s_emb, np.float32)),
        none=torch.from_numpy(np.asarray(none, np.float32)),
        opts=torch.from_numpy(np.asarray(opts, np.float32)),
        opt_val=torch.tensor([option_value(o) for o in options], dtype=f32),
        is_count=float(bool(_HOW_MANY.search(obs.question))),
        state=torch.tensor(state, dtype=f32),
        action_mask=action_mask,
        n_obs=obs.last_frames,
        labels=labels,
    )


@dataclass
class Decision:
    """One sampled turn: what was decided, its log-probability under the sampling policy, and the text."""

    features: Features
    action: int
    letter: int  # option index (-1 when the action is a tool call)
    logp: float
    text: str


def decision_logp(
    net: ToyPolicyNet, batch: dict[str, Any], actions: Any, letters: Any
) -> tuple[Any, Any, Any]:
    """Per-token log-probs [B, 2] (action token, answer-letter token; the letter is 0 when no answer) and its mask,
    plus the per-step entropy."""
    torch = _torch()
    act_logits, ans_logits = net(batch)
    la = act_logits.log_softmax(-1)
    lb = ans_logits.log_softmax(-1)
    tok_a = la.gather(1, actions[:, None]).squeeze(1)
    is_ans = letters >= 0
    tok_b = lb.gather(1, letters.clamp(min=0)[:, None]).squeeze(1)
    tok = torch.stack([tok_a, torch.where(is_ans, tok_b, torch.zeros_like(tok_b))], 1)
    mask = torch.stack([torch.ones_like(is_ans), is_ans], 1).float()
    pa = la.exp()
    ent = -(pa * la.masked_fill(pa == 0, 0)).sum(-1)
    pb = lb.exp()
    ent = ent + torch.where(is_ans, -(pb * lb.masked_fill(pb == 0, 0)).sum(-1), torch.zeros_like(ent))
    return tok, mask, ent


class ToyPolicy:
    """A ``vidlab.understanding.messages.Policy``: the trained toy network + the toy CLIP, sampling structured turns."""

    def __init__(self, net: ToyPolicyNet, clip: Any, name: str = "toy", max_calls: int = 5):
        self.net = net.eval()
        self.clip = clip
        self.embedder = Embedder(clip)
        self.name = name
        self.max_calls = max_calls

    @property
    def actions(self) -> tuple[str, ...]:
        """The action set: ``ACTIONS`` (basic) or ``where.WHERE_ACTIONS``."""
        return tuple(self.net.ACTIONS)

    def featurize(self, obs: Observation) -> Features:
        """What the network is shown at this decision (the where policy also plans each action's arguments)."""
        return self.net.featurize(obs, self.embedder, self.max_calls)

    def render(self, obs: Observation, f: Features, action: int, letter: str | None) -> str:
        """A decision as protocol text."""
        return self.net.render(obs, f, action, letter)

    def _logits(self, messages: list[Message]) -> tuple[Observation, Features, Any, Any]:
        torch = _torch()
        obs = observe(messages)
        f = self.featurize(obs)
        with torch.no_grad():
            act_logits, ans_logits = self.net(Features.collate([f]))
        return obs, f, act_logits[0], ans_logits[0]

    def _sample(
        self, obs: Observation, f: Features, la: Any, lb: Any, temperature: float, generator: Any
    ) -> Decision:
        torch = _torch()
        if temperature and temperature > 0:
            a = int(torch.multinomial((la / temperature).softmax(-1), 1, generator=generator))
            b = int(torch.multinomial((lb / temperature).softmax(-1), 1, generator=generator))
        else:
            a, b = int(la.argmax()), int(lb.argmax())
        b = min(b, max(1, len(obs.options)) - 1)
        logp = float(la.log_softmax(-1)[a])
        letter = -1
        if self.actions[a] == "answer":
            letter = b
            logp += float(lb.log_softmax(-1)[b])
        text = self.render(obs, f, a, chr(65 + letter) if letter >= 0 else None)
        return Decision(f, a, letter, logp, text)

    def act(self, messages: list[Message], temperature: float = 1.0, generator: Any = None) -> Decision:
        """Read the conversation, then sample (or, at temperature 0, pick) one decision and render it."""
        return self._sample(*self._logits(messages), temperature, generator)

    def generate(
        self,
        messages: list[Message],
        *,
        num_samples: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = 512,
        seed: int | None = None,
    ) -> list[str]:
        """``num_samples`` turns; temperature 0 is greedy; a seed makes sampling reproducible."""
        torch = _torch()
        gen = torch.Generator().manual_seed(int(seed)) if seed is not None else None
        obs, f, la, lb = self._logits(messages)
        return [self._sample(obs, f, la, lb, temperature, gen).text for _ in range(num_samples)]

    # ----- persistence ------------------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike, clip_dir: str | os.PathLike | None = None) -> Path:
        """``policy.safetensors`` + ``policy.json`` (the net's config; where the CLIP lives), written atomically."""
        from safetensors.torch import save_file

        from vidlab.io import atomic_tmp_path, atomic_write_json, commit_tmp

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        tmp = atomic_tmp_path(d / "policy.safetensors")
        save_file({k: v.detach().contiguous() for k, v in self.net.state_dict().items()}, str(tmp))
        commit_tmp(tmp, d / "policy.safetensors")
        atomic_write_json(d / "policy.json", {"net": asdict(self.net.cfg), "clip": str(clip_dir or "clip")})
        return d
