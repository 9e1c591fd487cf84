"""Layouts: keyframed, normalised boxes per subject, validated, saved as JSON/YAML, rasterised to Wan's token grid.

Coordinates are fractions of the frame: (x0, y0, x1, y1) with (0, 0) the top-left corner; times are fractions
of the clip, 0 = first frame, 1 = last frame. ``latent_masks`` turns boxes into boolean masks over the
transformer's video-token grid, a ``TokenGrid`` read from the pipeline (``TokenGrid.of(pipe)``): time ÷ the VAE's
temporal factor (frames t·k + 1), space ÷ (the VAE's spatial factor × the transformer's patch size), e.g.
4 and 8 × 2 = 16 for Wan2.1, 16 × 2 = 32 for Wan2.2-TI2V-5B's VAE, 4 × 2 = 8 for a 4× toy VAE.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vidlab.generation.errors import GenerationInputError
from vidlab.io import atomic_open, atomic_write_text

Box = tuple[float, float, float, float]
SCHEMA_VERSION = 1
SPATIAL_RELATIONS = (
    "left of",
    "right of",
    "above",
    "below",
    "on",
    "under",
    "in front of",
    "behind",
    "near",
)
MOTION_RELATIONS = ("moving left", "moving right", "moving up", "moving down")
RELATIONS = SPATIAL_RELATIONS + MOTION_RELATIONS
# A token counts as inside a box when at least this share of its cell is covered (see latent_masks).
MIN_CELL_COVERAGE = 0.5


@dataclass(frozen=True)
class TokenGrid:
    """How a pipeline maps pixels to video tokens: pixel frames per latent frame, pixels per token (h, w).

    ``temporal`` is the VAE's temporal factor (times the transformer's temporal patch, always 1 in Wan);
    ``spatial_h``/``spatial_w`` are the VAE's spatial factor times the transformer's patch height/width.
    The defaults are Wan2.1's and Wan2.2-A14B's (VAE 4 × 8 × 8, patch 1 × 2 × 2); read a pipeline's own with
    ``TokenGrid.of(pipe)``.
    """

    temporal: int = 4
    spatial_h: int = 16
    spatial_w: int = 16
    vae_temporal: int = 4
    vae_spatial: int = 8
    patch: tuple[int, int, int] = (1, 2, 2)

    @classmethod
    def of(cls, pipe: Any) -> TokenGrid:
        """The grid of a diffusers Wan pipeline: ``vae_scale_factor_temporal``/``_spatial`` and the
        transformer's ``patch_size`` (both experts of Wan2.2 must agree)."""
        vt = int(getattr(pipe, "vae_scale_factor_temporal", 4) or 4)
        vs = int(getattr(pipe, "vae_scale_factor_spatial", 8) or 8)
        patches = set()
        for name in ("transformer", "transformer_2"):
            tr = getattr(pipe, name, None)
            if tr is not None:
                patches.add(tuple(int(p) for p in getattr(tr.config, "patch_size", (1, 2, 2))))
        if len(patches) > 1:
            raise GenerationInputError(
                f"the pipeline's transformers have different patch sizes {sorted(patches)}"
            )
        pt, ph, pw = patches.pop() if patches else (1, 2, 2)
        if pt != 1:
            raise GenerationInputError(
                f"a temporal patch of {pt} is not supported (Wan's transformers patch time by 1); patch_size={(pt, ph, pw)}"
            )
        return cls(vt * pt, vs * ph, vs * pw, vt, vs, (pt, ph, pw))

    def shape(self, num_frames: int, height: int, width: int) -> tuple[int, int, int]:
        """Tokens (T, H', W') for a video of ``num_frames`` frames at ``height`` x ``width`` (checked)."""
        for name, v, stride in (("height", height, self.spatial_h), ("width", width, self.spatial_w)):
            if int(v) <= 0 or int(v) % stride:
                raise LayoutError(
                    f"{name}={v} must be a positive multiple of spatial_stride={stride} "
                    f"(VAE {self.vae_spatial} x patch {stride // self.vae_spatial})"
                )
        times = latent_frame_times(num_frames, self.temporal)
        return len(times), int(height) // self.spatial_h, int(width) // self.spatial_w

    def describe(self) -> str:
        """E.g. ``VAE 4x8x8, patch (1, 2, 2): 4 frames x 16x16 px per token``."""
        return (
            f"VAE {self.vae_temporal}x{self.vae_spatial}x{self.vae_spatial}, patch {self.patch}: "
            f"{self.temporal} frames x {self.spatial_h}x{self.spatial_w} px per token"
        )


