"""Latency figures that used to be wall-clock asserts in tests: now measured here, as ratios.

* ``tokenizer_build``: building the tiny offline T5-style tokenizer from scratch (cache cleared),
  against tokenizing one prompt with the built tokenizer in the same run.
* ``endpoint_timeout``: how long ``vidlab.http`` takes to give up on a server that never answers in
  time, against the floor ``timeout x attempts`` (ratio 1.0 = no overhead beyond the timeouts).

    python benchmarks/failure_paths.py --quick
"""

from __future__ import annotations

import pathlib
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from benchmarks._common import bench_args, emit_json, print_table, time_side_by_side  # noqa: E402


def _tokenizer_figures(repeats: int, budget: float) -> dict[str, float]:
    from vidlab.generation.tiny_tokenizer import _train, build_tiny_tokenizer

    tok = build_tiny_tokenizer()

    def cold() -> None:
        _train.cache_clear()
        build_tiny_tokenizer()

    res = time_side_by_side(
        {"build": cold, "encode": lambda: tok("a red cat on the left of a blue dog")}, repeats, budget
    )
    return {"build_s": res["build"]["best"], "encode_s": res["encode"]["best"],
            "build_over_encode": res["build"]["best"] / max(res["encode"]["best"], 1e-9)}  # fmt: skip


class _Slow(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(self.server.delay)  # type: ignore[attr-defined]
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")


def _timeout_figures(timeout: float, retries: int) -> dict[str, float]:
    from vidlab.http import Endpoint, EndpointTimeout, chat_text

    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    srv.daemon_threads = True
    srv.delay = timeout * 5  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        ep = Endpoint(
            f"http://127.0.0.1:{srv.server_address[1]}/v1", timeout=timeout, max_retries=retries, backoff=0
        )
        t0 = time.perf_counter()
        try:
            chat_text(ep, [{"role": "user", "content": "hi"}], model="m")
        except EndpointTimeout:
            pass
        elapsed = time.perf_counter() - t0
    finally:
        srv.shutdown()
        srv.server_close()
    floor = timeout * (retries + 1)
    return {"give_up_s": elapsed, "floor_s": floor, "give_up_over_floor": elapsed / floor}


def main(argv=None) -> int:
    args = bench_args(__doc__.splitlines()[0], argv=argv)
    tok = _tokenizer_figures(args.repeats, args.budget)
    out = _timeout_figures(0.2 if args.quick else 1.0, 1 if args.quick else 3)
    print_table(
        [{"case": "tokenizer_build", "seconds": tok["build_s"], "ratio": tok["build_over_encode"]},
         {"case": "endpoint_timeout", "seconds": out["give_up_s"], "ratio": out["give_up_over_floor"]}],
        ["case", "seconds", "ratio"],
    )  # fmt: skip
    emit_json({"tokenizer": tok, "endpoint_timeout": out})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
