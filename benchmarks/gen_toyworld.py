"""Comp-Attn on a Wan that was actually trained: the toy world's held-out prompts, judged by the exact detector.

Gates come first (the VAE round trip and the base model's single-subject presence): when they fail, no Comp-Attn
figure below them means much. Then:

1. Calibration on the VALIDATION split only (generation/toyworld/splits.py; single-subject captions are training
   captions by necessity, so their validation scenes use seeds the test never uses): LAM ``alpha_max``, then LAM
   ``step_fraction`` at the best alpha, SCI ``strength``, and ``lam.mask_source`` fused (when the installed
   Comp-Attn has it). The paper-faithful defaults stay the defaults; the chosen values are the toy-world preset.
2. Test: multi-subject held-out prompts (rule-planner layouts) and single-subject position items (the box on the
   LEFT or RIGHT third) x seeds, for ``baseline``, ``sci``, ``lam``, ``both`` (calibrated values), ``placebo``
   (LAM with a contradicting layout: the two subjects' boxes swapped, a single box moved to the other side),
   ``both_default`` (paper-faithful defaults), ``both_fused`` (calibrated, fused mask source) and ``ts_attn``
   (TS-Attn, the published sibling method, ``lam.rule=ts_attn`` with its own settings: no layout, SCI off).
3. 2-D position items (``--grid2d-prompts``): single subjects with the box in one of the four quadrants or the
   centre; figures: the share landing in the box's quadrant (both axes right), per axis, in the centre box, and
   presence; the placebo gets every box mirrored through the frame's centre. Two-subject relation prompts are
   also reported by axis: left/right apart from above/below (``relation_by_axis``).

Test seeds: ``--seed-base N`` uses seeds N, N+1, ... (fresh seeds after a change; the JSON records them).
``--study-2d OUT`` runs only the validation study of 2-D control (why vertical / diagonal placement is weaker):
every single caption at nine box positions on validation seeds, baseline and the LAM settings of
``--study-settings``; it writes OUT (JSON) and prints a table.

Every video is judged by the learning-free detector (vidlab.generation.toyworld.detect) on the rendered frames, never on
the attention LAM biased: presence, relation, swapped (the opposite relation: what the placebo asks for), count,
IoU with the layout the method was given (``iou``) and with the true one (``iou_real``), where the single subject
lands (``toward``: its centre's offset from the middle towards the real box, in frame widths), seconds.
Intervals: percentile bootstrap over items (per-item means over seeds), and of the paired per-item difference vs
the baseline. Time is a ratio to the baseline measured in the same run.

    python benchmarks/gen_toyworld.py --quick           # a smoke run: few prompts, 1 seed, small grids
    python benchmarks/gen_toyworld.py                    # 200 test prompts + 48 position items, x 2 seeds
    python benchmarks/gen_toyworld.py --plot bench.png --sweep-plot sweep.png --cache /tmp/gtw.json  # resumable
    python benchmarks/gen_toyworld.py --no-sweep --alpha-max 1 --sci-strength 2 --seed-base 20  # fresh test seeds
    python benchmarks/gen_toyworld.py --study-2d study.json --cache /tmp/gtw.json   # validation only

The last line of stdout is one JSON object: ``gates`` (first), ``methods``, ``paired_vs_baseline``,
``both_minus_baseline``, ``position_control``, ``single_subject_presence``, ``sweep``, ``chosen``, ``targets``, ...
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from _common import emit_json, print_table, smoke_size_note  # noqa: E402

KEYS = (
    "presence",
    "presence_colour",
    "relation",
    "swapped",
    "relation_colour",
    "swapped_colour",
    "count",
    "iou",
    "iou_real",
)
SINGLE_KEYS = ("presence", "presence_colour", "toward", "on_side", "found")
POS2D_KEYS = (
    "presence",
    "presence_colour",
    "found",
    "quadrant",
    "x_ok",
    "y_ok",
    "in_box",
    "toward2d",
    "dist",
)
QUADRANTS = ("top-left", "top-right", "bottom-left", "bottom-right")
POSITIONS_2D = (*QUADRANTS, "centre")
CORNERS = tuple(f"corner-{q}" for q in QUADRANTS)
STUDY_POSITIONS = (*POSITIONS_2D, "left", "right", "top", "bottom", *CORNERS)
# TS-Attn runs as LAM's other rule (generation/ts_attn.py); the toy world's run_method takes sci.* / lam.* overrides
# and method names whose base is one of its METHODS, so it runs as "lam@ts_attn" and is reported as "ts_attn"
TS_ATTN_OV = {"lam.rule": "ts_attn"}
RUN_AS = {"ts_attn": "lam@ts_attn"}


def run_name(method: str) -> str:
    """The method name run_method is given for a reported method (``ts_attn`` -> ``lam@ts_attn``)."""
    return RUN_AS.get(method, method)


def position_2d(rec: dict) -> dict[str, float | None]:
    """Where a single subject landed against its box (``rec["side"]``: a BOXES_2D or SIDE_BOXES name), from the
    detector's colour centre ``(cx, cy)``. A subject whose colour is never found counts as a miss (0) for
    ``quadrant``, ``x_ok``, ``y_ok`` and ``in_box`` (never as a hit by omission); ``toward2d`` and ``dist`` are None.

    ``x_ok`` / ``y_ok``: the centre on the box's side of the frame's middle along that axis (None for an axis the
    box is centred on); ``quadrant``: both (None unless the box is off-centre on both axes); ``in_box``: the
    centre inside the box; ``toward2d``: the offset from the frame's centre projected on the direction of the box
    centre (frame units; None for the centre box); ``dist``: distance to the box centre."""
    from vidlab.generation.toyworld.evaluate import SIDE_BOXES

    box = SIDE_BOXES[rec["side"]]
    bx, by = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    cx, cy = rec.get("cx"), rec.get("cy")
    dx, dy = bx - 0.5, by - 0.5
    if cx is None or cy is None:
        x_ok = None if abs(dx) < 1e-9 else 0.0
        y_ok = None if abs(dy) < 1e-9 else 0.0
        quad = 0.0 if x_ok is not None and y_ok is not None else None
        return {"x_ok": x_ok, "y_ok": y_ok, "quadrant": quad, "in_box": 0.0, "toward2d": None, "dist": None}
    x_ok = None if abs(dx) < 1e-9 else float((cx - 0.5) * dx > 0)
    y_ok = None if abs(dy) < 1e-9 else float((cy - 0.5) * dy > 0)
    quad = float(bool(x_ok) and bool(y_ok)) if x_ok is not None and y_ok is not None else None
    norm = float(np.hypot(dx, dy))
    return {
        "x_ok": x_ok,
        "y_ok": y_ok,
        "quadrant": quad,
        "in_box": float(box[0] <= cx <= box[2] and box[1] <= cy <= box[3]),
        "toward2d": None if norm < 1e-9 else float(((cx - 0.5) * dx + (cy - 0.5) * dy) / norm),
        "dist": float(np.hypot(cx - bx, cy - by)),
    }


def relation_axis(prompt: str) -> str | None:
    """``horizontal`` (left of / right of), ``vertical`` (above / below) or None (not a relation prompt)."""
    from vidlab.generation.toyworld.world import parse_caption

    rel = parse_caption(prompt).relation
    if rel in ("left of", "right of"):
        return "horizontal"
    if rel in ("above", "below"):
        return "vertical"
    return None


# ---- summaries -----------------------------------------------------------------------------------------
def _ci(values, nd: int = 4) -> dict[str, Any]:
    from vidlab.generation.toyworld.metrics import bootstrap_ci

    m, lo, hi = bootstrap_ci(list(values))
    if np.isnan(m):
        return {"mean": None, "ci": None, "n": 0}
    return {"mean": round(m, nd), "ci": [round(lo, nd), round(hi, nd)], "n": len(list(values))}


def _derive(records: list[dict]) -> list[dict]:
    """Add per-video ``on_side`` (landed on the real box's half) and ``found`` (subject colour seen) to side items."""
    out = []
    for r in records:
        r = dict(r)
        if r.get("side"):
            r["found"] = float(r.get("cx") is not None)
            r["on_side"] = None if r.get("toward") is None else float(r["toward"] > 0)
            r.update(position_2d(r))
        out.append(r)
    return out


def summarise(records: list[dict], keys=KEYS) -> dict[str, Any]:
    """Mean + bootstrap CI over items of every key, mean seconds and the number of videos."""
    from vidlab.generation.toyworld.evaluate import per_item

    recs = _derive(records)
    out: dict[str, Any] = {}
    for key in keys:
        c = _ci(per_item(recs, key).values())
        out[key], out[f"{key}_ci"] = c["mean"], c["ci"]
    out["seconds"] = round(float(np.mean([r["seconds"] for r in recs])), 4) if recs else None
    out["videos"] = len(recs)
    return out


def paired(base: list[dict], other: list[dict], key: str) -> dict[str, Any]:
    """Bootstrap CI of the per-item difference other - base (items both have a value for)."""
    from vidlab.generation.toyworld.evaluate import per_item
    from vidlab.generation.toyworld.metrics import paired_ci

    m, lo, hi, n = paired_ci(per_item(_derive(base), key), per_item(_derive(other), key))
    if n == 0:
        return {}
    return {"diff": round(m, 4), "ci": [round(lo, 4), round(hi, 4)], "n": n}


def time_ratio(base: list[dict], other: list[dict], run_id: str) -> dict[str, Any]:
    """Per-item ratio of mean seconds (other / base), bootstrap CI over items: only videos generated in THIS run
    (``run`` == ``run_id``; a cache's older videos were timed under another load), ``n`` the items paired."""
    from vidlab.generation.toyworld.evaluate import per_item

    a = per_item([r for r in base if r.get("run") == run_id], "seconds")
    b = per_item([r for r in other if r.get("run") == run_id], "seconds")
    return _ci([b[k] / a[k] for k in a if k in b and a[k] > 0], 3)


# The calibration's guards. Single-subject presence: the issue's own margin (+both may cost at most 2 points), so a
# setting the validation split already sees costing more is never chosen. Multi-subject presence: 5 points (40
# prompts x 1 seed: a finer guard would sit inside one setting's noise).
PRESENCE_TOL = 0.05
SINGLE_PRESENCE_TOL = 0.02


def _keeps(row: dict, base: dict, key: str, tol: float) -> bool:
    """True when the setting's ``key`` (a presence) falls no more than ``tol`` below the baseline's."""
    return (row.get(key) or 0.0) >= (base.get(key) or 0.0) - tol


def selection_score(
    row: dict, base: dict, tol: float = PRESENCE_TOL, single_tol: float = SINGLE_PRESENCE_TOL
) -> float:
    """Validation objective for a LAM setting: relation + true-layout IoU + 2 x toward-box shift, and -inf when
    multi-subject presence falls more than ``tol`` or single-subject presence more than ``single_tol`` below the
    baseline's (on the same validation scenes)."""
    if not (_keeps(row, base, "presence", tol) and _keeps(row, base, "single_presence", single_tol)):
        return float("-inf")
    return (row.get("relation") or 0.0) + (row.get("iou_real") or 0.0) + 2.0 * (row.get("toward") or 0.0)


def sci_score(row: dict, base: dict, single_tol: float = SINGLE_PRESENCE_TOL) -> float:
    """Validation objective for SCI strength: multi-subject presence + relation (single presence kept within
    ``single_tol``)."""
    if not _keeps(row, base, "single_presence", single_tol):
        return float("-inf")
    return (row.get("presence") or 0.0) + (row.get("relation") or 0.0)


def best_value(rows: list[dict], score) -> float:
    """The grid value with the highest score (ties: the smaller value)."""
    return max(rows, key=lambda r: (score(r), -r["value"]))["value"]


# ---- relation by axis, 2-D position items, the 2-D study -----------------------------------------------------
def relation_by_axis(multi: dict[str, list[dict]]) -> dict[str, Any]:
    """Two-subject relation prompts split by axis: ``horizontal`` (left of / right of) and ``vertical`` (above /
    below), each with every method's relation, swapped relation and presence, and the paired differences vs the
    baseline on the same prompts and seeds."""
    out: dict[str, Any] = {}
    for axis in ("horizontal", "vertical"):
        sub = {m: [r for r in recs if relation_axis(r["prompt"]) == axis] for m, recs in multi.items()}
        if not sub.get("baseline"):
            continue
        methods = {}
        for m, recs in sub.items():
            sm = summarise(recs)
            methods[m] = {
                k: sm.get(k)
                for k in (
                    "relation",
                    "relation_ci",
                    "swapped",
                    "relation_colour",
                    "relation_colour_ci",
                    "swapped_colour",
                    "presence",
                    "presence_colour",
                )
            }
        out[axis] = {
            "prompts": len({r["item"] for r in sub["baseline"]}),
            "methods": methods,
            "paired": {
                m: paired(sub["baseline"], recs, "relation") for m, recs in sub.items() if m != "baseline"
            },
            "paired_colour": {
                m: paired(sub["baseline"], recs, "relation_colour")
                for m, recs in sub.items()
                if m != "baseline"
            },
            "paired_swapped": {
                m: paired(sub["baseline"], recs, "swapped") for m, recs in sub.items() if m != "baseline"
            },
            "paired_presence": {
                m: paired(sub["baseline"], recs, "presence") for m, recs in sub.items() if m != "baseline"
            },
        }
    return out


def position_2d_summary(grid: dict[str, list[dict]]) -> dict[str, Any]:
    """The 2-D items' figures: per method on the quadrant items and on the centre items, paired vs the baseline
    (presence over all 2-D items; the quadrant share on quadrant items) and LAM / +both vs the placebo."""
    from vidlab.generation.toyworld.evaluate import BOXES_2D

    quad = {m: [r for r in recs if r["side"] in QUADRANTS] for m, recs in grid.items()}
    cent = {m: [r for r in recs if r["side"] == "centre"] for m, recs in grid.items()}
    base = grid["baseline"]
    out: dict[str, Any] = {
        "what": "single subjects with the box in a quadrant or the centre; the detector's colour centre: quadrant = "
        "both axes on the box's side (a subject not found counts as a miss), in_box = the centre inside the box; "
        "placebo = every box mirrored through the frame's centre (the opposite quadrant; the centre stays)",
        "boxes": {k: BOXES_2D[k] for k in POSITIONS_2D},
        "items": len({r["item"] for r in base}),
        "quadrant_items": {m: summarise(r, POS2D_KEYS) for m, r in quad.items()},
        "centre_items": {m: summarise(r, POS2D_KEYS) for m, r in cent.items()},
        "all_items": {m: summarise(r, ("presence", "presence_colour", "found")) for m, r in grid.items()},
        "paired_vs_baseline": {
            m: {
                "presence": paired(base, r, "presence"),
                "quadrant": paired(quad["baseline"], quad[m], "quadrant"),
                "centre_in_box": paired(cent["baseline"], cent[m], "in_box"),
            }
            for m, r in grid.items()
            if m != "baseline"
        },
    }
    if "placebo" in grid:
        out["vs_placebo"] = {
            m: {
                "quadrant": paired(quad["placebo"], quad[m], "quadrant"),
                "toward2d": paired(quad["placebo"], quad[m], "toward2d"),
            }
            for m in ("lam", "both", "lam_fix")
            if m in grid
        }
    return out


DEFAULT_STUDY: dict[str, list] = {
    "baseline": ["baseline", {}],
    "lam_a1": ["lam", {"lam.alpha_max": 1.0, "lam.step_fraction": 0.3}],
    "lam_a2": ["lam", {"lam.alpha_max": 2.0, "lam.step_fraction": 0.3}],
    "lam_a4": ["lam", {"lam.alpha_max": 4.0, "lam.step_fraction": 0.3}],
    "lam_a1_f0.6": ["lam", {"lam.alpha_max": 1.0, "lam.step_fraction": 0.6}],
}


def _study_settings(ap: argparse.ArgumentParser, text: str | None) -> dict[str, list]:
    """``--study-settings`` parsed and checked (one line and exit 2 on a mistake), or the default study."""
    if text is None:
        return DEFAULT_STUDY
    try:
        val = json.loads(text)
        ok = isinstance(val, dict) and all(
            isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], dict)
            for v in val.values()
        )
    except ValueError:
        ok = False
    if not ok or "baseline" not in val:
        ap.error(
            '--study-settings: JSON {"baseline": ["baseline", {}], name: [method, {override: value}], ...}'
        )
    from vidlab.generation.toyworld.evaluate import comp_config

    for name, (method, ov) in val.items():
        try:
            comp_config(method, overrides=ov)
        except (ValueError, TypeError) as exc:
            ap.error(f"--study-settings: {name}: {exc}")
    return val


