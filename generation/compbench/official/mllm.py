"""MLLM grid scoring (official: LLaVA-v1.6-34B), for consistent attribute binding and action binding.

Official pipeline (``MLLM_eval/eval_*.py``): 16 frames at ``linspace(0, total-1, 16, dtype=int)``; of those,
6 at ``linspace(0, 15, 6, dtype=int)`` = 0, 3, 6, 9, 12, 15, tiled as a 3-row x 2-column grid
(:func:`make_grid`). A two-turn conversation on the grid: Q1 asks for a description, Q2 asks for options
or a score in JSON. Reply -> score:

* ``consistent_attr``: the option pair maps to 5 / 4.5 / 4 / 3.5 / 3 / 2.8 / 2.5 / 2 / 1.5 / 1
  (:data:`CONSISTENT_ATTR_SCORES`); normalised ``(s - 1) / 4``;
* ``action_binding``: the JSON ``score`` 0..5; normalised ``s / 5``.

A reply without a usable answer is the official "bad reply": skipped in the category mean (``score:
None``). ``dynamic_attr`` (D-LLaVA, frame-wise) and ``interaction`` are not re-implemented here: run the
official scripts and merge their CSVs (``score.ingest``).

Backend interface (``score.mllm=module:factory``; the factory returns an object with)::

    def chat(self, image: np.ndarray, questions: list[str]) -> list[str]
        # one conversation about the uint8 [H, W, 3] grid image: ask questions[0], keep the reply in the
        # history, ask questions[1], ...; return the replies (official: temperature 0.2, 512 new tokens)
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import numpy as np

from vidlab.generation.compbench.metrics import VideoContext, build_backend

GRID_FRAMES = 6
SUPPORTED = ("consistent_attr", "action_binding")


class MLLMBackend(Protocol):
    def chat(self, image: np.ndarray, questions: list[str]) -> list[str]: ...


def grid_indices(n_frames: int = 16, n: int = GRID_FRAMES) -> list[int]:
    return [int(i) for i in np.linspace(0, n_frames - 1, n, dtype=int)]


def make_grid(frames16: np.ndarray) -> np.ndarray:
    """The official 3x2 grid of 6 of the 16 sampled frames (rows: (0, 1), (2, 3), (4, 5) of the six)."""
    six = [frames16[i] for i in grid_indices(len(frames16))]
    rows = [np.concatenate((six[2 * r], six[2 * r + 1]), axis=1) for r in range(3)]
    return np.concatenate(rows, axis=0)


def extract_json(text: str) -> dict[str, Any] | None:
    """The official parser: the substring from the first '{' to the last '}' as JSON, else None."""
    start, end = text.find("{"), text.rfind("}") + 1
    try:
        obj = json.loads(text[start:end])
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _pairs(a: str, b: str) -> tuple[str, str]:
    return f"{a}1,{b}2", f"{b}2,{a}1"


CONSISTENT_ATTR_SCORES: dict[str, float] = {}
for _pair, _score in (
    (("A", "A"), 5.0),
    (("A", "B"), 4.5),
    (("B", "A"), 4.5),
    (("B", "B"), 4.0),
    (("A", "C"), 3.5),
    (("C", "A"), 3.5),
    (("A", "D"), 3.0),
    (("D", "A"), 3.0),
    (("B", "C"), 2.8),
    (("C", "B"), 2.8),
    (("B", "D"), 2.5),
    (("D", "B"), 2.5),
    (("C", "C"), 2.0),
    (("C", "D"), 1.5),
    (("D", "C"), 1.5),
    (("D", "D"), 1.0),
):
    for _key in _pairs(*_pair):
        CONSISTENT_ATTR_SCORES[_key] = _score


def consistent_attr_questions(phrase_1: str, phrase_2: str) -> list[str]:
    q1 = (
        "The provided image arranges key frames from a video in a grid view.  Describe the video within 20 words, "
        "carefully examining the characters or objects throughout the frames and their visible attributes."
    )
    opts = []
    for k, ph in ((1, phrase_1), (2, phrase_2)):
        opts.append(
            f"Question {k}: \n A{k}: '{ph}' is clearly portrayed throughout the frames. \n "
            f"B{k}: '{ph}' is present in some frames. \n C{k}: '{ph}' is not correctly portrayed. \n "
            f"D{k}: '{ph}' is not present. \n "
        )
    q2 = (
        "According to your previous description, please select one answer from options A1 to D1 for the first "
        "multiple choice question, and select one answer from options A2 to D2 for the second one. \n "
        + "".join(opts)
        + "Seperate the two options by a comma and put it in JSON format with the following keys: option "
        "(e.g., A1,B2), explanation (within 20 words)."
    )
    return [q1, q2]


def score_consistent_attr(reply: str) -> float | None:
    """Raw official score 1..5 of the second reply, or None ("bad reply")."""
    obj = extract_json(reply)
    if obj is None or "option" not in obj:
        return None
    return CONSISTENT_ATTR_SCORES.get(str(obj["option"]).replace(" ", ""))


def action_binding_questions(prompt: str, meta: dict[str, Any]) -> list[str]:
    obj1, act1 = (str(x).rstrip("?").strip() for x in meta["phrase_0"][:2])
    obj2, act2 = (str(x).rstrip("?").strip() for x in meta["phrase_1"][:2])
    q1 = (
        "The provided image arranges key frames from a video in a grid view. Describe the video within 20 words, "
        "highlight all the characters or objects that appear throughout the frames and indicate how they act."
    )
    q2 = (
        f"According to the video and your previous answer, evaluate if the text '{prompt}' is correctly portrayed "
        "in the video. Assign a score from 0 to 5 according the criteria: "
        f"5: Both {obj1} and {obj2} are present, and {act1}, {act2}. "
        f"4: Both {obj1} and {obj2} are present, but only one of the actions (either {act1} or {act2}) is depicted. "
        f"3: Both {obj1} and {obj2} are present, neither of the actions are depicted. "
        f"2: Only one of {obj1} or {obj2} is present, and its action matches the text. "
        f"1: Only one of {obj1} or {obj2} is present, but its action does not match the text. "
        f"0: Neither {obj1} nor {obj2} appears in the video. "
        "Provide your analysis and explanation in JSON format with the following keys: score (e.g., 2), "
        "explanation (within 20 words)."
    )
    return [q1, q2]


def score_action_binding(reply: str) -> float | None:
    obj = extract_json(reply)
    try:
        return float(obj["score"]) if obj is not None else None
    except (KeyError, TypeError, ValueError):
        return None


def score_grid(
    backend: MLLMBackend, category: str, prompt: str, meta: dict[str, Any], frames16: np.ndarray
) -> dict:
    """Ask the backend about the official grid and score its reply; ``score`` is normalised to [0, 1]."""
    if category == "consistent_attr":
        p1, p2 = (s.strip() for s in str(meta["phrases"]).split(";")[:2])
        questions, parse, norm = (
            consistent_attr_questions(p1, p2),
            score_consistent_attr,
            lambda s: (s - 1) / 4,
        )
    elif category == "action_binding":
        questions, parse, norm = action_binding_questions(prompt, meta), score_action_binding, lambda s: s / 5
    else:
        return {
            "score": None,
            "reason": f"MLLM category {category!r} is scored by the official scripts (ingest)",
        }
    replies = backend.chat(make_grid(frames16), questions)
    raw = parse(replies[-1]) if replies else None
    return {
        "score": None if raw is None else float(norm(raw)),
        "raw": raw,
        "replies": replies,
        "reason": "bad reply" if raw is None else None,
    }


class OfficialMLLM:
    name = "official_mllm"
    description = "official MLLM grid score (consistent_attr, action_binding) with a user-supplied backend"

    def __init__(self, cfg: Any, suite: Any) -> None:
        self.backend = build_backend(cfg.mllm, "mllm")

    def score(self, ctx: VideoContext) -> dict[str, Any]:
        if ctx.prompt.category not in SUPPORTED:
            return {"score": None, "reason": f"not an in-process MLLM category ({', '.join(SUPPORTED)})"}
        if not ctx.prompt.meta:
            return {"score": None, "reason": "the benchmark folder has no metadata for this category"}
        return score_grid(self.backend, ctx.prompt.category, ctx.prompt.text, ctx.prompt.meta, ctx.frames())
