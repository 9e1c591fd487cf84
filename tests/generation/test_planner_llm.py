"""The LLM planner against a real local HTTP server speaking the OpenAI chat-completions protocol.

The server (http.server on 127.0.0.1, port 0, in a thread) answers by the mode in the URL path: good,
bad-then-good, always-bad, out-of-range boxes, slow (past the client's timeout) and HTTP 500. It counts
requests per mode and records the messages it got, so cache hits and repair rounds can be checked server-side.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from generation.layout import Layout
from generation.planners import plan_layout
from generation.planners.llm import (
    SYSTEM_PROMPT,
    EndpointError,
    LLMPlannerError,
    cache_key,
    layout_from_reply,
)
from generation.subjects import SubjectNotFoundError

PROMPT = "a red cat on the left of a blue vase"
GOOD = {
    "subjects": [
        {"phrase": "red cat", "keyframes": [{"t": 0, "box": [0.05, 0.3, 0.45, 0.9]}]},
        {"phrase": "a blue vase", "keyframes": [{"t": 0, "box": [0.55, 0.35, 0.9, 0.9]}]},
    ],
    "relations": [{"subject": 0, "relation": "left of", "object": 1}],
}
OUT_OF_RANGE = {
    "subjects": [
        {
            "phrase": "red cat",
            "keyframes": [{"t": 0, "box": [-0.2, 0.3, 0.45, 1.3]}, {"t": 1.5, "box": [0, 0, 1, 1]}],
        },
        {"phrase": "blue vase", "keyframes": [{"t": 0, "box": [0.9, 0.9, 0.55, 0.35]}]},
    ]
}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass

    def do_POST(self):
        server = self.server
        mode = self.path.strip("/").split("/")[0]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with server.lock:
            server.counts[mode] += 1
            n = server.counts[mode]
            server.requests.append((mode, self.headers.get("Authorization"), body))
        if mode == "error500":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b'{"error": "boom"}')
            return
        if mode == "slow":
            time.sleep(1.5)
        if mode == "notchat":
            return self._send(b'{"hello": "world"}')
        content = {
            "good": "Here you go:\n```json\n" + json.dumps(GOOD) + "\n```",
            "slow": json.dumps(GOOD),
            "badthengood": '{"subjects": [}' if n % 2 == 1 else json.dumps(GOOD),
            "alwaysbad": json.dumps(
                {"subjects": [{"phrase": "zebra", "keyframes": [{"t": 0, "box": [0, 0, 1, 1]}]}]}
            ),
            "outofrange": json.dumps(OUT_OF_RANGE),
        }[mode]
        reply = {"choices": [{"message": {"role": "assistant", "content": content}}]}
        self._send(json.dumps(reply).encode())

    def _send(self, data: bytes):
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (the timeout test)


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    srv.counts, srv.requests, srv.lock = Counter(), [], threading.Lock()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(5)


@pytest.fixture
def ask(server, tmp_path):
    def _ask(mode: str, prompt: str = PROMPT, **kw):
        kw.setdefault("cache_dir", tmp_path / "cache")
        kw.setdefault("timeout", 5.0)
        kw.setdefault("model", "tiny-planner")
        kw.setdefault("max_retries", 0)
        kw.setdefault("backoff", 0.0)
        base = f"http://127.0.0.1:{server.server_address[1]}/{mode}/v1"
        return plan_layout(prompt, planner="llm", base_url=base, **kw)

    return _ask


def test_good_reply_is_parsed_and_cached(ask, server):
    layout = ask("good", api_key="sekret")
    assert layout.planner == "llm"
    assert layout.phrases == ["red cat", "blue vase"]  # leading article stripped
    assert layout.meta["attempts"] == 1 and layout.meta["cache"] == "miss"
    assert layout.relation_holds(layout.relations[0])
    mode, auth, body = server.requests[-1]
    assert auth == "Bearer sekret" and body["model"] == "tiny-planner"
    assert body["messages"][0]["content"] == SYSTEM_PROMPT and PROMPT in body["messages"][1]["content"]
    before = server.counts["good"]
    again = ask("good", api_key="sekret")
    assert server.counts["good"] == before  # a cache hit makes no request
    assert again.meta["cache"] == "hit" and again.phrases == layout.phrases
    # Another model is another cache key: it asks again.
    ask("good", model="other-model")
    assert server.counts["good"] == before + 1


def test_malformed_then_good_uses_one_repair_round(ask, server):
    layout = ask("badthengood")
    assert layout.planner == "llm" and layout.meta["attempts"] == 2
    assert server.counts["badthengood"] == 2
    _, _, repair = server.requests[-1]
    assert repair["messages"][-2] == {"role": "assistant", "content": '{"subjects": [}'}
    assert "not valid JSON" in repair["messages"][-1]["content"]  # the error is sent back


def test_always_malformed_falls_back_to_rule_planner(ask, server):
    with pytest.warns(RuntimeWarning, match="invalid layout after one repair.*zebra"):
        layout = ask("alwaysbad")
    assert server.counts["alwaysbad"] == 2  # first try + one repair, no more
    assert layout.planner == "rule" and layout.meta["fallback_from"] == "llm"
    assert layout.phrases == ["red cat", "blue vase"]


def test_out_of_range_boxes_are_clamped(ask):
    layout = ask("outofrange")
    assert layout.meta["keyframes_clamped"] == 3  # two boxes and one time
    cat, vase = layout.subjects
    assert cat.keyframes == [(0.0, (0.0, 0.3, 0.45, 1.0)), (1.0, (0.0, 0.0, 1.0, 1.0))]
    assert vase.box_at(0) == (0.55, 0.35, 0.9, 0.9)


def test_slow_endpoint_times_out_and_falls_back(ask, server):
    with pytest.warns(RuntimeWarning, match="llm planner failed"):
        layout = ask("slow", timeout=0.3)
    assert layout.planner == "rule" and "no answer within 0.3s" in layout.meta["fallback_reason"]


def test_http_500_falls_back_and_is_not_cached(ask, server, tmp_path):
    with pytest.warns(RuntimeWarning, match="HTTP 500"):
        layout = ask("error500")
    assert layout.planner == "rule"
    assert not list((tmp_path / "cache").glob("*.json"))
    with pytest.warns(RuntimeWarning):
        ask("error500")
    assert server.counts["error500"] == 2  # failures are asked again next time


def test_http_500_is_retried_by_the_shared_client(ask, server):
    before = server.counts["error500"]
    with pytest.warns(RuntimeWarning, match=r"HTTP 500.*after 3 attempts"):
        ask("error500", max_retries=2)
    assert server.counts["error500"] == before + 3  # vidlab.http retries 5xx: first try + 2 retries


def test_not_a_chat_reply_falls_back(ask):
    with pytest.warns(RuntimeWarning, match="not a chat completion"):
        assert ask("notchat").planner == "rule"


def test_no_fallback_raises(ask):
    with pytest.raises(EndpointError, match="HTTP 500"):
        ask("error500", fallback=False)


def test_unreachable_endpoint_falls_back(tmp_path):
    with pytest.warns(RuntimeWarning, match="llm planner failed"):
        layout = plan_layout(
            PROMPT,
            planner="llm",
            base_url="http://127.0.0.1:9/v1",
            model="m",
            cache_dir=tmp_path,
            timeout=2,
            max_retries=0,
        )
    assert layout.planner == "rule"


def _clear_env(monkeypatch):
    for var in (
        "VIDLAB_OPENAI_BASE_URL",
        "OPENAI_BASE_URL",
        "VIDLAB_OPENAI_API_KEY",
        "OPENAI_API_KEY",
        "VIDLAB_LLM_BASE_URL",
        "VIDLAB_LLM_API_KEY",
        "VIDLAB_LLM_CACHE_DIR",
        "VIDLAB_LLM_MODEL",
    ):
        monkeypatch.delenv(var, raising=False)


def test_settings_from_environment_the_one_client_way(server, monkeypatch, tmp_path):
    _clear_env(monkeypatch)
    monkeypatch.setenv("VIDLAB_OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/good/v1")
    monkeypatch.setenv("VIDLAB_OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("VIDLAB_LLM_MODEL", "env-model")
    monkeypatch.setenv("VIDLAB_CACHE_DIR", str(tmp_path / "root"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        layout = plan_layout(PROMPT, planner="llm")
    assert layout.meta["model"] == "env-model"
    _, auth, body = server.requests[-1]
    assert auth == "Bearer env-key" and body["model"] == "env-model"
    # the plan cache lives under the one cache root: $VIDLAB_CACHE_DIR/plans
    cached = tmp_path / "root" / "plans" / f"{cache_key(PROMPT, 'env-model')}.json"
    assert cached.is_file() and Layout.from_json(cached.read_text()).phrases == layout.phrases
    assert not [p for p in cached.parent.iterdir() if p.name.endswith(".tmp")]  # atomic: no temporaries


def test_old_llm_variables_still_work_with_a_deprecation_warning(server, monkeypatch, tmp_path):
    _clear_env(monkeypatch)
    monkeypatch.setenv("VIDLAB_LLM_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/good/v1")
    monkeypatch.setenv("VIDLAB_LLM_API_KEY", "old-key")
    monkeypatch.setenv("VIDLAB_LLM_CACHE_DIR", str(tmp_path / "oldcache"))
    with pytest.warns(DeprecationWarning, match="VIDLAB_OPENAI_BASE_URL"):
        plan_layout(PROMPT, planner="llm", model="m2")
    assert server.requests[-1][1] == "Bearer old-key"
    assert (tmp_path / "oldcache" / f"{cache_key(PROMPT, 'm2')}.json").is_file()


def test_missing_configuration_is_a_clear_error(monkeypatch):
    _clear_env(monkeypatch)
    with pytest.raises(LLMPlannerError, match="VIDLAB_OPENAI_BASE_URL"):
        plan_layout(PROMPT, planner="llm")
    with pytest.raises(LLMPlannerError, match="VIDLAB_LLM_MODEL"):
        plan_layout(PROMPT, planner="llm", base_url="http://127.0.0.1:9/v1")
    from vidlab.errors import UserError

    assert issubclass(LLMPlannerError, UserError) and issubclass(EndpointError, UserError)


def test_explicit_subjects_go_into_the_request_and_are_checked(ask, server):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layout = ask("good", subjects=["red cat", "blue vase"])
    assert layout.planner == "llm"
    assert '["red cat", "blue vase"]' in server.requests[-1][2]["messages"][1]["content"]
    with pytest.raises(SubjectNotFoundError):
        ask("good", subjects=["green dog"])


def test_damaged_cache_entry_is_ignored(ask, server, tmp_path):
    key = cache_key(PROMPT, "tiny-planner")
    (tmp_path / "cache").mkdir(parents=True)
    (tmp_path / "cache" / f"{key}.json").write_text("{broken")
    before = server.counts["good"]
    layout = ask("good")
    assert server.counts["good"] == before + 1 and layout.planner == "llm"
    assert Layout.from_json((tmp_path / "cache" / f"{key}.json").read_text()).phrases == layout.phrases


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("no json here", "no JSON object"),
        ('{"subjects": []}', "non-empty 'subjects'"),
        ('{"subjects": [{"phrase": "red cat"}]}', "'keyframes' list"),
        ('{"subjects": [{"phrase": "red cat", "keyframes": [{"t": 0, "box": [0, 0, 1]}]}]}', "4 numbers"),
        (
            '{"subjects": [{"phrase": "red cat", "keyframes": [{"t": "x", "box": [0, 0, 1, 1]}]}]}',
            "t must be",
        ),
        ('{"subjects": [{"phrase": "zebra", "keyframes": [{"t": 0, "box": [0, 0, 1, 1]}]}]}', "'zebra'"),
        (
            '{"subjects": [{"phrase": "red cat", "keyframes": [{"t": 0, "box": [0, 0, 1, 1]}]}], '
            '"relations": [{"subject": 0, "relation": "inside", "object": 0}]}',
            "unknown relation",
        ),
    ],
)
def test_reply_validation_messages(reply, message):
    with pytest.raises(LLMPlannerError, match=message):
        layout_from_reply(PROMPT, reply)


def test_group_box_with_count_is_split_into_copies():
    reply = json.dumps(
        {
            "subjects": [
                {"phrase": "blue vase", "keyframes": [{"t": 0, "box": [0.6, 0.2, 0.9, 0.8]}]},
                {"phrase": "cats", "count": 3, "keyframes": [{"t": 0, "box": [0.0, 0.2, 0.5, 0.8]}]},
            ],
            "relations": [{"subject": 1, "relation": "left of", "object": 0}],
        }
    )
    layout, _ = layout_from_reply("three cats on the left of a blue vase", reply)
    assert layout.phrases == ["blue vase", "cats", "cats", "cats"]
    assert [s.count_index for s in layout.subjects] == [None, 0, 1, 2]
    (r,) = layout.relations
    assert (r.subject, r.object) == (1, 0) and layout.relation_holds(r)
    xs = [layout.subjects[i].box_at(0)[0] for i in (1, 2, 3)]
    assert xs == sorted(xs) and all(0.0 <= x < 0.5 for x in xs)
