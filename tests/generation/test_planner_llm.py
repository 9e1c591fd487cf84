"""The LLM planner against a real local HTTP server speaking the OpenAI chat-completions protocol.

The server (http.server on 127.0.0.1, port 0, in a thread) answers by the mode in the URL path: good,
bad-then-good, always-bad, out-of-range boxes, slow (past the client's timeout) and HTTP 500. It counts
requests per mode and records the messages it got, so cache hits and repair rounds can be checked server-side.
"""

from __future__ import annotations

import json
import re
import time
import warnings

import pytest

from vidlab.generation.layout import Layout
from vidlab.generation.planners import plan_layout
from vidlab.generation.planners.llm import (
    MAX_SUBJECTS,
    REPAIR_EXCERPT_CHARS,
    SYSTEM_PROMPT,
    EndpointError,
    LLMPlannerError,
    PlannerWarning,
    cache_key,
    judge_reply,
    layout_from_reply,
)
from vidlab.generation.subjects import SubjectNotFoundError
from vidlab.http_testing import HostileServer, Reply, chat, drip, garbage, hang, sequence, status

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


def _plan(*subjects, relations=()):
    """A reply plan: subjects as (phrase, box) or (phrase, box, count_index) or (phrase, [(t, box), ...])."""
    subs = []
    for s in subjects:
        phrase, boxes = s[0], s[1]
        kfs = (
            [{"t": t, "box": list(b)} for t, b in boxes]
            if isinstance(boxes[0], tuple)
            else [{"t": 0, "box": list(boxes)}]
        )
        subs.append({"phrase": phrase, "count_index": s[2] if len(s) > 2 else None, "keyframes": kfs})
    return {
        "subjects": subs,
        "relations": [dict(zip(("subject", "relation", "object"), r)) for r in relations],
    }


BALL = "a green ball above a white box"
BALL_GOOD = _plan(
    ("green ball", [0.35, 0.05, 0.65, 0.4]),
    ("white box", [0.3, 0.55, 0.7, 0.95]),
    relations=[(0, "above", 1)],
)
BALL_BELOW = _plan(
    ("green ball", [0.35, 0.6, 0.65, 0.95]), ("white box", [0.3, 0.05, 0.7, 0.4])
)  # the case
BALL_FAR = _plan(
    ("green ball", [3.0, 40.0, 5.0, 90.0]), ("white box", [-9.0, -80.0, -2.0, -30.0])
)  # slivers, wrong
CATS = "three cats sitting on a sofa"
SOFA = ("sofa", [0.05, 0.5, 0.95, 0.95])


def _cats(n):
    w = 0.9 / n
    return _plan(*[("cats", [0.05 + i * w, 0.3, 0.05 + (i + 1) * w - 0.01, 0.6], i) for i in range(n)], SOFA)


def _many(n):
    return {
        "subjects": [
            {"phrase": "cats", "count_index": i, "keyframes": [{"t": 0, "box": [0.1, 0.1, 0.2, 0.2]}]}
            for i in range(n)
        ]
    }


def _last(srv):
    r = srv.requests[-1]
    return r.mode, r.headers.get("Authorization"), r.body


def _text(d):
    return json.dumps(d)


@pytest.fixture(scope="module")
def server():
    """One hostile server for the module: a path per behaviour (see vidlab.http_testing)."""
    zebra = _text({"subjects": [{"phrase": "zebra", "keyframes": [{"t": 0, "box": [0, 0, 1, 1]}]}]})
    behaviours = {
        "good": chat("Here you go:\n```json\n" + json.dumps(GOOD) + "\n```"),
        "good2": chat(json.dumps(GOOD)),
        "badthengood": chat(lambda req, n: '{"subjects": [}' if n % 2 == 1 else json.dumps(GOOD)),
        "alwaysbad": chat(zebra),
        "outofrange": chat(json.dumps(OUT_OF_RANGE)),
        "slow": hang(),
        "error500": status(500),
        "notchat": lambda req, n: Reply(body=b'{"hello": "world"}'),
        "drip": drip(json.dumps(GOOD), per_byte=0.25),
        "ballgood": chat(_text(BALL_GOOD)),
        "ballbelow": chat(_text(BALL_BELOW)),
        "ballbelow_then_good": sequence(chat(_text(BALL_BELOW)), chat(_text(BALL_GOOD))),
        "ballfar": chat(_text(BALL_FAR)),
        "cats3": chat(_text(_cats(3))),
        "cats5": chat(_text(_cats(5))),
        "tenthousand": chat(_text(_many(10_000))),
        "countgroup": chat(
            _text(
                {
                    "subjects": [
                        {"phrase": "cats", "count": 10_000, "keyframes": [{"t": 0, "box": [0, 0, 1, 1]}]}
                    ]
                }
            )
        ),
        "garbage_reply": chat("x" * 600_000),
        "garbage_body": garbage(5 * 1024 * 1024),
    }
    with HostileServer(behaviours) as srv:
        yield srv


