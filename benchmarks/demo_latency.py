"""Demo latency: time to the first progress update and to the finished video, driven over HTTP.

Serves the demo on 127.0.0.1 (tiny pipeline by default), submits one generation with gradio_client and polls
the job's status. Prints a table and ends with one JSON line. Figures are wall-clock on this machine; the
first request includes the pipeline load, so it is reported apart from a warm second request.
"""

from __future__ import annotations

import argparse
import json
import socket
import time


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one(client, table, steps: int) -> dict[str, float]:
    t0 = time.perf_counter()
    job = client.submit(
        "a red cat on the left of a blue dog", table, True, 0.5, True, 0.5, 0, steps, api_name="/generate"
    )
    first = None
    while not job.done():
        st = job.status()
        if first is None and getattr(st, "progress_data", None):
            first = time.perf_counter() - t0
        time.sleep(0.02)
    job.result()
    return {
        "first_progress_s": round(first, 3) if first is not None else None,
        "video_s": round(time.perf_counter() - t0, 3),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="2 steps instead of 4")
    p.add_argument("--preset", default="tiny", help="generation preset the demo serves")
    args = p.parse_args(argv)
    from gradio_client import Client

    from demos.app import build_demo, launch
    from demos.config import DemoConfig, DemoGenerationConfig, DemoQAConfig

    steps = 2 if args.quick else 4
    cfg = DemoConfig(
        port=_free_port(),
        generation=DemoGenerationConfig(preset=args.preset),
        qa=DemoQAConfig(synthetic_videos=0),
    )
    demo = build_demo(cfg)
    _, url, _ = launch(demo, cfg, prevent_thread_lock=True)
    try:
        client = Client(url, verbose=False)
        _, table, _ = client.predict("a red cat on the left of a blue dog", "", api_name="/plan")
        cold = _one(client, table, steps)
        warm = _one(client, table, steps)
    finally:
        demo.close()
    print(f"{'request':<8} {'first progress (s)':>19} {'finished video (s)':>19}")
    for name, r in (("cold", cold), ("warm", warm)):
        print(f"{name:<8} {r['first_progress_s']!s:>19} {r['video_s']:>19}")
    print(json.dumps({"preset": args.preset, "steps": steps, "cold": cold, "warm": warm}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
