"""Adapters to metrics that live elsewhere in ``generation/`` (imported lazily, on first use).

``layout_faithfulness``: the non-circular attention measure (``vidlab.generation.attention_measure``): the share of
each subject's cross-attention inside its box, read only from maps LAM did not bias, beside the same
attention's share inside a mirrored (placebo) layout and the boxes' area (chance). It is computed during
generation (``measure_layout=true`` captures the maps; the baseline then runs with Comp-Attn installed but
inert, bit-identical to diffusers) and stored in the manifest; this adapter turns it into the per-video
score (``share``) with ``control_placebo`` and ``control_chance`` beside it.

``toyworld_shapes``: on videos of the generation toy-world model (prompts in the toy world's caption
grammar), the exact colour+shape detector of ``vidlab.generation.toyworld.detect`` checks what the caption asks
for, frame by frame: presence ("a red circle"), the exact count ("two yellow triangles"), the relation
between centres ("... to the left of ..."), or the motion direction between the first and the last sampled
frame ("... moving right"). Score = fraction of sampled frames that satisfy the caption (motion: 1 or 0).
Prompts outside the grammar get ``score: None`` with the reason.
"""

from __future__ import annotations

from typing import Any

from vidlab.generation.compbench.metrics import MetricError, VideoContext


class LayoutFaithfulness:
    name = "layout_faithfulness"
    description = "layout faithfulness by the non-circular attention measure (needs measure_layout=true)"

    @classmethod
    def check(cls, cfg: Any) -> None:
        try:
            import vidlab.generation.attention_measure  # noqa: F401
        except ImportError as e:
            raise MetricError(
                f"metric layout_faithfulness needs vidlab.generation.attention_measure ({e})"
            ) from e
        if not cfg.measure_layout:
            raise MetricError(
                "metric layout_faithfulness reads attention captured during generation: generate with "
                "measure_layout=true (a new job: use another out= or --overwrite)"
            )

    def __init__(self, cfg: Any, suite: Any) -> None:
        self.cfg = cfg

    def score(self, ctx: VideoContext) -> dict[str, Any]:
        f = ctx.row.get("layout_faithfulness")
        if not f:
            return {"score": None, "reason": "generated without measure_layout=true"}
        if "error" in f:
            return {"score": None, "reason": f["error"][:200]}
        return {
            "score": f["share"],
            "control_placebo": f.get("placebo_share"),
            "control_chance": f.get("chance"),
            "lift": f.get("lift"),
            "n_maps": f.get("n_maps"),
        }


_RELATION_AXES = {  # relation -> (axis, sign): subject centre minus object centre must have this sign
    "left of": (0, -1),
    "right of": (0, 1),
    "above": (1, -1),
    "below": (1, 1),
}
_MOTION_AXES = {"left": (0, -1), "right": (0, 1), "up": (1, -1), "down": (1, 1)}


def caption_satisfied(parsed: Any, detections: list[list[Any]]) -> tuple[float, dict[str, Any]]:
    """Score of one video's per-frame detections against a parsed toy-world caption (see module docstring)."""

    def find(dets: list[Any], subject: tuple[str, str]) -> list[Any]:
        return [d for d in dets if (d.colour, d.shape) == tuple(subject)]

    if parsed.kind == "motion":
        first, last = find(detections[0], parsed.subjects[0]), find(detections[-1], parsed.subjects[0])
        if not first or not last:
            return 0.0, {"reason": "subject not detected in the first or the last frame"}
        axis, sign = _MOTION_AXES[parsed.motion]
        d = last[0].centre[axis] - first[0].centre[axis]
        other = abs(last[0].centre[1 - axis] - first[0].centre[1 - axis])
        ok = sign * d > 0 and abs(d) > other
        return float(ok), {"displacement": d}
    hits = []
    for dets in detections:
        if parsed.kind == "count":
            hits.append(len(find(dets, parsed.subjects[0])) == parsed.count)
        elif parsed.kind == "relation":
            a, b = find(dets, parsed.subjects[0]), find(dets, parsed.subjects[1])
            if not a or not b:
                hits.append(False)
                continue
            axis, sign = _RELATION_AXES[parsed.relation]
            hits.append(sign * (a[0].centre[axis] - b[0].centre[axis]) > 0)
        else:
            hits.append(bool(find(dets, parsed.subjects[0])))
    return float(sum(hits)) / max(1, len(hits)), {"frames_ok": int(sum(hits)), "frames": len(hits)}


class ToyworldShapes:
    name = "toyworld_shapes"
    description = "toy-world model only: exact colour/shape detector checks presence, count, relation, motion"

    def __init__(self, cfg: Any, suite: Any) -> None:
        try:
            from vidlab.generation.toyworld.detect import detect_video
            from vidlab.generation.toyworld.world import CaptionError, parse_caption
        except ImportError as e:
            raise MetricError(f"metric toyworld_shapes needs vidlab.generation.toyworld ({e})") from e
        self.detect_video, self.parse, self.CaptionError = detect_video, parse_caption, CaptionError

    def score(self, ctx: VideoContext) -> dict[str, Any]:
        try:
            parsed = self.parse(ctx.prompt.text)
        except self.CaptionError as e:
            return {"score": None, "reason": str(e)[:200]}
        if parsed.kind == "relation" and parsed.relation not in _RELATION_AXES:
            return {"score": None, "reason": f"relation {parsed.relation!r} has no 2D check"}
        score, info = caption_satisfied(parsed, self.detect_video(ctx.frames()))
        return {"score": score, "kind": parsed.kind, **info}