class LayoutError(GenerationInputError):
    """An invalid layout, with a message that names the subject, keyframe and value at fault."""


def _num(value: Any, what: str) -> float:
    """Coerce to a finite float or raise LayoutError naming ``what``."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise LayoutError(f"{what} must be a number, got {value!r}") from None
    if not np.isfinite(out):
        raise LayoutError(f"{what} must be finite, got {value!r}")
    return out


def _parse_box(box: Any, what: str) -> Box:
    """A 4-number box; LayoutError when the shape is wrong."""
    if isinstance(box, dict):
        try:
            box = [box["x0"], box["y0"], box["x1"], box["y1"]]
        except KeyError as exc:
            raise LayoutError(f"{what} box dict needs keys x0, y0, x1, y1; missing {exc}") from None
    if isinstance(box, str) or not isinstance(box, Sequence) or len(box) != 4:
        raise LayoutError(f"{what} box must be [x0, y0, x1, y1], got {box!r}")
    x0, y0, x1, y1 = (_num(v, f"{what} box[{i}]") for i, v in enumerate(box))
    return (x0, y0, x1, y1)


def _check_box(box: Box, what: str) -> None:
    """Boxes lie inside [0, 1] and have positive width and height."""
    for name, v in zip(("x0", "y0", "x1", "y1"), box):
        if not 0.0 <= v <= 1.0:
            raise LayoutError(f"{what}: {name}={v:g} is outside [0, 1]")
    if not box[0] < box[2]:
        raise LayoutError(f"{what}: x0={box[0]:g} must be < x1={box[2]:g}")
    if not box[1] < box[3]:
        raise LayoutError(f"{what}: y0={box[1]:g} must be < y1={box[3]:g}")


def clamp_box(box: Sequence[float], min_size: float = 0.02) -> Box:
    """Clip a box into [0, 1] (sorting its corners), keeping at least ``min_size`` width and height."""
    x0, y0, x1, y1 = (float(v) for v in box)
    x0, x1 = sorted((x0, x1))
    y0, y1 = sorted((y0, y1))
    out = []
    for a, b in ((x0, x1), (y0, y1)):
        a, b = min(max(a, 0.0), 1.0), min(max(b, 0.0), 1.0)
        if b - a < min_size:
            mid = min(max((a + b) / 2, min_size / 2), 1 - min_size / 2)
            a, b = mid - min_size / 2, mid + min_size / 2
        out.append((a, b))
    return (out[0][0], out[1][0], out[0][1], out[1][1])


@dataclass
class SubjectLayout:
    """One subject: its phrase as it occurs in the prompt and its keyframed box.

    ``count_index`` numbers the copies of a counted subject ("three cats" -> three SubjectLayouts with phrase
    "cats" and count_index 0, 1, 2; None for a single subject). ``span`` is the phrase's character span in
    the prompt when known (copies share it), so token lookup finds the right occurrence of a repeated phrase.
    """

    phrase: str
    keyframes: list[tuple[float, Box]]
    count_index: int | None = None
    attributes: list[str] = field(default_factory=list)
    span: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.phrase, str) or not self.phrase.strip():
            raise LayoutError(f"subject phrase must be a non-empty string, got {self.phrase!r}")
        what = f"subject {self.phrase!r}"
        if not isinstance(self.keyframes, Sequence) or isinstance(self.keyframes, str | bytes):
            raise LayoutError(
                f"{what}: keyframes must be a list of (t, [x0, y0, x1, y1]), got {self.keyframes!r}"
            )
        if len(self.keyframes) == 0:
            raise LayoutError(f"{what}: needs at least one keyframe")
        parsed: list[tuple[float, Box]] = []
        for k, kf in enumerate(self.keyframes):
            kw = f"{what} keyframe {k}"
            if isinstance(kf, dict):
                if "t" not in kf or "box" not in kf:
                    raise LayoutError(f"{kw} must have keys 't' and 'box', got {sorted(kf)}")
                t, box = kf["t"], kf["box"]
            elif isinstance(kf, Sequence) and not isinstance(kf, str) and len(kf) == 2:
                t, box = kf
            else:
                raise LayoutError(f"{kw} must be (t, [x0, y0, x1, y1]) or {{'t':..., 'box':...}}, got {kf!r}")
            t = _num(t, f"{kw} time")
            if not 0.0 <= t <= 1.0:
                raise LayoutError(f"{kw}: time t={t:g} is outside [0, 1]")
            b = _parse_box(box, kw)
            _check_box(b, f"{kw} (t={t:g})")
            if parsed and t <= parsed[-1][0]:
                raise LayoutError(
                    f"{kw}: times must be strictly increasing, got t={t:g} after t={parsed[-1][0]:g}"
                )
            parsed.append((t, b))
        self.keyframes = parsed
        if self.count_index is not None:
            if isinstance(self.count_index, bool) or int(self.count_index) != self.count_index:
                raise LayoutError(f"{what}: count_index must be an integer, got {self.count_index!r}")
            self.count_index = int(self.count_index)
            if self.count_index < 0:
                raise LayoutError(f"{what}: count_index must be >= 0, got {self.count_index}")
        if isinstance(self.attributes, str) or not all(isinstance(a, str) for a in self.attributes):
            raise LayoutError(f"{what}: attributes must be a list of strings, got {self.attributes!r}")
        self.attributes = list(self.attributes)
        if self.span is not None:
            if len(self.span) != 2 or not all(isinstance(v, int) for v in self.span):
                raise LayoutError(f"{what}: span must be [start, end] character offsets, got {self.span!r}")
            self.span = (int(self.span[0]), int(self.span[1]))

    @property
    def label(self) -> str:
        """Display name: the phrase, with "#k" (1-based) for copies of a counted subject."""
        return self.phrase if self.count_index is None else f"{self.phrase} #{self.count_index + 1}"

    def box_at(self, t: float) -> Box:
        """Box at time ``t`` in [0, 1]: linear between keyframes, held constant outside their range."""
        times = [k[0] for k in self.keyframes]
        if t <= times[0]:
            return self.keyframes[0][1]
        if t >= times[-1]:
            return self.keyframes[-1][1]
        i = int(np.searchsorted(times, t, side="right"))
        (t0, b0), (t1, b1) = self.keyframes[i - 1], self.keyframes[i]
        w = (t - t0) / (t1 - t0)
        return tuple(float(a + w * (b - a)) for a, b in zip(b0, b1))  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the layout schema)."""
        out: dict[str, Any] = {
            "phrase": self.phrase,
            "keyframes": [{"t": t, "box": list(b)} for t, b in self.keyframes],
        }
        if self.count_index is not None:
            out["count_index"] = self.count_index
        if self.attributes:
            out["attributes"] = list(self.attributes)
        if self.span is not None:
            out["span"] = list(self.span)
        return out

    @classmethod
    def from_dict(cls, d: Any, where: str = "subject") -> SubjectLayout:
        """Build from the schema dict; LayoutError names ``where`` when the shape is wrong."""
        if not isinstance(d, dict):
            raise LayoutError(f"{where} must be an object with 'phrase' and 'keyframes', got {d!r}")
        unknown = set(d) - {"phrase", "keyframes", "count_index", "attributes", "span"}
        if unknown:
            raise LayoutError(f"{where} has unknown keys {sorted(unknown)}")
        for key in ("phrase", "keyframes"):
            if key not in d:
                raise LayoutError(f"{where} is missing {key!r}")
        span = d.get("span")
        return cls(
            phrase=d["phrase"],
            keyframes=d["keyframes"],
            count_index=d.get("count_index"),
            attributes=list(d.get("attributes") or []),
            span=tuple(span) if span is not None else None,
        )


