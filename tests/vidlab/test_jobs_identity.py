"""Job identity, locking, damaged records and stale-file sweeping in vidlab.distributed.

Each test here fails on the executor before identities: there a rerun with other settings silently
reused the old results, a damaged record was never reported, and stale files stayed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from vidlab.distributed import (
    JobIdentityError,
    OutputDirError,
    fingerprint_file,
    fingerprint_inputs,
    identity_diff,
    make_identity,
    open_job,
    read_identity,
    read_records,
    require_fields,
    run_job,
)
from vidlab.distributed.toy import EchoWorker
from vidlab.errors import UserError, run_command


def _items(n):
    return [{"id": f"i{k}", "value": k} for k in range(n)]


def test_same_identity_resumes_other_identity_refused_naming_the_keys(tmp_path):
    out = tmp_path / "out"
    a = make_identity({"policy": "pixel:red", "episode": {"max_calls": 3}}, command="eval-qa")
    assert run_job(_items(3), EchoWorker, out, identity=a).done == 3
    assert read_identity(out) == a
    assert run_job(_items(3), EchoWorker, out, identity=a).skipped == 3  # resumes
    b = make_identity({"policy": "const:B", "episode": {"max_calls": 1}}, command="eval-qa")
    with pytest.raises(JobIdentityError) as ei:
        run_job(_items(3), EchoWorker, out, identity=b)
    msg = str(ei.value)
    assert "config.policy: 'pixel:red' -> 'const:B'" in msg and "config.episode.max_calls: 3 -> 1" in msg
    assert "--overwrite" in msg and "--out" in msg and isinstance(ei.value, UserError)
    assert read_identity(out) == a and len(read_records(out)) == 3  # nothing touched


def test_overwrite_starts_the_job_over(tmp_path):
    out = tmp_path / "out"
    run_job(_items(2), EchoWorker, out, identity={"x": 1})
    s = run_job(_items(2), EchoWorker, out, identity={"x": 2}, overwrite=True)
    assert (s.done, s.skipped) == (2, 0) and read_identity(out) == {"x": 2}
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2  # the old records are gone


def test_open_job_then_run_job_share_the_lock_and_overwrite_once(tmp_path):
    out = tmp_path / "out"
    run_job(_items(2), EchoWorker, out, identity={"x": 1})
    with open_job(out, {"x": 2}, overwrite=True) as job:
        (out / "config.yaml").write_text("x: 2\n")  # a command writes its config under the lock
        s = run_job(_items(2), EchoWorker, out, identity={"x": 2}, overwrite=True)
        assert not job.resumed and s.done == 2
    assert len((out / "results.jsonl").read_text().splitlines()) == 2


def test_results_without_identity_are_not_adopted(tmp_path):
    out = tmp_path / "out"
    run_job(_items(2), EchoWorker, out)  # an old-style job: no job.json
    with pytest.raises(JobIdentityError, match="no job.json"):
        run_job(_items(2), EchoWorker, out, identity={"x": 1})


def test_changed_item_is_redone(tmp_path):
    out = tmp_path / "out"
    run_job(_items(3), EchoWorker, out)
    items = _items(3)
    items[1]["value"] = 7  # same id, other content (e.g. an edited question)
    s = run_job(items, EchoWorker, out)
    assert s.done_ids == ["i1"] and read_records(out)["i1"]["result"]["square"] == 49


def test_damaged_record_reported_with_file_line_and_redone(tmp_path, caplog):
    out = tmp_path / "out"
    run_job(_items(3), EchoWorker, out)
    path = out / "results.jsonl"
    lines = path.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["result"]["square"] = "one"  # valid JSON, a string where a number belongs
    lines[1] = json.dumps(rec)
    lines[2] = json.dumps({k: v for k, v in json.loads(lines[2]).items() if k != "result"})  # missing key
    path.write_text("\n".join(lines) + "\n" + "garbage{\n")
    caplog.clear()
    with caplog.at_level("WARNING", logger="vidlab.distributed"):  # the library logs; CLIs show it on stderr
        s = run_job(_items(3), EchoWorker, out, check_result=require_fields(square=int, pid=int))
    err = caplog.text
    assert sorted(s.done_ids) == ["i1", "i2"] and s.skipped == 1
    assert f"{path}:2: result field 'square' should be int, got 'one'" in err
    assert f"{path}:3: ok record without a 'result' mapping" in err
    assert f"{path}: 1 torn or non-JSON line(s) (line 4) ignored" in err
    assert len(s.problems) == 3
    good = read_records(out, check_result=require_fields(square=int))
    assert {r["result"]["square"] for r in good.values()} == {0, 1, 4}


def test_require_fields_types():
    check = require_fields(score=float, correct=bool, calls=int)
    check({"score": 1, "correct": False, "calls": 2})
    for bad in (
        {"score": "x", "correct": True, "calls": 1},
        {"score": 1.0, "correct": 1, "calls": 1},
        {"score": 1.0, "correct": True, "calls": True},
        {"score": 1.0, "correct": True},
    ):
        with pytest.raises(ValueError):
            check(bad)


def test_stale_temporaries_and_unheld_empty_locks_are_swept(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = out / f".summary.json.{dead.stdout.strip()}.abcd1234.tmp"
    stale.write_text("half")
    (out / "old.lock").touch()
    (out / "keep.lock").write_text("not empty")
    run_job(_items(1), EchoWorker, out)
    assert not stale.exists() and not (out / "old.lock").exists() and (out / "keep.lock").exists()


def test_unwritable_out_is_one_line(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(OutputDirError, match="cannot create output folder"):
        run_job(_items(1), EchoWorker, tmp_path / "afile" / "out")
    with pytest.raises(OutputDirError, match="is a file"):
        run_job(_items(1), EchoWorker, tmp_path / "afile")

    def cmd(argv):
        run_job(_items(1), EchoWorker, tmp_path / "afile" / "sub")

    assert run_command("vidlab x", cmd, []) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vidlab x: error: cannot create output folder")


class _NeedsModel:
    def __init__(self, model="nope"):
        raise OutputDirError(f"unknown model {model!r}")  # any UserError from a worker's constructor


def test_user_error_in_worker_constructor_is_not_wrapped(tmp_path):
    with pytest.raises(OutputDirError, match="unknown model"):
        run_job(_items(1), _NeedsModel, tmp_path / "out")


def test_fingerprints_follow_content_not_name(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text('{"q": 1}\n')
    b.write_text('{"q": 1}\n')
    assert fingerprint_file(a) == fingerprint_file(b)
    fa = fingerprint_inputs(data=a, extra=None, videos=[a, b])
    assert fa["extra"] is None and len(fa["videos"]) == 2
    b.write_text('{"q": 2}\n')
    d = identity_diff(
        make_identity({}, fingerprint_inputs(data=a)), make_identity({}, fingerprint_inputs(data=b))
    )
    assert len(d) == 1 and d[0].startswith("inputs.data.sha256:")
    with pytest.raises(UserError, match="no such file"):
        fingerprint_file(tmp_path / "missing.jsonl")


def test_identity_survives_dataclasses_and_tuples():
    import dataclasses

    @dataclasses.dataclass
    class Cfg:
        steps: int = 4
        blocks: tuple = (0, 1)

    assert make_identity(Cfg()) == make_identity({"steps": 4, "blocks": [0, 1]})
    assert make_identity(Cfg(steps=5)) != make_identity(Cfg())


def test_ray_temp_dir_prefers_the_cache_root_when_short_enough(monkeypatch, tmp_path):
    from vidlab.distributed.ray_backend import ray_temp_dir

    monkeypatch.delenv("VIDLAB_RAY_TMPDIR", raising=False)
    monkeypatch.setenv("VIDLAB_CACHE_DIR", "/tmp/vc")
    assert str(ray_temp_dir()) == "/tmp/vc/ray"
    monkeypatch.setenv("VIDLAB_CACHE_DIR", str(tmp_path / ("x" * 60)))  # too long for Ray's socket paths
    assert ray_temp_dir().name.startswith("vidlab-ray-") and len(str(ray_temp_dir())) <= 40
    monkeypatch.setenv("VIDLAB_RAY_TMPDIR", str(tmp_path / "mine"))
    assert ray_temp_dir() == tmp_path / "mine"


def test_folder_inputs_get_a_listing_fingerprint(tmp_path):
    d = tmp_path / "data"
    (d / "videos").mkdir(parents=True)
    (d / "q.json").write_text("[]")
    (d / "videos" / "a.mp4").write_bytes(b"1234")
    a = fingerprint_inputs(data=d)["data"]
    assert a["files"] == 2
    (d / "videos" / "b.mp4").write_bytes(b"5")
    b = fingerprint_inputs(data=d)["data"]
    assert b["files"] == 3 and b["listing_sha256"] != a["listing_sha256"]
