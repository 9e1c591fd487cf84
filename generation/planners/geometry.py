"""Box placement for the rule planner: turn subject groups, relations and motion into keyframed boxes.

The frame is split into *strips* (one per subject moving up or down, on the right), *rows* (one per subject
moving left or right) and one *static row* of items. Static items are a single group, a vertical stack (from
above/below/on/under) or a depth pair (in front of/behind); left of/right of/near order the items in the row.
Counted groups ("three cats") split their box into that many side-by-side copies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

Box = tuple[float, float, float, float]

VERTICAL = {"above": False, "on": True, "below": False, "under": True}  # value: boxes touch
DEPTH = ("in front of", "behind")
HORIZONTAL = ("left of", "right of", "near")


@dataclass
class GeometryConfig:
    """Constants of the rule planner's geometry (fractions of the frame)."""

    margin: float = 0.04  # empty border around the frame
    pad: float = 0.08  # inner padding of each cell, as a fraction of the cell
    moving_box: float = 0.34  # width (left/right motion) or height (up/down) of a moving box
    strip_width: float = 0.28  # width of the strip an up/down mover travels in
    copy_pad: float = 0.08  # padding between the copies of a counted group
    max_copies: int = 12  # a larger count stays one group box (attributes record the count)
    touch_overlap: float = 0.02  # how far an "on" box sinks into the box it stands on
    # largest box side: a larger box shrinks about its centre to this (1: no cap). Set it to the subjects' size
    # where that is known: LAM draws a subject to fill its box, so a half-frame box stretches a small shape
    max_box: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 < self.max_box <= 1.0:
            raise ValueError(f"max_box must be in (0, 1] (a fraction of the frame side), got {self.max_box}")


@dataclass
class Placement:
    """Keyframes for every copy of one group: list (per copy) of [(t, box), ...]."""

    copies: list[list[tuple[float, Box]]] = field(default_factory=list)


def cap_box(box: Box, max_side: float) -> Box:
    """``box`` with each side at most ``max_side``, about the same centre."""
    x0, y0, x1, y1 = box
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    w, h = min(x1 - x0, max_side), min(y1 - y0, max_side)
    return (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)


def _shrink(box: Box, frac: float) -> Box:
    x0, y0, x1, y1 = box
    dx, dy = (x1 - x0) * frac, (y1 - y0) * frac
    return (x0 + dx, y0 + dy, x1 - dx, y1 - dy)


def split_copies(box: Box, n: int, pad: float) -> list[Box]:
    """Split ``box`` into ``n`` copy boxes: one row up to 4, then a grid with as few rows as fit."""
    if n <= 1:
        return [box]
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    rows = 1 if n <= 4 else max(2, round(math.sqrt(n * h / max(w, 1e-6))))
    rows = min(rows, n)
    cols = math.ceil(n / rows)
    out = []
    for k in range(n):
        r, c = divmod(k, cols)
        in_row = cols if r < rows - 1 else n - cols * (rows - 1)
        cw = w / in_row
        cell = (x0 + c * cw, y0 + r * h / rows, x0 + (c + 1) * cw, y0 + (r + 1) * h / rows)
        out.append(_shrink(cell, pad))
    return out


class _Items:
    """Static items (single, stack, depth pair) and their left-to-right order."""

    def __init__(self, members: list[int]):
        self.items: list[dict] = [{"kind": "single", "groups": [g]} for g in members]

    def item_of(self, g: int) -> dict | None:
        return next((it for it in self.items if g in it["groups"]), None)

    def merge_vertical(self, top: int, bottom: int, touch: bool) -> None:
        a, b = self.item_of(top), self.item_of(bottom)
        if a is None or b is None or a is b:
            return
        if a["kind"] == "single" and b["kind"] == "single":
            a.update(kind="stack", groups=[top, bottom], touch=[touch])
            self.items.remove(b)
        elif a["kind"] == "stack" and b["kind"] == "single" and a["groups"][-1] == top:
            a["groups"].append(bottom)
            a["touch"].append(touch)
            self.items.remove(b)
        elif b["kind"] == "stack" and a["kind"] == "single" and b["groups"][0] == bottom:
            b["groups"].insert(0, top)
            b["touch"].insert(0, touch)
            self.items.remove(a)

    def merge_depth(self, front: int, back: int) -> None:
        a, b = self.item_of(front), self.item_of(back)
        if a is None or b is None or a is b or a["kind"] != "single" or b["kind"] != "single":
            return
        a.update(kind="depth", groups=[front, back])
        self.items.remove(b)

    def order(self, first: int, second: int, adjacent: bool) -> None:
        """Put the item of ``first`` left of the item of ``second`` (directly, when ``adjacent``)."""
        a, b = self.item_of(first), self.item_of(second)
        if a is None or b is None or a is b:
            return
        ia, ib = self.items.index(a), self.items.index(b)
        if ia < ib and (not adjacent or ib == ia + 1):
            return
        self.items.remove(a)
        self.items.insert(self.items.index(b), a)


