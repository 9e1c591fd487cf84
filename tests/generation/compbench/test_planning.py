"""The planning stage with the LLM planner against a local OpenAI-compatible endpoint (127.0.0.1): every
layout written before generation, existing layouts reused, and the planner's own cache reused (no request)."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from vidlab.generation.compbench.planning import layout_path, plan_all
from vidlab.generation.compbench.suite import load_suite


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        user = body["messages"][-1]["content"]
        m = re.search(r"A (\w+ \w+) next to a (\w+ \w+)", user)
        self.server.requests.append(user)
        subjects = [
            {"phrase": m.group(1), "keyframes": [{"t": 0, "box": [0.05, 0.3, 0.45, 0.9]}]},
            {"phrase": m.group(2), "keyframes": [{"t": 0, "box": [0.55, 0.3, 0.95, 0.9]}]},
        ]
        content = json.dumps({"subjects": subjects, "relations": []})
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def endpoint(monkeypatch):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    srv.requests = []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    monkeypatch.setenv("VIDLAB_OPENAI_BASE_URL", f"http://127.0.0.1:{srv.server_address[1]}/v1")
    monkeypatch.setenv("VIDLAB_LLM_MODEL", "fake-planner")
    yield srv
    srv.shutdown()
    srv.server_close()
    t.join(5)


def test_llm_planning_stage_writes_reuses_and_hits_the_cache(
    tmp_path, compbench_suite, endpoint, monkeypatch
):
    monkeypatch.setenv("VIDLAB_CACHE_DIR", str(tmp_path / "cache"))
    prompts = load_suite(compbench_suite).select(["consistent_attr"], per_category=3)
    out = tmp_path / "run"
    first = plan_all(prompts, out, planner="llm", threads=3, progress=False)
    assert (first.planned, first.reused, first.failed) == (3, 0, {})
    assert len(endpoint.requests) == 3
    lay = json.loads(layout_path(out, prompts[0].id).read_text())
    assert [s["phrase"] for s in lay["subjects"]] == ["red cat", "yellow chair"]
    again = plan_all(prompts, out, planner="llm", progress=False)
    assert (again.planned, again.reused) == (0, 3) and len(endpoint.requests) == 3
    other = plan_all(prompts, tmp_path / "run2", planner="llm", progress=False)
    assert other.planned == 3 and len(endpoint.requests) == 3  # the LLM planner's cache answered
    a = json.loads(layout_path(tmp_path / "run2", prompts[2].id).read_text())
    b = json.loads(layout_path(out, prompts[2].id).read_text())
    assert a["subjects"] == b["subjects"] and a["meta"]["cache"] == "hit" and b["meta"]["cache"] == "miss"


def test_planning_failures_are_listed_and_retried(tmp_path, compbench_suite, monkeypatch):
    monkeypatch.delenv("VIDLAB_OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("VIDLAB_LLM_BASE_URL", raising=False)
    prompts = load_suite(compbench_suite).select(["interaction"], per_category=2)
    res = plan_all(prompts, tmp_path / "run", planner="llm", progress=False)
    assert res.planned == 0 and sorted(res.failed) == ["interaction-0001", "interaction-0002"]
    assert "no endpoint" in res.failed["interaction-0001"]
    listed = json.loads((tmp_path / "run" / "layouts" / "failed.json").read_text())
    assert sorted(listed) == sorted(res.failed)
    ok = plan_all(prompts, tmp_path / "run", planner="rule", progress=False)
    assert ok.planned == 2 and ok.failed == {}
    assert json.loads((tmp_path / "run" / "layouts" / "failed.json").read_text()) == {}
