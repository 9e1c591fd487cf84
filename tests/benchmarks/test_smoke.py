"""Every script in benchmarks/ runs end to end at its smallest size and ends with its JSON line.

``vidlab bench --smoke`` runs the same command lines (``vidlab.bench.SMOKE``). The smoke runs are `slow` (CI runs
them): about three minutes in all on two cores. The fast checks below keep the table and the runner honest.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from vidlab.bench import SMOKE, available, command, last_json_line, run_benchmark

RAY = {"clip_index", "compbench_throughput", "qa_corpus", "rl_clip_tool"}  # start a local Ray instance
SERVES = {"demo_latency"}  # serve the demo on a port picked free first
# they print gates and gains that a reader could take at face value
SAYS_SMOKE_SIZE = {"gen_toyworld", "toyworld_rl"}


def _marks(name: str) -> list:
    if name in RAY:
        return [pytest.mark.ray]  # tests/conftest.py runs them in the serial "ray" group
    if name in SERVES:
        return [pytest.mark.xdist_group("server")]
    return []


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks(n)) for n in available()])
def test_benchmark_runs_at_its_smoke_size_and_ends_with_its_json_line(name):
    assert name in SMOKE, f"benchmarks/{name}.py has no smoke command: add one to SMOKE in vidlab/bench.py"
    proc = run_benchmark(name, command(name, "smoke"), timeout=900)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    last = [line for line in proc.stdout.splitlines() if line.strip()][-1]
    record = json.loads(last)  # the very last line, not just some JSON further up
    assert isinstance(record, dict) and record, last
    assert "skipped" not in record, record  # a smoke run runs here: no GPU and no data needed
    if name in SAYS_SMOKE_SIZE:  # gates and gains printed from a handful of items say that they mean nothing
        assert "SMOKE-SIZE RUN (--quick" in proc.stdout, proc.stdout[-3000:]


def test_every_benchmark_has_a_smoke_command():
    """A new script in benchmarks/ without an entry fails here, in the fast suite, before the slow one runs."""
    scripts = set(available())
    assert scripts >= {"decode", "gen_toyworld", "toyworld_rl", "gpu_overhead"}  # the folder was found
    assert set(SMOKE) == scripts, {"no smoke": scripts - set(SMOKE), "no script": set(SMOKE) - scripts}
    assert (RAY | SERVES) <= scripts


def test_last_json_line_is_the_last_line():
    assert last_json_line('table\n{"a": 1}\n\n') == {"a": 1}
    assert last_json_line('{"a": 1}\ndone\n') is None  # a JSON line further up is not the final line
    assert last_json_line("{not json}\n") is None and last_json_line("") is None
    assert last_json_line("[1, 2]\n") is None


def test_vidlab_bench_lists_skips_apart_from_failures(tmp_path, monkeypatch, capsys):
    """Run the runner on three scripts: one with figures, one that cannot run here, one that fails."""
    import vidlab.bench as bench

    scripts = {
        "works": 'import sys; print("table"); print(\'{"x": 1, "args": "%s"}\' % " ".join(sys.argv[1:]))',
        "nogpu": 'print(\'{"benchmark": "nogpu", "skipped": "no CUDA GPU here"}\')',
        "broken": 'import sys; print("{\\"half\\":"); sys.exit(3)',
    }
    for name, body in scripts.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(body) + "\n")
    monkeypatch.setattr(bench, "BENCH_DIR", tmp_path)
    monkeypatch.setattr(bench, "SMOKE", {"works": ["--tiny", bench.TMP], "nogpu": [], "broken": []})
    out = tmp_path / "out" / "bench.jsonl"
    assert bench.main(["--smoke", "--out", str(out)]) == 1  # one failure
    text = capsys.readouterr().out
    assert "-- nogpu skipped: no CUDA GPU here" in text and "!! broken failed with exit code 3" in text
    assert "1 ran, 1 skipped ['nogpu'], 1 failed ['broken']; results appended to" in text
    rows = {r["benchmark"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(rows) == {"works", "nogpu"} and rows["works"]["size"] == "smoke"
    tiny, tmp = rows["works"]["args"].split()
    assert tiny == "--tiny" and tmp.startswith(str(sys.modules["tempfile"].gettempdir()))  # a fresh folder
    # control: without the failing script the run succeeds, skips included
    (tmp_path / "broken.py").unlink()
    assert bench.main(["--smoke", "--out", str(out)]) == 0
    assert "1 ran, 1 skipped ['nogpu']; results" in capsys.readouterr().out
