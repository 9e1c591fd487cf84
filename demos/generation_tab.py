"""The generation tab: a prompt, editable subjects and boxes, SCI/LAM controls, and what Comp-Attn did.

``GenerationService`` holds one loaded pipeline and runs one request at a time on it (the Comp-Attn
controller carries per-call state, so two requests must never share it mid-run: a lock guards it, and the
Gradio event has concurrency 1 on top). The layout lives in a table of boxes, one row per subject and
keyframe, in the same format as ``vidlab generate --layout`` (``Layout.to_dict``); a canvas edits the boxes
of one keyframe by dragging, and both redraw the preview at once. Generate with an empty table plans the
boxes first (the same planner as 'Plan layout') and fills the table with the plan it used.

Under each video (each half of the side by side) a caption gives the verdict of the toy world's exact detector
where the model has one: every subject drawn? the relation? IoU with the boxes; a wrong video says so in red.
"""

from __future__ import annotations

import dataclasses
import html
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from vidlab.demos.config import MAX_SEED, DemoGenerationConfig
from vidlab.demos.work import WorkArea
from vidlab.errors import UserError

COLUMNS = ["subject", "t", "x0", "y0", "x1", "y1"]
CANVAS_SHORT_SIDE = 320


class DemoInputError(UserError):
    """A request the demo refuses (over a cap, a malformed table); the message says what to change."""


# ----------------------------------------------------------------------------------------- layout <-> table
def _as_rows(rows: Any) -> list[Any]:
    """The box table as a list of rows, whether the UI sent a pandas DataFrame or plain lists."""
    if hasattr(rows, "values") and hasattr(rows, "columns"):
        return rows.values.tolist()
    return list(rows or [])


def layout_to_rows(layout: Any) -> list[list[Any]]:
    """One row per subject keyframe: ``[label, t, x0, y0, x1, y1]`` (fractions of the frame)."""
    rows = []
    for s in layout.subjects:
        for t, box in s.keyframes:
            rows.append([s.label, round(float(t), 4), *[round(float(v), 4) for v in box]])
    return rows


def _split_label(label: str) -> tuple[str, int | None]:
    """``"cats #2"`` -> ``("cats", 1)``; a plain phrase -> ``(phrase, None)``."""
    head, sep, tail = label.rpartition(" #")
    if sep and tail.isdigit() and head.strip():
        return head.strip(), int(tail) - 1
    return label.strip(), None


def rows_to_layout(prompt: str, rows: Any, relations: list[dict[str, Any]] | None = None) -> Any:
    """Build a validated ``Layout`` from table rows (a list of lists or a DataFrame)."""
    from vidlab.generation.layout import Layout, SubjectLayout

    rows = _as_rows(rows)
    order: list[tuple[str, int | None]] = []
    keyframes: dict[tuple[str, int | None], list[tuple[float, tuple[float, float, float, float]]]] = {}
    for r, row in enumerate(rows or []):
        cells = list(row)
        if not any(str(c).strip() for c in cells if c is not None):
            continue  # an empty row the user added and left blank
        if len(cells) != len(COLUMNS):
            raise DemoInputError(f"box table row {r + 1} has {len(cells)} cells, expected {COLUMNS}")
        label = str(cells[0] or "").strip()
        if not label:
            raise DemoInputError(f"box table row {r + 1} has no subject")
        try:
            t, *box = (float(c) for c in cells[1:])
        except (TypeError, ValueError):
            raise DemoInputError(
                f"box table row {r + 1} ({label}): t, x0, y0, x1, y1 must be numbers"
            ) from None
        key = _split_label(label)
        if key not in keyframes:
            order.append(key)
            keyframes[key] = []
        keyframes[key].append((t, (box[0], box[1], box[2], box[3])))
    subjects = [
        SubjectLayout(phrase, sorted(keyframes[(phrase, ci)], key=lambda k: k[0]), count_index=ci)
        for phrase, ci in order
    ]
    keep: Any = relations if relations and all(_rel_fits(r, len(subjects)) for r in relations) else []
    return Layout(
        prompt=prompt, subjects=subjects, relations=keep, planner="demo"
    )  # dicts: Layout checks them


def _rel_fits(rel: dict[str, Any], n: int) -> bool:
    return all(rel.get(k) is None or 0 <= int(rel[k]) < n for k in ("subject", "object"))


# -------------------------------------------------------------------------------------------------- canvas
def canvas_size(height: int, width: int) -> tuple[int, int]:
    """Canvas pixels (w, h) at the video's aspect, CANVAS_SHORT_SIDE on the short side."""
    scale = CANVAS_SHORT_SIDE / min(height, width)
    return round(width * scale), round(height * scale)