def _landing(recs: list[dict]) -> dict[str, Any]:
    """Where subjects land: mean and spread of the colour centre (x, y) over the videos where it is found."""
    xs = [r["cx"] for r in recs if r.get("cx") is not None]
    ys = [r["cy"] for r in recs if r.get("cy") is not None]
    if not xs:
        return {}
    return {
        "mean": [round(float(np.mean(xs)), 4), round(float(np.mean(ys)), 4)],
        "std": [round(float(np.std(xs)), 4), round(float(np.std(ys)), 4)],
        "found": len(xs),
    }


def against_seed(base: list[dict], recs: list[dict]) -> dict[str, Any]:
    """Per axis (x, y) of every off-centre box: the share of videos with the subject on the box's side, split by
    where the baseline video of the same caption and seed put it (already on the box's side, or on the other), and
    how many misses against the seed are unmoved (the subject within 0.02 of the frame of the baseline's spot)."""
    from vidlab.generation.toyworld.evaluate import SIDE_BOXES

    ref = {(r["prompt"], r["seed"]): r for r in base}
    out: dict[str, Any] = {}
    for ax, key in (("x", "cx"), ("y", "cy")):
        cells: dict[bool, list[float]] = {True: [], False: []}
        unmoved = misses = 0
        for r in recs:
            box = SIDE_BOXES[r["side"]]
            centre = (box[0] + box[2]) / 2 if ax == "x" else (box[1] + box[3]) / 2
            b = ref.get((r["prompt"], r["seed"]))
            if abs(centre - 0.5) < 1e-9 or b is None or b.get(key) is None:
                continue
            agree = (b[key] - 0.5) * (centre - 0.5) > 0
            ok = r.get(key) is not None and (r[key] - 0.5) * (centre - 0.5) > 0
            cells[agree].append(float(ok))
            if not agree and not ok:
                misses += 1
                unmoved += int(r.get(key) is not None and abs(r[key] - b[key]) < 0.02)
        out[ax] = {
            "baseline_on_box_side": round(float(np.mean(cells[True])), 4) if cells[True] else None,
            "baseline_on_other_side": round(float(np.mean(cells[False])), 4) if cells[False] else None,
            "n_other_side": len(cells[False]),
            "misses_other_side": misses,
            "misses_unmoved": unmoved,
        }
    return out