@pytest.fixture
def ask(server, tmp_path):
    def _ask(mode: str, prompt: str = PROMPT, **kw):
        kw.setdefault("cache_dir", tmp_path / "cache")
        kw.setdefault("timeout", 5.0)
        kw.setdefault("model", "tiny-planner")
        kw.setdefault("max_retries", 0)
        kw.setdefault("backoff", 0.0)
        return plan_layout(prompt, planner="llm", base_url=server.url(mode), **kw)

    return _ask


def test_good_reply_is_parsed_and_cached(ask, server):
    layout = ask("good", api_key="sekret")
    assert layout.planner == "llm"
    assert layout.phrases == ["red cat", "blue vase"]  # leading article stripped
    assert layout.meta["attempts"] == 1 and layout.meta["cache"] == "miss"
    assert layout.relation_holds(layout.relations[0])
    mode, auth, body = _last(server)
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
    _, _, repair = _last(server)
    assert repair["messages"][-2] == {"role": "assistant", "content": '{"subjects": [}'}
    assert "not valid JSON" in repair["messages"][-1]["content"]  # the error is sent back


def test_always_malformed_falls_back_to_rule_planner(ask, server):
    with pytest.warns(RuntimeWarning, match="invalid layout after one repair.*zebra"):
        layout = ask("alwaysbad")
    assert server.counts["alwaysbad"] == 2  # first try + one repair, no more
    assert layout.planner == "rule" and layout.meta["fallback_from"] == "llm"
    assert layout.phrases == ["red cat", "blue vase"]


def test_out_of_range_boxes_are_not_used_unless_allowed_and_never_cached(ask, server, tmp_path):
    before = server.counts["outofrange"]
    with pytest.warns(
        PlannerWarning, match="invalid layout after one repair.*not inside the frame.*accept_repaired"
    ):
        layout = ask("outofrange")
    assert server.counts["outofrange"] == before + 2  # asked once more, then the rule planner
    assert layout.planner == "rule" and not list((tmp_path / "cache").glob("*.json"))
    repair = server.of("outofrange")[-1].body["messages"][-1]["content"]
    assert "not inside the frame" in repair and "t=1.5 is outside [0, 1]" in repair
    # allowed: the clamped plan is used, with a warning, and still not cached
    with pytest.warns(PlannerWarning, match="using a repaired plan, not cached"):
        layout = ask("outofrange", accept_repaired=True)
    assert layout.planner == "llm" and layout.meta["cache"] == "not cached (repaired)"
    assert layout.meta["keyframes_clamped"] == 3  # two boxes and one time
    cat, vase = layout.subjects
    assert cat.keyframes == [(0.0, (0.0, 0.3, 0.45, 1.0)), (1.0, (0.0, 0.0, 1.0, 1.0))]
    assert vase.box_at(0) == (0.55, 0.35, 0.9, 0.9)
    assert not list((tmp_path / "cache").glob("*.json"))


def test_slow_endpoint_times_out_and_falls_back(ask, server):
    with pytest.warns(RuntimeWarning, match="llm planner failed"):
        layout = ask("slow", timeout=0.3)
    reason = layout.meta["fallback_reason"]
    assert (
        layout.planner == "rule" and "no reply within 0.3 s (request sent, the server sent nothing)" in reason
    )


