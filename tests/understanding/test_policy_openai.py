"""The OpenAI-compatible policy against a real HTTP server on 127.0.0.1 that checks each request's shape."""

from __future__ import annotations

import base64
import io
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from PIL import Image

from vidlab.understanding.messages import Frame, Message
from vidlab.understanding.policies import (
    BadResponseError,
    EndpointError,
    EndpointTimeout,
    PolicySpecError,
    load_policy,
)
from vidlab.understanding.policies.openai_server import OpenAIPolicy


class Server:
    """A chat-completions server: records requests, answers from a scripted queue of (status, body, delay)."""

    def __init__(self):
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.script: list[tuple[int, object, float]] = []
        self.default = (200, None, 0.0)  # None body -> a completion echoing how many images came in
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body})
                server.headers.append(dict(self.headers))
                status, reply, delay = server.script.pop(0) if server.script else server.default
                if delay:
                    time.sleep(delay)
                if reply is None:
                    reply = server.completion(body)
                raw = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    @staticmethod
    def completion(body: dict, n: int | None = None) -> dict:
        n_img = sum(
            1
            for m in body["messages"]
            if isinstance(m["content"], list)
            for p in m["content"]
            if p["type"] == "image_url"
        )
        k = body.get("n", 1) if n is None else n
        text = f"<thinking>saw {n_img} images</thinking><answer>B</answer>"
        return {
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                for i in range(k)
            ]
        }

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def frame(i: int, h: int = 36, w: int = 64) -> Frame:
    img = np.zeros((h, w, 3), np.uint8)
    img[..., i % 3] = (30 * (i + 1)) % 256
    return Frame(img, i, i / 8)


def conversation() -> list[Message]:
    return [
        Message("system", ["You answer video questions."]),
        Message("user", ["Question: what colour?\n", "\nframe 0: ", frame(0), "\nframe 7: ", frame(7)]),
        Message("assistant", ['<thinking>more</thinking><tool_call>{"name": "uniform_sample"}</tool_call>']),
        Message("user", ["Based on sampling", "\nframe 3: ", frame(3, 48, 80)]),
    ]


def decode_data_url(url: str) -> tuple[str, np.ndarray]:
    head, b64 = url.split(",", 1)
    assert head.startswith("data:image/") and head.endswith(";base64")
    return head[len("data:image/") : -len(";base64")], np.asarray(
        Image.open(io.BytesIO(base64.b64decode(b64)))
    )


