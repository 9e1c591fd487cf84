"""The generation tab: a prompt, editable subjects and boxes, SCI/LAM controls, and what Comp-Attn did.

``GenerationService`` holds one loaded pipeline and runs one request at a time on it (the Comp-Attn
controller carries per-call state, so two requests must never share it mid-run: a lock guards it, and the
Gradio event has concurrency 1 on top). The layout lives in a table of boxes, one row per subject and
keyframe, in the same format as ``vidlab generate --layout`` (``Layout.to_dict``); a canvas edits the boxes
of one keyframe by dragging, and both redraw the preview at once.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from demos.config import MAX_SEED, DemoGenerationConfig
from demos.work import WorkArea
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
    from generation.layout import Layout, SubjectLayout

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
    from generation.layout import PALETTE

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


def label_halves(left: np.ndarray, right: np.ndarray, labels: tuple[str, str]) -> np.ndarray:
    """``[N, H, 2W + gap, 3]``: the two videos side by side, each under a band that names it, drawn on the
    video itself. Small videos are scaled up (nearest) first so the labels are legible."""
    from PIL import Image, ImageDraw, ImageFont

    n, h, w, _ = left.shape
    scale = max(1, -(-160 // w))  # each half at least 160 px wide
    if scale > 1:
        left = left.repeat(scale, axis=1).repeat(scale, axis=2)
        right = right.repeat(scale, axis=1).repeat(scale, axis=2)
        h, w = h * scale, w * scale
    gap = 4
    band = 22
    header = Image.new("RGB", (2 * w + gap, band), (0, 0, 0))
    draw = ImageDraw.Draw(header)
    try:
        font: Any = ImageFont.load_default(size=14)
    except TypeError:  # Pillow < 10.1
        font = ImageFont.load_default()
    for k, text in enumerate(labels):
        x0 = k * (w + gap)
        tw = draw.textlength(text, font=font)
        draw.text((x0 + max(2, (w - tw) / 2), 3), text, fill=(255, 255, 255), font=font)
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


# ------------------------------------------------------------------------------------------------- service
class GenerationService:
    """One loaded Wan pipeline (lazily), planning, and one-at-a-time generation with or without Comp-Attn."""

    def __init__(self, config: DemoGenerationConfig, work: WorkArea):
        from generation.pipeline import GenerateConfig
        from vidlab.config import resolve

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
        from generation.pipeline import TINY_MODELS

        return self.base.model in TINY_MODELS

    def model_note(self) -> str:
        """What the page says about the model (random weights are said plainly)."""
        b = self.base
        text = f"Model preset: `{self.config.preset}` ({self.model_name}, {b.width}x{b.height}, {b.frames} frames)"
        if self.random_weights:
            text += (
                "\n\n**Random weights**: this model was never trained, so its videos are noise by construction. "
                "It shows the machinery (layouts, SCI, LAM, attention maps), not what Comp-Attn does to a real "
                "model; pick a trained preset (`generation.preset=toyworld` or a real Wan) for that."
            )
        return text

    def pipeline(self) -> Any:
        if self._pipe is None:
            from generation.pipeline import load_pipeline

            self._pipe = load_pipeline(self.base)
        return self._pipe

    def plan(self, prompt: str, subjects: list[str] | None = None) -> Any:
        from generation.pipeline import planner_kwargs
        from generation.planners import plan_layout

        self.check_prompt(prompt)
        # the preset's planner options for the demo's planner, as `vidlab generate` plans
        kw = planner_kwargs(dataclasses.replace(self.base, planner=self.config.planner)) or {}
        try:
            return plan_layout(prompt, planner=self.config.planner, subjects=subjects or None, **kw)
        except UserError as exc:  # the planner's own messages name the phrase at fault
            raise DemoInputError(str(exc)) from None

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
        from generation.pipeline import generate_video, model_source
        from generation.toyworld.metrics import judge_toyworld_videos, verdict_line
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
        if res.maps is not None:
            biased = sorted({int(e["step"]) for e in res.lam_log})
            maps = [
                (str(p), f"{name} (LAM biased steps {biased or 'none'})")
                for p, name in zip(res.maps.save_png(out / "attention"), res.maps.names)
            ]
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
            video = gr.Video(label="Video", elem_id="gen-video", autoplay=True, loop=True)
            maps = gr.Gallery(  # contain: a cropped thumbnail would hide the first (LAM-biased) step rows
                label="Per-subject cross-attention (rows: steps; LAM-biased steps named)",
                columns=2,
                object_fit="contain",
                height="auto",
                elem_id="gen-maps",
            )
            info = gr.JSON(label="What Comp-Attn did")
    relations = gr.State([])
    track_tqdm = gr.Progress(track_tqdm=True)  # Gradio reads the progress tracker from the default argument

    def on_plan(p, subj):
        try:
            lay = service.plan(p, [s.strip() for s in (subj or "").split(";") if s.strip()] or None)
        except UserError as exc:
            raise gr.Error(str(exc)) from None
        rows = layout_to_rows(lay)
        times = keyframe_times(rows)
        return (
            "; ".join(dict.fromkeys(s.phrase for s in lay.subjects)),
            rows,
            [r.to_dict() for r in lay.relations],
            gr.Dropdown(choices=times, value=times[0]),
        )

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

    def _layout(p, rows, rels):
        try:
            lay = rows_to_layout(p, rows, rels)
        except UserError as exc:
            raise gr.Error(str(exc)) from None
        if not lay.subjects:
            raise gr.Error("the box table is empty: press 'Plan layout' or add rows")
        return lay

    def _request(run, p, rows, rels, sc, scs, la, sf, sd, st):
        """Validate the table, run ``run`` (generate or compare); a user error becomes a message on the page."""
        lay = _layout(p, rows, rels)
        try:
            return run(p, lay, sci=sc, sci_strength=scs, lam=la, step_fraction=sf, seed=sd, steps=st)
        except UserError as exc:  # typed input errors only: a bug keeps its traceback in the log
            raise gr.Error(str(exc)) from None

    def on_generate(p, rows, rels, sc, scs, la, sf, sd, st, progress=track_tqdm):
        r = _request(service.generate, p, rows, rels, sc, scs, la, sf, sd, st)
        return r["video"], r["maps"], r["summary"], r["layout_json"]

    def on_compare(p, rows, rels, sc, scs, la, sf, sd, st, progress=track_tqdm):
        r = _request(service.compare, p, rows, rels, sc, scs, la, sf, sd, st)
        info = {
            "left": COMPARE_LABELS[0],
            "right": COMPARE_LABELS[1],
            "reused_comp_attn_video": r["reused"],
            **r["comp_attn"]["summary"],
        }
        return r["video"], r["comp_attn"]["maps"], info, r["comp_attn"]["layout_json"]

    def on_upload(file):
        from generation.layout import Layout

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
    run_inputs = [prompt, table, relations, sci, sci_strength, lam, step_fraction, seed, steps]
    gen_btn.click(
        on_generate,
        run_inputs,
        [video, maps, info, layout_download],
        api_name="generate",
        concurrency_limit=1,
        concurrency_id="generation-model",
    )
    cmp_btn.click(
        on_compare,
        run_inputs,
        [video, maps, info, layout_download],
        api_name="compare",
        concurrency_limit=1,
        concurrency_id="generation-model",
    )