def arrange(
    counts: list[int],
    motions: list[str | None],
    relations: list[tuple[int, str, int]],
    cfg: GeometryConfig | None = None,
) -> list[list[list[tuple[float, Box]]]]:
    """Keyframes per group per copy: ``result[g][copy] = [(t, box), ...]`` satisfying the relations it can."""
    cfg = cfg or GeometryConfig()
    n = len(counts)
    horiz = [g for g in range(n) if motions[g] in ("left", "right")]
    vert = [g for g in range(n) if motions[g] in ("up", "down")]
    static = [g for g in range(n) if motions[g] is None]
    m = cfg.margin
    out: list[list[list[tuple[float, Box]]]] = [[] for _ in range(n)]

    # Up/down movers related to a static subject travel over that subject's column ("a squirrel climbs up on
    # a tree", "a teddy bear tumbles down and lands on a bed"); the others get strips on the right (or the
    # whole width when nothing else is there).
    anchored: dict[int, tuple[int, str]] = {}
    for a, rel, b in relations:
        if a in vert and b in static and a not in anchored:
            anchored[a] = (b, rel)
    vert = [g for g in vert if g not in anchored]
    main_x1 = 1.0 - m
    if vert:
        if static or horiz:
            sw = min(cfg.strip_width, 0.5 / len(vert))
            main_x1 = 1.0 - m - sw * len(vert)
            strips = [(main_x1 + k * sw, main_x1 + (k + 1) * sw) for k in range(len(vert))]
        else:
            sw = (1 - 2 * m) / len(vert)
            strips = [(m + k * sw, m + (k + 1) * sw) for k in range(len(vert))]
        for g, (sx0, sx1) in zip(vert, strips):
            h = cfg.moving_box
            top = (sx0, m, sx1, m + h)
            bottom = (sx0, 1 - m - h, sx1, 1 - m)
            start, end = (bottom, top) if motions[g] == "up" else (top, bottom)
            out[g] = _copies_over_time(start, end, counts[g], cfg)

    # Static items and their order.
    items = _Items(static)
    for a, rel, b in relations:
        if a in static and b in static:
            if rel in VERTICAL:
                top, bottom = (a, b) if rel in ("above", "on") else (b, a)
                items.merge_vertical(top, bottom, VERTICAL[rel])
            elif rel in DEPTH:
                front, back = (a, b) if rel == "in front of" else (b, a)
                items.merge_depth(front, back)
    for _ in range(2):
        for a, rel, b in relations:
            if rel == "left of":
                items.order(a, b, adjacent=False)
            elif rel == "right of":
                items.order(b, a, adjacent=False)
            elif rel == "near" and items.item_of(a) is not None and items.item_of(b) is not None:
                ia, ib = items.items.index(items.item_of(a)), items.items.index(items.item_of(b))
                if abs(ia - ib) > 1:
                    items.order(a, b, adjacent=True)

    # Rows: each left/right mover gets a row; the static row goes below movers unless a relation says not.
    rows: list[tuple[str, int | None, float]] = []
    above_static, below_static = [], []
    for g in horiz:
        rel_to_static = [rel for a, rel, b in relations if a == g and b in static]
        (below_static if any(r in ("below", "under") for r in rel_to_static) else above_static).append(g)
    static_weight = max([len(it["groups"]) for it in items.items if it["kind"] == "stack"] or [1])
    rows += [("move", g, 1.0) for g in above_static]
    if items.items:
        rows.append(("static", None, float(static_weight)))
    rows += [("move", g, 1.0) for g in below_static]
    total = sum(w for _, _, w in rows) or 1.0
    y = m
    for kind, g, w in rows:
        h = (1 - 2 * m) * w / total
        y0, y1 = y, y + h
        y = y1
        if kind == "move":
            assert g is not None
            bw = min(cfg.moving_box * max(1, min(counts[g], 3)), (main_x1 - m) * 0.6)
            cell_y = _shrink((m, y0, main_x1, y1), cfg.pad)
            left = (m, cell_y[1], m + bw, cell_y[3])
            right = (main_x1 - bw, cell_y[1], main_x1, cell_y[3])
            start, end = (left, right) if motions[g] == "right" else (right, left)
            out[g] = _copies_over_time(start, end, counts[g], cfg)
        else:
            _place_static(items.items, counts, (m, y0, main_x1, y1), cfg, out)
    for g, (b, rel) in anchored.items():
        if not out[b]:
            continue
        # The static box moves to the part of its cell that leaves the mover room on the right side of it.
        if rel in ("on", "above"):
            frac = (0.45, 1.0)  # lower part: the mover stays above it ("sinks onto", "rises above")
        elif rel in ("under", "below"):
            frac = (0.0, 0.55)  # upper part: the mover stays below it
        else:
            frac = (0.0, 1.0)
        out[b] = [
            [(t, (x0, y0 + (y1 - y0) * frac[0], x1, y0 + (y1 - y0) * frac[1])) for t, (x0, y0, x1, y1) in kfs]
            for kfs in out[b]
        ]
        bx0 = min(kf[0][1][0] for kf in out[b])
        bx1 = max(kf[0][1][2] for kf in out[b])
        by0 = min(kf[0][1][1] for kf in out[b])
        by1 = max(kf[0][1][3] for kf in out[b])
        w = max(min((bx1 - bx0) * 0.6, cfg.strip_width), min(cfg.moving_box * 0.5, bx1 - bx0))
        cx = (bx0 + bx1) / 2
        x0, x1 = max(cx - w / 2, 0.0), min(cx + w / 2, 1.0)
        if rel in ("on", "above"):
            lo, hi = m, min(by0 + (cfg.touch_overlap if rel == "on" else 0.0), 1 - m)
        elif rel in ("under", "below"):
            lo, hi = max(by1 - (cfg.touch_overlap if rel == "under" else 0.0), m), 1 - m
        else:
            lo, hi = m, 1 - m
        h = min(cfg.moving_box, max((hi - lo) / 2, 0.05))  # small enough to travel at least its own height
        top, bottom = (x0, lo, x1, lo + h), (x0, hi - h, x1, hi)
        start, end = (bottom, top) if motions[g] == "up" else (top, bottom)
        out[g] = _copies_over_time(start, end, counts[g], cfg)
    for a, rel, b in relations:  # a mover "on" something static: its row sits right on the static box
        if rel == "on" and a in horiz and b in static and out[a] and out[b]:
            top = min(kf[0][1][1] for kf in out[b])
            bottom = max(box[3] for kfs in out[a] for _, box in kfs)
            dy = top + cfg.touch_overlap - bottom
            if dy > 0:
                out[a] = [[(t, (x0, y0 + dy, x1, y1 + dy)) for t, (x0, y0, x1, y1) in kfs] for kfs in out[a]]
    return out


