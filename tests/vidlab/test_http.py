"""vidlab.http against real servers on 127.0.0.1 (vidlab.http_testing.HostileServer): good replies, retries,
and hostile ones: a reply dripped one byte at a time (body, or status line and headers too), a server that
never answers, a budget over retries, Retry-After past the budget, garbage, an endless body, a truncated one.

The deadline tests check the bound the way the server sees it: the drip is cut off after a few bytes (a count,
not a clock); the wall-clock guard beside it is generous (deadline + 3 s), a correctness bound, not a speed."""

from __future__ import annotations

import pickle
import socket
import time

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
from vidlab.http_testing import (
    HostileServer,
    Reply,
    chat,
    chat_body,
    drip,
    endless,
    garbage,
    hang,
    sequence,
    status,
    truncated,
)

MSG = [{"role": "user", "content": "hi"}]
LONG = "a layout " * 40  # a ~360-character reply: minutes when dripped at 0.25 s a byte


def _echo(req, n):
    return Reply(body=chat_body(f"echo:{req.body['messages'][-1]['content']}"))


@pytest.fixture
def srv():
    with HostileServer(
        {
            "ok": _echo,
            "flaky": sequence(status(500), status(503), _echo),
            "e500": status(500),
            "e404": status(404),
            "hang": hang(),
            "garbage": garbage(5 * 1024 * 1024),
            "drip": drip(LONG, per_byte=0.25),
            "driphead": drip(LONG, per_byte=0.25, head_too=True),
            "endless": endless(),
            "truncated": truncated(LONG),
            "busy": status(503, retry_after=30),
            "good": chat("fine"),
        }
    ) as s:
        yield s


def _wait_for_drop(srv, mode):
    """The server notices a client that left at its next write; wait for that (a hang guard, not a timing)."""
    deadline = time.monotonic() + 10
    while not srv.drops(mode):
        assert time.monotonic() < deadline, f"the {mode} handler never saw the client leave"
        time.sleep(0.05)
    return srv.drops(mode)[0]


def test_good_reply_sends_model_params_and_key(srv):
    ep = Endpoint(srv.url("ok"), api_key="sk-test", backoff=0)
    assert chat_text(ep, MSG, model="m1", temperature=0, n=1) == "echo:hi"
    (req,) = srv.of("ok")
    assert req.body == {"model": "m1", "messages": MSG, "temperature": 0, "n": 1}
    assert req.headers["Authorization"] == "Bearer sk-test" and req.path == "/ok/v1/chat/completions"


def test_500_then_success_is_retried(srv):
    body = chat_completion(Endpoint(srv.url("flaky"), backoff=0, max_retries=3), MSG, model="m")
    assert body["choices"][0]["message"]["content"] == "echo:hi" and srv.counts["flaky"] == 3


def test_500_every_time_gives_up_saying_how_often_and_how_long(srv):
    with pytest.raises(EndpointError, match=r"gave up after 3 attempts in \d+\.\d s: HTTP 500") as ei:
        chat_text(Endpoint(srv.url("e500"), backoff=0, max_retries=2), MSG, model="m")
    assert ei.value.status == 500 and srv.counts["e500"] == 3 and isinstance(ei.value, UserError)
    assert ei.value.attempts == 3 and "\n" not in str(ei.value)


def test_backoff_doubles_between_attempts(srv):
    """0.2 s then 0.4 s: the three attempts span at least 0.6 s (a lower bound only, never a speed claim)."""
    with pytest.raises(EndpointError) as ei:
        chat_text(Endpoint(srv.url("e500"), backoff=0.2, max_retries=2), MSG, model="m")
    assert ei.value.elapsed >= 0.6 and srv.counts["e500"] == 3


def test_4xx_is_not_retried(srv):
    with pytest.raises(EndpointError, match="HTTP 404") as ei:
        chat_text(Endpoint(srv.url("e404"), backoff=0), MSG, model="no-such-model")
    assert srv.counts["e404"] == 1 and "gave up" not in str(ei.value)


def test_silent_server_times_out_typed_and_retried(srv):
    with pytest.raises(
        EndpointTimeout, match=r"gave up after 2 attempts.*no reply within 0.3 s \(request sent"
    ):
        chat_text(Endpoint(srv.url("hang"), timeout=0.3, backoff=0, max_retries=1), MSG, model="m")
    assert srv.counts["hang"] == 2


