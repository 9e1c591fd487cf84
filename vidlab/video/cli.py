"""``vidlab synth`` and ``vidlab contact-sheet``: write a synthetic video; read one back into a labelled sheet."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from vidlab.config import validate

SYNTH_EPILOG = """examples:
  vidlab synth outputs/demo.mp4                                 # 240 frames, 320x240, 24 fps, seed 0
  vidlab synth outputs/long.mp4 --frames 14400 --gop 250        # 10 minutes, long GOP
  vidlab synth outputs/odd.webm --width 321 --height 179 --codec vp9
  vidlab synth outputs/needle.mp4 --frames 600 --event 300:312:circle:red --text "toy world"

Every frame carries its index in the top band (see vidlab.video.synth.read_index_code), so any
reader can be checked for frame exactness. The options used are saved as OUT.config.yaml.
"""

SHEET_EPILOG = """examples:
  vidlab contact-sheet outputs/demo.mp4 --out outputs/demo_sheet.png
  vidlab contact-sheet movie.mp4 --out sheet.png --frames 32 --columns 8 --backend pyav

Frames are sampled with uniform_indices(0, num_frames - 1, FRAMES) (numpy linspace, rounded).
Writes the PNG, SHEET.json (video metadata, backend, frame indices and timestamps) and
SHEET.config.yaml (the resolved options).
"""


SYNTH_EXTS = (".mp4", ".mkv", ".webm", ".mov", ".avi")  # the containers the writer knows by extension


@dataclass
class SynthConfig:
    """Options of ``vidlab synth`` (saved next to the video)."""

    out: str = "outputs/synth.mp4"
    frames: int = 240
    fps: float = 24.0
    width: int = 320
    height: int = 240
    seed: int = 0
    gop: int | None = None
    codec: str = "h264"
    crf: int = 18
    shapes: int = 3
    text: str | None = None
    events: list = field(default_factory=list)

    def __post_init__(self) -> None:
        validate(self)


@dataclass
class ContactSheetConfig:
    """Options of ``vidlab contact-sheet`` (saved next to the sheet)."""

    video: str = ""
    out: str = "outputs/contact_sheet.png"
    frames: int = 16
    backend: str = "auto"
    columns: int = 4
    tile_width: int = 320
    tile_height: int = 180

    def __post_init__(self) -> None:
        validate(self)


def _parse_event(text: str):
    from .synth import Event

    parts = text.split(":")
    if len(parts) < 2:
        raise argparse.ArgumentTypeError(f"event {text!r} must look like START:END[:SHAPE[:COLOR]]")
    try:
        start, end = int(parts[0]), int(parts[1])
        return Event(start, end, *(parts[2:4]))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"bad event {text!r}: {e}") from e


def synth_main(argv: list[str] | None = None) -> int:
    """Render a deterministic synthetic video (shapes, colours, counter, text, events) to OUT."""
    from vidlab.config import save_resolved

    from .errors import VideoWriteError
    from .synth import render_synthetic

    ap = argparse.ArgumentParser(
        prog="vidlab synth",
        description="Render a procedural test video, deterministic by seed, streamed to the encoder.",
        epilog=SYNTH_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = SynthConfig()
    ap.add_argument("out", help="output video path (.mp4, .mkv or .webm)")
    ap.add_argument("--frames", type=int, default=d.frames, help="number of frames (default %(default)s)")
    ap.add_argument("--fps", type=float, default=d.fps, help="frame rate (default %(default)s)")
    ap.add_argument("--width", type=int, default=d.width, help="frame width (default %(default)s)")
    ap.add_argument("--height", type=int, default=d.height, help="frame height (default %(default)s)")
    ap.add_argument("--seed", type=int, default=d.seed, help="scene seed (default %(default)s)")
    ap.add_argument("--gop", type=int, default=None, help="keyframe interval in frames (default: encoder's)")
    ap.add_argument("--codec", default=d.codec, help="h264 (mp4/mkv) or vp9 (webm) (default %(default)s)")
    ap.add_argument("--crf", type=int, default=d.crf, help="quality, lower is better (default %(default)s)")
    ap.add_argument("--shapes", type=int, default=d.shapes, help="moving shapes (default %(default)s)")
    ap.add_argument("--text", default=None, help="caption drawn on every frame")
    ap.add_argument(
        "--event",
        action="append",
        type=_parse_event,
        default=[],
        metavar="START:END[:SHAPE[:COLOR]]",
        help="show a shape in frames [START, END); repeatable",
    )
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    a = ap.parse_args(argv)
    if a.frames < 1:
        print(f"vidlab synth: error: --frames must be >= 1, got {a.frames}", file=sys.stderr)
        return 2
    suffix = Path(a.out).suffix.lower()
    if suffix not in SYNTH_EXTS:  # before any folder, temporary file or progress bar
        why = "has no video extension" if not suffix else f"ends in {suffix!r}, not a video extension"
        print(
            f"vidlab synth: error: output {a.out!r} {why}: add .mp4 (or {', '.join(SYNTH_EXTS[1:])}), "
            f"e.g. {Path(a.out).with_suffix('.mp4') if suffix else a.out + '.mp4'}",
            file=sys.stderr,
        )
        return 2
    try:
        path = render_synthetic(
            a.out,
            a.frames,
            fps=a.fps,
            width=a.width,
            height=a.height,
            seed=a.seed,
            gop=a.gop,
            codec=a.codec,
            crf=a.crf,
            num_shapes=a.shapes,
            text=a.text,
            events=a.event,
            progress=not a.quiet,
        )
    except (VideoWriteError, ValueError) as e:
        print(f"vidlab synth: error: {e}", file=sys.stderr)
        return 2
    cfg = SynthConfig(
        str(path), a.frames, a.fps, a.width, a.height, a.seed, a.gop, a.codec, a.crf, a.shapes, a.text,
        [asdict(e) for e in a.event],
    )  # fmt: skip
    save_resolved(cfg, path.parent, name=f"{path.stem}.config.yaml")
    print(f"wrote {path} ({a.frames} frames, {a.width}x{a.height} @ {a.fps:g} fps, seed {a.seed})")
    return 0


def contact_sheet_main(argv: list[str] | None = None) -> int:
    """Read uniformly spaced frames through open_video and write a labelled contact sheet + metadata."""
    from vidlab.config import save_resolved

    from .errors import VideoReadError
    from .reader import BACKENDS, open_video, uniform_indices
    from .sheet import contact_sheet

    d = ContactSheetConfig()
    ap = argparse.ArgumentParser(
        prog="vidlab contact-sheet",
        description="Read uniformly spaced frames of VIDEO and write a labelled contact-sheet PNG.",
        epilog=SHEET_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("video", help="input video")
    ap.add_argument("--out", default=d.out, help="output PNG (default %(default)s)")
    ap.add_argument("--frames", type=int, default=d.frames, help="frames to sample (default %(default)s)")
    ap.add_argument(
        "--backend", default=d.backend, choices=["auto", *BACKENDS], help="decoder (default auto)"
    )
    ap.add_argument("--columns", type=int, default=d.columns, help="tiles per row (default %(default)s)")
    ap.add_argument(
        "--tile-width", type=int, default=d.tile_width, help="max tile width (default %(default)s)"
    )
    ap.add_argument(
        "--tile-height", type=int, default=d.tile_height, help="max tile height (default %(default)s)"
    )
    a = ap.parse_args(argv)
    for flag, value in (("--frames", a.frames), ("--columns", a.columns), ("--tile-width", a.tile_width),
                        ("--tile-height", a.tile_height)):  # fmt: skip
        if value < 1:
            ap.error(f"{flag} must be >= 1, got {value}")
    cfg = ContactSheetConfig(a.video, a.out, a.frames, a.backend, a.columns, a.tile_width, a.tile_height)
    out = Path(a.out)
    from vidlab.io import ensure_output_dir

    ensure_output_dir(out.parent)  # an unwritable --out is one line, before any decoding
    try:
        with open_video(a.video, backend=a.backend) as reader:
            idx = uniform_indices(0, reader.num_frames - 1, min(a.frames, reader.num_frames), unique=True)
            frames = reader.get_frames(idx, size=(a.tile_width, a.tile_height))
            ts = reader.timestamps(idx)
            meta = reader.metadata()
            meta["selection_reason"] = getattr(reader, "selection_reason", "")
    except VideoReadError as e:  # also BackendUnavailableError: what is missing, what installs it
        print(f"vidlab contact-sheet: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    title = f"{Path(a.video).name}  {meta['width']}x{meta['height']}  {meta['num_frames']} frames  {meta['fps']:.2f} fps"
    contact_sheet(frames, idx, ts, columns=a.columns, title=title).save(out)
    meta["frames"] = [{"index": int(i), "timestamp": round(float(t), 6)} for i, t in zip(idx, ts)]
    meta_path = out.with_suffix(".json")
    meta_path.write_text(json.dumps(meta, indent=2))
    save_resolved(cfg, out.parent, name=f"{out.stem}.config.yaml")
    print(f"wrote {out} ({len(idx)} frames via {meta['backend']}), {meta_path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(synth_main())
