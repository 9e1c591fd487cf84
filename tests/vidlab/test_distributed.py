"""run_job on the local backend: records, resume, retries, failures recorded, torn lines, locking."""

import json

import pytest

from vidlab.distributed import JobConfigError, JobLockedError, WorkerInitError, read_records, run_job
from vidlab.distributed.toy import EchoWorker, FlakyWorker


def _items(n):
    return [{"id": f"i{k}", "value": k} for k in range(n)]


def _lines(out):
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]


def test_all_items_recorded_once_and_worker_built_once(tmp_path):
    s = run_job(_items(5), EchoWorker, tmp_path / "out", worker_kwargs={"init_dir": str(tmp_path / "init")})
    assert (s.total, s.done, s.skipped, s.failed) == (5, 5, 0, 0)
    assert len(list((tmp_path / "init").iterdir())) == 1  # stateful: constructed once
    recs = read_records(tmp_path / "out")
    assert {r["result"]["square"] for r in recs.values()} == {0, 1, 4, 9, 16}
    assert len(_lines(tmp_path / "out")) == 5
    again = run_job(_items(5), EchoWorker, tmp_path / "out")
    assert (again.done, again.skipped) == (0, 5)
    assert len(_lines(tmp_path / "out")) == 5  # nothing duplicated


def test_failure_is_recorded_job_goes_on_and_rerun_completes(tmp_path):
    items = _items(4)
    items[1]["fail"] = True
    kw = {"fix_file": str(tmp_path / "fixed")}
    s = run_job(items, FlakyWorker, tmp_path / "out", worker_kwargs=kw, max_retries=2)
    assert (s.done, s.failed) == (3, 1)
    assert s.errors[0]["id"] == "i1" and s.errors[0]["type"] == "ValueError" and s.errors[0]["attempts"] == 3
    rec = read_records(tmp_path / "out")["i1"]
    assert rec["status"] == "error" and "on purpose" in rec["error"]["message"]
    (tmp_path / "fixed").touch()
    s2 = run_job(items, FlakyWorker, tmp_path / "out", worker_kwargs=kw)
    assert (s2.done, s2.skipped, s2.failed) == (1, 3, 0) and s2.done_ids == ["i1"]
    assert read_records(tmp_path / "out")["i1"]["status"] == "ok"
    oks = [r for r in _lines(tmp_path / "out") if r["status"] == "ok"]
    assert sorted(r["id"] for r in oks) == ["i0", "i1", "i2", "i3"]


def test_torn_last_line_is_ignored_and_next_record_starts_clean(tmp_path):
    out = tmp_path / "out"
    run_job(_items(2), EchoWorker, out)
    with open(out / "results.jsonl", "ab") as f:
        f.write(b'{"id": "i2", "status": "ok", "resu')  # a crash mid-write
    assert set(read_records(out)) == {"i0", "i1"}
    s = run_job(_items(3), EchoWorker, out)
    assert s.done_ids == ["i2"]
    assert read_records(out)["i2"]["result"]["square"] == 4


def test_is_done_skips_items_with_valid_outputs(tmp_path):
    (tmp_path / "i1.done").touch()
    s = run_job(
        _items(3), EchoWorker, tmp_path / "out", is_done=lambda it: (tmp_path / f"{it['id']}.done").exists()
    )
    assert (s.done, s.skipped) == (2, 1) and "i1" not in read_records(tmp_path / "out")


class _BadResult:
    def process(self, item):
        return {"x": object()} if item["id"] == "i0" else {"ok": True}


def test_non_json_result_is_a_recorded_failure(tmp_path):
    s = run_job(_items(2), _BadResult, tmp_path / "out", max_retries=0)
    assert (s.done, s.failed) == (1, 1) and s.errors[0]["type"] == "TypeError"


class _Broken:
    def __init__(self):
        raise OSError("weights missing")


def test_worker_init_failure_raises_without_records(tmp_path):
    with pytest.raises(WorkerInitError, match="weights missing"):
        run_job(_items(2), _Broken, tmp_path / "out")
    assert read_records(tmp_path / "out") == {}


def test_bad_items_and_arguments(tmp_path):
    with pytest.raises(JobConfigError, match="duplicate item id 'a'"):
        run_job([{"id": "a"}, {"id": "a"}], EchoWorker, tmp_path)
    with pytest.raises(JobConfigError, match="'id'"):
        run_job([{"value": 1}], EchoWorker, tmp_path)
    with pytest.raises(JobConfigError, match="backend"):
        run_job(_items(1), EchoWorker, tmp_path, backend="spark")


def test_second_concurrent_job_on_same_folder_refused(tmp_path):
    """Another *process* holds the folder: run_job refuses at once and writes nothing there."""
    import subprocess
    import sys

    out = tmp_path / "out"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from vidlab.distributed import job_lock\n"
            f"with job_lock({str(out)!r}):\n    print('held', flush=True); sys.stdin.readline()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        before = sorted(p.name for p in out.iterdir())
        with pytest.raises(JobLockedError, match="in use by another running job"):
            run_job(_items(1), EchoWorker, out)
        assert sorted(p.name for p in out.iterdir()) == before  # touched nothing
    finally:
        holder.communicate("\n", timeout=30)
    assert run_job(_items(1), EchoWorker, out).done == 1  # free again once the holder exits


def test_validate_redoes_items_whose_output_is_gone(tmp_path):
    out = tmp_path / "out"
    run_job(_items(3), EchoWorker, out)
    gone = {"i1"}
    s = run_job(_items(3), EchoWorker, out, validate=lambda item, result: item["id"] not in gone)
    assert s.done_ids == ["i1"] and s.skipped == 2
    assert len(_lines(out)) == 4 and read_records(out)["i1"]["status"] == "ok"