def box_tokens(pipe: Any, sampling: Any) -> dict[str, Any]:
    """How each study box is rasterised on the model's token grid: tokens per latent frame, and the grid."""
    from vidlab.generation.layout import TokenGrid
    from vidlab.generation.toyworld.evaluate import side_layout

    grid = TokenGrid.of(pipe)
    out: dict[str, Any] = {}
    for pos in STUDY_POSITIONS:
        m = np.asarray(
            side_layout("a red circle", pos).latent_masks(
                sampling.frames, sampling.height, sampling.width, grid
            )
        )[0, 0]
        rows, cols = np.nonzero(m)
        out[pos] = {
            "tokens": int(m.sum()),
            "rows": [int(rows.min()), int(rows.max())] if rows.size else None,
            "cols": [int(cols.min()), int(cols.max())] if cols.size else None,
        }
    out["grid"] = list(np.asarray(m).shape)
    return out


def study_2d(runner: Any, captions: list[str], seeds: list[int], settings: dict[str, list]) -> dict[str, Any]:
    """Validation study of 2-D control: every caption at STUDY_POSITIONS (quadrants, centre, left/right, top/bottom,
    the quadrants' corner thirds) x ``seeds`` for each setting. Per setting: the figures of each position group
    (quadrant, centre, horizontal = left/right, vertical = top/bottom: the same box shape transposed, corner = the
    corner thirds), per position, where subjects land, and presence paired vs the baseline."""
    from vidlab.generation.toyworld.evaluate import EvalItem

    items = [EvalItem.of(p, pos) for p in captions for pos in STUDY_POSITIONS]
    names = list(settings)
    res = runner.many([(run_name(m), items, seeds, ov, f"study {n}") for n, (m, ov) in settings.items()])
    by = dict(zip(names, res))
    groups = {
        "quadrant": QUADRANTS,
        "centre": ("centre",),
        "horizontal": ("left", "right"),
        "vertical": ("top", "bottom"),
        "corner": CORNERS,
    }
    rows: dict[str, Any] = {}
    for name, recs in by.items():
        row: dict[str, Any] = {
            g: summarise([r for r in recs if r["side"] in poss], POS2D_KEYS) for g, poss in groups.items()
        }
        row["per_position"] = {
            pos: {
                **summarise(
                    [r for r in recs if r["side"] == pos], ("quadrant", "x_ok", "y_ok", "in_box", "presence")
                ),
                "landing": _landing([r for r in recs if r["side"] == pos]),
            }
            for pos in STUDY_POSITIONS
        }
        row["presence_all"] = summarise(recs, ("presence",))["presence"]
        row["landing_all"] = _landing(recs)
        if name != "baseline":
            row["against_seed"] = against_seed(by["baseline"], recs)
            row["paired_presence_vs_baseline"] = paired(by["baseline"], recs, "presence")
            row["paired_quadrant_vs_baseline"] = paired(
                [r for r in by["baseline"] if r["side"] in QUADRANTS],
                [r for r in recs if r["side"] in QUADRANTS],
                "quadrant",
            )
        rows[name] = row
    cols = [
        "setting",
        "quadrant",
        "x_ok",
        "y_ok",
        "corner quadrant",
        "horizontal x_ok",
        "vertical y_ok",
        "centre in_box",
        "presence",
    ]
    print_table(
        [
            {
                "setting": n,
                "quadrant": r["quadrant"]["quadrant"],
                "x_ok": r["quadrant"]["x_ok"],
                "y_ok": r["quadrant"]["y_ok"],
                "corner quadrant": r["corner"]["quadrant"],
                "horizontal x_ok": r["horizontal"]["x_ok"],
                "vertical y_ok": r["vertical"]["y_ok"],
                "centre in_box": r["centre"]["in_box"],
                "presence": r["presence_all"],
            }
            for n, r in rows.items()
        ],
        cols,
    )
    return {
        "benchmark": "gen_toyworld_study_2d",
        "what": "validation only: single-subject captions (training captions) on validation seeds, box at each "
        "position; quadrant = both axes on the box's side; horizontal = left/right third boxes (x_ok), vertical = "
        "the same boxes transposed, top/bottom third (y_ok); a subject not found is a miss",
        "seeds": seeds,
        "captions": len(captions),
        "positions": list(STUDY_POSITIONS),
        "box_tokens": box_tokens(runner.pipe, runner.sampling),
        "settings": settings,
        "rows": rows,
    }


