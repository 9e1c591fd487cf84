"""Judges: the offline rule judge, and the endpoint judge against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vidlab.understanding.judge import EndpointJudge, JudgeError, RuleJudge, load_judge, parse_score
from vidlab.understanding.reward import compute_score


@pytest.mark.parametrize(
    "reference, answer, expected",
    [
        ("red umbrella", "A red umbrella.", 1.0),
        ("3", "three", 1.0),
        ("3", "there are 4", 0.0),
        ("3", "3 or 4", 0.0),
        ("the man opens the door", "man opens door", 1.0),
        ("red umbrella", "", 0.0),
        ("red umbrella", "blue umbrella", 0.5),
    ],
)
def test_rule_judge(reference, answer, expected):
    assert RuleJudge().score("q", reference, answer) == pytest.approx(expected)


def test_rule_judge_exact_mode_and_loader():
    assert RuleJudge("exact").score("q", "red umbrella", "blue umbrella") == 0.0
    assert isinstance(load_judge("rule"), RuleJudge) and load_judge("rule:exact").mode == "exact"
    j = load_judge("openai:http://127.0.0.1:9/v1@judge-model")
    assert (
        isinstance(j, EndpointJudge)
        and j.url == "http://127.0.0.1:9/v1/chat/completions"
        and j.model == "judge-model"
    )
    with pytest.raises(ValueError, match="unknown judge spec"):
        load_judge("gpt")


@pytest.mark.parametrize(
    "reply, value",
    [
        ('{"score": 0.7}', 0.7),
        ('Sure!\n```json\n{"score": 1}\n```', 1.0),
        ('"score": 0.25 because', 0.25),
        ('{"score": 3}', 1.0),
        ('{"score": -1}', 0.0),
        ("no idea", None),
        ('{"score": "high"}', None),
    ],
)
def test_parse_score(reply, value):
    assert parse_score(reply) == value


class _Server:
    """A real OpenAI-compatible stand-in: records requests, answers from a script of (status, body, delay)."""

    def __init__(self, script):
        self.script = list(script)
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                status, content, delay = server.script.pop(0) if len(server.script) > 1 else server.script[0]
                time.sleep(delay)
                payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]})
                data = payload.encode() if status == 200 else b'{"error": "boom"}'
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def test_endpoint_judge_request_shape_and_score():
    with _Server([(200, '{"score": 0.8}', 0)]) as srv:
        j = EndpointJudge(srv.url, "judge-model", api_key="k123", backoff=0)
        assert j.score("What is held?", "red umbrella", "an umbrella") == pytest.approx(0.8)
    (req,) = srv.requests
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer k123"
    body = req["body"]
    assert body["model"] == "judge-model" and body["temperature"] == 0.0
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "Ground Truth: red umbrella" in body["messages"][1]["content"]
    assert "Model Response: an umbrella" in body["messages"][1]["content"]


def test_endpoint_judge_retries_5xx_and_unparsable_then_succeeds():
    with _Server([(500, "", 0), (200, "I refuse", 0), (200, '{"score": 1.0}', 0)]) as srv:
        assert EndpointJudge(srv.url, "m", retries=3, backoff=0).score("q", "a", "a") == 1.0
    assert len(srv.requests) == 3


def test_endpoint_judge_4xx_not_retried_and_failure_modes():
    with _Server([(400, "", 0)]) as srv:
        with pytest.raises(JudgeError, match=r"HTTP 400 after 3 tries") as e:
            EndpointJudge(srv.url, "m", retries=3, backoff=0, on_failure="raise").score("q", "a", "b")
        assert e.value.endpoint.endswith("/v1/chat/completions")
        assert len(srv.requests) == 1
        assert EndpointJudge(srv.url, "m", retries=2, backoff=0).score("q", "a", "b") == 0.0  # reference: 0


def test_endpoint_judge_timeout_is_reported():
    with _Server([(200, '{"score": 1}', 1.0)]) as srv:
        with pytest.raises(JudgeError, match="Timeout|timed out"):
            EndpointJudge(srv.url, "m", retries=1, timeout=0.2, on_failure="raise").score("q", "a", "b")


def test_endpoint_judge_unreachable():
    with pytest.raises(JudgeError, match="URLError|ConnectionRefused|refused"):
        EndpointJudge("http://127.0.0.1:9/v1", "m", retries=1, on_failure="raise").score("q", "a", "b")


def test_reward_with_endpoint_judge_for_open_ended():
    solution = "<thinking>t</thinking><answer>he holds an umbrella</answer>"
    with _Server([(200, '{"score": 0.6}', 0)]) as srv:
        r = compute_score(
            "x",
            solution,
            "a red umbrella",
            {"question_type": "oe", "classification": "adaptive", "question": "What?"},
            judge=EndpointJudge(srv.url, "m", backoff=0),
        )
    assert r["acc"] == pytest.approx(0.6) and r["bonus"] == 0.0 and r["score"] == pytest.approx(0.65)
    assert "Model Response: he holds an umbrella" in srv.requests[0]["body"]["messages"][1]["content"]
