"""vidlab.http against a real HTTP server on 127.0.0.1: good reply, 500 then success, timeout, bad JSON, 4xx."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vidlab.errors import UserError
from vidlab.http import (
    BadResponseError,
    Endpoint,
    EndpointConfigError,
    EndpointError,
    EndpointTimeout,
    chat_completion,
    chat_text,
)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, script):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = list(script)  # one action per request; the last one repeats
        self.requests: list[dict] = []
        self.headers_seen: list[dict] = []


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        srv: _Server = self.server  # type: ignore[assignment]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        srv.requests.append(body)
        srv.headers_seen.append(dict(self.headers))
        action = srv.script.pop(0) if len(srv.script) > 1 else srv.script[0]
        if action == "sleep":
            time.sleep(1.0)
            action = "ok"
        if isinstance(action, int):
            self.send_response(action)
            self.end_headers()
            self.wfile.write(b'{"error": "nope"}')
            return
        payload = (
            b"{not json"
            if action == "garbage"
            else json.dumps(
                {
                    "choices": [
                        {
                            "message": {
                                "role": "assistant",
                                "content": f"echo:{body['messages'][-1]['content']}",
                            }
                        }
                    ]
                }
            ).encode()
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def server():
    made = []

    def start(*script):
        srv = _Server(script)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        made.append(srv)
        return srv, f"http://127.0.0.1:{srv.server_address[1]}/v1"

    yield start
    for srv in made:
        srv.shutdown()
        srv.server_close()


MSG = [{"role": "user", "content": "hi"}]


def test_good_reply_sends_model_params_and_key(server):
    srv, url = server("ok")
    ep = Endpoint(url, api_key="sk-test", backoff=0)
    assert chat_text(ep, MSG, model="m1", temperature=0, n=1) == "echo:hi"
    assert srv.requests[0] == {"model": "m1", "messages": MSG, "temperature": 0, "n": 1}
    assert srv.headers_seen[0]["Authorization"] == "Bearer sk-test"


def test_500_then_success_is_retried(server):
    srv, url = server(500, 503, "ok")
    body = chat_completion(Endpoint(url, backoff=0, max_retries=3), MSG, model="m")
    assert body["choices"][0]["message"]["content"] == "echo:hi" and len(srv.requests) == 3


def test_500_every_time_gives_up_with_status_and_attempts(server):
    srv, url = server(500)
    with pytest.raises(EndpointError, match=r"HTTP 500.*after 3 attempts") as ei:
        chat_text(Endpoint(url, backoff=0, max_retries=2), MSG, model="m")
    assert ei.value.status == 500 and len(srv.requests) == 3 and isinstance(ei.value, UserError)


def test_4xx_is_not_retried(server):
    srv, url = server(404)
    with pytest.raises(EndpointError, match="HTTP 404"):
        chat_text(Endpoint(url, backoff=0), MSG, model="no-such-model")
    assert len(srv.requests) == 1


def test_timeout_is_typed_and_retried(server):
    srv, url = server("sleep")
    with pytest.raises(EndpointTimeout, match="no answer within 0.2s"):
        chat_text(Endpoint(url, timeout=0.2, backoff=0, max_retries=1), MSG, model="m")
    assert len(srv.requests) == 2


def test_malformed_json_and_wrong_shape_are_bad_responses(server):
    srv, url = server("garbage")
    with pytest.raises(BadResponseError, match="not JSON"):
        chat_text(Endpoint(url, backoff=0), MSG, model="m")
    assert len(srv.requests) == 1  # a broken body is not retried


def test_connection_refused_is_an_endpoint_error():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(EndpointError, match="cannot connect"):
        chat_text(Endpoint(f"http://127.0.0.1:{port}/v1", backoff=0, max_retries=0), MSG, model="m")


def test_endpoint_from_env_one_variable_with_openai_fallback(monkeypatch):
    for k in ("VIDLAB_OPENAI_BASE_URL", "OPENAI_BASE_URL", "VIDLAB_OPENAI_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(EndpointConfigError, match="VIDLAB_OPENAI_BASE_URL"):
        Endpoint.from_env()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "old")
    assert Endpoint.from_env() == Endpoint("http://127.0.0.1:9/v1", "old")
    monkeypatch.setenv("VIDLAB_OPENAI_API_KEY", "new")
    monkeypatch.setenv("VIDLAB_OPENAI_BASE_URL", "http://127.0.0.1:8/v1")
    assert Endpoint.from_env() == Endpoint("http://127.0.0.1:8/v1", "new")
    with pytest.raises(EndpointConfigError, match="http"):
        Endpoint("localhost:8000")


def test_errors_pickle_for_ray():
    import pickle

    e = pickle.loads(pickle.dumps(EndpointTimeout("http://x/v1", "slow", None, "")))
    assert isinstance(e, EndpointTimeout) and e.url == "http://x/v1"
