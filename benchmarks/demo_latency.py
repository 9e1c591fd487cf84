"""Demo latency: time to the first progress update and to the finished video, driven over HTTP.

Serves the demo on 127.0.0.1 (tiny pipeline by default), submits one generation with gradio_client and polls
the job's status. Prints a table and ends with one JSON line. Figures are wall-clock on this machine. The first
request is a newcomer's first click: the box table empty, so it plans the layout and loads the pipeline; it is
reported apart from a warm second request with the planned table.

    python benchmarks/demo_latency.py --quick     # 2 steps
    python benchmarks/demo_latency.py --smoke     # 1 step on a 32x32, 9-frame clip (the test suite's size)
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


PROMPT = "a red cat on the left of a blue dog"


def _one(client, table, steps: int) -> dict[str, float]:
    t0 = time.perf_counter()
    # prompt, subjects (empty: the planner's), box table, SCI on at 0.5, LAM on at 0.5, seed, steps
    job = client.submit(PROMPT, "", table, True, 0.5, True, 0.5, 0, steps, api_name="/generate")
    first = None
    while not job.done():
        st = job.status()
        if first is None and getattr(st, "progress_data", None):
            first = time.perf_counter() - t0
        time.sleep(0.02)
    out = job.result()
    if not table["data"] and not (out[7] or {}).get("data"):  # sent empty: the plan it used comes back
        raise RuntimeError("the demo planned no layout for the first click")
    return {
        "first_progress_s": round(first, 3) if first is not None else None,
        "video_s": round(time.perf_counter() - t0, 3),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="2 steps instead of 4")
    p.add_argument("--smoke", action="store_true", help="1 step on a 32x32, 9-frame clip (seconds)")
    p.add_argument("--preset", default="tiny", help="generation preset the demo serves")
    args = p.parse_args(argv)
    import tempfile

    from gradio_client import Client

    from vidlab.demos.app import build_demo, launch
    from vidlab.demos.config import DemoConfig, DemoGenerationConfig, DemoQAConfig

    steps = 1 if args.smoke else 2 if args.quick else 4
    overrides = ["height=32", "width=32", "frames=9"] if args.smoke else []
    with tempfile.TemporaryDirectory(prefix="vidlab-demo-latency-") as work:
        cfg = DemoConfig(
            port=_free_port(),
            work_dir=work,
            generation=DemoGenerationConfig(preset=args.preset, overrides=overrides),
            qa=DemoQAConfig(synthetic_videos=0),
        )
        demo = build_demo(cfg)
        _, url, _ = launch(demo, cfg, prevent_thread_lock=True)
        try:
            client = Client(url, verbose=False, ssl_verify=False)
            _, table, _ = client.predict(PROMPT, "", api_name="/plan")
            first = _one(
                client, {"headers": table["headers"], "data": []}, steps
            )  # first click: plans, loads
            warm = _one(client, table, steps)
        finally:
            demo.close()
    print(f"{'request':<12} {'first progress (s)':>19} {'finished video (s)':>19}")
    for name, r in (("first click", first), ("warm", warm)):
        print(f"{name:<12} {r['first_progress_s']!s:>19} {r['video_s']:>19}")
    print(
        json.dumps({"preset": args.preset, "steps": steps, "smoke": args.smoke, "cold": first, "warm": warm})
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
