"""The benchmark helpers: side-by-side timing, table, final JSON line, and the remuxed long-video builder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root holds benchmarks/
from benchmarks._common import bench_args, emit_json, print_table, time_side_by_side  # noqa: E402
from benchmarks.decode import PyAVSeekPerFrame, paired_rounds, tile_video  # noqa: E402
from vidlab.video import open_video  # noqa: E402
from vidlab.video.synth import render_synthetic  # noqa: E402
from vidlab.video.testing import codes_of  # noqa: E402


def test_time_side_by_side_alternates_and_respects_budget(monkeypatch):
    # a fake clock that only the contenders advance: the budget logic is tested, not the machine's load
    import benchmarks._common as common

    now = [0.0]
    monkeypatch.setattr(common.time, "perf_counter", lambda: now[0])
    calls = []

    def slow():
        calls.append("slow")
        now[0] += 0.03125  # exact in binary

    res = time_side_by_side({"slow": slow, "fast": lambda: calls.append("fast")}, repeats=4, budget_s=0.05)
    assert calls[:2] == ["slow", "fast"]  # round robin
    assert res["slow"]["runs"] == 2 and res["fast"]["runs"] == 4  # slow stops once past its budget
    assert res["slow"]["best"] >= 0.03 > res["fast"]["best"]


def _fake_clock(monkeypatch):
    """A fake ``perf_counter`` that only the contenders advance (no wall-clock timing in the tests): returns the
    call log and ``ticker(name, seconds)``, which makes a contender that logs its name and takes ``seconds``."""
    import benchmarks.decode as decode

    now = [0.0]
    monkeypatch.setattr(decode.time, "perf_counter", lambda: now[0])
    calls: list[str] = []

    def ticker(name, s):
        def fn(idx):
            calls.append(name)
            now[0] += s

        return fn

    return calls, ticker


def test_paired_rounds_rotates_order_and_pairs_each_peer_with_vidlab_of_the_same_round(monkeypatch):
    calls, ticker = _fake_clock(monkeypatch)

    fns = {"vidlab": ticker("vidlab", 0.25), "slow": ticker("slow", 1.0), "fast": ticker("fast", 0.125)}
    res = paired_rounds(fns, [0], rounds=7, dominated=float("inf"))  # nobody leaves early here
    assert calls[:3] == ["vidlab", "slow", "fast"]  # one untimed warm-up call each
    timed = calls[3:]
    assert [timed[3 * r] for r in range(3)] == ["vidlab", "slow", "fast"]  # each round starts one further on
    assert res["vidlab"] == [0.25] * 7 and res["slow"] == [1.0] * 7 and res["fast"] == [0.125] * 7
    assert res["vidlab_vs"]["slow"] == [4.0] * 7 and res["vidlab_vs"]["fast"] == [0.5] * 7
    assert sorted(res["cpu_vs"]) == ["fast", "slow"] and all(len(v) == 7 for v in res["cpu_vs"].values())
    assert sorted(res["faults"]) == ["fast", "slow", "vidlab"]


def test_paired_rounds_drops_only_a_peer_that_another_peer_beats_twice_over(monkeypatch):
    calls, ticker = _fake_clock(monkeypatch)

    # "slow" takes 4x "fast" (dominated: leaves after 3 rounds); "near" takes 1.5x "fast" (stays); vidlab
    # itself is slower than every peer, so only peer-vs-peer dominance decides
    fns = {n: ticker(n, s) for n, s in {"vidlab": 8.0, "slow": 2.0, "near": 0.75, "fast": 0.5}.items()}
    res = paired_rounds(fns, [0], rounds=7)
    assert res["dropped"] == {"slow": 3}
    assert calls.count("slow") == 1 + 3 and calls.count("near") == calls.count("vidlab") == 1 + 7
    assert res["vidlab_vs"]["slow"] == [0.25] * 3 and res["vidlab_vs"]["near"] == [0.09375] * 7
    assert len(res["cpu_vs"]["slow"]) == 3 and len(res["cpu_vs"]["fast"]) == 7
    # with no dominance threshold reached nobody leaves
    assert paired_rounds(fns, [0], rounds=7, dominated=5.0)["dropped"] == {}


def test_resume_keeps_a_file_only_under_the_same_signature(tmp_path):
    import benchmarks.decode as decode
    from vidlab.io import atomic_write_json

    sig = {"rounds": 7, "reader_source": decode.reader_source_hash()}
    atomic_write_json(tmp_path / "long-250.json", {"signature": sig, "rows": [{"vs_best": 1.5}]})
    assert decode.resumed(str(tmp_path), "long-250", sig) == [{"vs_best": 1.5}]
    assert decode.resumed(str(tmp_path), "long-250", {**sig, "rounds": 9}) is None  # other settings
    assert (
        decode.resumed(str(tmp_path), "short-30", sig) is None
        and decode.resumed(None, "long-250", sig) is None
    )
    assert len(sig["reader_source"]) == 16


def test_table_and_json_line(capsys):
    print_table([{"a": 1.23456, "b": "x"}, {"a": 12345.0}], ["a", "b"])
    emit_json({"ratio": 1.5})
    lines = capsys.readouterr().out.strip().splitlines()
    assert (
        lines[0].split() == ["a", "b"]
        and lines[2].split() == ["1.23", "x"]
        and lines[3].split() == ["12345", "-"]
    )
    assert json.loads(lines[-1]) == {"ratio": 1.5}
    args = bench_args("d", argv=["--quick"])
    assert args.quick and args.repeats == 5 and args.budget < 1


def test_tiled_video_repeats_packets_with_exact_frames(tmp_path):
    src = render_synthetic(tmp_path / "c.mp4", 40, fps=24, width=64, height=48, gop=20, num_shapes=1)
    long = tile_video(src, 3)
    with open_video(long) as r:
        assert r.num_frames == 120 and r.fps == 24 and r.index.keyframes.tolist() == [0, 20, 40, 60, 80, 100]
        idx = np.array([119, 0, 41, 80, 79, 60])
        assert codes_of(r.get_frames(idx)) == (idx % 40).tolist()
        assert r.duration == 5.0
    peer = PyAVSeekPerFrame(long)  # the seek-per-frame peer is exact too, so the comparison is fair
    assert codes_of(peer(idx)) == (idx % 40).tolist()