def test_dripping_endpoint_is_cut_off_at_VIDLAB_LLM_TIMEOUT(ask, server, monkeypatch, tmp_path):
    """VIDLAB_LLM_TIMEOUT=2 against a reply dripped a byte every 0.25 s (the whole reply: ~2 minutes): the
    attempt ends at 2 s, the rule planner is used, nothing is cached. Checked as the server saw it (bytes sent
    before the client left) and with a generous clock guard (2 s + 3 s)."""
    monkeypatch.setenv("VIDLAB_LLM_TIMEOUT", "2")
    deadline = time.monotonic() + 2 + 3
    with pytest.warns(
        PlannerWarning, match=r"no complete reply within 2 s \(server sent \d+ bytes, still sending\)"
    ):
        layout = ask("drip", timeout=None)
    assert time.monotonic() < deadline
    assert layout.planner == "rule" and not list((tmp_path / "cache").glob("*.json"))
    drop_deadline = time.monotonic() + 10
    while not server.drops("drip"):
        assert time.monotonic() < drop_deadline
        time.sleep(0.05)
    drop = server.drops("drip")[-1]
    assert drop.sent < drop.total and drop.total - drop.sent > 300  # most of the reply was never sent


def test_bad_timeout_setting_is_one_clear_error(ask, monkeypatch):
    monkeypatch.setenv("VIDLAB_LLM_TIMEOUT", "soon")
    with pytest.raises(LLMPlannerError, match="VIDLAB_LLM_TIMEOUT must be a number of seconds"):
        ask("good", timeout=None)
    with pytest.raises(LLMPlannerError, match="cache='sometimes' must be one of on, off, refresh"):
        ask("good", cache="sometimes")


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
    with pytest.warns(RuntimeWarning, match=r"gave up after 3 attempts in .* s: HTTP 500"):
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
    monkeypatch.setenv("VIDLAB_OPENAI_BASE_URL", f"http://127.0.0.1:{server.port}/good/v1")
    monkeypatch.setenv("VIDLAB_OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("VIDLAB_LLM_MODEL", "env-model")
    monkeypatch.setenv("VIDLAB_CACHE_DIR", str(tmp_path / "root"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        layout = plan_layout(PROMPT, planner="llm")
    assert layout.meta["model"] == "env-model"
    _, auth, body = _last(server)
    assert auth == "Bearer env-key" and body["model"] == "env-model"
    # the plan cache lives under the one cache root: $VIDLAB_CACHE_DIR/plans
    cached = tmp_path / "root" / "plans" / f"{cache_key(PROMPT, 'env-model')}.json"
    assert cached.is_file() and Layout.from_json(cached.read_text()).phrases == layout.phrases
    assert not [p for p in cached.parent.iterdir() if p.name.endswith(".tmp")]  # atomic: no temporaries


def test_old_llm_variables_still_work_with_a_deprecation_warning(server, monkeypatch, tmp_path):
    _clear_env(monkeypatch)
    monkeypatch.setenv("VIDLAB_LLM_BASE_URL", f"http://127.0.0.1:{server.port}/good/v1")
    monkeypatch.setenv("VIDLAB_LLM_API_KEY", "old-key")
    monkeypatch.setenv("VIDLAB_LLM_CACHE_DIR", str(tmp_path / "oldcache"))
    with pytest.warns(DeprecationWarning) as got:
        plan_layout(PROMPT, planner="llm", model="m2")
    said = " ".join(str(w.message) for w in got)
    for old, new in (
        ("BASE_URL", "VIDLAB_OPENAI_BASE_URL"),
        ("API_KEY", "VIDLAB_OPENAI_API_KEY"),
        ("CACHE_DIR", "VIDLAB_CACHE_DIR"),
    ):
        assert f"VIDLAB_LLM_{old} is deprecated; use {new}" in said
    assert _last(server)[1] == "Bearer old-key"
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
    assert '["red cat", "blue vase"]' in _last(server)[2]["messages"][1]["content"]
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


# ------------------------------------------------------------------------------ plans that contradict the prompt
def test_a_relation_the_boxes_contradict_is_asked_again_then_the_rule_planner(ask, server, tmp_path):
    """ "ball above box" with the ball at y 0.6-0.95 and the box at 0.05-0.4: asked once more, then the rule
    planner, saying why; nothing cached."""
    with pytest.warns(
        PlannerWarning, match="the prompt says 'green ball' above 'white box', but the boxes do not show it"
    ):
        layout = ask("ballbelow", BALL)
    assert server.counts["ballbelow"] == 2 and layout.planner == "rule"
    assert "above" in server.of("ballbelow")[-1].body["messages"][-1]["content"]
    assert not list((tmp_path / "cache").glob("*.json"))
    ball, box = layout.subjects
    assert ball.box_at(0)[3] <= box.box_at(0)[1] + 0.05  # the rule planner's layout: the ball on top


def test_a_corrected_second_reply_is_used_and_cached(ask, server, tmp_path):
    layout = ask("ballbelow_then_good", BALL)
    assert layout.planner == "llm" and layout.meta["attempts"] == 2 and layout.meta["checks"] == "passed"
    assert len(list((tmp_path / "cache").glob("*.json"))) == 1


def test_far_out_boxes_clamped_into_slivers_are_never_used_or_cached(ask, server, tmp_path):
    """The issue's poisoned plan: boxes far outside [0, 1] clamp to 2% slivers at the edges with the ball
    below the box. Even with repaired plans allowed it is not used (the relation fails), and the next run
    against a good server asks that server (0 requests would mean a poisoned cache)."""
    cache = tmp_path / "shared-cache"
    with pytest.warns(PlannerWarning, match="boxes do not show it"):
        layout = ask("ballfar", BALL, accept_repaired=True, cache_dir=cache, model="poison-check")
    assert layout.planner == "rule" and not list(cache.glob("*.json"))
    before = server.counts["ballgood"]
    good = ask("ballgood", BALL, cache_dir=cache, model="poison-check")
    assert server.counts["ballgood"] == before + 1 and good.planner == "llm"
    ball, box = good.subjects
    assert ball.box_at(0)[3] < box.box_at(0)[1]


def test_counts_must_match_the_prompt(ask, server, tmp_path):
    with pytest.warns(PlannerWarning, match="the prompt has 3 'cats', the plan has 5"):
        layout = ask("cats5", CATS)
    assert layout.planner == "rule" and [s.count_index for s in layout.subjects if s.phrase == "cats"] == [
        0,
        1,
        2,
    ]
    assert not list((tmp_path / "cache").glob("*.json"))
    good = ask("cats3", CATS)
    assert good.planner == "llm" and good.phrases.count("cats") == 3


@pytest.mark.parametrize(
    ("mode", "why"),
    [("tenthousand", f"10000 subjects; at most {MAX_SUBJECTS}"), ("countgroup", "count 10000; at most 12")],
)
def test_ten_thousand_subjects_are_refused_and_the_repair_round_is_bounded(ask, server, tmp_path, mode, why):
    with pytest.warns(PlannerWarning, match=why):
        layout = ask(mode, CATS)
    assert layout.planner == "rule" and len(layout.subjects) == 4  # three cats and a sofa
    first, repair = server.of(mode)[-2:]
    assert repair.size < first.size + REPAIR_EXCERPT_CHARS + 2000  # not the whole bad reply again
    assert not list((tmp_path / "cache").glob("*.json"))


def test_a_huge_bad_reply_is_sent_back_as_a_bounded_excerpt(ask, server):
    with pytest.warns(PlannerWarning, match="no JSON object"):
        ask("garbage_reply")
    first, repair = server.of("garbage_reply")[-2:]
    sent_back = repair.body["messages"][-2]["content"]
    assert len(sent_back) < REPAIR_EXCERPT_CHARS + 100 and "characters left out" in sent_back
    assert repair.size < 20_000  # the reply itself was 600,000 characters


def test_a_5MB_garbage_body_is_one_line_not_retried_not_cached(ask, server, tmp_path):
    with pytest.warns(PlannerWarning) as got:
        layout = ask("garbage_body", max_retries=2)
    (w,) = [w for w in got if issubclass(w.category, PlannerWarning)]
    assert "\n" not in str(w.message) and len(str(w.message)) < 1200
    assert layout.planner == "rule" and server.counts["garbage_body"] == 1
    assert not list((tmp_path / "cache").glob("*.json"))


def test_judge_reply_names_every_kind_of_problem():
    v = judge_reply(BALL, _text(BALL_BELOW))
    assert not v.clean and v.problems and "above" in v.why()
    assert judge_reply(BALL, _text(BALL_GOOD)).clean
    bad_decl = _plan(
        ("green ball", [0.35, 0.05, 0.65, 0.4]),
        ("white box", [0.3, 0.55, 0.7, 0.95]),
        relations=[(0, "below", 1)],
    )
    assert "the plan says 'green ball' below 'white box'" in judge_reply(BALL, _text(bad_decl)).why()
    one_cat = _plan(("cat", [0.1, 0.1, 0.3, 0.3], 0), ("cat", [0.5, 0.1, 0.7, 0.3], 1))
    assert "the prompt has one 'cat', the plan has 2" in judge_reply("a cat in a room", _text(one_cat)).why()
    moving = "two dogs run from left to right"
    still = _plan(("dogs", [0.1, 0.1, 0.3, 0.3], 0), ("dogs", [0.5, 0.1, 0.7, 0.3], 1))
    assert "'dogs' moving right" in judge_reply(moving, _text(still)).why()


# ------------------------------------------------------------------------------------------------ cache
def test_cache_modes_off_and_refresh(ask, server, tmp_path):
    cache = tmp_path / "cache"
    before = server.counts["good2"]
    ask("good2", cache="off")
    assert server.counts["good2"] == before + 1 and not list(cache.glob("*.json"))
    ask("good2")  # on: asks and writes
    ask("good2")  # on: a hit
    assert server.counts["good2"] == before + 2
    (entry,) = cache.glob("*.json")
    stamp = entry.stat().st_mtime_ns
    off = ask("good2", cache="off")  # off: does not read either
    assert server.counts["good2"] == before + 3 and off.meta["cache"] == "miss"
    time.sleep(0.01)
    fresh = ask("good2", cache="refresh")  # refresh: asks again and rewrites
    assert server.counts["good2"] == before + 4 and fresh.meta["cache"] == "refreshed"
    assert entry.stat().st_mtime_ns != stamp


def test_a_cached_plan_that_fails_the_checks_is_not_used(ask, server, tmp_path):
    """A plan cached before the checks existed (e.g. ball below box) is asked for again, not used."""
    cache = tmp_path / "cache"
    cache.mkdir()
    poisoned = Layout.from_dict({**BALL_BELOW, "prompt": BALL, "planner": "llm"})
    (cache / f"{cache_key(BALL, 'tiny-planner')}.json").write_text(poisoned.to_json())
    before = server.counts["ballgood"]
    layout = ask("ballgood", BALL)
    assert server.counts["ballgood"] == before + 1 and layout.meta["cache"] == "miss"


def test_generate_config_reaches_the_planner(ask, server, tmp_path):
    """`vidlab generate ... planner=llm planner_cache=off planner_accept_repaired=true` (key=value overrides
    of GenerateConfig) become the planner's options."""
    from vidlab.config import ConfigError, resolve
    from vidlab.generation.pipeline import GenerateConfig, planner_kwargs

    cfg = resolve(GenerateConfig, None, ["planner=llm", "planner_cache=off", "planner_accept_repaired=true"])
    kw = planner_kwargs(cfg)
    assert kw == {"cache": "off", "accept_repaired": True} and cfg.planner_cache == "off"
    before = server.counts["good2"]
    ask("good2", **kw)
    ask("good2", **kw)
    assert server.counts["good2"] == before + 2 and not list((tmp_path / "cache").glob("*.json"))
    with pytest.raises(ConfigError, match="planner_cache"):
        resolve(GenerateConfig, None, ["planner_cache=sometimes"])


def test_plan_cache_command_lists_and_clears(ask, server, tmp_path, capsys):
    from pathlib import Path

    import tomllib

    from vidlab.errors import run_command
    from vidlab.generation.planners.cache_cli import plan_cache_main

    cache = tmp_path / "cache"
    ask("good")
    ask("ballgood", BALL, model="other-model")
    (cache / "0123abcd.json").write_text("{broken")

    def cli(*argv):
        return run_command("vidlab plan-cache", plan_cache_main, [*argv, "--cache-dir", str(cache)])

    assert cli("list") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:5] == ["written", "size", "model", "version", "subj"]
    (cat_line,) = [line for line in out if PROMPT in line]
    assert "tiny-planner" in cat_line and "llm-2" in cat_line and re.search(r" \d+ B ", cat_line)
    assert time.strftime("%Y-%m-%d") in cat_line
    assert any(BALL in line and "other-model" in line for line in out)
    assert any("not a readable plan: 0123abcd.json" in line for line in out)
    assert out[-1].startswith("3 cached plan(s)")
    assert cli("list", "--model", "other-model") == 0
    assert PROMPT not in capsys.readouterr().out
    assert cli("clear", "--prompt", "GREEN BALL") == 0
    assert "removed 1 cached plan(s) with prompt containing 'GREEN BALL'" in capsys.readouterr().out
    assert cli("clear") == 0
    assert "removed 2 cached plan(s)" in capsys.readouterr().out and not list(cache.glob("*.json"))
    assert cli("list") == 0 and "no cached plans in" in capsys.readouterr().out
    (tmp_path / "afile").write_text("x")
    assert (
        run_command("vidlab plan-cache", plan_cache_main, ["list", "--cache-dir", str(tmp_path / "afile")])
        == 2
    )
    assert "not a folder" in capsys.readouterr().err
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    commands = pyproject["project"]["entry-points"]["vidlab.commands"]
    assert commands["plan-cache"] == "vidlab.generation.planners.cache_cli:plan_cache_main"


def test_compbench_takes_the_cache_switch_from_generate_and_keeps_its_job_identity(tmp_path):
    """`vidlab compbench generate planner=llm generate.planner_cache=refresh`: the planning stage gets the
    switch; a cache mode does not change the job identity (a run resumes with either)."""
    from vidlab.config import resolve
    from vidlab.generation.compbench.config import CompbenchConfig
    from vidlab.generation.compbench.jobs import _planner_kwargs, identity

    cfg = resolve(CompbenchConfig, None, ["planner=llm", "generate.planner_cache=refresh"])
    assert _planner_kwargs(cfg) == {"cache": "refresh", "accept_repaired": False}

    class _Suite:
        fingerprint = "s"

    plain = identity(resolve(CompbenchConfig, None, ["planner=llm"]), _Suite())
    assert identity(cfg, _Suite()) == plain
    assert "planner_cache" not in json.dumps(plain) and "planner_accept_repaired" not in json.dumps(plain)
    allowed = resolve(CompbenchConfig, None, ["planner=llm", "generate.planner_accept_repaired=true"])
    assert identity(allowed, _Suite()) != plain  # a repaired plan may differ: another job


_KF = '"keyframes": [{"t": 0, "box": [0.1, 0.1, 0.4, 0.9]}]'
HOSTILE_REPLIES = [
    "null",
    "[]",
    '"a string"',
    '{"subjects": {}}',
    '{"subjects": [null]}',
    '{"subjects": [{"phrase": "red cat", "keyframes": "abc"}]}',
    '{"subjects": [{"phrase": 123, ' + _KF + "}]}",
    '{"subjects": [{"phrase": "red cat", "count_index": "zero", ' + _KF + "}]}",
    '{"subjects": [{"phrase": "red cat", "count_index": 1e400, ' + _KF + "}]}",
    '{"subjects": [{"phrase": "red cat", "count": true, ' + _KF + "}]}",
    '{"subjects": [{"phrase": "red cat", "count": -5, ' + _KF + "}]}",
    '{"subjects": [{"phrase": "red cat", "count": 1e9, ' + _KF + "}]}",
    '{"subjects": [{"phrase": "red cat", "keyframes": [{"t": NaN, "box": [0, 0, 1, 1]}]}]}',
    '{"subjects": [{"phrase": "red cat", "keyframes": [{"t": 0, "box": [0, 0, 1e400, 1]}]}]}',
    '{"subjects": [{"phrase": "red cat", "keyframes": [{"t": 0, "box": [0, 0, true, 1]}]}]}',
    '{"subjects": [{"phrase": "red cat", ' + _KF + '}], "relations": ["foo"]}',
    '{"subjects": [{"phrase": "red cat", ' + _KF + '}], "relations": {"a": 1}}',
    '{"subjects": [{"phrase": "red cat", '
    + _KF
    + '}], "relations": [{"subject": [1], "relation": "left of"}]}',
    '{"subjects": [{"phrase": "red cat", '
    + _KF
    + '}], "relations": [{"subject": 0, "relation": 5, "object": 0}]}',
    '{"subjects": [{"phrase": "' + "cat " * 5000 + '", ' + _KF + "}]}",
    "{" * 100_000 + "}" * 100_000,
    '{"subjects": [' + ", ".join(['{"phrase": "red cat", "keyframes": []}'] * 3) + "]}",
    '{"subjects": [{"phrase": "red cat", "keyframes": ['
    + ", ".join(f'{{"t": {i / 1000}, "box": [0, 0, 1, 1]}}' for i in range(1000))
    + "]}]}",
]


@pytest.mark.parametrize("reply", HOSTILE_REPLIES, ids=range(len(HOSTILE_REPLIES)))
def test_hostile_replies_are_judged_never_raised(reply):
    verdict = judge_reply(PROMPT, reply)
    assert not verdict.clean and verdict.why() and "\n" not in verdict.why() and len(verdict.why()) <= 600


def test_a_battery_of_hostile_replies_ends_in_the_rule_planner_with_one_line_each(server, tmp_path):
    """Each reply, served by the local server, gives the rule planner's layout, one warning line, nothing
    cached, and a bounded repair request."""
    for k, reply in enumerate(HOSTILE_REPLIES):
        name = f"hostile{k}"
        server.add(name, chat(reply))
        with pytest.warns(PlannerWarning) as got:
            layout = plan_layout(
                PROMPT,
                planner="llm",
                base_url=server.url(name),
                model="m",
                cache_dir=tmp_path,
                max_retries=0,
                timeout=5,
            )
        msgs = [str(w.message) for w in got if issubclass(w.category, PlannerWarning)]
        assert layout.planner == "rule" and len(msgs) == 1 and "\n" not in msgs[0], (k, msgs)
        assert server.counts[name] == 2 and server.of(name)[-1].size < 20_000, k
    assert not list(tmp_path.glob("*.json"))


@pytest.mark.slow
def test_vidlab_generate_against_a_hostile_planner_endpoint(server, tmp_path, monkeypatch, capsys):
    """`vidlab generate --planner llm planner_cache=off` against a server whose plan contradicts the prompt:
    one warning line saying why, the rule planner's layout in layout.json, nothing cached, exit 0."""
    from vidlab.errors import run_command
    from vidlab.generation.cli import generate_main

    _clear_env(monkeypatch)
    monkeypatch.setenv("VIDLAB_OPENAI_BASE_URL", server.url("ballbelow"))
    monkeypatch.setenv("VIDLAB_LLM_MODEL", "m")
    monkeypatch.setenv("VIDLAB_CACHE_DIR", str(tmp_path / "root"))
    before = server.counts["ballbelow"]
    out = tmp_path / "gen"
    argv = [BALL, "--planner", "llm", "--out", str(out), "--steps", "1", "planner_cache=off"]
    assert run_command("vidlab generate", generate_main, argv) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "llm planner" in line]
    assert len(err) == 1 and err[0].startswith("vidlab generate: warning: llm planner failed (invalid layout")
    assert "'green ball' above 'white box', but the boxes do not show it" in err[0]
    assert json.loads((out / "layout.json").read_text())["planner"] == "rule"
    assert server.counts["ballbelow"] == before + 2 and not (tmp_path / "root" / "plans").exists()
