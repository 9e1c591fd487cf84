"""The vidlab Gradio demo: compositional generation with editable boxes, and long-video QA with the trajectory.

Start it with ``vidlab demo`` or ``python demos/app.py`` (both take ``--preset``, ``--host``, ``--port`` and
``key=value`` overrides). ``build_demo(config)`` returns the ``gr.Blocks`` the tests drive. It listens on
127.0.0.1 unless ``--host`` says otherwise, serves only files it wrote or the user uploaded, caps uploads,
resolution, frames, steps and video length by config, and runs one request at a time per loaded model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python demos/app.py` from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from demos.config import DemoConfig  # noqa: E402

TITLE = "vidlab: Comp-Attn generation and VideoBrain long-video QA"


def build_demo(config: DemoConfig | None = None) -> Any:
    """Build the two-tab app; models load lazily on the first request (a bad preset fails here, at once)."""
    import gradio as gr

    from demos.generation_tab import GenerationService, build_generation_tab
    from demos.qa_tab import QAService, build_qa_tab
    from demos.work import WorkArea

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


def launch(demo: Any, config: DemoConfig, **kw: Any) -> Any:
    """Serve ``demo`` on ``config.host:config.port`` with the safety settings (file access, upload size)."""
    work = demo.vidlab["work"]
    return demo.launch(
        server_name=config.host,
        server_port=config.port or None,
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
        epilog="""examples:
  vidlab demo                                   # tiny models, http://127.0.0.1:7860
  vidlab demo --preset demo-toyworld            # the trained toy-world models (when shipped)
  vidlab demo generation.preset=wan2.1-t2v-1.3b qa.policy=openai:http://127.0.0.1:8000/v1@qwen
  vidlab demo --host 0.0.0.0 --port 8080        # reachable from other machines: only if you mean it

key=value overrides address DemoConfig: host, port, queue_size, work_dir, generation.* (preset, overrides,
planner, max_steps, max_frames, max_side, ...) and qa.* (policy, clip_model, max_calls, max_upload_mb,
max_video_seconds, ...).""",
    )
    from vidlab.config import add_config_args

    add_config_args(p)
    p.add_argument("--host", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, help="port (default 7860; 0 = any free port)")
    return p


def main(argv: list[str] | None = None) -> int:
    """``vidlab demo``: resolve the config, build the app, serve until interrupted."""
    from vidlab.config import config_from_args

    args = _parser().parse_args(argv)
    cfg = config_from_args(DemoConfig, args, {"host": args.host, "port": args.port})
    demo = build_demo(cfg)
    print(f"vidlab demo on http://{cfg.host}:{cfg.port or '<any free port>'} (Ctrl+C stops it)")
    launch(demo, cfg)
    return 0


if __name__ == "__main__":
    from vidlab.errors import run_command

    raise SystemExit(run_command("demos/app.py", main, sys.argv[1:]))
