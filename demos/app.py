"""The vidlab Gradio demo: compositional generation with editable boxes, and long-video QA with the trajectory.

Start it with ``vidlab demo`` or ``python demos/app.py`` (both take ``--preset``, ``--host``, ``--port`` and
``key=value`` overrides). ``build_demo(config)`` returns the ``gr.Blocks`` the tests drive. It listens on
127.0.0.1 unless ``--host`` (or ``$GRADIO_SERVER_NAME``, as for any Gradio app) says otherwise, serves only
files it wrote or the user uploaded, caps uploads, resolution, frames, steps and video length by config, and
runs one request at a time per loaded model.

Hugging Face Spaces (``sdk: gradio``): this file is the Space's entry point; set ``app_file: demos/app.py`` in
the Space's README header. The Space runs ``python demos/app.py`` and sets ``GRADIO_SERVER_NAME=0.0.0.0`` and
``GRADIO_SERVER_PORT``, which are honoured; ``$VIDLAB_DEMO_PRESET`` picks the preset where no flag can be
passed. ``gradio demos/app.py`` (reload mode) finds the module-level ``demo``, built on first access.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python demos/app.py` from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vidlab.demos.config import DemoConfig  # noqa: E402
from vidlab.errors import UserError  # noqa: E402

TITLE = "vidlab: Comp-Attn generation and VideoBrain long-video QA"


def build_demo(config: DemoConfig | None = None) -> Any:
    """Build the two-tab app; models load lazily on the first request (a bad preset fails here, at once)."""
    import gradio as gr

    from vidlab.demos.generation_tab import GenerationService, build_generation_tab
    from vidlab.demos.qa_tab import QAService, build_qa_tab
    from vidlab.demos.work import WorkArea

    cfg = config or DemoConfig()
    work = WorkArea(cfg.work_dir)
    gen = GenerationService(cfg.generation, work)
    qa = QAService(cfg.qa, work)
    with gr.Blocks(title=TITLE) as demo:
        gr.Markdown(f"# {TITLE}")
        with gr.Tab("Generate"):
            build_generation_tab(gen)
        with gr.Tab("Long-video QA"):
            build_qa_tab(qa, cfg.qa.max_upload_mb)
    demo.queue(max_size=cfg.queue_size, default_concurrency_limit=1)
    demo.vidlab = {"config": cfg, "work": work, "generation": gen, "qa": qa}  # for launch() and tests
    return demo


DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 7860


class DemoAddressError(UserError):
    """$GRADIO_SERVER_PORT is not a port number."""


def server_address(config: DemoConfig, environ: Any = None) -> tuple[str, int]:
    """Where to listen: ``config.host``/``config.port`` when set (flags, overrides, preset), else Gradio's own
    variables ``GRADIO_SERVER_NAME``/``GRADIO_SERVER_PORT`` (as every Gradio app reads them), else
    127.0.0.1:7860. Port 0 means any free port."""
    env = os.environ if environ is None else environ
    host = config.host or env.get("GRADIO_SERVER_NAME", "").strip() or DEFAULT_HOST
    if config.port is not None:
        return host, int(config.port)
    raw = env.get("GRADIO_SERVER_PORT", "").strip()
    if not raw:
        return host, DEFAULT_PORT
    if not raw.isdigit() or not 0 <= int(raw) <= 65535:
        raise DemoAddressError(f"GRADIO_SERVER_PORT={raw!r} is not a port number (0..65535)")
    return host, int(raw)


def launch(demo: Any, config: DemoConfig, **kw: Any) -> Any:
    """Serve ``demo`` on :func:`server_address` with the safety settings (file access, upload size)."""
    work = demo.vidlab["work"]
    host, port = server_address(config)
    return demo.launch(
        server_name=host,
        server_port=port or None,
        allowed_paths=[str(work.root)],
        max_file_size=int(config.qa.max_upload_mb * 1_000_000),
        show_error=True,
        quiet=True,
        **kw,
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vidlab demo",
        description="Serve the Gradio demo: Comp-Attn generation with boxes you can draw, and long-video QA "
        "with the agent's trajectory on view.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"""examples:
  vidlab demo                                   # the models trained on the toy worlds, http://127.0.0.1:7860
  vidlab demo --preset tiny                     # random tiny Wan + scripted pixel reader (seconds per request)
  vidlab demo generation.preset=wan2.1-t2v-1.3b qa.policy=openai:http://127.0.0.1:8000/v1@qwen
  vidlab demo --port 8080 generation.max_steps=20
  vidlab demo --host 0.0.0.0 --port 8080        # reachable from other machines: only if you mean it

presets (--preset NAME, configs/demo/): {", ".join(demo_presets()) or "-"}

key=value overrides address DemoConfig: host, port, queue_size, work_dir, generation.* (preset, overrides,
planner, max_steps, max_frames, max_side, ...) and qa.* (policy, clip_model, max_calls, max_upload_mb,
max_video_seconds, ...). Without --host/--port, $GRADIO_SERVER_NAME and $GRADIO_SERVER_PORT are honoured
as in any Gradio app; the default stays 127.0.0.1:7860.""",
    )
    from vidlab.config import add_config_args

    add_config_args(p, example="generation.max_steps=20 qa.max_calls=3")
    p.add_argument(
        "--host",
        help="address to listen on (default $GRADIO_SERVER_NAME, else 127.0.0.1: this machine only)",
    )
    p.add_argument(
        "--port", type=int, help="port (default $GRADIO_SERVER_PORT, else 7860; 0 = any free port)"
    )
    return p


def demo_presets() -> list[str]:
    """The preset names ``--preset`` finds for the demo (configs/demo/*.yaml)."""
    from vidlab.config import config_dir

    folder = config_dir() / DemoConfig.PRESET_DIR
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def demo_config(argv: list[str] | None = None) -> DemoConfig:
    """The config ``vidlab demo ARGV`` serves: DemoConfig's defaults <- ``--preset`` (else
    ``$VIDLAB_DEMO_PRESET``) <- ``key=value`` overrides <- ``--host``/``--port``. With no preset it is the
    defaults themselves, which is what ``--preset default`` gives too (that preset sets nothing)."""
    from vidlab.config import config_from_args

    args = _parser().parse_args(argv)
    if not getattr(args, "preset", None) and os.environ.get("VIDLAB_DEMO_PRESET"):
        args.preset = os.environ["VIDLAB_DEMO_PRESET"]  # a Space cannot pass flags
    return config_from_args(DemoConfig, args, {"host": args.host, "port": args.port})


def main(argv: list[str] | None = None) -> int:
    """``vidlab demo``: resolve the config, build the app, serve until interrupted."""
    cfg = demo_config(argv)
    host, port = server_address(cfg)  # a bad $GRADIO_SERVER_PORT fails here, before any model loads
    demo = build_demo(cfg)
    print(f"vidlab demo on http://{host}:{port or '<any free port>'} (Ctrl+C stops it)", flush=True)
    launch(demo, cfg)
    return 0


def __getattr__(name: str) -> Any:
    """``demo``: the app of the default (or $VIDLAB_DEMO_PRESET) config, built on first access, for
    ``gradio demos/app.py`` and Spaces tooling that look for a module-level ``demo``."""
    if name == "demo":
        from vidlab.config import resolve

        built = build_demo(resolve(DemoConfig, os.environ.get("VIDLAB_DEMO_PRESET") or None, []))
        globals()["demo"] = built
        return built
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    from vidlab.errors import run_command

    raise SystemExit(run_command("demos/app.py", main, sys.argv[1:]))
