"""The where-to-look policy: the toy policy's reader, plus tool *arguments* chosen from what it saw.

The basic toy policy (``policy.py``) chooses *whether* and *which* tool; its arguments are a fixed rule over the
question. This one chooses among seven actions, each a tool with its arguments:

======================  ===========================================================================================
``answer``              answer now
``clip_subject``        ``clip_sample(0, total, <subject>)``: a coarse search for the question's noun ("triangle")
``clip_anchor``         ``clip_sample(0, total, <anchor>)``: a coarse search for the event the question is anchored
                        on ("... just before the star appeared?" -> "star"); only when the question names one
``uniform_all``         ``uniform_sample`` over the question's interval (else the whole video)
``uniform_split``       ``uniform_sample`` over the next half, then quarter, ... of that interval
``uniform_quarter``     ``uniform_sample`` over the next quarter of that interval not yet looked at (four of them
                        cover it 4x denser than one call: short events that two halves miss)
``zoom_around``         ``uniform_sample(f - step, f + step)`` around the focus ``f`` of the latest observation
``zoom_before``         ``uniform_sample(f - 2 step, f)`` just before the first anchor frame ``f`` of the latest
                        observation (questions with an anchor)
======================  ===========================================================================================

``step`` is the sampling stride of the call that produced the latest observation (``clip_sample``: its range over
its candidate count, e.g. ``total / 128``; ``uniform_sample``: its range over 7), so a zoom looks at the region of
one step either side of what the last call found, 3.5x denser; a zoom after a zoom looks closer again.
Zooms need a previous call. **What the reader saw decides the arguments**: the focus is the frame of the latest
observation that the reader rates most like the subject (its learned presence plus the CLIP similarity to the
subject, so a region of look-alikes, such as the grey triangle, is found even before the lit frame is);
the anchor frame is the earliest frame of the latest observation that the reader says shows the anchor (else the
one most similar to it). The reader's findings on the latest observation also go into the action head, so the
next action depends on what the last call showed.

Reading (``WhereNet``) extends the basic reader by one relation: for questions with an anchor, each frame's weight
in the colour read-out is multiplied by how much the *next* frame in view (by label) shows the anchor, so "the
square just before the star" reads the square that the star follows, not any square in view.
It never sees ground truth, paths or frame metadata: only the conversation's text and pixels, as the basic policy.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from vidlab.understanding import protocol as P
from vidlab.understanding.agents import clip_candidate_count
from vidlab.understanding.toyworld.policy import (
    _HOW_MANY,
    NO_SHAPE,
    Embedder,
    Features,
    Observation,
    ToyPolicyNet,
    frame_inputs,
    option_text,
    subject,
    to_features,
    uniform_ranges,
)

WHERE_ACTIONS = (
    "answer",
    "clip_subject",
    "clip_anchor",
    "uniform_all",
    "uniform_split",
    "zoom_around",
    "zoom_before",
    "uniform_quarter",  # appended last: a network saved with the first seven actions loads (``WhereNet``)
)
CALL_KINDS = ("clip_subject", "clip_anchor", "uniform_all", "uniform_split", "zoom")
WHERE_STATE_DIM = 6 + 2 * len(CALL_KINDS)
WHERE_EVIDENCE_DIM = 9  # the last one (frames per run of the subject) appended last, as the action above
MIN_RANGE = 8  # a shorter uniform_sample range ends the episode (the reference's rule)
_ANCHOR = re.compile(r"\bbefore the (\w+)", re.I)


def anchor_of(question: str) -> str | None:
    """The event a question is anchored on ("... just before the star appeared?" -> "star"), else None."""
    m = _ANCHOR.search(question)
    return m.group(1).lower() if m else None


def call_stride(call: P.ToolCall) -> float:
    """The sampling stride of a call: ``clip_sample`` over its candidates (range / K), ``uniform_sample`` over its
    8 frames (range / 7)."""
    s, e = int(call.args["start_frame"]), int(call.args["end_frame"])
    if call.name == P.CLIP:
        return (e - s) / max(1, clip_candidate_count(s, e))
    return max(1, e - s - 1) / 7


def _fit(s: int, e: int, total: int, min_len: int = MIN_RANGE) -> tuple[int, int] | None:
    """Clip ``[s, e)`` to the video, widened to ``min_len`` frames (None when the video is shorter)."""
    if total < min_len:
        return None
    if e - s < min_len:
        pad = min_len - (e - s)
        s, e = s - pad // 2, e + pad - pad // 2
    if s < 0:
        s, e = 0, e - s
    if e > total:
        s, e = s - (e - total), total
    s, e = max(0, s), min(total, e)
    return (int(s), int(e)) if e - s >= min_len else None


def window_around(focus: int, step: float, total: int) -> tuple[int, int] | None:
    """``[focus - step, focus + step]`` (at least 8 frames, inside the video)."""
    return _fit(int(round(focus - step)), int(round(focus + step)) + 1, total)


def window_before(focus: int, step: float, total: int) -> tuple[int, int] | None:
    """``[focus - 2 step, focus)``: what happened just before the focus frame (at least 8 frames; None when the
    focus is among the first 8 frames)."""
    e = min(int(focus), total)
    s = max(0, min(int(round(focus - 2 * step)), e - MIN_RANGE))
    return (s, e) if e - s >= MIN_RANGE else None  # nothing to see before the first 8 frames


def split_ranges(lo: int, hi: int, total: int) -> list[tuple[int, int]]:
    """``uniform_split``'s ranges, in order: the halves of ``[lo, hi)``, then its quarters, ..."""
    return list(_split_ranges(int(lo), int(hi), int(total)))


