"""Evaluation glue: load the trained toy-world Wan, generate with or without Comp-Attn, score with the detector.

``load_toyworld_pipeline(model)`` goes through ``vidlab.generation.pipeline.load_pipeline`` (the code path of ``vidlab generate``).
``METHODS`` names the compared settings. An ``EvalItem`` is one prompt with how its layout is made: the rule
planner's (multi-subject prompts), or for single-subject position items a box on the LEFT or RIGHT third
(``side_layout``). ``item_layout(item, method)`` gives the layout a method is fed: the ``placebo`` gets a layout that
contradicts the prompt (two subjects' boxes swapped; a single box mirrored to the other side).
``run_method(pipe, method, items, seeds, ...)`` generates every (item, seed) and returns one record per video: the
detector's ``VideoScore`` against the caption and the given layout, ``iou_real`` against the true (unswapped) layout,
where the first subject landed (``cx``, ``cy``, colour only) and the seconds the generation took.
``RecordCache`` keeps finished records on disk (written atomically every few seconds), so a killed run resumes.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vidlab.generation.toyworld.metrics import layout_iou, score_video, subject_centre, toward_box
from vidlab.generation.toyworld.model import WEIGHTS_DIR
from vidlab.generation.toyworld.world import WorldConfig

METHODS = ("baseline", "sci", "lam", "both", "placebo")
SIDES = ("left", "right")
# single-subject position boxes: the left / right third of the frame, the middle 40% of its height
SIDE_BOXES: dict[str, tuple[float, float, float, float]] = {
    "left": (0.02, 0.3, 0.35, 0.7),
    "right": (0.65, 0.3, 0.98, 0.7),
}
# two-dimensional position boxes (benchmarks/gen_toyworld.py's 2-D items): the four quadrants (inset by 0.04 of
# the side), the centre, and the top / bottom third (the left / right boxes transposed: the vertical axis alone)
BOXES_2D: dict[str, tuple[float, float, float, float]] = {
    "top-left": (0.04, 0.04, 0.46, 0.46),
    "top-right": (0.54, 0.04, 0.96, 0.46),
    "bottom-left": (0.04, 0.54, 0.46, 0.96),
    "bottom-right": (0.54, 0.54, 0.96, 0.96),
    "centre": (0.3, 0.3, 0.7, 0.7),
    "top": (0.3, 0.02, 0.7, 0.35),
    "bottom": (0.3, 0.65, 0.7, 0.98),
    # the quadrants' corner thirds (as far out as the left / right boxes): the box-geometry check
    "corner-top-left": (0.02, 0.02, 0.35, 0.35),
    "corner-top-right": (0.65, 0.02, 0.98, 0.35),
    "corner-bottom-left": (0.02, 0.65, 0.35, 0.98),
    "corner-bottom-right": (0.65, 0.65, 0.98, 0.98),
}
SIDE_BOXES.update(BOXES_2D)


@dataclass
class SamplingConfig:
    """How the benchmark samples the toy model (``from_model`` reads the model's own frames/size)."""

    height: int = field(default_factory=lambda: WorldConfig().size)
    width: int = field(default_factory=lambda: WorldConfig().size)
    frames: int = field(default_factory=lambda: WorldConfig().frames)  # the world's clip length
    steps: int = 12
    guidance: float = 4.0
    # the rule planner's largest box side (``GenerateConfig.planner_max_box``; 1: the planner's own boxes)
    planner_max_box: float = 1.0

    @classmethod
    def from_model(cls, model: str | Path | None = None) -> SamplingConfig:
        """Defaults, with the sampling settings the model folder records (``toyworld.json``'s ``generate`` entry,
        read and checked by ``vidlab.generation.pipeline.model_settings``, as ``vidlab generate`` reads them)."""
        from vidlab.generation.pipeline import model_settings

        path = Path(model) if model is not None else WEIGHTS_DIR
        out = cls()
        own = model_settings(str(path.resolve()))  # a folder: never a shipped or built-in model's name
        recorded = own.values if own is not None else {}
        for k in ("height", "width", "frames", "steps"):
            if k in recorded:
                setattr(out, k, int(recorded[k]))
        for k in ("guidance", "planner_max_box"):
            if k in recorded:
                setattr(out, k, float(recorded[k]))
        return out


@dataclass(frozen=True)
class EvalItem:
    """One prompt to generate: ``key`` is unique per item; ``side`` puts a single subject's box left or right."""

    prompt: str
    key: str
    side: str | None = None

    @classmethod
    def of(cls, prompt: str, side: str | None = None) -> EvalItem:
        return cls(prompt, prompt if side is None else f"{prompt} | box {side}", side)


def multi_items(prompts: Sequence[str]) -> list[EvalItem]:
    """Items with the rule planner's layouts."""
    return [EvalItem.of(p) for p in prompts]


def single_items(prompts: Sequence[str], both_sides: bool = True) -> list[EvalItem]:
    """Single-subject position items: each prompt with its box on the left and on the right third
    (``both_sides=False``: one side per prompt, alternating)."""
    if both_sides:
        return [EvalItem.of(p, s) for p in prompts for s in SIDES]
    return [EvalItem.of(p, SIDES[i % 2]) for i, p in enumerate(prompts)]


def planned_layout(prompt: str, max_box: float = 1.0) -> Any:
    """The rule planner's layout of ``prompt``, boxes capped at ``max_box`` (what ``vidlab generate`` plans)."""
    from vidlab.generation.planners import plan_layout

    return plan_layout(prompt, planner="rule", **({"max_box": max_box} if max_box < 1.0 else {}))


def side_layout(prompt: str, side: str) -> Any:
    """The rule planner's layout of a single-subject prompt with its box moved to the ``side`` third."""
    from vidlab.generation.planners import plan_layout

    if side not in SIDE_BOXES:
        raise ValueError(f"side must be one of {sorted(SIDE_BOXES)}, got {side!r}")
    lay = plan_layout(prompt, planner="rule")
    if len(lay.subjects) != 1:
        raise ValueError(
            f"side layouts are for single-subject prompts; {prompt!r} has {len(lay.subjects)} subjects"
        )
    box = SIDE_BOXES[side]
    lay.subjects = [_with_keyframes(lay.subjects[0], [(0.0, box), (1.0, box)])]
    lay.relations = []
    lay.meta = {**lay.meta, "side": side}
    return lay


def item_layout(item: EvalItem, method: str, max_box: float = 1.0) -> tuple[Any, Any]:
    """(layout given to ``method``, the true layout) for an item; multi-subject boxes capped at ``max_box``."""
    real = side_layout(item.prompt, item.side) if item.side else planned_layout(item.prompt, max_box)
    if method_base(method) != "placebo":
        return real, real
    # 2-D items: every box mirrored through the frame's centre (the diagonally opposite quadrant)
    return (mirrored_layout(real) if item.side in BOXES_2D else swapped_layout(real)), real


def load_toyworld_pipeline(model: str | Path | None = None):
    """The trained toy-world pipeline (default: the shipped weights) on CPU, loaded like ``vidlab generate`` does."""
    from vidlab.generation.pipeline import GenerateConfig, load_pipeline

    path = Path(model) if model is not None else WEIGHTS_DIR
    if not (path / "model_index.json").is_file():
        from vidlab.errors import UserError

        raise UserError(
            f"no trained toy-world pipeline at {path} (model_index.json missing); "
            "train one with: vidlab train-gen-toyworld --out " + str(path)
        )
    pipe = load_pipeline(GenerateConfig(model=str(path), device="cpu"))
    pipe.set_progress_bar_config(disable=True)
    return pipe


def method_base(method: str) -> str:
    """The base method of a named variant: ``both_fused`` -> ``both``, ``lam@a4`` -> ``lam``."""
    base = method.split("@")[0].split("_")[0]
    if base not in METHODS:
        raise ValueError(
            f"unknown method {method!r}; known: {METHODS} (variants: <method>_<tag> or <method>@<tag>)"
        )
    return base


def comp_config(
    method: str,
    sci_strength: float | None = None,
    step_fraction: float | None = None,
    overrides: Mapping[str, Any] | None = None,
):
    """The ``CompAttnConfig`` of a method (``placebo`` is LAM alone, fed a contradicting layout).

    ``sci_strength`` / ``step_fraction`` (None: the config default) and ``overrides`` (``{"lam.alpha_max": 4}``)
    change the paper-faithful defaults; every value goes through the config's own validation.
    """
    from vidlab.generation.config import CompAttnConfig

    cfg = CompAttnConfig()
    ov: dict[str, Any] = dict(overrides or {})
    if sci_strength is not None:
        ov.setdefault("sci.strength", float(sci_strength))
    if step_fraction is not None:
        ov.setdefault("lam.step_fraction", float(step_fraction))
    for part in ("sci", "lam"):
        vals = {k.split(".", 1)[1]: v for k, v in ov.items() if k.startswith(part + ".")}
        if vals:
            sub = getattr(cfg, part)
            unknown = set(vals) - {f.name for f in dataclasses.fields(sub)}
            if unknown:
                raise ValueError(f"unknown {part} settings {sorted(unknown)}")
            setattr(cfg, part, dataclasses.replace(sub, **vals))
    bad = [k for k in ov if not k.startswith(("sci.", "lam."))]
    if bad:
        raise ValueError(f"overrides must be sci.* or lam.* settings, got {bad}")
    base = method_base(method)
    if base == "baseline":
        cfg.enabled = False
    elif base == "sci":
        cfg.lam.enabled = False
    elif base in ("lam", "placebo"):
        cfg.sci.enabled = False
    return cfg


def _with_keyframes(s: Any, keyframes: Any) -> Any:
    return dataclasses.replace(s, keyframes=list(keyframes))


def swapped_layout(layout: Any) -> Any:
    """A layout that contradicts the prompt: two groups swap boxes; a single group is mirrored left-right."""
    from vidlab.generation.layout import Layout

    subs = list(layout.subjects)
    groups: list[list[int]] = []
    for i in range(len(subs)):
        if not any(i in g for g in groups):
            groups.append(layout.group_of(i))
    new = [copy.deepcopy(s) for s in subs]
    if len(groups) >= 2:
        a, b = groups[0], groups[1]
        for i, j in zip(a, b):
            new[i] = _with_keyframes(subs[i], subs[j].keyframes)
            new[j] = _with_keyframes(subs[j], subs[i].keyframes)
    else:
        for i, s in enumerate(subs):
            kfs = [(t, (1 - b[2], b[1], 1 - b[0], b[3])) for t, b in s.keyframes]
            new[i] = _with_keyframes(s, kfs)
    return Layout(prompt=layout.prompt, subjects=new, relations=[], planner="placebo-swapped", meta={})


def mirrored_layout(layout: Any) -> Any:
    """Every box mirrored through the frame's centre (both axes): the 2-D items' placebo."""
    from vidlab.generation.layout import Layout

    new = [
        _with_keyframes(s, [(t, (1 - b[2], 1 - b[3], 1 - b[0], 1 - b[1])) for t, b in s.keyframes])
        for s in layout.subjects
    ]
    return Layout(prompt=layout.prompt, subjects=new, relations=[], planner="placebo-mirrored", meta={})


def model_fingerprint(pipe: Any) -> str:
    """A short hash of the pipeline's weights (transformer + VAE + text encoder parameters' shapes and sums)."""
    import torch

    h = hashlib.sha256()
    for name in ("transformer", "vae", "text_encoder"):
        mod = getattr(pipe, name, None)
        if mod is None:
            continue
        with torch.no_grad():
            for pname, p in mod.named_parameters():
                h.update(f"{name}.{pname}{tuple(p.shape)}{float(p.double().sum()):.9e}".encode())
    return h.hexdigest()[:16]


@dataclass
class RecordCache:
    """Finished video records on disk, keyed by (setting, item, seed); rewritten atomically every ``every_s``."""

    path: Path | None
    every_s: float = 10.0
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    _last: float = 0.0
    _dirty: bool = False

    def __post_init__(self) -> None:
        if self.path is not None:
            self.path = Path(self.path)
            if self.path.is_file():
                self.records = json.loads(self.path.read_text(encoding="utf-8"))
        self._last = time.monotonic()

    def get(self, key: str) -> dict[str, Any] | None:
        return self.records.get(key)

    def put(self, key: str, record: dict[str, Any]) -> None:
        self.records[key] = record
        self._dirty = True
        if time.monotonic() - self._last >= self.every_s:
            self.flush()

    def flush(self) -> None:
        if self.path is None or not self._dirty:
            return
        from vidlab.io import atomic_write_text

        atomic_write_text(self.path, json.dumps(self.records, separators=(",", ":")))
        self._dirty, self._last = False, time.monotonic()


def setting_key(method: str, cfg: Any, sampling: SamplingConfig, model: str) -> str:
    """What makes a record: the model, the method, its Comp-Attn config and the sampling."""
    samp = dict(vars(sampling))
    if samp.get("planner_max_box") == 1.0:  # added later: records made before it (no cap) keep their keys
        samp.pop("planner_max_box")
    blob = json.dumps(
        {"m": method_base(method), "c": dataclasses.asdict(cfg), "s": samp, "w": model},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def split_cached(
    cache: RecordCache | None,
    method: str,
    items: Sequence[EvalItem],
    seeds: Sequence[int],
    sampling: SamplingConfig,
    overrides: Mapping[str, Any] | None = None,
    fingerprint: str = "",
) -> tuple[list[dict[str, Any]], list[EvalItem], str]:
    """(cached records, items with a seed still to generate, the setting's cache key prefix)."""
    skey = setting_key(method, comp_config(method, overrides=overrides), sampling, fingerprint)
    hits: list[dict[str, Any]] = []
    todo: list[EvalItem] = []
    for it in items:
        recs = [cache.get(f"{skey}|{it.key}|{int(sd)}") if cache is not None else None for sd in seeds]
        if all(r is not None for r in recs):
            hits += [r for r in recs if r is not None]
        else:
            todo.append(it)
    return hits, todo, skey


def store(cache: RecordCache, skey: str, records: Sequence[dict[str, Any]]) -> None:
    """Put records made elsewhere (another process) into the cache under the setting's key."""
    for r in records:
        cache.put(f"{skey}|{r['item']}|{int(r['seed'])}", r)
    cache.flush()


def run_method(
    pipe: Any,
    method: str,
    prompts: Sequence[str | EvalItem],
    seeds: Sequence[int],
    sampling: SamplingConfig | None = None,
    sci_strength: float | None = None,
    step_fraction: float | None = None,
    progress: bool = True,
    desc: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    cache: RecordCache | None = None,
    fingerprint: str = "",
    run_id: str | None = None,
) -> list[dict[str, Any]]:
    """Generate and score every (item, seed) with ``method``; one dict per video (cached ones are not redone).

    Each new record carries ``run`` = ``run_id``: a cache mixes videos timed in different runs (other load, other
    day), so a time ratio pairs only records of one run."""
    from tqdm.auto import tqdm

    from vidlab.generation.pipeline import GenerateConfig, generate_video

    s = sampling or SamplingConfig()
    cfg = comp_config(method, sci_strength, step_fraction, overrides)
    skey = setting_key(method, cfg, s, fingerprint)
    items = [p if isinstance(p, EvalItem) else EvalItem.of(p) for p in prompts]
    out: list[dict[str, Any]] = []
    todo: list[tuple[EvalItem, list[int]]] = []
    for it in items:
        missing = []
        for sd in seeds:
            hit = cache.get(f"{skey}|{it.key}|{int(sd)}") if cache is not None else None
            if hit is not None:
                out.append(hit)
            else:
                missing.append(int(sd))
        if missing:
            todo.append((it, missing))
    if not todo:
        return out
    gcfg = GenerateConfig(
        model="toyworld",
        height=s.height,
        width=s.width,
        frames=s.frames,
        steps=s.steps,
        guidance=s.guidance,
        planner_max_box=s.planner_max_box,
    )
    bar = tqdm(total=sum(len(sds) for _, sds in todo), desc=desc or method, disable=not progress, leave=False)
    # Comp-Attn off: the layout changes nothing, so the left- and right-box items of one caption share a video
    memo: dict[tuple[str, tuple[int, ...]], tuple[np.ndarray, float]] = {}
    try:
        for it, sds in todo:
            given, real = item_layout(it, method, s.planner_max_box)
            key = (it.prompt, tuple(sds))
            if not cfg.enabled and key in memo:
                videos, secs = memo[key]
            else:
                # the one recipe; the seeds of one item in one call: video k from its own generator (seed sds[k])
                gen = generate_video(pipe, gcfg, it.prompt, given, seed=sds, comp_attn=cfg)
                secs = gen.seconds / len(sds)
                videos = np.asarray(gen.result.output.frames)
                if not cfg.enabled:
                    memo[key] = (videos, secs)
            for seed, frames in zip(sds, videos):
                rec = score_record(it, frames, given, real)
                rec.update(seed=seed, method=method, seconds=secs, run=run_id)
                out.append(rec)
                if cache is not None:
                    cache.put(f"{skey}|{it.key}|{seed}", rec)
            bar.update(len(sds))
    finally:
        bar.close()
        if cache is not None:
            cache.flush()
    return out


def colour_relation(
    caption: str, detections: Sequence[Sequence[Any]], share: float = 0.5
) -> tuple[bool | None, bool | None]:
    """The caption's spatial relation, and its opposite, judged on COLOUR alone: per frame the largest component of
    each subject's colour (any shape), the relation holding between their centres in at least ``share`` of the
    frames. (None, None) for captions that are not two-subject relations or name one colour twice. It separates
    layout control (where each colour goes) from the shape the model draws there."""
    from vidlab.generation.toyworld.metrics import OPPOSITE, relation_holds
    from vidlab.generation.toyworld.world import parse_caption

    p = parse_caption(caption)
    if p.kind != "relation" or len(p.subjects) != 2 or p.subjects[0][0] == p.subjects[1][0]:
        return None, None
    (ca, _), (cb, _) = p.subjects
    rel = p.relation or ""
    hits = {rel: 0, OPPOSITE[rel]: 0}
    for fr in detections:
        a = max((d for d in fr if d.colour == ca), key=lambda d: d.area, default=None)
        b = max((d for d in fr if d.colour == cb), key=lambda d: d.area, default=None)
        if a is not None and b is not None:
            for r in hits:
                hits[r] += int(relation_holds(r, a.centre, b.centre))
    n = max(len(detections), 1)
    return hits[rel] >= share * n, hits[OPPOSITE[rel]] >= share * n


def score_record(item: EvalItem, frames: np.ndarray, given: Any, real: Any) -> dict[str, Any]:
    """The detector's verdict on one video: ``VideoScore`` vs the given layout, IoU vs the true one, the position."""
    from vidlab.generation.toyworld.detect import detect_video

    dets = detect_video(frames)
    sc = score_video(item.prompt, frames, layout=given, detections=dets)
    centre = subject_centre(item.prompt, detections=dets)
    err = two_subject_error(item.prompt, dets)
    rel_c, swapped_c = colour_relation(item.prompt, dets)
    return {
        # two-subject relation prompts with distinct colours and shapes: the error class and binding figures
        "error": err,
        "prompt": item.prompt,
        "item": item.key,
        "side": item.side,
        **sc.to_dict(),
        "iou_real": layout_iou(dets, real),
        # the relation read off the colours alone (layout control without the shape the model draws)
        "relation_colour": rel_c,
        "swapped_colour": swapped_c,
        "cx": None if centre is None else centre[0],
        "cy": None if centre is None else centre[1],
        # towards the item's REAL box side (for the placebo too: it should go negative)
        "toward": None
        if centre is None or item.side not in ("left", "right")
        else toward_box(centre[0], item.side),
    }


# ---- two-subject error classes (what SCI is meant to fix) -------------------------------------------------
ERROR_CLASSES = ("correct", "swap", "merge", "drop_one", "drop_both", "shape")


def _touch(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    """True when two boxes overlap or abut (no gap between them on either axis)."""
    return max(a[0], b[0]) <= min(a[2], b[2]) and max(a[1], b[1]) <= min(a[3], b[3])


def two_subject_error(
    caption: str, detections: Sequence[Sequence[Any]], share: float = 0.5
) -> dict[str, Any] | None:
    """Which error a two-subject relation video makes, judged by the exact detector; None when undefined.

    Defined for relation captions whose two subjects differ in colour AND shape ("a red circle to the left of a
    blue square": A = red circle, B = blue square). "Present" means in at least ``share`` of the frames, as
    ``score_video``'s presence. One class per video, the first that holds:

    * ``correct`` -- both subjects present (colour and shape);
    * ``swap`` -- both attributes swapped: a red square AND a blue circle present;
    * ``merge`` -- both colours present, but in ``share`` of the frames the largest component of each colour
      overlaps or touches the other's box (one blob drawn for two subjects);
    * ``drop_one`` / ``drop_both`` -- one / neither subject's colour present at all;
    * ``shape`` -- both colours present and apart, a shape wrong in another way.

    Beside the class, per subject (A, B): ``leak`` -- its colour drawn with the OTHER subject's shape (the binding
    error), and ``foreign`` -- its colour drawn with a shape the caption does not name (mean over the two such
    shapes); ``subjects`` -- per subject [told shape, the other's shape, the shapes its colour is drawn as].
    """
    from vidlab.generation.toyworld.world import SHAPES, parse_caption

    p = parse_caption(caption)
    if p.kind != "relation" or len(p.subjects) != 2:
        return None
    (ca, sa), (cb, sb) = p.subjects
    if ca == cb or sa == sb:
        return None
    n = max(len(detections), 1)

    def present(colour: str, shape: str | None) -> bool:
        hits = sum(
            any(d.colour == colour and (shape is None or d.shape == shape) for d in fr) for fr in detections
        )
        return hits >= share * n

    def largest(fr: Sequence[Any], colour: str) -> Any:
        cands = [d for d in fr if d.colour == colour]
        return max(cands, key=lambda d: d.area) if cands else None

    col_a, col_b = present(ca, None), present(cb, None)
    if present(ca, sa) and present(cb, sb):
        cls = "correct"
    elif present(ca, sb) and present(cb, sa):
        cls = "swap"
    elif col_a and col_b:
        touching = 0
        for fr in detections:
            da, db = largest(fr, ca), largest(fr, cb)
            touching += int(da is not None and db is not None and _touch(da.box, db.box))
        cls = "merge" if touching >= share * n else "shape"
    elif col_a or col_b:
        cls = "drop_one"
    else:
        cls = "drop_both"
    others = [sh for sh in SHAPES if sh not in (sa, sb)]
    leak = [present(ca, sb), present(cb, sa)]
    foreign = [
        sum(present(ca, sh) for sh in others) / len(others),
        sum(present(cb, sh) for sh in others) / len(others),
    ]
    drawn_a = [sh for sh in SHAPES if present(ca, sh)]
    drawn_b = [sh for sh in SHAPES if present(cb, sh)]
    return {
        "class": cls,
        "leak": sum(leak) / 2,
        "foreign": sum(foreign) / 2,
        # per subject: (told shape, the other subject's shape, the shapes its colour is drawn as)
        "subjects": [[sa, sb, drawn_a], [sb, sa, drawn_b]],
    }


def per_item(records: list[dict[str, Any]], key: str) -> dict[str, float]:
    """Per-item mean of ``key`` over seeds (items where it is None are skipped); items keyed by ``item``."""
    by: dict[str, list[float]] = {}
    for r in records:
        if r.get(key) is not None:
            by.setdefault(r.get("item", r["prompt"]), []).append(float(r[key]))
    return {k: float(np.mean(v)) for k, v in by.items()}


def per_prompt(records: list[dict[str, Any]], key: str) -> list[float]:
    """Per-item mean of ``key`` over seeds, as a list (the values a bootstrap over prompts resamples)."""
    return list(per_item(records, key).values())


__all__ = [
    "BOXES_2D",
    "METHODS",
    "SIDE_BOXES",
    "ERROR_CLASSES",
    "EvalItem",
    "RecordCache",
    "SamplingConfig",
    "comp_config",
    "item_layout",
    "load_toyworld_pipeline",
    "method_base",
    "mirrored_layout",
    "model_fingerprint",
    "multi_items",
    "per_item",
    "per_prompt",
    "run_method",
    "score_record",
    "side_layout",
    "split_cached",
    "store",
    "single_items",
    "swapped_layout",
    "two_subject_error",
]
