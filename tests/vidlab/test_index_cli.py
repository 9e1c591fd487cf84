"""``vidlab index`` / ``vidlab search`` end to end on real encoded videos (local backend)."""

import json

import pytest

from vidlab.clip.cli import index_main, search_main
from vidlab.errors import UserError
from vidlab.video.synth import render_synthetic


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    d = tmp_path_factory.mktemp("videos")
    for seed in range(2):
        render_synthetic(d / f"clip{seed}.mp4", 72, fps=24, width=128, height=96, seed=seed)
    (d / "sub").mkdir()
    render_synthetic(d / "sub" / "clip2.mp4", 48, fps=24, width=96, height=128, seed=2)
    (d / "broken.mp4").write_bytes(b"this is not a video" * 50)
    return d


def test_index_then_rerun_then_search(videos, tmp_path, capsys):
    idx = tmp_path / "idx"
    rc = index_main(
        [str(videos), "--cache-dir", str(idx), "--sampling", "fps=4", "--quiet", "--max-retries", "0"]
    )
    out = capsys.readouterr()
    assert rc == 3  # finished with some failures: one video failed, the others were indexed
    assert "videos: 4  indexed: 3  cached: 0  failures: 1  frames: 32" in out.out
    assert "broken.mp4" in out.err and "VideoReadError" in out.err and "1 of 4 video(s) failed" in out.err
    listed = [
        json.loads(x) for x in (next((idx / "jobs").iterdir()) / "failures.jsonl").read_text().splitlines()
    ]
    assert [f["path"].rsplit("/", 1)[-1] for f in listed] == ["broken.mp4"] and "failures.jsonl" in out.err
    manifest = json.loads((idx / "manifest.json").read_text())
    assert manifest["model_tag"] == "vidlab-tiny:seed0" and manifest["sampling"] == "fps=4"
    assert sorted(v["frames"] for v in manifest["videos"]) == [8, 12, 12]
    job = next((idx / "jobs").iterdir())
    summary = json.loads((job / "summary.json").read_text())
    assert summary["frames_embedded"] == 32 and summary["frames_per_s"] > 0
    assert (job / "config.yaml").is_file()

    # rerun: nothing re-embedded, the failure is retried (and fails again)
    rc = index_main(
        [str(videos), "--cache-dir", str(idx), "--sampling", "fps=4", "--quiet", "--max-retries", "0"]
    )
    assert rc == 3
    assert "indexed: 0  cached: 3  failures: 1" in capsys.readouterr().out

    assert search_main(["a red circle", "--index", str(idx), "-k", "5", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(rows) == 5 and all(rows[i]["score"] >= rows[i + 1]["score"] for i in range(4))
    assert {r["video"].rsplit("/", 1)[-1] for r in rows} <= {"clip0.mp4", "clip1.mp4", "clip2.mp4"}
    assert search_main(["a red circle", "--index", str(idx), "-k", "100", "--nms", "10"]) == 0
    table = capsys.readouterr().out
    assert "over 32 frames of 3 videos" in table


def test_list_file_input_and_bad_arguments(videos, tmp_path, capsys):
    lst = tmp_path / "videos.txt"
    lst.write_text(f"# two videos\n{videos / 'clip0.mp4'}\n{videos / 'sub' / 'clip2.mp4'}\n")
    assert (
        index_main([str(lst), "--cache-dir", str(tmp_path / "i"), "--sampling", "every=12", "--quiet"]) == 0
    )
    assert "videos: 2  indexed: 2" in capsys.readouterr().out
    with pytest.raises(UserError, match="fps must be a positive number"):
        index_main([str(lst), "--cache-dir", str(tmp_path / "i"), "--sampling", "fps=0"])
    with pytest.raises(UserError, match="ViT-B-32"):
        index_main([str(lst), "--cache-dir", str(tmp_path / "j"), "--model", "ViT-B-33"])
    assert not (tmp_path / "j").exists()  # a wrong model name leaves no folder behind
    with pytest.raises(UserError, match="no corpus manifest"):
        search_main(["x", "--index", str(tmp_path / "nothing")])
    with pytest.raises(UserError, match="workers: expected an int >= 1, got 0"):
        index_main([str(lst), "--cache-dir", str(tmp_path / "i"), "--workers", "0"])
    with pytest.raises(UserError, match="batch_size: expected an int >= 1, got 'many'"):
        index_main([str(lst), "batch_size=many", "--cache-dir", str(tmp_path / "i")])


@pytest.mark.parametrize("main", [index_main, search_main])
def test_help_has_examples(main, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    assert "examples:" in capsys.readouterr().out


def test_preset_sets_defaults_and_flags_override(videos, tmp_path, capsys):
    preset = tmp_path / "p.yaml"
    preset.write_text("sampling: every=24\nmax_retries: 0\n")
    lst = tmp_path / "one.txt"
    lst.write_text(f"{videos / 'clip0.mp4'}\n")
    assert index_main([str(lst), "--cache-dir", str(tmp_path / "i"), "--preset", str(preset), "--quiet"]) == 0
    assert "frames: 3" in capsys.readouterr().out  # 72 frames, every 24th
    rc = index_main(
        [
            str(lst),
            "--cache-dir",
            str(tmp_path / "i"),
            "--preset",
            str(preset),
            "--sampling",
            "every=36",
            "--quiet",
        ]
    )
    assert rc == 0 and "frames: 2" in capsys.readouterr().out
    # key=value words sit between preset and flags
    assert (
        index_main(
            [
                str(lst),
                "sampling=every=8",
                "--cache-dir",
                str(tmp_path / "i"),
                "--preset",
                str(preset),
                "--quiet",
            ]
        )
        == 0
    )
    assert "frames: 9" in capsys.readouterr().out
    preset.write_text("workerz: 3\n")
    with pytest.raises(UserError, match="workerz"):
        index_main([str(lst), "--cache-dir", str(tmp_path / "i"), "--preset", str(preset)])


def test_search_skips_a_corrupt_cache_with_a_warning(videos, tmp_path, capsys, caplog):
    lst = tmp_path / "two.txt"
    lst.write_text(f"{videos / 'clip0.mp4'}\n{videos / 'clip1.mp4'}\n")
    idx = tmp_path / "i"
    assert index_main([str(lst), "--cache-dir", str(idx), "--sampling", "every=8", "--quiet"]) == 0
    capsys.readouterr()
    victim = next(idx.glob("*.safetensors"))
    victim.write_bytes(victim.read_bytes()[:-50])
    with caplog.at_level("WARNING"):
        assert search_main(["x", "--index", str(idx), "-k", "3"]) == 3  # a skipped video is a failed item
    out = capsys.readouterr()
    assert "over 9 frames of 1 videos (1 skipped)" in out.out
    assert "corrupt cache file" in out.err  # said once, by the command
    assert "corrupt cache file" not in caplog.text
    # a rerun of the index notices the damaged cache, rebuilds it, and the corpus is whole again
    assert index_main([str(lst), "--cache-dir", str(idx), "--sampling", "every=8", "--quiet"]) == 0
    assert "indexed: 1  cached: 1" in capsys.readouterr().out
    assert search_main(["x", "--index", str(idx), "-k", "3"]) == 0
    assert "over 18 frames of 2 videos" in capsys.readouterr().out


def test_index_merges_manifests_and_search_sees_every_video(videos, tmp_path, capsys):
    """Indexing a second batch into the same cache keeps the first (it was replaced before)."""
    from vidlab.clip.corpus import entries

    idx = tmp_path / "i"
    for name in ("clip0.mp4", "clip1.mp4"):
        assert (
            index_main([str(videos / name), "--cache-dir", str(idx), "--sampling", "every=24", "--quiet"])
            == 0
        )
    manifest = json.loads((idx / "manifest.json").read_text())
    assert sorted(v["video"].rsplit("/", 1)[-1] for v in manifest["videos"]) == ["clip0.mp4", "clip1.mp4"]
    capsys.readouterr()
    assert search_main(["x", "--index", str(idx), "-k", "3"]) == 0
    assert "over 6 frames of 2 videos" in capsys.readouterr().out
    # another sampling gets its own entry; search still sees both videos, each once
    assert (
        index_main([str(videos / "clip0.mp4"), "--cache-dir", str(idx), "--sampling", "every=36", "--quiet"])
        == 0
    )
    manifest = json.loads((idx / "manifest.json").read_text())
    assert sorted((e["sampling"], e["num_videos"]) for e in entries(manifest)) == [
        ("every=24", 2),
        ("every=36", 1),
    ]
    capsys.readouterr()
    assert search_main(["x", "--index", str(idx), "-k", "3"]) == 0
    assert "over 5 frames of 2 videos" in capsys.readouterr().out  # clip0 at every=36 (2) + clip1 (3)
    assert search_main(["x", "--index", str(idx), "-k", "3", "--sampling", "every=24"]) == 0
    assert "over 6 frames of 2 videos" in capsys.readouterr().out
    with pytest.raises(UserError, match="no index with sampling 'fps=9'"):
        search_main(["x", "--index", str(idx), "--sampling", "fps=9"])


def test_symlink_loop_and_locked_cache_are_one_line(videos, tmp_path, capsys):
    import subprocess
    import sys

    from vidlab.cli import main

    loop = tmp_path / "loop.mp4"
    loop.symlink_to(loop)
    assert main(["index", str(loop), "--cache-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "symlink loop" in err[0] and str(loop) in err[0]
    assert not (tmp_path / "c").exists()

    cache = tmp_path / "busy"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from vidlab.distributed import job_lock\n"
         f"with job_lock({str(cache)!r}):\n    print('held', flush=True); sys.stdin.readline()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(["index", str(videos / "clip0.mp4"), "--cache-dir", str(cache), "--quiet"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "in use by another running job" in err[0]
        assert sorted(p.name for p in cache.iterdir()) == [".job.lock"]
    finally:
        holder.communicate("\n", timeout=30)


def test_damaged_index_record_is_reported_and_redone(videos, tmp_path, capsys):
    lst = tmp_path / "one.txt"
    lst.write_text(f"{videos / 'clip0.mp4'}\n")
    idx = tmp_path / "i"
    assert index_main([str(lst), "--cache-dir", str(idx), "--sampling", "every=24", "--quiet"]) == 0
    results = next((idx / "jobs").iterdir()) / "results.jsonl"
    rec = json.loads(results.read_text())
    rec["result"]["frames"] = "three"  # valid JSON, a string where a number belongs
    results.write_text(json.dumps(rec) + "\n")
    capsys.readouterr()
    assert index_main([str(lst), "--cache-dir", str(idx), "--sampling", "every=24", "--quiet"]) == 0
    out = capsys.readouterr()
    assert f"{results}:1: result field 'frames' should be int, got 'three'" in out.err
    assert "videos: 1" in out.out and "frames: 3" in out.out


def test_video_rewritten_in_place_is_reindexed(tmp_path, capsys):
    v = tmp_path / "v.mp4"
    render_synthetic(v, 48, fps=24, width=96, height=72, seed=0)
    idx = tmp_path / "i"
    assert index_main([str(v), "--cache-dir", str(idx), "--sampling", "every=24", "--quiet"]) == 0
    first = json.loads((idx / "manifest.json").read_text())["videos"][0]["cache_file"]
    render_synthetic(v, 72, fps=24, width=96, height=72, seed=5)  # other content, same path
    capsys.readouterr()
    assert index_main([str(v), "--cache-dir", str(idx), "--sampling", "every=24", "--quiet"]) == 0
    assert "indexed: 1" in capsys.readouterr().out
    videos = json.loads((idx / "manifest.json").read_text())["videos"]
    assert len(videos) == 1 and videos[0]["cache_file"] != first and videos[0]["frames"] == 3