def _copies_over_time(start: Box, end: Box, count: int, cfg: GeometryConfig) -> list[list[tuple[float, Box]]]:
    """Copies of a moving group: each copy travels with the group box from ``start`` to ``end``."""
    n = count if 1 <= count <= cfg.max_copies else 1
    a = split_copies(start, n, cfg.copy_pad)
    b = split_copies(end, n, cfg.copy_pad)
    return [[(0.0, ba), (1.0, bb)] for ba, bb in zip(a, b)]


def _static_boxes(box: Box, count: int, cfg: GeometryConfig) -> list[list[tuple[float, Box]]]:
    n = count if 1 <= count <= cfg.max_copies else 1
    return [[(0.0, c)] for c in split_copies(box, n, cfg.copy_pad)]


def _place_static(
    items: list[dict],
    counts: list[int],
    area: Box,
    cfg: GeometryConfig,
    out: list[list[list[tuple[float, Box]]]],
) -> None:
    """Columns for the static items, widths by how many copies they hold."""
    x0, y0, x1, y1 = area

    def weight(it: dict) -> float:
        return max(min(max(counts[g], 1), 4) ** 0.7 for g in it["groups"])

    total = sum(weight(it) for it in items)
    x = x0
    for it in items:
        w = (x1 - x0) * weight(it) / total
        cell = (x, y0, x + w, y1)
        x += w
        if it["kind"] == "single":
            g = it["groups"][0]
            out[g] = _static_boxes(_shrink(cell, cfg.pad), counts[g], cfg)
        elif it["kind"] == "stack":
            k = len(it["groups"])
            ch = (y1 - y0) / k
            for j, g in enumerate(it["groups"]):
                cy0, cy1 = y0 + j * ch, y0 + (j + 1) * ch
                sub = _shrink((cell[0], cy0, cell[2], cy1), cfg.pad)
                touch_below = j < k - 1 and it["touch"][j]
                touch_above = j > 0 and it["touch"][j - 1]
                bx0, by0, bx1, by1 = sub
                if touch_below:  # stands on the next one: narrower, bottom edge sinks into it
                    wdt = (bx1 - bx0) * 0.7
                    cx = (bx0 + bx1) / 2
                    bx0, bx1 = cx - wdt / 2, cx + wdt / 2
                    by1 = cy1 + cfg.touch_overlap
                if touch_above:
                    by0 = cy0
                out[g] = _static_boxes((bx0, by0, bx1, by1), counts[g], cfg)
        else:  # depth pair: the front one lower and larger, the back one higher, smaller, offset
            front, back = it["groups"]
            cw, chh = cell[2] - cell[0], y1 - y0
            back_box = (cell[0] + 0.38 * cw, y0 + 0.06 * chh, cell[2] - 0.06 * cw, y0 + 0.58 * chh)
            front_box = (cell[0] + 0.06 * cw, y0 + 0.30 * chh, cell[0] + 0.72 * cw, y1 - 0.05 * chh)
            out[back] = _static_boxes(back_box, counts[back], cfg)
            out[front] = _static_boxes(front_box, counts[front], cfg)