@pytest.mark.parametrize("mode", ["drip", "driphead"])
def test_a_dripping_reply_is_cut_off_at_the_deadline(srv, mode):
    """The deadline covers every read: 1.5 s, not the ~95 s the whole drip would take (httpx's timeout= is
    per read, and each byte comes well within it)."""
    deadline = time.monotonic() + 1.5 + 3
    with pytest.raises(EndpointTimeout) as ei:
        chat_text(Endpoint(srv.url(mode), timeout=1.5, max_retries=0), MSG, model="m")
    assert time.monotonic() < deadline
    msg = str(ei.value)
    assert "no complete reply within 1.5 s (server sent " in msg and "bytes, still sending)" in msg, msg
    drop = _wait_for_drop(srv, mode)
    head = drop.total - len(chat_body(LONG))
    dripped = drop.sent - (0 if mode == "driphead" else head)
    # 1.5 s at 0.25 s a byte is ~6 bytes; 30 leaves room for a loaded machine, and a per-read timeout reads all
    assert dripped < 30 and drop.sent < drop.total, drop


def test_budget_bounds_all_attempts_together(srv):
    ep = Endpoint(srv.url("hang"), timeout=1.0, max_retries=10, backoff=0.1, budget=2.5)
    deadline = time.monotonic() + 2.5 + 3
    with pytest.raises(
        EndpointTimeout, match=r"gave up after \d attempts in .* \(the 2.5 s budget is spent\)"
    ):
        chat_text(ep, MSG, model="m")
    assert time.monotonic() < deadline
    assert 2 <= srv.counts["hang"] <= 3  # not the 11 attempts max_retries would allow


def test_retry_after_past_the_budget_gives_up_at_once(srv):
    with pytest.raises(EndpointError, match=r"gave up after 1 attempt in .*budget is spent\): HTTP 503"):
        chat_text(Endpoint(srv.url("busy"), max_retries=5, budget=5), MSG, model="m")
    assert srv.counts["busy"] == 1


def test_garbage_and_wrong_shape_are_bad_responses_not_retried(srv):
    with pytest.raises(BadResponseError, match="not JSON") as ei:
        chat_text(Endpoint(srv.url("garbage"), backoff=0), MSG, model="m")
    assert srv.counts["garbage"] == 1 and len(str(ei.value)) < 600  # a bounded excerpt, not 5 MB
    srv.add("notchat", lambda req, n: Reply(body=b'{"hello": "world"}'))
    with pytest.raises(BadResponseError, match="not a chat completion"):
        chat_text(Endpoint(srv.url("notchat"), backoff=0), MSG, model="m")


def test_an_endless_reply_stops_at_the_size_cap(srv):
    with pytest.raises(BadResponseError, match="reply larger than 1000000 bytes"):
        chat_text(Endpoint(srv.url("endless"), max_reply_bytes=1_000_000, max_retries=0), MSG, model="m")
    assert _wait_for_drop(srv, "endless").sent > 0


def test_a_truncated_reply_is_a_broken_connection_and_retried(srv):
    with pytest.raises(EndpointError, match="gave up after 2 attempts.*the connection broke"):
        chat_text(Endpoint(srv.url("truncated"), backoff=0, max_retries=1), MSG, model="m")
    assert srv.counts["truncated"] == 2


def test_connection_refused_is_an_endpoint_error():
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
    with pytest.raises(EndpointConfigError, match="budget"):
        Endpoint("http://127.0.0.1:8/v1", budget=0)


def test_errors_pickle_for_ray():
    e = pickle.loads(pickle.dumps(EndpointTimeout("http://x/v1", "slow", None, "", 3, 4.25, " (budget)")))
    assert isinstance(e, EndpointTimeout) and e.url == "http://x/v1" and e.attempts == 3
    assert str(e) == "http://x/v1: gave up after 3 attempts in 4.2 s (budget): slow"


def test_proxy_from_the_environment_but_never_for_loopback(srv, monkeypatch):
    """http_proxy is used the usual way (the request goes to the proxy in absolute form, under the same
    deadline), and a 127.0.0.1 endpoint is reached directly even when a proxy is set."""
    for var in ("no_proxy", "NO_PROXY", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    with HostileServer({"http:": chat("via proxy")}) as proxy:
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.port}")
        ep = Endpoint("http://vidlab-test.invalid/v1", backoff=0, max_retries=0)
        assert chat_text(ep, MSG, model="m") == "via proxy"
        (req,) = proxy.requests
        assert req.path == "http://vidlab-test.invalid/v1/chat/completions"
        assert chat_text(Endpoint(srv.url("ok"), backoff=0), MSG, model="m") == "echo:hi"  # direct
        assert len(proxy.requests) == 1 and srv.counts["ok"] == 1