def canvas_value(rows: Any, t: float, height: int, width: int) -> dict[str, Any]:
    """The annotator's value: a plain background and every subject's box at keyframe time ``t``."""
    from vidlab.generation.layout import PALETTE

    w, h = canvas_size(height, width)
    image = np.full((h, w, 3), 40, dtype=np.uint8)
    image[:, :: max(1, w // 8)] = 60  # a faint grid so positions read at a glance
    image[:: max(1, h // 8), :] = 60
    boxes = []
    rows = _as_rows(rows)
    for i, row in enumerate(r for r in (rows or []) if r and str(r[0] or "").strip()):
        try:
            rt, x0, y0, x1, y1 = (float(c) for c in row[1:6])
        except (TypeError, ValueError):
            continue
        if abs(rt - t) > 1e-6:
            continue
        colour = PALETTE[i % len(PALETTE)]
        boxes.append(
            {
                "xmin": round(x0 * w),
                "ymin": round(y0 * h),
                "xmax": round(x1 * w),
                "ymax": round(y1 * h),
                "label": str(row[0]),
                "color": tuple(int(c) for c in colour),
            }
        )
    return {"image": image, "boxes": boxes}


def rows_from_canvas(rows: Any, value: dict[str, Any] | None, t: float) -> list[list[Any]]:
    """Write the canvas's boxes back into the rows of keyframe ``t`` (matched by label)."""
    rows = [list(r) for r in _as_rows(rows)]
    if not value or value.get("image") is None:
        return rows
    image = value["image"]
    h, w = (image.shape[:2] if hasattr(image, "shape") else (None, None)) or (None, None)
    if not h or not w:
        return rows
    by_label = {str(b.get("label", "")): b for b in value.get("boxes") or []}
    for r in rows:
        if not r or abs(float(r[1]) - t) > 1e-6 or str(r[0]) not in by_label:
            continue
        b = by_label[str(r[0])]
        box = [b["xmin"] / w, b["ymin"] / h, b["xmax"] / w, b["ymax"] / h]
        r[2:6] = [round(min(max(v, 0.0), 1.0), 4) for v in box]
    return rows


def keyframe_times(rows: Any) -> list[str]:
    """The distinct keyframe times in the table, as strings for a dropdown."""
    rows = _as_rows(rows)
    times = set()
    for r in rows or []:
        try:
            times.add(round(float(r[1]), 4))
        except (TypeError, ValueError, IndexError):
            continue
    return [f"{t:g}" for t in sorted(times)] or ["0"]


def _font(size: int) -> Any:
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1
        return ImageFont.load_default()


def check_seed(value: Any) -> int:
    """The seed as an int in 0..MAX_SEED (empty = 0); anything else is a DemoInputError saying the range."""
    if value is None or value == "":
        return 0
    try:
        seed = int(value)
        whole = float(value) == seed
    except (TypeError, ValueError, OverflowError):
        raise DemoInputError(f"seed {value!r} is not a whole number; use 0..{MAX_SEED}") from None
    if not whole or not 0 <= seed <= MAX_SEED:
        raise DemoInputError(
            f"seed {value!r} is outside 0..{MAX_SEED} (2**53 - 1: the largest whole number a browser keeps exact)"
        )
    return seed


LABEL_BAND, LABEL_GAP = 22, 4  # the label band's height above the halves, the white gap between them (pixels)


def label_spans(half_width: int, labels: tuple[str, str]) -> list[tuple[float, float]]:
    """Where each label's text runs on the side-by-side frame, ``(x_start, x_end)`` in its pixels (the text
    centred in its half, drawn from y=3 in the :data:`LABEL_BAND` band)."""
    from PIL import Image, ImageDraw

    draw, font = ImageDraw.Draw(Image.new("RGB", (1, 1))), _font(14)
    spans = []
    for k, text in enumerate(labels):
        tw = float(draw.textlength(text, font=font))
        x0 = k * (half_width + LABEL_GAP) + max(2.0, (half_width - tw) / 2)
        spans.append((x0, x0 + tw))
    return spans


def label_halves(left: np.ndarray, right: np.ndarray, labels: tuple[str, str]) -> np.ndarray:
    """``[N, H, 2W + gap, 3]``: the two videos side by side, each under a band that names it, drawn on the
    video itself. Small videos are scaled up (nearest) first so the labels are legible."""
    from PIL import Image, ImageDraw

    n, h, w, _ = left.shape
    scale = max(1, -(-160 // w))  # each half at least 160 px wide
    if scale > 1:
        left = left.repeat(scale, axis=1).repeat(scale, axis=2)
        right = right.repeat(scale, axis=1).repeat(scale, axis=2)
        h, w = h * scale, w * scale
    gap, band = LABEL_GAP, LABEL_BAND
    header = Image.new("RGB", (2 * w + gap, band), (0, 0, 0))
    draw = ImageDraw.Draw(header)
    font = _font(14)
    for (x0, _), text in zip(label_spans(w, labels), labels):
        draw.text((x0, 3), text, fill=(255, 255, 255), font=font)
    head = np.broadcast_to(np.asarray(header), (n, band, 2 * w + gap, 3))
    sep = np.full((n, h, gap, 3), 255, dtype=np.uint8)
    body = np.concatenate([left, sep, right], axis=2)
    both = np.concatenate([head, body], axis=1)
    if both.shape[1] % 2:  # even sizes for yuv420p
        both = np.concatenate([both, np.zeros_like(both[:, :1])], axis=1)
    if both.shape[2] % 2:
        both = np.concatenate([both, np.zeros_like(both[:, :, :1])], axis=2)
    return np.ascontiguousarray(both)


COMPARE_LABELS = ("without Comp-Attn", "with Comp-Attn")


# ------------------------------------------------------------------------------------- attention thumbnails
def _spread(items: list[int], most: int) -> list[int]:
    """At most ``most`` of ``items``, evenly spaced, first and last kept."""
    if len(items) <= most:
        return list(items)
    picks = sorted({round(k * (len(items) - 1) / (most - 1)) for k in range(most)})
    return [items[i] for i in picks]


def attention_thumbnail(maps: Any, g: int, most_steps: int = 6, most_frames: int = 3, cell: int = 56) -> Any:
    """One subject's cross-attention as a legible, roughly square PIL image (the gallery shows square tiles).

    At most ``most_steps`` denoising steps (LAM-biased ones marked) and ``most_frames`` latent frames. Each
    step is a labelled block holding its frames left to right; the blocks are laid out in the grid closest to
    square. Each map is scaled up (nearest) in the magma colours, normalised per step, with the layout mask's
    cells outlined in cyan; the subject's name is the title."""
    import math

    from matplotlib import colormaps
    from PIL import Image, ImageDraw

    steps = _spread(list(maps.steps), most_steps)
    frames = _spread(list(range(int(maps.grid[0]))), most_frames)
    h, w = int(maps.grid[1]), int(maps.grid[2])
    k = max(1, cell // max(h, w))
    ch, cw = h * k, w * k
    pad, label, head = 6, 16, 44
    block_w, block_h = len(frames) * (cw + 2) + pad, label + ch + pad
    cols = min(
        range(1, len(steps) + 1),
        key=lambda c: abs(math.log((c * block_w + pad) / (head + math.ceil(len(steps) / c) * block_h + pad))),
    )
    rows = math.ceil(len(steps) / cols)
    small, big = _font(12), _font(18)
    name = str(maps.names[g])
    legend = (
        f"latent frame{'s' if len(frames) > 1 else ''} {', '.join(map(str, frames))} left to right; box: cyan"
    )
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    text_w = max(probe.textlength(name, font=big), probe.textlength(legend, font=small))
    width, height = max(cols * block_w + pad, math.ceil(text_w) + 2 * pad), head + rows * block_h + pad
    img = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    draw.text((pad, 2), name, fill=(0, 0, 0), font=big)
    draw.text((pad, 24), legend, fill=(80, 80, 80), font=small)
    cmap = colormaps["magma"]
    mask = None if maps.masks is None else maps.masks[g]
    for n, step in enumerate(steps):
        m = maps.map(step)[g]
        m = m / max(float(m.max()), 1e-30)
        bx, by = pad + (n % cols) * block_w, head + (n // cols) * block_h
        tag = f"step {step}" + (" (LAM)" if maps.step_biased(step) else "")
        draw.text((bx, by), tag, fill=(0, 0, 0), font=small)
        for i, f in enumerate(frames):
            x0, y0 = bx + i * (cw + 2), by + label
            rgb = (cmap(m[f])[..., :3] * 255).astype(np.uint8).repeat(k, 0).repeat(k, 1)
            img.paste(Image.fromarray(rgb), (x0, y0))
            if mask is not None and mask[f].any():
                _outline(draw, mask[f], x0, y0, k)
    return img


def _outline(draw: Any, mask: np.ndarray, x0: int, y0: int, k: int) -> None:
    """Cyan edges around the mask's cells (every cell side that borders a cell outside the mask)."""
    hh, ww = mask.shape
    for i in range(hh):
        for j in range(ww):
            if not mask[i, j]:
                continue
            xa, ya, xb, yb = x0 + j * k, y0 + i * k, x0 + (j + 1) * k - 1, y0 + (i + 1) * k - 1
            if i == 0 or not mask[i - 1, j]:
                draw.line([(xa, ya), (xb, ya)], fill=(0, 255, 255))
            if i == hh - 1 or not mask[i + 1, j]:
                draw.line([(xa, yb), (xb, yb)], fill=(0, 255, 255))
            if j == 0 or not mask[i, j - 1]:
                draw.line([(xa, ya), (xa, yb)], fill=(0, 255, 255))
            if j == ww - 1 or not mask[i, j + 1]:
                draw.line([(xb, ya), (xb, yb)], fill=(0, 255, 255))


def save_attention_thumbnails(maps: Any, out_dir: Path) -> list[tuple[str, str]]:
    """Each subject's thumbnail as a PNG in ``out_dir`` with a short caption (its name): [(path, caption)]."""
    from vidlab.io import atomic_open

    out_dir.mkdir(parents=True, exist_ok=True)
    items = []
    for g, name in enumerate(maps.names):
        path = out_dir / f"subject_{g:02d}.png"
        with atomic_open(path, "wb") as fh:
            attention_thumbnail(maps, g).save(fh, format="PNG")
        items.append((str(path), str(name)))
    return items


# ----------------------------------------------------------------------------------------- verdict captions
def verdict_ok(v: dict[str, Any] | None) -> bool | None:
    """Right (True), wrong (False) or not known (None): every subject drawn, and the relation and the count
    where the prompt asks for one."""
    if not v or "error" in v:
        return None
    return bool(v.get("presence")) and v.get("relation") is not False and v.get("count") is not False


def verdict_caption(label: str, summary: dict[str, Any], half: str) -> str:
    """One video's caption (HTML): the detector's verdict, what the prompt asked beside it, wrong in red."""
    v = summary.get("verdict")
    ok = verdict_ok(v)
    asked = html.escape(str(summary.get("prompt", "")))
    if v is None:
        colour, head = "#6b7280", "no exact detector for this model"
        body = (
            f"only the toy world has one ({html.escape(str(summary.get('model')))} is judged by eye); "
            f"asked: “{asked}”"
        )
    elif ok is None:
        colour, head, body = "#6b7280", "not judged", html.escape(str(v.get("error", "")))
    else:
        yes = {True: "yes", False: "NO", None: "-"}
        parts = [f"every subject drawn: <b>{yes[v['presence']]}</b>"]
        if v.get("relation") is not None:
            parts.append(f"relation: <b>{yes[v['relation']]}</b>")
        if v.get("count") is not None:
            parts.append(f"count: <b>{yes[v['count']]}</b>")
        if v.get("iou") is not None:
            parts.append(f"IoU with the boxes: <b>{float(v['iou']):.2f}</b>")
        colour = "#15803d" if ok else "#b91c1c"
        head = "✓ RIGHT" if ok else "✗ WRONG"
        body = " · ".join(parts) + f"<br>asked: “{asked}”"
    return (
        f'<div class="gen-verdict-item" data-half="{half}" data-ok="{str(ok).lower()}" '
        f'style="flex:1 1 0;min-width:0;border:2px solid {colour};border-radius:6px;padding:6px 8px;'
        f'font-size:14px;line-height:1.35">'
        f'<div><b>{html.escape(label)}</b>: <b style="color:{colour}">{head}</b></div>'
        f'<div style="color:#111827">{body}</div>'
        f'<div style="color:#6b7280;font-size:12px">toy-world detector: exact, learning-free, on the frames '
        f"drawn</div></div>"
    )


def verdict_html(items: list[tuple[str, dict[str, Any], str]]) -> str:
    """The captions in a row, one per video or per half (left to right as on the video)."""
    inner = "".join(verdict_caption(label, summary, half) for label, summary, half in items)
    return f'<div class="gen-verdicts" style="display:flex;gap:4px;width:100%">{inner}</div>'


# ------------------------------------------------------------------------------------------------- service
class GenerationService:
    """One loaded Wan pipeline (lazily), planning, and one-at-a-time generation with or without Comp-Attn."""

    def __init__(self, config: DemoGenerationConfig, work: WorkArea):
        from vidlab.config import resolve
        from vidlab.generation.pipeline import GenerateConfig

        self.config = config
        self.work = work
        self.base = resolve(
            GenerateConfig, config.preset, list(config.overrides)
        )  # a bad preset fails at start
        self._pipe: Any = None
        self._lock = threading.Lock()
        self._last: tuple[str, dict[str, Any]] | None = None  # the last Comp-Attn video, for side by side

    @property
    def model_name(self) -> str:
        return str(self.base.model)

    @property
    def random_weights(self) -> bool:
        """True for the built-in tiny pipelines: random weights, so the video is noise by construction."""
        from vidlab.generation.pipeline import TINY_MODELS

        return self.base.model in TINY_MODELS

    def model_note(self) -> str:
        """What the page says about the model (random weights are said plainly)."""
        b = self.base
        text = f"Model preset: `{self.config.preset}` ({self.model_name}, {b.width}x{b.height}, {b.frames} frames)"
        if self.random_weights:
            text += (
                "\n\n**Random weights**: this model was never trained, so its videos are noise by construction. "
                "It shows the machinery (layouts, SCI, LAM, attention maps), not what Comp-Attn does to a real "
                "model; pick a trained preset (`generation.preset=generate/toyworld-calibrated` or a real Wan) "
                "for that."
            )
        return text

    def pipeline(self) -> Any:
        if self._pipe is None:
            from vidlab.generation.pipeline import load_pipeline

            self._pipe = load_pipeline(self.base)
        return self._pipe

    def plan(self, prompt: str, subjects: list[str] | None = None) -> Any:
        from vidlab.generation.pipeline import planner_kwargs
        from vidlab.generation.planners import plan_layout

        self.check_prompt(prompt)
        # the preset's planner options for the demo's planner, as `vidlab generate` plans
        kw = planner_kwargs(dataclasses.replace(self.base, planner=self.config.planner)) or {}
        try:
            return plan_layout(prompt, planner=self.config.planner, subjects=subjects or None, **kw)
        except UserError as exc:  # the planner's own messages name the phrase at fault
            raise DemoInputError(str(exc)) from None

    def layout_for(
        self, prompt: str, rows: Any, relations: list[dict[str, Any]] | None = None, subjects: Any = None
    ) -> tuple[Any, bool]:
        """The request's layout and whether it was planned: the box table's, or with an empty table the
        planner's (the same call as 'Plan layout', ``subjects`` as typed: a "; "-separated string or a list)."""
        self.check_prompt(prompt)
        layout = rows_to_layout(prompt, rows, relations)
        if layout.subjects:
            return layout, False
        if isinstance(subjects, str):
            subjects = [s.strip() for s in subjects.split(";") if s.strip()]
        return self.plan(prompt, list(subjects or []) or None), True

    def check_prompt(self, prompt: str) -> None:
        if not isinstance(prompt, str) or not prompt.strip():
            raise DemoInputError("enter a prompt first")
        if len(prompt) > self.config.max_prompt_chars:
            raise DemoInputError(
                f"the prompt has {len(prompt)} characters; this demo accepts at most "
                f"{self.config.max_prompt_chars} (generation.max_prompt_chars)"
            )

    def settings(self, **ui: Any) -> Any:
        """The request's GenerateConfig: the preset with the UI's values, checked against the caps."""
        cap = self.config
        steps, seed = int(ui.get("steps") or self.base.steps), check_seed(ui.get("seed"))
        if not 1 <= steps <= cap.max_steps:
            raise DemoInputError(f"steps={steps} is outside 1..{cap.max_steps} (generation.max_steps)")
        if self.base.frames > cap.max_frames:
            raise DemoInputError(
                f"the preset's {self.base.frames} frames exceed generation.max_frames={cap.max_frames}"
            )
        if max(self.base.height, self.base.width) > cap.max_side:
            raise DemoInputError(
                f"the preset's {self.base.width}x{self.base.height} exceeds generation.max_side={cap.max_side}"
            )
        ca = self.base.comp_attn
        sci = dataclasses.replace(
            ca.sci,
            enabled=bool(ui.get("sci", ca.sci.enabled)),
            strength=float(ui.get("sci_strength", ca.sci.strength)),
        )
        lam = dataclasses.replace(
            ca.lam,
            enabled=bool(ui.get("lam", ca.lam.enabled)),
            step_fraction=float(ui.get("step_fraction", ca.lam.step_fraction)),
        )
        if not 0.0 <= sci.strength <= 5.0:
            raise DemoInputError(f"SCI strength {sci.strength:g} is outside 0..5")
        if not 0.0 <= lam.step_fraction <= 1.0:
            raise DemoInputError(f"LAM step fraction {lam.step_fraction:g} is outside 0..1")
        comp = dataclasses.replace(
            ca,
            enabled=bool(ui.get("comp_attn", True)),
            sci=sci,
            lam=lam,
            capture_attention=bool(ui.get("comp_attn", True)) and cap.attention_maps,
        )
        return dataclasses.replace(self.base, steps=steps, seed=seed, comp_attn=comp)

    def generate(self, prompt: str, layout: Any, **ui: Any) -> dict[str, Any]:
        """Run one request; returns the paths the UI shows and what Comp-Attn did (all validated first)."""
        from vidlab.generation.pipeline import generate_video, model_source
        from vidlab.generation.toyworld.metrics import judge_toyworld_videos, verdict_line
        from vidlab.io import atomic_write_json
        from vidlab.video import write_video

        self.check_prompt(prompt)
        if len(layout.subjects) > self.config.max_subjects:
            raise DemoInputError(
                f"{len(layout.subjects)} subjects exceed generation.max_subjects={self.config.max_subjects}"
            )
        cfg = self.settings(**ui)
        with self._lock:  # one Comp-Attn call per loaded model at a time
            t0 = time.perf_counter()
            gen = generate_video(self.pipeline(), cfg, prompt, layout if cfg.comp_attn.enabled else None)
            res, frames = gen.result, gen.frames
            seconds = time.perf_counter() - t0
        out = self.work.new_dir("generate")
        video = write_video(frames, out / "video.mp4", fps=cfg.fps)
        layout.save(out / "layout.json")
        scale = max(1.0, 256 / min(cfg.width, cfg.height))
        overlays = layout.render_overlays(out / "layout", round(cfg.width * scale), round(cfg.height * scale))
        maps = []
        if res.maps is not None:  # the full grids (every step and frame) for download, thumbnails to show
            res.maps.save_png(out / "attention")
            maps = save_attention_thumbnails(res.maps, out / "attention_thumbnails")
        summary = {
            "prompt": prompt,
            "model": self.model_name,
            "comp_attn": cfg.comp_attn.enabled,
            "seed": cfg.seed,
            "steps": cfg.steps,
            "subjects": res.subjects,
            "lam_biased_steps": sorted({int(e["step"]) for e in res.lam_log}),
            "sci": res.sci,
            "seconds": round(seconds, 3),
        }
        truth = judge_toyworld_videos(model_source(cfg.model), prompt, [frames], layout)
        summary["verdict"] = None if truth is None else truth[0]
        if truth is not None:  # the truth beside the video where it is known: the toy world's exact detector
            summary["detector"] = verdict_line(truth[0], "this video")
        atomic_write_json(out / "result.json", summary)
        result = {
            "video": str(video),
            "frames": frames,
            "layout_json": str(out / "layout.json"),
            "overlays": [str(p) for p in overlays],
            "maps": maps,
            "summary": summary,
        }
        if cfg.comp_attn.enabled:
            with self._lock:
                self._last = (self._request_key(prompt, layout, cfg), result)
        return result

    @staticmethod
    def _request_key(prompt: str, layout: Any, cfg: Any) -> str:
        """Everything that decides the video: prompt, layout, and the resolved settings (seed included)."""
        import json

        return json.dumps([prompt, layout.to_dict(), dataclasses.asdict(cfg)], sort_keys=True, default=str)

    def compare(self, prompt: str, layout: Any, **ui: Any) -> dict[str, Any]:
        """The same request without Comp-Attn, same seed, beside the Comp-Attn video: the one just generated
        for this very request when there is one (not generated again), else both. Each half is labelled on
        the video itself."""
        from vidlab.video import write_video

        self.check_prompt(prompt)
        key = self._request_key(prompt, layout, self.settings(**{**ui, "comp_attn": True}))
        with self._lock:
            last = self._last
        reused = last is not None and last[0] == key
        with_ca = (
            last[1]
            if reused and last is not None
            else self.generate(prompt, layout, **{**ui, "comp_attn": True})
        )
        plain = self.generate(prompt, layout, **{**ui, "comp_attn": False})
        both = label_halves(plain["frames"], with_ca["frames"], COMPARE_LABELS)
        out = self.work.new_dir("compare")
        path = write_video(both, out / "side_by_side.mp4", fps=self.base.fps)
        return {"video": str(path), "plain": plain, "comp_attn": with_ca, "reused": reused}


# ----------------------------------------------------------------------------------------------------- UI
def build_generation_tab(service: GenerationService) -> None:
    """Lay out the tab's components and wire its events (call inside a ``gr.Blocks``)."""
    import gradio as gr

    try:
        from gradio_image_annotation import image_annotator
    except ImportError:  # pragma: no cover - the demo extra installs it
        image_annotator = None

    h, w = service.base.height, service.base.width
    with gr.Row():
        with gr.Column(scale=3):
            prompt = gr.Textbox(
                label="Prompt",
                value=service.config.prompt,
                elem_id="gen-prompt",
                max_length=service.config.max_prompt_chars,
            )
            subjects = gr.Textbox(
                label="Subjects (; separated; the planner fills them in, edit and re-plan)",
                elem_id="gen-subjects",
            )
            plan_btn = gr.Button("Plan layout", elem_id="gen-plan")
            table = gr.Dataframe(
                headers=COLUMNS,
                datatype=["str", "number", "number", "number", "number", "number"],
                column_count=len(COLUMNS),
                interactive=True,
                label="Boxes: one row per subject keyframe (t, x0, y0, x1, y1 are fractions of the clip and frame)",
                elem_id="gen-boxes",
            )
            with gr.Row():
                keyframe = gr.Dropdown(
                    choices=["0"], value="0", label="Keyframe on the canvas", elem_id="gen-keyframe"
                )
                layout_upload = gr.UploadButton(
                    "Upload layout JSON", file_types=[".json"], elem_id="gen-upload"
                )
                layout_download = gr.File(label="Layout JSON (same format as vidlab generate --layout)")
            canvas = (
                image_annotator(label="Drag the boxes of this keyframe", sources=[], show_clear_button=False)
                if image_annotator is not None
                else None
            )
            preview = gr.Gallery(label="Layout preview", columns=4, height=220, elem_id="gen-preview")
        with gr.Column(scale=2):
            with gr.Accordion("Comp-Attn", open=True):
                sci = gr.Checkbox(value=service.base.comp_attn.sci.enabled, label="SCI (subject presence)")
                sci_strength = gr.Slider(
                    0, 2, value=service.base.comp_attn.sci.strength, step=0.05, label="SCI strength"
                )
                lam = gr.Checkbox(value=service.base.comp_attn.lam.enabled, label="LAM (layout)")
                step_fraction = gr.Slider(
                    0, 1, value=service.base.comp_attn.lam.step_fraction, step=0.05, label="LAM step fraction"
                )
            seed = gr.Number(value=service.base.seed, precision=0, minimum=0, maximum=MAX_SEED, label="Seed")
            steps = gr.Slider(1, service.config.max_steps, value=service.base.steps, step=1, label="Steps")
            gr.Markdown(service.model_note(), elem_id="gen-model")
            gen_btn = gr.Button("Generate", variant="primary", elem_id="gen-run")
            cmp_btn = gr.Button("Side by side without Comp-Attn (same seed)", elem_id="gen-compare")
            plan_note = gr.Markdown(elem_id="gen-plan-note")
            # no label badge: it sat on the side by side's left label ("without Comp-Attn")
            video = gr.Video(show_label=False, elem_id="gen-video", autoplay=True, loop=True)
            verdict = gr.HTML(elem_id="gen-verdict")
            maps = gr.Gallery(  # one per row, wide: the steps read left to right, the titles whole
                label="Per-subject cross-attention (LAM-biased steps marked; boxes in cyan)",
                columns=1,
                object_fit="contain",
                height="auto",
                elem_id="gen-maps",
            )
            info = gr.JSON(label="What Comp-Attn did")
    relations = gr.State([])
    track_tqdm = gr.Progress(track_tqdm=True)  # Gradio reads the progress tracker from the default argument

    def plan_outputs(lay):
        """The planned layout into the subjects box, the table, the relations and the keyframe list."""
        rows = layout_to_rows(lay)
        times = keyframe_times(rows)
        return (
            "; ".join(dict.fromkeys(s.phrase for s in lay.subjects)),
            rows,
            [r.to_dict() for r in lay.relations],
            gr.Dropdown(choices=times, value=times[0]),
        )

    def on_plan(p, subj):
        try:
            lay = service.plan(p, [s.strip() for s in (subj or "").split(";") if s.strip()] or None)
        except UserError as exc:
            raise gr.Error(str(exc)) from None
        return plan_outputs(lay)

    def on_table(p, rows, rels, t):
        times = keyframe_times(rows)
        t = t if t in times else times[0]
        out = [gr.Dropdown(choices=times, value=t), _preview(p, rows, rels)]
        if canvas is not None:
            out.append(canvas_value(rows, float(t), h, w))
        return out

    def _preview(p, rows, rels):
        try:
            lay = rows_to_layout(p or "", rows, rels)
        except UserError:  # a half-edited table: no preview until it is valid
            return []
        if not lay.subjects:
            return []
        d = service.work.new_dir("preview")
        scale = max(1.0, 192 / min(h, w))
        return [str(x) for x in lay.render_overlays(d, round(w * scale), round(h * scale))]

    def on_canvas(rows, value, t):
        return rows_from_canvas(rows, value, float(t or 0))

    def _request(run, p, subj, rows, rels, sc, scs, la, sf, sd, st):
        """The table's layout, or with an empty table the planner's; run ``run`` (generate or compare). A user
        error becomes a message on the page. Returns the result, the plan's outputs (skipped when the table
        was used) and the line that says which layout was used."""
        try:
            lay, planned = service.layout_for(p, rows, rels, subj)
            r = run(p, lay, sci=sc, sci_strength=scs, lam=la, step_fraction=sf, seed=sd, steps=st)
        except UserError as exc:  # typed input errors only: a bug keeps its traceback in the log
            raise gr.Error(str(exc)) from None
        if planned:
            note = (
                f"The box table was empty: the {service.config.planner} planner laid out "
                f"{'; '.join(lay.phrases)} (now in the table: edit the boxes and generate again)."
            )
            return r, plan_outputs(lay), note, planned
        return r, (gr.skip(),) * 4, "", planned

    def on_generate(p, subj, rows, rels, sc, scs, la, sf, sd, st, progress=track_tqdm):
        r, plan, note, planned = _request(service.generate, p, subj, rows, rels, sc, scs, la, sf, sd, st)
        info = {**r["summary"], "layout": "planned (the table was empty)" if planned else "the box table"}
        caption = verdict_html([(COMPARE_LABELS[1], r["summary"], "single")])
        return (r["video"], r["maps"], info, r["layout_json"], caption, note, *plan)

    def on_compare(p, subj, rows, rels, sc, scs, la, sf, sd, st, progress=track_tqdm):
        r, plan, note, planned = _request(service.compare, p, subj, rows, rels, sc, scs, la, sf, sd, st)
        info = {
            "left": COMPARE_LABELS[0],
            "right": COMPARE_LABELS[1],
            "reused_comp_attn_video": r["reused"],
            "layout": "planned (the table was empty)" if planned else "the box table",
            **r["comp_attn"]["summary"],
            "verdict_without_comp_attn": r["plain"]["summary"].get("verdict"),
        }
        caption = verdict_html(
            [
                (COMPARE_LABELS[0], r["plain"]["summary"], "left"),
                (COMPARE_LABELS[1], r["comp_attn"]["summary"], "right"),
            ]
        )
        return (r["video"], r["comp_attn"]["maps"], info, r["comp_attn"]["layout_json"], caption, note, *plan)

    def on_upload(file):
        from vidlab.generation.layout import Layout

        try:
            lay = Layout.load(Path(file if isinstance(file, str) else file.name))
        except UserError as exc:
            raise gr.Error(str(exc)) from None
        rows = layout_to_rows(lay)
        times = keyframe_times(rows)
        return (
            lay.prompt,
            "; ".join(dict.fromkeys(s.phrase for s in lay.subjects)),
            rows,
            [r.to_dict() for r in lay.relations],
            gr.Dropdown(choices=times, value=times[0]),
        )

    table_outputs = [keyframe, preview] + ([canvas] if canvas is not None else [])
    plan_btn.click(on_plan, [prompt, subjects], [subjects, table, relations, keyframe], api_name="plan").then(
        on_table, [prompt, table, relations, keyframe], table_outputs, api_name=False
    )
    table.input(on_table, [prompt, table, relations, keyframe], table_outputs, api_name=False)
    keyframe.change(on_table, [prompt, table, relations, keyframe], table_outputs, api_name=False)
    if canvas is not None:
        canvas.change(on_canvas, [table, canvas, keyframe], [table], api_name=False).then(
            lambda p, rows, rels: _preview(p, rows, rels),
            [prompt, table, relations],
            [preview],
            api_name=False,
        )
    layout_upload.upload(
        on_upload, [layout_upload], [prompt, subjects, table, relations, keyframe], api_name=False
    ).then(on_table, [prompt, table, relations, keyframe], table_outputs, api_name=False)
    run_inputs = [prompt, subjects, table, relations, sci, sci_strength, lam, step_fraction, seed, steps]
    run_outputs = [
        video,
        maps,
        info,
        layout_download,
        verdict,
        plan_note,
        subjects,
        table,
        relations,
        keyframe,
    ]
    for button, handler, name in ((gen_btn, on_generate, "generate"), (cmp_btn, on_compare, "compare")):
        button.click(
            handler,
            run_inputs,
            run_outputs,
            api_name=name,
            concurrency_limit=1,
            concurrency_id="generation-model",
        ).success(on_table, [prompt, table, relations, keyframe], table_outputs, api_name=False)