# ---- gates ---------------------------------------------------------------------------------------------
def gates(pipe: Any, sampling: Any, quick: bool) -> dict[str, Any]:
    """The gates, reported before any Comp-Attn figure (``vidlab.generation.toyworld.gates``, the one implementation):
    the VAE round trip (worst frame position) and the base model's single-subject presence on unseen seeds."""
    from vidlab.generation.toyworld import gates as g

    size = sampling.height
    v = g.vae_roundtrip(pipe.vae, n_per_caption=1 if quick else 2, size=size, frames=sampling.frames)
    caps = None
    if quick:
        from vidlab.generation.toyworld.world import all_captions

        caps = all_captions("single")[::6]
    sp = g.single_presence(
        pipe,
        seeds=(0,) if quick else (0, 1),
        steps=sampling.steps,
        guidance=sampling.guidance,
        height=sampling.height,
        width=sampling.width,
        frames=sampling.frames,
        captions=caps,
    )
    return {
        "vae_roundtrip": {
            "value": round(v["min"], 4),
            "threshold": v["gate"],
            "passed": v["passed"],
            "per_frame_position": v["per_frame"],
            "mean": round(v["mean"], 4),
            "clean": round(v["clean"], 4),
            "clips": v["clips"],
        },
        "single_presence": {
            "value": round(sp["presence"], 4),
            "threshold": sp["gate"],
            "passed": sp["passed"],
            "presence_colour": round(sp["presence_colour"], 4),
            "presence_frame0": round(sp["presence_frame0"], 4),
            "videos": sp["videos"],
            "what": "base model, every single-subject caption (all training captions, by necessity) on unseen seeds",
        },
    }


# ---- plots ---------------------------------------------------------------------------------------------
def _plot(summary: dict, path: pathlib.Path, note: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from vidlab.io import atomic_path

    methods = list(summary)
    keys = ("presence", "relation", "swapped", "iou_real")
    fig, ax = plt.subplots(figsize=(8, 3.4), dpi=120)
    w = 0.8 / len(methods)
    for i, m in enumerate(methods):
        vals = [summary[m][k] or 0.0 for k in keys]
        cis = [summary[m][f"{k}_ci"] or [v, v] for k, v in zip(keys, vals)]
        err = np.array([[v - c[0] for v, c in zip(vals, cis)], [c[1] - v for v, c in zip(vals, cis)]])
        ax.bar(np.arange(len(keys)) + i * w, vals, w, yerr=np.clip(err, 0, None), capsize=2, label=m)
    ax.set_xticks(np.arange(len(keys)) + 0.4 - w / 2, keys)
    ax.set_ylim(0, 1)
    ax.set_ylabel("mean over prompts (95% CI)")
    ax.set_title(f"Comp-Attn on the trained toy-world Wan ({note})", fontsize=9)
    ax.legend(fontsize=7, ncol=4, loc="upper center")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)


def _plot_sweep(sweep: dict, base: dict, chosen: dict, path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from vidlab.io import atomic_path

    panels = [k for k in ("lam.alpha_max", "lam.step_fraction", "sci.strength") if sweep.get(k)]
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.2), dpi=120, squeeze=False)
    series = ("presence", "relation", "iou_real", "toward", "single_presence")
    for ax, name in zip(axes[0], panels):
        rows = sweep[name]
        xs = [r["value"] for r in rows]
        for key in series:
            ax.plot(xs, [r.get(key) or 0.0 for r in rows], marker="o", label=key)
            if base.get(key) is not None:
                ax.axhline(base[key], lw=0.6, ls=":", color=ax.lines[-1].get_color())
        ax.axvline(chosen[name], lw=0.8, color="k", ls="--")
        ax.set_xscale("log" if min(xs) > 0 and max(xs) / min(xs) >= 8 else "linear")
        ax.set_xticks(xs, [f"{x:g}" for x in xs])
        ax.minorticks_off()
        ax.set_xlabel(name)
        ax.set_ylim(-0.5, 1)
        ax.set_title(f"{name} (validation; dotted: baseline)", fontsize=8)
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)


