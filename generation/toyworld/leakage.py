"""Attribute leakage of a text encoder on the toy world's two-subject prompts: SCI's premise, measured.

SCI exists because contextual encoders smear one subject's attributes into the other subject's tokens. On a
relation prompt "a red circle to the left of a blue square" (subject A = red circle, B = blue square), with each
word's state taken from the encoder's output (the mean of its tokens; toy-world words are one or two pieces):

- **attribute similarity**: the cosine of each subject's shape-word state to its *own* colour word's state and to
  the *other* subject's colour word's state (and the same for each colour word against the two shape words);
  ``sim_gap`` = own - other (how much more a subject's noun resembles its own attribute than the other's);
- **colour-swap leakage**: change one subject's colour word to a colour neither subject has and measure how far
  the *other* subject's shape-word state moves (``1 - cos``), against how far the subject's *own* shape-word state
  moves; ``swap_leak_ratio`` = other / own. 0: each subject's tokens ignore the other subject's words (no leakage);
  1: a colour word reaches the other subject's noun as strongly as its own. The scale of a move: how far a
  shape-word state moves when the shape word itself is replaced (``other_move_over_shape_word_change``: the
  leaked change as a share of a change of content).

``leakage(states_fn, prompts)`` works on any ``states_fn(prompts) -> list of [n_words, d] tensors`` (one row per
whitespace word), so the metric is tested on constructed encoders whose answer is known; ``pipeline_states_fn``
and ``minilm_states_fn`` adapt a toy-world pipeline's text encoder and the frozen MiniLM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

StatesFn = Callable[[list[str]], list[Any]]


def two_subject_prompts(prompts: Sequence[str] | None = None) -> list[str]:
    """Relation prompts whose two subjects differ in colour and in shape (default: every such grammar caption)."""
    from vidlab.generation.toyworld.world import all_captions, parse_caption

    out = []
    for p in prompts if prompts is not None else all_captions("relation"):
        c = parse_caption(p)
        if (
            c.kind == "relation"
            and len({s[0] for s in c.subjects}) == 2
            and len({s[1] for s in c.subjects}) == 2
        ):
            out.append(p)
    return out


def _positions(prompt: str) -> tuple[tuple[int, int], tuple[int, int], list[tuple[str, str]]]:
    """Word indices (colour, shape) of subjects A and B, and the subjects."""
    from vidlab.generation.toyworld.world import parse_caption

    words = prompt.split()
    subs = [tuple(s[:2]) for s in parse_caption(prompt).subjects]
    ia = words.index(subs[0][0])
    ib = words.index(subs[1][0], ia + 2)
    return (ia, ia + 1), (ib, ib + 1), subs  # type: ignore[return-value]


def _replacement(prompt: str, k: int, shape: bool = False) -> str:
    """A colour (``shape``: a shape) neither subject has (the ``k``-th such, cyclically)."""
    from vidlab.generation.toyworld.world import COLOURS, SHAPES

    words = set(prompt.split())
    free = [c for c in (SHAPES if shape else COLOURS) if c not in words]
    return free[k % len(free)]


def _cos(a: Any, b: Any) -> float:
    import torch.nn.functional as F

    return float(F.cosine_similarity(a.float()[None], b.float()[None], dim=-1)[0])


def leakage(states_fn: StatesFn, prompts: Sequence[str], batch: int = 64) -> dict[str, Any]:
    """The leakage figures of one encoder (means over ``prompts`` and both subjects; see the module docstring)."""
    prompts = list(prompts)
    variants: list[str] = []
    for k, p in enumerate(prompts):
        (ca, sa), (cb, _), _ = _positions(p)
        new = _replacement(p, k)
        words = p.split()
        for pos, word in ((ca, new), (cb, new), (sa, _replacement(p, k, shape=True))):
            w = list(words)
            w[pos] = word
            variants.append(" ".join(w))
    texts = prompts + variants
    states: list[Any] = []
    for i in range(0, len(texts), batch):
        states += list(states_fn(texts[i : i + batch]))
    base, var = states[: len(prompts)], states[len(prompts) :]
    own_sim, other_sim, own_move, other_move, word_move = [], [], [], [], []
    for k, p in enumerate(prompts):
        (ca, sa), (cb, sb), _ = _positions(p)
        h = base[k]
        for (c, s), (oc, _) in (((ca, sa), (cb, sb)), ((cb, sb), (ca, sa))):
            own_sim.append(_cos(h[s], h[c]))
            other_sim.append(_cos(h[s], h[oc]))
        word_move.append(1.0 - _cos(var[3 * k + 2][sa], h[sa]))  # A's shape word itself replaced
        for j, (changed_shape, kept_shape) in enumerate(((sa, sb), (sb, sa))):  # A's colour changed, then B's
            v = var[3 * k + j]
            own_move.append(1.0 - _cos(v[changed_shape], h[changed_shape]))
            other_move.append(1.0 - _cos(v[kept_shape], h[kept_shape]))
    own_m, other_m = float(np.mean(own_move)), float(np.mean(other_move))
    ratios = [o / w for o, w in zip(other_move, own_move) if w > 1e-9]
    return {
        "prompts": len(prompts),
        "shape_to_own_colour_cos": round(float(np.mean(own_sim)), 4),
        "shape_to_other_colour_cos": round(float(np.mean(other_sim)), 4),
        "sim_gap": round(float(np.mean(own_sim) - np.mean(other_sim)), 4),
        "own_shape_move_when_own_colour_changed": round(own_m, 5),
        "other_shape_move_when_colour_changed": round(other_m, 5),
        "swap_leak_ratio": round(other_m / own_m, 4) if own_m > 1e-12 else None,
        "swap_leak_ratio_per_prompt_median": round(float(np.median(ratios)), 4) if ratios else None,
        "shape_move_when_shape_word_changed": round(float(np.mean(word_move)), 5),
        "other_move_over_shape_word_change": round(other_m / float(np.mean(word_move)), 4),
    }


def word_rows(tokenizer: Any, hidden: Any, texts: Sequence[str]) -> list[Any]:
    """Per-word states ``[n_words, d]`` from token states ``[B, L, d]``: each whitespace word's tokens averaged,
    found through the tokenizer's offset mapping (special tokens and pieces without characters skipped)."""
    import torch

    out = []
    for i, t in enumerate(texts):
        enc = tokenizer(t, return_offsets_mapping=True, add_special_tokens=True)
        offsets = enc["offset_mapping"]
        spans, pos = [], 0
        for w in t.split():
            s = t.index(w, pos)
            spans.append((s, s + len(w)))
            pos = s + len(w)
        rows = []
        for s, e in spans:
            toks = [j for j, (a, b) in enumerate(offsets) if b > a and a < e and b > s]
            if not toks:
                raise ValueError(f"word at {s}:{e} of {t!r} maps to no token")
            rows.append(hidden[i, toks].float().mean(0))
        out.append(torch.stack(rows))
    return out


def pipeline_states_fn(pipe: Any) -> StatesFn:
    """Word states of a toy-world pipeline's text encoder output (what the transformer's text projection reads)."""
    import torch

    def fn(texts: list[str]) -> list[Any]:
        enc = pipe.tokenizer(texts, padding="longest", return_tensors="pt")
        with torch.no_grad():
            h = pipe.text_encoder(enc.input_ids, enc.attention_mask).last_hidden_state
        return word_rows(pipe.tokenizer, h, texts)

    return fn


def minilm_states_fn() -> StatesFn:
    """Word states of the frozen MiniLM's last layer (384-d; the ``minilm`` extra)."""
    from vidlab.generation.toyworld.minilm import load_tokenizer, minilm_states

    tok = load_tokenizer()

    def fn(texts: list[str]) -> list[Any]:
        enc = tok(texts, padding="longest", return_tensors="pt")
        return word_rows(tok, minilm_states(enc.input_ids, enc.attention_mask), texts)

    return fn