@dataclass
class Relation:
    """A relation the layout satisfies: ``subject`` <relation> ``object`` (subject indices; motion has no object)."""

    subject: int
    relation: str
    object: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {"subject": self.subject, "relation": self.relation, "object": self.object}


def latent_frame_times(num_frames: int, temporal_stride: int = 4) -> np.ndarray:
    """Normalised time of each latent frame's centre for a Wan video of ``num_frames`` pixel frames.

    Wan needs num_frames = stride*k + 1. Latent frame 0 is pixel frame 0; latent frame f >= 1 covers pixel
    frames stride*f - (stride-1) .. stride*f and sits at their centre; times are divided by (num_frames - 1).
    """
    n, s = int(num_frames), int(temporal_stride)
    if s < 1:
        raise LayoutError(f"temporal_stride must be >= 1, got {temporal_stride}")
    if n < 1 or (n - 1) % s != 0:
        raise LayoutError(f"num_frames must be {s}k+1 (e.g. {s + 1}, {4 * s + 1}, 81), got {num_frames}")
    if n == 1:
        return np.zeros(1)
    f = np.arange(1, (n - 1) // s + 1, dtype=np.float64)
    centres = s * f - (s - 1) / 2.0
    return np.concatenate([[0.0], centres / (n - 1)])


def box_to_grid_mask(box: Box, grid_h: int, grid_w: int) -> np.ndarray:
    """Boolean [grid_h, grid_w] mask: cells at least half covered by ``box``; never empty (else the best cell)."""
    x0, y0, x1, y1 = box

    def cover(a: float, b: float, n: int) -> np.ndarray:
        edges = np.arange(n + 1) / n
        return np.clip(np.minimum(b, edges[1:]) - np.maximum(a, edges[:-1]), 0.0, None) * n

    frac = cover(y0, y1, grid_h)[:, None] * cover(x0, x1, grid_w)[None, :]
    mask = frac >= MIN_CELL_COVERAGE - 1e-9
    if not mask.any():
        # A box smaller than half a cell: take the cell it covers most (ties: the one holding its centre).
        cy = min(int((y0 + y1) / 2 * grid_h), grid_h - 1)
        cx = min(int((x0 + x1) / 2 * grid_w), grid_w - 1)
        best = np.flatnonzero(frac == frac.max())
        pick = (cy, cx) if frac[cy, cx] == frac.max() else np.unravel_index(best[0], frac.shape)
        mask[pick] = True
    return mask


MIN_MOTION = 0.05  # a moving subject's box centre travels at least this far (fraction of the frame)
NEAR_GAP = 0.15  # "near": the gap between two boxes is at most this


def box_relation_holds(relation: str, a: Box, b: Box) -> bool:
    """The geometric reading of a spatial relation between box ``a`` (subject) and box ``b`` (object).

    left of/right of: centres ordered in x; above/below: centres ordered in y; on: a's centre above b's and
    a's bottom edge reaching b's top (within 0.05) with horizontal overlap; under: a's centre below b's with
    horizontal overlap; in front of: a's bottom edge lower and a larger (a 2-D stand-in for depth);
    behind: the reverse; near: the gap between the boxes is at most NEAR_GAP.
    """
    acx, acy = (a[0] + a[2]) / 2, (a[1] + a[3]) / 2
    bcx, bcy = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
    x_overlap = min(a[2], b[2]) - max(a[0], b[0]) > 0
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    if relation == "left of":
        return acx < bcx
    if relation == "right of":
        return acx > bcx
    if relation == "above":
        return acy < bcy
    if relation == "below":
        return acy > bcy
    if relation == "on":
        return acy < bcy and a[3] >= b[1] - 0.05 and x_overlap
    if relation == "under":
        return acy > bcy and x_overlap
    if relation == "in front of":
        return a[3] > b[3] and area_a > area_b
    if relation == "behind":
        return a[3] < b[3] and area_a < area_b
    if relation == "near":
        gap_x = max(a[0] - b[2], b[0] - a[2], 0.0)
        gap_y = max(a[1] - b[3], b[1] - a[3], 0.0)
        return max(gap_x, gap_y) <= NEAR_GAP
    raise LayoutError(f"unknown relation {relation!r}; known: {', '.join(RELATIONS)}")


@dataclass
class Layout:
    """A prompt's subjects with keyframed boxes, the relations they satisfy, and where the plan came from."""

    prompt: str
    subjects: list[SubjectLayout]
    relations: list[Relation] = field(default_factory=list)
    planner: str = "user"
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.prompt, str):
            raise LayoutError(f"layout prompt must be a string, got {self.prompt!r}")
        subs = []
        for i, s in enumerate(self.subjects):
            subs.append(s if isinstance(s, SubjectLayout) else SubjectLayout.from_dict(s, f"subject {i}"))
        self.subjects = subs
        rels = []
        for k, r in enumerate(self.relations):
            if isinstance(r, dict):
                try:
                    r = Relation(int(r["subject"]), str(r["relation"]), r.get("object"))
                except (KeyError, TypeError, ValueError) as exc:
                    raise LayoutError(f"relation {k} must have 'subject' and 'relation': {exc}") from None
            if r.relation not in RELATIONS:
                raise LayoutError(
                    f"relation {k}: unknown relation {r.relation!r}; known: {', '.join(RELATIONS)}"
                )
            for role in ("subject", "object"):
                idx = getattr(r, role)
                if idx is None and role == "object":
                    if r.relation in SPATIAL_RELATIONS:
                        raise LayoutError(f"relation {k}: {r.relation!r} needs an object subject index")
                    continue
                if not isinstance(idx, int) or not 0 <= idx < len(self.subjects):
                    raise LayoutError(
                        f"relation {k}: {role} index {idx!r} is not a subject index (0..{len(self.subjects) - 1})"
                    )
            rels.append(r)
        self.relations = rels
        for s in self.subjects:
            if s.span is not None:
                a, b = s.span
                if not (0 <= a < b <= len(self.prompt)) or " ".join(
                    self.prompt[a:b].lower().split()
                ) != " ".join(s.phrase.lower().split()):
                    raise LayoutError(
                        f"subject {s.phrase!r}: span {a}:{b} is {self.prompt[a:b]!r} in the prompt, not the phrase"
                    )
        if not isinstance(self.meta, dict):
            raise LayoutError(f"layout meta must be a dict, got {self.meta!r}")

    # ---- geometry -------------------------------------------------------------------------------
    @property
    def phrases(self) -> list[str]:
        """Each subject's phrase, in order (copies of a counted subject repeat it)."""
        return [s.phrase for s in self.subjects]

    def boxes_at(self, t: float) -> list[Box]:
        """Every subject's box at time ``t``."""
        return [s.box_at(t) for s in self.subjects]

    def subject_token_indices(self, tokenizer: Any, max_length: int | None = None) -> list[list[int]]:
        """Token positions of every subject in ``tokenizer(self.prompt)`` (copies share their phrase's tokens)."""
        from vidlab.generation.subjects import subject_token_indices

        return subject_token_indices(tokenizer, self.prompt, self.subjects, max_length=max_length)

    def latent_masks(
        self,
        num_frames: int,
        height: int,
        width: int,
        grid: TokenGrid | None = None,
    ) -> np.ndarray:
        """Boolean masks [num_subjects, T, H', W'] on a pipeline's video-token grid (``TokenGrid.of(pipe)``;
        default ``TokenGrid()``, Wan2.1's VAE 8 x patch 2).

        Each subject's box is interpolated to every latent frame's centre time (``latent_frame_times``); a token
        is inside when its cell is at least half covered by the box, and a box too small to half-cover any cell
        still gets the one cell it covers most, so no subject ever has an empty mask.
        """
        grid = grid if grid is not None else TokenGrid()
        _, gh, gw = grid.shape(num_frames, height, width)
        times = latent_frame_times(num_frames, grid.temporal)
        out = np.zeros((len(self.subjects), len(times), gh, gw), dtype=bool)
        for i, s in enumerate(self.subjects):
            for f, t in enumerate(times):
                out[i, f] = box_to_grid_mask(s.box_at(float(t)), gh, gw)
        return out

    def group_of(self, index: int) -> list[int]:
        """Indices of all copies of subject ``index``'s counted group (just ``[index]`` for a single subject)."""
        s = self.subjects[index]
        if s.count_index is None:
            return [index]
        return [
            i
            for i, o in enumerate(self.subjects)
            if o.count_index is not None and o.phrase == s.phrase and o.span == s.span
        ]

    def group_box_at(self, index: int, t: float) -> Box:
        """Union box of subject ``index``'s group at time ``t``."""
        boxes = [self.subjects[i].box_at(t) for i in self.group_of(index)]
        return (
            min(b[0] for b in boxes),
            min(b[1] for b in boxes),
            max(b[2] for b in boxes),
            max(b[3] for b in boxes),
        )

    def relation_holds(self, relation: Relation, times: Sequence[float] = (0.0, 0.5, 1.0)) -> bool:
        """Whether the boxes satisfy ``relation`` (on the groups' union boxes) at every time in ``times``."""
        if relation.relation in MOTION_RELATIONS:
            a0, a1 = self.group_box_at(relation.subject, 0.0), self.group_box_at(relation.subject, 1.0)
            dx = (a1[0] + a1[2] - a0[0] - a0[2]) / 2
            dy = (a1[1] + a1[3] - a0[1] - a0[3]) / 2
            need = {"moving left": -dx, "moving right": dx, "moving up": -dy, "moving down": dy}
            return need[relation.relation] > MIN_MOTION
        assert relation.object is not None
        return all(
            box_relation_holds(
                relation.relation,
                self.group_box_at(relation.subject, t),
                self.group_box_at(relation.object, t),
            )
            for t in times
        )

    # ---- serialisation --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The layout schema as a dict."""
        return {
            "version": SCHEMA_VERSION,
            "prompt": self.prompt,
            "planner": self.planner,
            "subjects": [s.to_dict() for s in self.subjects],
            "relations": [r.to_dict() for r in self.relations],
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, d: Any, prompt: str | None = None) -> Layout:
        """Build from the schema dict (``prompt`` fills in when the dict has none); LayoutError on bad shape."""
        if not isinstance(d, dict):
            raise LayoutError(
                f"layout must be an object with 'prompt' and 'subjects', got {type(d).__name__}"
            )
        unknown = set(d) - {"version", "prompt", "planner", "subjects", "relations", "meta"}
        if unknown:
            raise LayoutError(f"layout has unknown keys {sorted(unknown)}")
        if d.get("version", SCHEMA_VERSION) != SCHEMA_VERSION:
            raise LayoutError(
                f"layout version {d.get('version')!r} is not supported (expected {SCHEMA_VERSION})"
            )
        p = d.get("prompt", prompt)
        if p is None:
            raise LayoutError("layout is missing 'prompt'")
        subjects = d.get("subjects")
        if not isinstance(subjects, list):
            raise LayoutError(f"layout 'subjects' must be a list, got {subjects!r}")
        relations = d.get("relations") or []
        if not isinstance(relations, list):
            raise LayoutError(f"layout 'relations' must be a list, got {relations!r}")
        return cls(
            prompt=p,
            subjects=[SubjectLayout.from_dict(s, f"subject {i}") for i, s in enumerate(subjects)],
            relations=list(relations),
            planner=str(d.get("planner", "user")),
            meta=dict(d.get("meta") or {}),
        )

    def to_json(self, indent: int | None = 2) -> str:
        """Serialise to JSON text."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, s: str) -> Layout:
        """Parse JSON text; LayoutError when it is not valid JSON or not a valid layout."""
        try:
            d = json.loads(s)
        except json.JSONDecodeError as exc:
            raise LayoutError(f"layout is not valid JSON: {exc}") from None
        return cls.from_dict(d)

    def save(self, path: str | Path) -> Path:
        """Write to ``.json``, ``.yaml`` or ``.yml`` (atomically: a temp file then rename)."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".json":
            text = self.to_json()
        elif suffix in (".yaml", ".yml"):
            import yaml

            text = yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)
        else:
            raise LayoutError(f"layout file {path} must end in .json, .yaml or .yml")
        atomic_write_text(path, text)
        return path

    @classmethod
    def load(cls, path: str | Path) -> Layout:
        """Read a ``.json``/``.yaml``/``.yml`` layout; LayoutError names the file and the problem."""
        from vidlab.io import file_problem

        path = Path(path)
        problem = file_problem(path)  # never opens the path, so a FIFO cannot block
        if problem is not None:
            raise LayoutError(f"layout file {path}: {problem}")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise LayoutError(
                f"layout file {path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
        suffix = path.suffix.lower()
        try:
            if suffix == ".json":
                return cls.from_json(text)
            if suffix in (".yaml", ".yml"):
                import yaml

                try:
                    d = yaml.safe_load(text)
                except yaml.YAMLError as exc:
                    raise LayoutError(f"not valid YAML: {exc}") from None
                return cls.from_dict(d)
        except LayoutError as exc:
            raise LayoutError(f"layout file {path}: {exc}") from None
        raise LayoutError(f"layout file {path} must end in .json, .yaml or .yml")

    # ---- pictures -------------------------------------------------------------------------------
    def keyframe_times(self) -> list[float]:
        """Sorted union of every subject's keyframe times."""
        return sorted({t for s in self.subjects for t, _ in s.keyframes})

    def render_overlays(
        self,
        out_dir: str | Path,
        width: int = 832,
        height: int = 480,
        num_keyframes: int | None = None,
        times: Iterable[float] | None = None,
    ) -> list[Path]:
        """Write one PNG per time (the keyframe times, or ``num_keyframes`` evenly spaced) with labelled boxes."""
        if times is None:
            if num_keyframes is not None:
                if int(num_keyframes) < 1:
                    raise LayoutError(f"num_keyframes must be >= 1, got {num_keyframes}")
                times = np.linspace(0.0, 1.0, int(num_keyframes)).tolist() if num_keyframes > 1 else [0.0]
            else:
                times = self.keyframe_times() or [0.0]
        return _render_pngs(self, Path(out_dir), int(width), int(height), [float(t) for t in times])


PALETTE = (
    (230, 25, 75),
    (60, 180, 75),
    (0, 130, 200),
    (255, 225, 25),
    (245, 130, 48),
    (145, 30, 180),
    (70, 240, 240),
    (240, 50, 230),
    (210, 245, 60),
    (250, 190, 212),
)


def _render_pngs(layout: Layout, out_dir: Path, width: int, height: int, times: list[float]) -> list[Path]:
    """Draw each subject's box (colour per subject, label, motion trail) at each time; one PNG per time."""
    from PIL import Image, ImageDraw, ImageFont

    if width < 16 or height < 16:
        raise LayoutError(f"overlay size must be at least 16x16 pixels, got {width}x{height}")
    out_dir.mkdir(parents=True, exist_ok=True)
    size = max(10, min(width, height) // 30)
    try:
        font = ImageFont.load_default(size=size)  # scalable when Pillow has FreeType
    except TypeError:  # pragma: no cover - old Pillow
        font = ImageFont.load_default()
    paths = []
    for k, t in enumerate(times):
        img = Image.new("RGB", (width, height), (32, 32, 36))
        draw = ImageDraw.Draw(img)
        for i, subject in enumerate(layout.subjects):
            colour = PALETTE[i % len(PALETTE)]
            x0, y0, x1, y1 = subject.box_at(t)
            px = (x0 * (width - 1), y0 * (height - 1), x1 * (width - 1), y1 * (height - 1))
            draw.rectangle(px, outline=colour, width=max(1, min(width, height) // 160 + 1))
            # The path of the box centre over the whole clip, so motion is visible in one still.
            trail = [subject.box_at(u) for u in np.linspace(0, 1, 9)]
            pts = [((b[0] + b[2]) / 2 * (width - 1), (b[1] + b[3]) / 2 * (height - 1)) for b in trail]
            if len({(round(a), round(b)) for a, b in pts}) > 1:
                draw.line(pts, fill=colour, width=1)
            label = subject.label
            tw = draw.textlength(label, font=font)
            ty = px[1] + 1 if px[1] + size + 2 < height else max(px[3] - size - 2, 0)
            draw.rectangle((px[0] + 1, ty, px[0] + 3 + tw, ty + size + 1), fill=colour)
            draw.text((px[0] + 2, ty), label, fill=(0, 0, 0), font=font)
        draw.text((4, height - size - 3), f"t={t:.2f}  [{layout.planner}]", fill=(220, 220, 220), font=font)
        path = out_dir / f"layout_{k:02d}_t{t:.2f}.png"
        with atomic_open(path, "wb") as f:
            img.save(f, format="PNG")
        paths.append(path)
    return paths