def write_preset(path: pathlib.Path, chosen: dict, base: pathlib.Path, note: str) -> pathlib.Path:
    """The calibrated generate preset: the model's preset with the values chosen on the validation split."""
    import yaml

    from vidlab.io import atomic_write_text

    cfg = yaml.safe_load(base.read_text(encoding="utf-8"))
    comp = cfg.setdefault("comp_attn", {})
    for key, value in chosen.items():
        part, name = key.split(".", 1)
        comp.setdefault(part, {})[name] = value
    header = (
        "# The toy-world Wan with Comp-Attn's strengths calibrated for THIS model (written by\n"
        "# benchmarks/gen_toyworld.py --write-preset; values chosen on the validation prompts only).\n"
        "# The paper-faithful defaults stay in CompAttnConfig and in configs/generate/toyworld.yaml.\n"
        f"# {note}\n"
    )
    return atomic_write_text(path, header + yaml.safe_dump(cfg, sort_keys=False))


# ---- running settings, in this process or in worker processes ----------------------------------------------
_W: dict[str, Any] = {}


def _worker_init(model: str | None, sampling: dict, fp: str, run_id: str) -> None:
    import torch

    from vidlab.generation.toyworld.evaluate import SamplingConfig, load_toyworld_pipeline

    torch.set_num_threads(1)
    _W.update(pipe=load_toyworld_pipeline(model), sampling=SamplingConfig(**sampling), fp=fp, run=run_id)


def _worker_run(method: str, items: list, seeds: list[int], ov: dict) -> list[dict]:
    from vidlab.generation.toyworld.evaluate import run_method

    return run_method(
        _W["pipe"],
        method,
        items,
        seeds,
        _W["sampling"],
        overrides=ov,
        progress=False,
        fingerprint=_W["fp"],
        run_id=_W["run"],
    )


class Runner:
    """Runs (method, items, seeds, overrides) jobs through the record cache: here, or in ``workers`` processes
    (each loads the pipeline once; jobs of one batch run in parallel, results come back in order)."""

    def __init__(self, pipe, model, sampling, fp: str, cache, workers: int = 1, progress: bool = True):
        import uuid

        self.pipe, self.sampling, self.fp, self.cache, self.progress = pipe, sampling, fp, cache, progress
        self.run_id = uuid.uuid4().hex[:12]  # tags the videos made (and timed) by this run
        self.pool = None
        if workers > 1:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            self.pool = ProcessPoolExecutor(
                workers,
                mp_context=mp.get_context("spawn"),
                initializer=_worker_init,
                initargs=(model, vars(sampling), fp, self.run_id),
            )

    def many(self, jobs: list[tuple[str, list, list[int], dict, str]]) -> list[list[dict]]:
        from vidlab.generation.toyworld.evaluate import run_method, split_cached, store

        if self.pool is None:
            return [
                run_method(
                    self.pipe,
                    m,
                    items,
                    sds,
                    self.sampling,
                    overrides=ov,
                    progress=self.progress,
                    desc=desc,
                    cache=self.cache,
                    fingerprint=self.fp,
                    run_id=self.run_id,
                )
                for m, items, sds, ov, desc in jobs
            ]
        pending = []
        for m, items, sds, ov, _desc in jobs:
            hits, todo, skey = split_cached(self.cache, m, items, sds, self.sampling, ov, self.fp)
            fut = self.pool.submit(_worker_run, m, todo, list(sds), ov) if todo else None
            pending.append((hits, fut, skey))
        out = []
        for hits, fut, skey in pending:
            new = fut.result() if fut is not None else []
            store(self.cache, skey, new)
            out.append(hits + new)
        return out

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


# ---- the run -------------------------------------------------------------------------------------------
def _subset(prompts: list[str], n: int) -> list[str]:
    """The first ``n`` prompts, keeping the relation / count proportions of the split."""
    if n >= len(prompts):
        return prompts
    rel = [p for p in prompts if not p.startswith("two ")]
    cnt = [p for p in prompts if p.startswith("two ")]
    k = (max(1, round(n * len(cnt) / len(prompts))) if n >= 5 else 0) if cnt else 0
    return rel[: n - k] + cnt[:k]


def _chunks(
    multi: list, single: list, nm: int, ns: int, grid2d: list | None = None, ng: int = 5
) -> list[tuple[str, list]]:
    """Multi-subject, position and 2-D position items in chunks, interleaved so every kind advances at the same
    pace (a run stopped by its time budget still has every method on the same items of each kind)."""
    kinds = [("single", single, ns), ("grid2d", grid2d or [], ng), ("multi", multi, nm)]
    lists = {k: [(k, items[i : i + n]) for i in range(0, len(items), n)] for k, items, n in kinds}
    pos = dict.fromkeys(lists, 0)
    out: list[tuple[str, list]] = []
    while any(pos[k] < len(v) for k, v in lists.items()):
        k = min((k for k, v in lists.items() if pos[k] < len(v)), key=lambda k: pos[k] / len(lists[k]))
        out.append(lists[k][pos[k]])
        pos[k] += 1
    return out


def _val_row(value: float, multi: list[dict], single: list[dict]) -> dict[str, Any]:
    m, s = summarise(multi), summarise(single, SINGLE_KEYS)
    return {
        "value": value,
        "presence": m["presence"],
        "relation": m["relation"],
        "swapped": m["swapped"],
        "iou_real": m["iou_real"],
        "single_presence": s["presence"],
        "toward": s["toward"],
        "on_side": s["on_side"],
    }