def test_request_shape_images_as_data_urls_in_order(server):
    pol = load_policy(f"openai:{server.url}@my-vlm", api_key="sk-test", image_format="png")
    out = pol.generate(conversation(), temperature=0.7, max_new_tokens=64, seed=5)
    assert out == ["<thinking>saw 3 images</thinking><answer>B</answer>"]
    (req,) = server.requests
    assert req["path"] == "/v1/chat/completions"
    body = req["body"]
    assert body["model"] == "my-vlm" and body["n"] == 1 and body["temperature"] == 0.7
    assert body["max_tokens"] == 64 and body["seed"] == 5
    assert server.headers[0]["Authorization"] == "Bearer sk-test"
    msgs = body["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[0]["content"] == "You answer video questions."  # text-only turns stay plain strings
    parts = msgs[1]["content"]
    assert [p["type"] for p in parts] == ["text", "text", "image_url", "text", "image_url"]
    assert (
        parts[1]["text"] == "\nframe 0: " and parts[3]["text"] == "\nframe 7: "
    )  # label right before its image
    fmt, px = decode_data_url(parts[4]["image_url"]["url"])
    assert fmt == "png" and np.array_equal(px, frame(7).image)  # PNG is lossless: exact pixels arrive
    fmt, px = decode_data_url(msgs[3]["content"][2]["image_url"]["url"])
    assert px.shape == (48, 80, 3)


def test_jpeg_encoding_is_the_default(server):
    OpenAIPolicy(server.url, "m").generate(conversation())
    url = server.requests[0]["body"]["messages"][1]["content"][2]["image_url"]["url"]
    fmt, px = decode_data_url(url)
    assert fmt == "jpeg" and px.shape == (36, 64, 3)
    assert np.abs(px.astype(int) - frame(0).image.astype(int)).mean() < 8


def test_num_samples_collected_from_servers_that_return_fewer_choices(server):
    server.script = [(200, Server.completion({"messages": []}, n=1), 0.0)] * 3
    out = OpenAIPolicy(server.url, "m").generate(conversation(), num_samples=3, temperature=1.0, seed=1)
    assert len(out) == 3 and len(server.requests) == 3
    assert [r["body"]["n"] for r in server.requests] == [3, 2, 1]
    assert [r["body"]["seed"] for r in server.requests] == [1, 2, 3]  # refills are not the same samples again


def test_retries_5xx_then_succeeds(server):
    server.script = [(503, {"error": "busy"}, 0.0), (500, {"error": "oops"}, 0.0)]
    out = OpenAIPolicy(server.url, "m", backoff=0.01).generate(conversation())
    assert out[0].endswith("<answer>B</answer>") and len(server.requests) == 3


def test_4xx_is_not_retried_and_names_status_and_body(server):
    server.script = [(400, {"error": {"message": "image too large"}}, 0.0)]
    with pytest.raises(EndpointError) as ei:
        OpenAIPolicy(server.url, "m", backoff=0.01).generate(conversation())
    assert ei.value.status == 400 and "image too large" in str(ei.value) and server.url in str(ei.value)
    assert len(server.requests) == 1


def test_slow_server_times_out_after_retries(server):
    server.default = (200, None, 1.0)
    pol = OpenAIPolicy(server.url, "m", timeout=0.2, max_retries=1, backoff=0.01)
    with pytest.raises(
        EndpointTimeout, match="gave up after 2 attempts"
    ):  # latency: benchmarks/failure_paths.py
        pol.generate(conversation())
    assert len(server.requests) == 2


def test_dripping_server_is_cut_off_at_the_deadline_of_the_spec():
    """`openai:URL@MODEL` with timeout=2 against a server that drips its reply a byte every 0.25 s: one attempt
    ends at 2 s (the whole reply would take minutes), the next retry too, and the message says what happened.
    The bound is checked as the server saw it (bytes sent before the client left) and, generously, on the clock."""
    from vidlab.http_testing import HostileServer, chat_body, drip

    text = "<thinking>" + "look " * 80 + "</thinking><answer>B</answer>"
    with HostileServer({"drip": drip(text, per_byte=0.25)}) as srv:
        pol = load_policy(f"openai:{srv.url('drip')}@m", timeout=2, max_retries=1, backoff=0.01)
        deadline = time.monotonic() + 2 * 2 + 0.01 + 3
        with pytest.raises(EndpointTimeout) as ei:
            pol.generate(conversation())
        assert time.monotonic() < deadline
        msg = str(ei.value)
        assert "gave up after 2 attempts" in msg and "no complete reply within 2 s (server sent" in msg, msg
        assert srv.counts["drip"] == 2
        drop_deadline = time.monotonic() + 10
        while len(srv.drops("drip")) < 2:  # the server notices a client that left at its next byte
            assert time.monotonic() < drop_deadline
            time.sleep(0.05)
        body_len = len(chat_body(text))
        for drop in srv.drops("drip"):
            assert drop.sent - (drop.total - body_len) < 40, drop  # ~8 body bytes in 2 s, not all of them


def test_budget_bounds_the_retries_of_the_policy():
    from vidlab.http_testing import HostileServer, hang

    with HostileServer({"hang": hang()}) as srv:
        pol = OpenAIPolicy(srv.url("hang"), "m", timeout=1, max_retries=20, backoff=0.05, budget=2.5)
        with pytest.raises(EndpointTimeout, match=r"budget is spent"):
            pol.generate(conversation())
        assert 2 <= srv.counts["hang"] <= 3


def test_bad_bodies_are_typed_errors(server):
    server.script = [(200, b"<html>not json</html>", 0.0)]
    with pytest.raises(BadResponseError, match="not JSON"):
        OpenAIPolicy(server.url, "m").generate(conversation())
    server.script = [(200, {"object": "error"}, 0.0)]
    with pytest.raises(BadResponseError, match="not a chat completion"):
        OpenAIPolicy(server.url, "m").generate(conversation())
    server.script = [(200, {"choices": []}, 0.0)]
    with pytest.raises(BadResponseError, match="no choices"):
        OpenAIPolicy(server.url, "m").generate(conversation())


def test_unreachable_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    with pytest.raises(EndpointError, match="cannot connect"):
        OpenAIPolicy(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, backoff=0.01).generate(conversation())


def test_stop_strings_passed_and_closing_tag_restored(server):
    text = '<thinking>look</thinking><tool_call>{"name": "uniform_sample", "arguments": {"start_frame": 0, "end_frame": 9}}'
    server.script = [(200, {"choices": [{"message": {"content": text}, "finish_reason": "stop"}]}, 0.0)]
    out = OpenAIPolicy(server.url, "m", stop=["</tool_call>", "</answer>"]).generate(conversation())
    assert server.requests[0]["body"]["stop"] == ["</tool_call>", "</answer>"]
    assert out == [text + "</tool_call>"]


def test_spec_parsing():
    pol = load_policy("openai:http://127.0.0.1:8000/v1@Qwen/Qwen2.5-VL-7B-Instruct")
    assert pol.base_url == "http://127.0.0.1:8000/v1" and pol.model == "Qwen/Qwen2.5-VL-7B-Instruct"
    for bad in ("openai:http://127.0.0.1:8000/v1", "openai:@m", "openai:ftp://x@m", "gpt4", "zzz:abc"):
        with pytest.raises(PolicySpecError):
            load_policy(bad)


def test_drives_a_whole_episode(server, tmp_path):
    """The server plays the model: a uniform_sample call, then an answer; the episode sees 16 + 8 frames."""
    from vidlab.understanding.env import EpisodeConfig, run_episode
    from vidlab.video.synth import render_synthetic

    video = render_synthetic(tmp_path / "v.mp4", 64, fps=8, width=64, height=48, seed=0)
    call = '<thinking>need more</thinking><tool_call>{"name": "uniform_sample", "arguments": {"start_frame": 8, "end_frame": 40}}</tool_call>'
    server.script = [(200, {"choices": [{"message": {"content": call}, "finish_reason": "stop"}]}, 0.0)]
    traj = run_episode(OpenAIPolicy(server.url, "m"), video, "Which?", ["x", "y"], EpisodeConfig())
    assert traj.valid and traj.predicted == "B" and traj.num_tool_calls == 1
    # the second request carried the initial 16 frames plus the 8 returned ones
    assert traj.answer == "B" and "saw 24 images" in traj.assistant_turns[-1]
    assert len(server.requests) == 2