@functools.lru_cache(maxsize=4096)
def _split_ranges(lo: int, hi: int, total: int) -> tuple[tuple[int, int], ...]:
    return tuple(r for r in uniform_ranges(lo, hi, total) if r != (lo, min(hi, total)))


def quarter_ranges(lo: int, hi: int, total: int) -> list[tuple[int, int]]:
    """``uniform_quarter``'s ranges, in order: the four quarters of ``[lo, hi)`` (those at least 8 frames long)."""
    hi = min(hi, total)
    out = [(lo + (hi - lo) * p // 4, lo + (hi - lo) * (p + 1) // 4) for p in range(4)]
    return [r for r in out if r[1] - r[0] >= MIN_RANGE]


def _dup(call: tuple[str, Any], done: list[P.ToolCall]) -> bool:
    name, args = call
    for c in done:
        if c.name != name:
            continue
        if name == P.CLIP and c.args["prompt"] == args[2]:
            return True
        if (
            name == P.UNIFORM
            and abs(c.args["start_frame"] - args[0]) <= 1
            and abs(c.args["end_frame"] - args[1]) <= 1
        ):
            return True
    return False


def call_kind(call: P.ToolCall, obs: Observation) -> str:
    """Which of ``CALL_KINDS`` a previous call was (read back from its arguments)."""
    anchor = anchor_of(obs.question)
    if call.name == P.CLIP:
        return "clip_anchor" if anchor and call.args["prompt"] == anchor else "clip_subject"
    lo, hi = obs.interval or (0, obs.total)
    s, e = call.args["start_frame"], call.args["end_frame"]
    if abs(s - lo) <= 1 and abs(e - min(hi, obs.total)) <= 1:
        return "uniform_all"
    if (s, e) in split_ranges(lo, hi, obs.total):
        return "uniform_split"
    return "zoom"


@dataclass
class Plan:
    """Each action's tool call (name, (start, end[, prompt])) or None when the action is not possible now, plus
    what the reader saw that the zooms use: the focus frame, the anchor frame and the stride they zoom by."""

    calls: list[tuple[str, tuple] | None]
    focus: int | None = None
    anchor_frame: int | None = None
    step: float = 0.0


def plan(
    obs: Observation,
    focus: int | None,
    anchor_frame: int | None,
    max_calls: int = 5,
) -> Plan:
    """Every action's arguments given the conversation and the reader's focus / anchor frame."""
    subj = subject(obs.question)
    anchor = anchor_of(obs.question)
    can_call = not obs.final and len(obs.calls) < max_calls and obs.total > 0
    calls: list[tuple[str, tuple] | None] = [("answer", ())]
    step = call_stride(obs.calls[-1]) if obs.calls else 0.0

    def ok(call: tuple[str, tuple] | None) -> tuple[str, tuple] | None:
        if call is None or not can_call or call[0] not in obs.tools or _dup(call, obs.calls):
            return None
        return call

    calls.append(ok((P.CLIP, (0, obs.total, subj))))
    calls.append(ok((P.CLIP, (0, obs.total, anchor))) if anchor else None)
    lo, hi = obs.interval or (0, obs.total)
    whole = (lo, min(hi, obs.total))
    calls.append(ok((P.UNIFORM, whole)) if whole[1] - whole[0] >= MIN_RANGE else None)
    nxt = next((r for r in split_ranges(lo, hi, obs.total) if not _dup((P.UNIFORM, r), obs.calls)), None)
    calls.append(ok((P.UNIFORM, nxt)) if nxt else None)
    w = window_around(focus, step, obs.total) if obs.calls and focus is not None else None
    calls.append(ok((P.UNIFORM, w)) if w else None)
    b = (
        window_before(anchor_frame, step, obs.total)
        if obs.calls and anchor and anchor_frame is not None
        else None
    )
    calls.append(ok((P.UNIFORM, b)) if b else None)
    q = next((r for r in quarter_ranges(lo, hi, obs.total) if not _dup((P.UNIFORM, r), obs.calls)), None)
    calls.append(ok((P.UNIFORM, q)) if q else None)
    return Plan(calls, focus, anchor_frame, step)


def render_where(obs: Observation, p: Plan, action: int, letter: str | None) -> str:
    """A decision as protocol text; the thinking says what the reader saw when it zooms."""
    n = len(obs.frames)
    name = WHERE_ACTIONS[action]
    if name == "answer":
        return f"<thinking>From the {n} frames I have seen, the answer is {letter}.</thinking><answer>{letter}</answer>"
    call = p.calls[action]
    assert call is not None, f"action {name} is not possible here"
    tool, a = call
    if tool == P.CLIP:
        args: dict[str, Any] = {"start_frame": a[0], "end_frame": a[1], "prompt": a[2]}
        why = f"The {n} frames may have missed the {a[2]}; search the whole video for it."
    else:
        args = {"start_frame": a[0], "end_frame": a[1]}
        why = {
            "uniform_all": f"I need a uniform look at frames {a[0]}-{a[1]}.",
            "uniform_split": f"I need a denser look at frames {a[0]}-{a[1]}.",
            "uniform_quarter": f"Brief events may fall between those frames; look at frames {a[0]}-{a[1]}.",
            "zoom_around": f"The {subject(obs.question)} looks closest at frame {p.focus}; zoom in on frames {a[0]}-{a[1]}.",
            "zoom_before": (
                f"The {anchor_of(obs.question)} shows at frame {p.anchor_frame}; look just before it, "
                f"frames {a[0]}-{a[1]}."
            ),
        }[name]
    return f"<thinking>{why}</thinking><tool_call>{json.dumps({'name': tool, 'arguments': args})}</tool_call>"


# ---------------------------------------------------------------------------------------------- network
def _torch():
    import torch

    return torch


class WhereNet(ToyPolicyNet):
    """The basic reader plus the anchor relation, and an action head over seven tool-with-argument actions."""

    ACTIONS = WHERE_ACTIONS

    def __init__(self, cfg: Any = None):
        torch = _torch()
        nn = torch.nn
        super().__init__(cfg)
        D, H = self.cfg.embed_dim, self.cfg.hidden
        # how strongly "the next frame shows the anchor" gates a frame's weight (questions with an anchor)
        self.log_relate = nn.Parameter(torch.tensor(0.0))
        self.action_head = nn.Sequential(
            nn.Linear(D + WHERE_STATE_DIM + WHERE_EVIDENCE_DIM, H),
            nn.Tanh(),
            nn.Linear(H, len(WHERE_ACTIONS)),
        )

    def read_frames(self, b: dict[str, Any]) -> tuple[Any, Any]:
        """-> (answer logits [B, K] masked, evidence features [B, WHERE_EVIDENCE_DIM])."""
        torch = _torch()
        F = torch.nn.functional
        img, pos, lengths = b["img"], b["pos"], b["lengths"]
        B, N, D = img.shape
        valid = torch.arange(N)[None, :] < lengths[:, None]
        latest = b["latest"] > 0
        pres = self.presence_logits(b)
        anc = self.presence_logits({**b, "subj": b["anchor"]})
        has_anchor = b["has_anchor"][:, None]
        nxt = torch.cat([anc[:, 1:], torch.full_like(anc[:, :1], -20.0)], 1)
        nxt_valid = torch.cat([valid[:, 1:], torch.zeros_like(valid[:, :1])], 1)
        nxt = nxt.masked_fill(~nxt_valid, -20.0)
        relate = F.logsigmoid(nxt) * self.log_relate.exp()
        logits_w = pres * self.log_focus.exp() + has_anchor * relate
        w = logits_w.masked_fill(~valid, -1e9).softmax(-1)
        proj = F.normalize(img + self.read(img), dim=-1)
        e = torch.einsum("bnd,bkd->bnk", proj, b["opts"])
        colour = self.log_alpha.exp() * (w[..., None] * e).sum(1)
        p = torch.sigmoid(pres) * valid * pos[..., 1]
        prev = torch.cat([torch.zeros_like(p[:, :1]), p[:, :-1]], 1)
        n = (p * (1 - prev)).sum(1)
        inside = (pos[..., 1] * valid).sum(1)
        trust = F.softplus(self.trust[0] * inside + self.trust[1])
        count = -(self.log_beta.exp() * trust)[:, None] * (n[:, None] - b["opt_val"]) ** 2
        ans = torch.where(b["is_count"][:, None] > 0, count, colour).masked_fill(~b["opt_mask"], -1e9)
        ps = torch.sigmoid(pres).masked_fill(~valid, 0.0)
        pa = torch.sigmoid(anc).masked_fill(~valid, 0.0)
        pn = torch.sigmoid(nxt)
        conf = ans.softmax(-1).max(-1).values
        evidence = torch.stack(
            [
                ps.max(1).values,
                (ps * latest).max(1).values,
                conf,
                (inside / 8).clamp(max=2),
                n / 4,
                (pa * latest).max(1).values * b["has_anchor"],
                (ps * pn).max(1).values * b["has_anchor"],
                valid.sum(1) / 56.0,
                # frames per run of the subject inside the interval: ~1 when the looks are sparser than the
                # events are long (a denser look may find more), more when each event spans several looks
                (p.sum(1) / n.clamp(min=0.5)).clamp(max=4) / 4,
            ],
            -1,
        )
        return ans, evidence

    def load_state_dict(self, state: Any, strict: bool = True, assign: bool = False) -> Any:
        """Load weights, also those saved before ``uniform_quarter`` and the run-length evidence were appended
        (seven actions, eight evidence features): the missing input column gets weight 0 and the missing
        action a logit bias of -30, so such a network acts exactly as it was trained (it never quarters)."""
        torch = _torch()
        state = dict(state)
        w0, w2, b2 = (state.get(f"action_head.{k}") for k in ("0.weight", "2.weight", "2.bias"))
        head0, head2 = self.action_head[0], self.action_head[2]
        if w0 is not None and w0.shape[1] < head0.in_features:
            pad = torch.zeros(w0.shape[0], head0.in_features - w0.shape[1], dtype=w0.dtype)
            state["action_head.0.weight"] = torch.cat([w0, pad], 1)
        if w2 is not None and b2 is not None and w2.shape[0] < head2.out_features:
            extra = head2.out_features - w2.shape[0]
            state["action_head.2.weight"] = torch.cat([w2, torch.zeros(extra, w2.shape[1], dtype=w2.dtype)])
            state["action_head.2.bias"] = torch.cat([b2, torch.full((extra,), -30.0, dtype=b2.dtype)])
        return super().load_state_dict(state, strict=strict, assign=assign)

    def presences(self, b: dict[str, Any]) -> tuple[Any, Any]:
        """[B, N] presence logits of the subject and of the anchor (for the focus and the anchor frame)."""
        return self.presence_logits(b), self.presence_logits({**b, "subj": b["anchor"]})

    # ---- the policy's side: features and text ----------------------------------------------------------
    def featurize(self, obs: Observation, emb: Embedder, max_calls: int = 5) -> Features:
        return where_featurize(obs, emb, self, max_calls)

    def render(self, obs: Observation, f: Features, action: int, letter: str | None) -> str:
        return render_where(obs, f.plan, action, letter)


def where_featurize(obs: Observation, emb: Embedder, net: WhereNet, max_calls: int = 5) -> Features:
    """The basic features plus the anchor text, the latest observation's frames, the call history, and the
    plan: each action's arguments from what the reader (``net``) sees in the latest observation."""
    torch = _torch()
    labels, img, pos = frame_inputs(obs, emb)
    iv = obs.interval
    latest_labels = (
        {lab for lab, _ in obs.frames[len(obs.frames) - obs.last_frames :]} if obs.calls else set()
    )
    latest = [float(lab in latest_labels) for lab in labels]
    subj = subject(obs.question)
    anchor = anchor_of(obs.question)
    q, s_emb, none, a_emb = emb.texts([obs.question or "?", subj, NO_SHAPE, anchor or NO_SHAPE])
    options = obs.options or ["?"]
    opts = emb.texts([option_text(o, subj) for o in options])
    kinds = [call_kind(c, obs) for c in obs.calls]
    last = [float(bool(kinds) and kinds[-1] == k) for k in CALL_KINDS]
    counts = [kinds.count(k) / max_calls for k in CALL_KINDS]
    state = [
        len(obs.calls) / max_calls,
        float(obs.final),
        float(iv is not None),
        float(anchor is not None),
        float(bool(_HOW_MANY.search(obs.question))),
        len(obs.frames) / 56.0,
        *counts,
        *last,
    ]
    f32 = torch.float32
    mask = torch.zeros(len(WHERE_ACTIONS), dtype=torch.bool)
    f = to_features(obs, labels, img, pos, (q, s_emb, none, opts), options, state, mask)
    f.anchor = torch.from_numpy(np.asarray(a_emb, np.float32))
    f.has_anchor = float(anchor is not None)
    f.latest = torch.tensor(latest, dtype=f32)
    focus, anchor_frame = None, None
    if obs.calls and latest_labels and labels:
        with torch.no_grad():
            b = Features.collate([f])
            pres, anc = net.presences(b)
        pres, anc = torch.sigmoid(pres[0]).numpy(), torch.sigmoid(anc[0]).numpy()
        x = np.asarray(img, np.float32)
        like_s = x @ np.asarray(s_emb, np.float32)
        like_a = x @ np.asarray(a_emb, np.float32)
        idx = [i for i, lab in enumerate(labels) if lab in latest_labels]
        focus = labels[max(idx, key=lambda i: pres[i] + like_s[i])]
        if anchor:
            shown = [i for i in idx if anc[i] > 0.5]
            anchor_frame = labels[shown[0]] if shown else labels[max(idx, key=lambda i: like_a[i])]
    f.plan = plan(obs, focus, anchor_frame, max_calls)
    f.action_mask = torch.tensor([c is not None for c in f.plan.calls])
    return f