def _has_mask_source() -> bool:
    import dataclasses

    from vidlab.generation.config import LAMConfig

    return "mask_source" in {f.name for f in dataclasses.fields(LAMConfig)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--quick", action="store_true", help="smoke run: 8 test prompts, 4 position captions, 1 seed"
    )
    ap.add_argument("--model", default=None, help="toy-world pipeline dir (default: the shipped weights)")
    ap.add_argument(
        "--prompts", type=int, default=None, help="multi-subject test prompts (default 200; quick 8)"
    )
    ap.add_argument("--val-prompts", type=int, default=None, help="validation prompts (default 40; quick 6)")
    ap.add_argument(
        "--single-prompts",
        type=int,
        default=None,
        help="single-subject captions, each with its box left and right (default 24 -> 48 items; quick 4)",
    )
    ap.add_argument("--seeds", type=int, default=None, help="seeds per test item (default 2; quick 1)")
    ap.add_argument("--steps", type=int, default=None, help="denoising steps (default: the model's)")
    ap.add_argument("--no-sweep", action="store_true", help="skip calibration; use --alpha-max etc. as given")
    ap.add_argument("--alpha-max", type=float, default=None, help="with --no-sweep: lam.alpha_max")
    ap.add_argument("--step-fraction", type=float, default=None, help="with --no-sweep: lam.step_fraction")
    ap.add_argument("--sci-strength", type=float, default=None, help="with --no-sweep: sci.strength")
    ap.add_argument("--cache", default=None, help="JSON file of finished videos: a rerun skips them (resume)")
    ap.add_argument("--plot", default=None, help="write the methods' bar chart PNG here")
    ap.add_argument("--sweep-plot", default=None, help="write the calibration curves PNG here")
    ap.add_argument(
        "--budget-min",
        type=float,
        default=None,
        help="stop starting new test chunks after this many minutes (the summary says how far it got)",
    )
    ap.add_argument(
        "--extras",
        default="both_default,both_fused",
        help="test methods beyond baseline, sci, lam, both, placebo (comma list; '' for none)",
    )
    ap.add_argument("--alpha-grid", default="1,2,4,8", help="validation grid of lam.alpha_max")
    ap.add_argument("--step-grid", default="0.3,0.6,1.0", help="validation grid of lam.step_fraction")
    ap.add_argument("--sci-grid", default="0.5,1,2", help="validation grid of sci.strength")
    ap.add_argument(
        "--write-preset",
        default=None,
        help="write the calibrated generate preset here (e.g. configs/generate/toyworld-calibrated.yaml)",
    )
    ap.add_argument(
        "--workers", type=int, default=1, help="worker processes for generation (each loads the model once)"
    )
    ap.add_argument(
        "--max-box",
        type=float,
        default=None,
        help="the rule planner's largest box side for multi-subject prompts (default: the model's own, "
        "toyworld.json generate.planner_max_box; 1: the planner's uncapped boxes, the ablation)",
    )
    ap.add_argument(
        "--seed-base",
        type=int,
        default=0,
        help="test seeds are seed-base, seed-base+1, ... (fresh seeds after a change; validation seeds never move)",
    )
    ap.add_argument(
        "--grid2d-prompts",
        type=int,
        default=None,
        help="single-subject captions for the 2-D items, each at the four quadrants and the centre "
        "(default 12 -> 60 items; quick 2; 0: none)",
    )
    ap.add_argument(
        "--study-2d",
        default=None,
        metavar="OUT",
        help="run only the validation study of 2-D position control and write its JSON to OUT",
    )
    ap.add_argument(
        "--study-settings",
        default=None,
        help="with --study-2d: JSON {name: [method, {override: value}]} (default: LAM alpha_max 1, 2, 4 at "
        "step_fraction 0.3, and alpha_max 1 at step_fraction 0.6)",
    )
    ap.add_argument(
        "--fix",
        default=None,
        help="JSON of lam.* overrides on top of the chosen LAM values: adds method lam_fix, run on the single-subject "
        "and 2-D position items only (a 2-D control fix chosen by --study-2d on validation)",
    )
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    fix: dict[str, Any] | None = None
    if args.fix is not None:
        try:
            fix = json.loads(args.fix)
        except ValueError:
            fix = None
        if not isinstance(fix, dict) or not fix or not all(str(k).startswith("lam.") for k in fix):
            ap.error(
                f'--fix: a JSON object of lam.* overrides such as {{"lam.alpha_max": 2}}, got {args.fix!r}'
            )
        from vidlab.generation.toyworld.evaluate import comp_config

        try:
            comp_config("lam", overrides=fix)
        except (ValueError, TypeError) as exc:
            ap.error(f"--fix: {exc}")
    study_settings = _study_settings(ap, args.study_settings)
    if args.max_box is not None and not 0.05 <= args.max_box <= 1.0:
        ap.error(f"--max-box: a fraction of the frame side in [0.05, 1], got {args.max_box}")
    if args.seed_base < 0 or (args.grid2d_prompts is not None and args.grid2d_prompts < 0):
        ap.error("--seed-base and --grid2d-prompts take numbers >= 0")
    extras = [e for e in args.extras.split(",") if e]
    unknown = set(extras) - {"both_default", "both_fused"}
    if unknown:
        ap.error(f"--extras: unknown {sorted(unknown)} (known: both_default, both_fused)")
    grids: dict[str, list[float]] = {}
    for name in ("alpha_grid", "step_grid", "sci_grid"):  # checked before any model loads
        text = getattr(args, name)
        try:
            grids[name] = [float(v) for v in text.split(",") if v.strip()]
        except ValueError:
            ap.error(f"--{name.replace('_', '-')}: comma-separated numbers, got {text!r}")
        if not grids[name]:
            ap.error(f"--{name.replace('_', '-')}: at least one value, got {text!r}")

    import torch

    from vidlab.generation.config import LAMConfig, SCIConfig
    from vidlab.generation.toyworld.evaluate import (
        EvalItem,
        RecordCache,
        SamplingConfig,
        load_toyworld_pipeline,
        model_fingerprint,
        multi_items,
        single_items,
    )
    from vidlab.generation.toyworld.splits import single_prompts, test_prompts, val_prompts

    torch.set_num_threads(1)
    q = args.quick
    n_test = args.prompts or (8 if q else 200)
    n_val = args.val_prompts or (6 if q else 40)
    n_single = args.single_prompts or (4 if q else 24)
    seeds = list(range(args.seed_base, args.seed_base + (args.seeds or (1 if q else 2))))
    sampling = SamplingConfig.from_model(args.model)
    if args.steps:
        sampling.steps = int(args.steps)
    if args.max_box is not None:
        sampling.planner_max_box = float(args.max_box)
    prog = not args.no_progress
    t_all = time.perf_counter()
    pipe = load_toyworld_pipeline(args.model)
    fp = model_fingerprint(pipe)
    cache = RecordCache(pathlib.Path(args.cache) if args.cache else None)  # in memory only without --cache
    deadline = t_all + 60 * args.budget_min if args.budget_min else None
    fused_ok = _has_mask_source()
    runner = Runner(pipe, args.model, sampling, fp, cache, args.workers, prog)

    all_singles = single_prompts()
    singles = all_singles[:: max(1, len(all_singles) // n_single)][:n_single]
    single_test = single_items(singles, both_sides=True)
    test = multi_items(_subset(test_prompts(), n_test))
    n_grid = args.grid2d_prompts if args.grid2d_prompts is not None else (2 if q else 12)
    grid_caps = all_singles[:: max(1, len(all_singles) // n_grid)][:n_grid] if n_grid else []
    grid_test = [EvalItem.of(p, pos) for p in grid_caps for pos in POSITIONS_2D]

    if args.study_2d:
        out = study_2d(runner, all_singles[:: 6 if q else 1], [1000] if q else [1000, 1001], study_settings)
        runner.close()
        out.update(model_fingerprint=fp, sampling=vars(sampling))
        from vidlab.io import atomic_write_text

        atomic_write_text(pathlib.Path(args.study_2d), json.dumps(out, indent=1))
        emit_json(out)
        return 0

    # 0. gates first
    smoke = smoke_size_note(f"--quick: {n_test} test prompts x {len(seeds)} seed(s)") if q else None
    gate = gates(pipe, sampling, q)
    print(
        "gates: "
        + "; ".join(
            f"{k} {v.get('value')} (>= {v['threshold']}: {'PASS' if v['passed'] else 'FAIL'})"
            for k, v in gate.items()
        ),
        flush=True,
    )
    if smoke:
        print(smoke, flush=True)

    # 1. calibration on the validation split only
    defaults = {
        "lam.alpha_max": LAMConfig().alpha_max,
        "lam.step_fraction": LAMConfig().step_fraction,
        "sci.strength": SCIConfig().strength,
    }
    sweep: dict[str, list[dict]] = {}
    val_base: dict = {}
    rule: dict[str, Any] = {}
    if args.no_sweep:
        chosen = dict(defaults)
        for k, v in (
            ("lam.alpha_max", args.alpha_max),
            ("lam.step_fraction", args.step_fraction),
            ("sci.strength", args.sci_strength),
        ):
            if v is not None:
                chosen[k] = float(v)
    else:
        val_multi = multi_items(_subset(val_prompts(), n_val))
        # single-subject captions are training captions: their validation scenes use seeds the test never uses
        # (both box sides per caption, so the baseline's toward-box figure is 0 by construction and LAM's is a shift)
        # every caption on both sides and two seeds in a full run (96 videos per setting): with 24 the guard was
        # within one setting's noise and refused every LAM strength; with 48 (one seed) it passed alpha_max 2 at
        # +2 points, and the test then measured -6 [-16, +3] (bench.json of 024e59a)
        val_single = single_items(all_singles[:: 6 if q else 1], both_sides=True)
        vseeds_m, vseeds_s = [0], ([1000] if q else [1000, 1001])
        rule = {
            "objective": "relation + iou_real + 2 x toward (LAM); presence + relation (SCI)",
            "presence_tol": PRESENCE_TOL,
            "single_presence_tol": SINGLE_PRESENCE_TOL,
            "val_multi_seeds": vseeds_m,
            "val_single_seeds": vseeds_s,
            "val_single_items": len(val_single),
        }

        def level(method: str, ovs_: list[dict], values: list, name: str) -> list[dict]:
            """One grid level: every value's validation multi + single runs, in parallel when workers > 1."""
            jobs = []
            for v, ov in zip(values, ovs_):
                jobs += [
                    (method, val_multi, vseeds_m, ov, f"val {name}={v} multi"),
                    (method, val_single, vseeds_s, ov, f"val {name}={v} single"),
                ]
            res = runner.many(jobs)
            return [_val_row(v, res[2 * i], res[2 * i + 1]) for i, v in enumerate(values)]

        alpha_grid = [1.0, 4.0] if q else grids["alpha_grid"]
        step_grid = [0.3, 0.6] if q else grids["step_grid"]
        sci_grid = [0.5, 2.0] if q else grids["sci_grid"]
        val_base = level("baseline", [{}], [0.0], "baseline")[0]
        sweep["lam.alpha_max"] = level(
            "lam", [{"lam.alpha_max": a} for a in alpha_grid], alpha_grid, "alpha_max"
        )
        a_best = best_value(sweep["lam.alpha_max"], lambda r: selection_score(r, val_base))
        sweep["lam.step_fraction"] = level(
            "lam",
            [{"lam.alpha_max": a_best, "lam.step_fraction": f} for f in step_grid],
            step_grid,
            "step_fraction",
        )
        f_best = best_value(sweep["lam.step_fraction"], lambda r: selection_score(r, val_base))
        sweep["sci.strength"] = level("sci", [{"sci.strength": v} for v in sci_grid], sci_grid, "sci")
        s_best = best_value(sweep["sci.strength"], lambda r: sci_score(r, val_base))
        chosen = {"lam.alpha_max": a_best, "lam.step_fraction": f_best, "sci.strength": s_best}
        if fused_ok:
            ov = {"lam.alpha_max": a_best, "lam.step_fraction": f_best}
            box, fused = level("lam", [ov, ov | {"lam.mask_source": "fused"}], [0.0, 1.0], "mask_source")
            sweep["lam.mask_source"] = [box | {"value": "box"}, fused | {"value": "fused"}]
        print(f"validation baseline: {val_base}\nvalidation sweep: {sweep}\nchosen: {chosen}", flush=True)

    # 2. the test prompts and the position items
    lam_ov = {"lam.alpha_max": chosen["lam.alpha_max"], "lam.step_fraction": chosen["lam.step_fraction"]}
    ovs: dict[str, dict] = {
        "baseline": {},
        "sci": {"sci.strength": chosen["sci.strength"]},
        "lam": lam_ov,
        "both": {**lam_ov, "sci.strength": chosen["sci.strength"]},
        "placebo": lam_ov,
        "ts_attn": dict(TS_ATTN_OV),
    }
    if "both_default" in extras:
        ovs["both_default"] = {}
    if "both_fused" in extras and fused_ok:
        ovs["both_fused"] = {**ovs["both"], "lam.mask_source": "fused"}
    if fix:
        ovs["lam_fix"] = {**lam_ov, **fix}
    multi: dict[str, list[dict]] = {m: [] for m in ovs if m != "lam_fix"}
    single: dict[str, list[dict]] = {m: [] for m in ovs}
    # the 2-D items: the core methods only (the extras are multi-subject ablations)
    grid_methods = [m for m in ("baseline", "lam", "both", "placebo", "ts_attn", "lam_fix") if m in ovs]
    grid: dict[str, list[dict]] = {m: [] for m in grid_methods}
    chunks = _chunks(test, single_test, 5 if not q else 4, 4, grid_test, 5)
    done = {"multi": 0, "single": 0, "grid2d": 0}
    stopped = False
    for kind, items in chunks:
        if deadline is not None and time.perf_counter() > deadline and min(done.values()) > 0:
            stopped = True
            break
        dest = {"multi": multi, "single": single, "grid2d": grid}[kind]
        res = runner.many(
            [(run_name(m), items, seeds, ovs[m], f"{kind} {m} [{done[kind]}+{len(items)}]") for m in dest]
        )
        for m, r in zip(dest, res):
            dest[m] += r
        done[kind] += len(items)
        print(f"{time.strftime('%H:%M:%S')} done {done}", flush=True)
    runner.close()
    print(
        f"test items done: {done} of multi {len(test)}, single {len(single_test)}, 2-D {len(grid_test)}; "
        f"stopped early: {stopped}"
    )

    base = multi["baseline"]
    methods = {m: summarise(r) for m, r in multi.items()}
    for m, r in multi.items():
        methods[m]["time_ratio"] = time_ratio(base, r, runner.run_id)
    pair_keys = KEYS
    paired_vs = {m: {k: paired(base, multi[m], k) for k in pair_keys} for m in multi if m != "baseline"}
    single_sum = {m: summarise(r, SINGLE_KEYS) for m, r in single.items()}
    single_paired = {
        m: {k: paired(single["baseline"], single[m], k) for k in ("presence", "toward")}
        for m in single
        if m != "baseline"
    }
    shift = paired(single["placebo"], single["lam"], "toward")
    shift_both = paired(single["placebo"], single["both"], "toward")
    position = {
        "what": "single-subject prompts, box on the left or right third; the detector's centre of the subject's colour "
        "(x, frame widths) signed towards the REAL box; placebo = LAM fed the box on the other side",
        "items": len(single_test),
        "seeds": len(seeds),
        "shift_real_vs_placebo": shift,  # lam (real box) minus placebo (mirrored box), paired per item
        "shift_both_vs_placebo": shift_both,
        "toward_box": {m: {"mean": s["toward"], "ci": s["toward_ci"]} for m, s in single_sum.items()},
        "on_side_share": {m: {"mean": s["on_side"], "ci": s["on_side_ci"]} for m, s in single_sum.items()},
        "found": {m: s["found"] for m, s in single_sum.items()},
        "target": 0.15,
    }
    single_presence = {m: s["presence"] for m, s in single_sum.items()}
    single_colour = {m: s["presence_colour"] for m, s in single_sum.items()}
    by_axis = relation_by_axis(multi)
    pos2d = position_2d_summary(grid) if grid_test else {}

    def excl0(d: dict, sign: int = 1) -> bool:
        return bool(d and d["ci"][0 if sign > 0 else 1] * sign > 0)

    pb = paired_vs
    targets = {
        "gates_met": all(v["passed"] for v in gate.values()),
        "both_raises_relation": excl0(pb["both"]["relation"]),
        "both_raises_iou": excl0(pb["both"]["iou_real"]),
        "placebo_moves_other_way": bool(
            pb["placebo"]["relation"]
            and pb["placebo"]["relation"]["diff"] < 0
            and pb["placebo"]["swapped"]["diff"] > 0
        ),
        # presence, split by who raises it (one target once read "sci_or_both", met by LAM alone): SCI alone,
        # LAM alone, both; the placebo's row says how much of a presence gain needs no correct layout at all
        "sci_raises_presence": excl0(pb["sci"]["presence"]),
        "lam_raises_presence": excl0(pb["lam"]["presence"]),
        "both_raises_presence": excl0(pb["both"]["presence"]),
        "placebo_raises_presence": excl0(pb["placebo"]["presence"]),
        "both_raises_vertical_relation": excl0(by_axis.get("vertical", {}).get("paired", {}).get("both", {})),
        "both_raises_horizontal_relation": excl0(
            by_axis.get("horizontal", {}).get("paired", {}).get("both", {})
        ),
        "single_presence_drop_within_2pts": bool(
            single_paired["both"]["presence"] and single_paired["both"]["presence"]["diff"] >= -0.02
        ),
        "position_shift_ge_0.15": bool(shift and shift["diff"] >= 0.15),
    }
    if pos2d:
        for m in [x for x in ("lam", "both", "lam_fix") if x in grid]:
            quad = pos2d["quadrant_items"][m]["quadrant"]
            drop = pos2d["paired_vs_baseline"][m]["presence"]
            targets[f"{m}_2d_quadrant_ge_0.7"] = bool(quad is not None and quad >= 0.7)
            targets[f"{m}_2d_presence_drop_within_2pts"] = bool(drop and drop["diff"] >= -0.02)

    cols = [
        "method",
        "presence",
        "presence_colour",
        "relation",
        "relation_colour",
        "swapped",
        "iou_real",
        "seconds",
    ]
    print_table([{"method": m, **{k: s[k] for k in cols[1:]}} for m, s in methods.items()], cols)
    scols = ["method", "presence", "toward", "on_side", "found"]
    print_table([{"method": m, **{k: s[k] for k in scols[1:]}} for m, s in single_sum.items()], scols)
    print(f"position shift, real vs placebo box (lam): {shift}; (both): {shift_both}")
    for axis, row in by_axis.items():
        print(
            f"relation, {axis} prompts ({row['prompts']}): "
            + ", ".join(f"{m} {v['relation']}" for m, v in row["methods"].items())
        )
    if pos2d:
        qcols = ["method", "quadrant", "x_ok", "y_ok", "in_box", "presence", "found"]
        print("2-D items, quadrant boxes:")
        print_table(
            [{"method": m, **{k: r[k] for k in qcols[1:]}} for m, r in pos2d["quadrant_items"].items()], qcols
        )
        print(
            "2-D items, centre box: "
            + ", ".join(
                f"{m} in box {r['in_box']} dist {r['dist']}" for m, r in pos2d["centre_items"].items()
            )
        )
    print(f"targets: {targets}")
    if smoke:
        print(smoke)
    note = f"{done['multi']} test prompts x {len(seeds)} seeds"
    if args.plot:
        _plot(methods, pathlib.Path(args.plot), note)
    if args.write_preset and sweep:
        base_preset = pathlib.Path(__file__).resolve().parents[1] / "configs" / "generate" / "toyworld.yaml"
        write_preset(
            pathlib.Path(args.write_preset),
            chosen,
            base_preset,
            f"model {fp}: validation sweep {', '.join(f'{k}={v}' for k, v in chosen.items())}",
        )
    if args.sweep_plot and sweep:
        _plot_sweep(sweep, val_base, chosen, pathlib.Path(args.sweep_plot))
    emit_json(
        {
            "benchmark": "gen_toyworld",
            "gates": gate,
            "quick": q,
            "model_fingerprint": fp,
            "test_prompts": done["multi"],
            "single_items_done": done["single"],
            "stopped_by_budget": stopped,
            "val_prompts": min(n_val, len(val_prompts())),
            "single_items": len(single_test),
            "seeds": len(seeds),
            "sampling": vars(sampling),
            "methods": methods,
            "paired_vs_baseline": paired_vs,
            "both_minus_baseline": paired_vs["both"],
            "position_control": position,
            "single_subject": single_sum,
            "single_subject_paired_vs_baseline": single_paired,
            "single_subject_presence": single_presence,
            "single_subject_presence_colour_only": single_colour,
            "relation_by_axis": by_axis,
            "position_2d": pos2d,
            "test_seeds": seeds,
            "fix": fix,
            "detector_on_samples": {
                "what": "share of single-subject baseline samples where the detector finds the caption's colour+shape "
                "in >= 50% of frames (generator and detector errors together)",
                "value": single_presence["baseline"],
            },
            "vae_roundtrip": gate["vae_roundtrip"],
            "sweep": sweep,
            "val_baseline": val_base,
            "calibration_rule": rule,
            "defaults": defaults,
            "chosen": chosen,
            "targets": targets,
            "total_seconds": round(time.perf_counter() - t_all, 1),
        }
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
