"""``vidlab index`` / ``vidlab search`` end to end on real encoded videos (local backend)."""

import json

import pytest

from vidlab.clip.cli import index_main, search_main
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
    assert rc == 2  # one video failed; the others were indexed
    assert "videos: 4  indexed: 3  cached: 0  failures: 1  frames: 32" in out.out
    assert "broken.mp4" in out.err and "VideoReadError" in out.err
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
    assert rc == 2
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
    assert index_main([str(lst), "--cache-dir", str(tmp_path / "i"), "--sampling", "fps=0"]) == 1
    assert "fps must be a positive number" in capsys.readouterr().err
    assert index_main([str(lst), "--cache-dir", str(tmp_path / "i"), "--model", "ViT-B-33"]) == 1
    assert "ViT-B-32" in capsys.readouterr().err
    assert search_main(["x", "--index", str(tmp_path / "nothing")]) == 1
    assert "no corpus manifest" in capsys.readouterr().err


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
    preset.write_text("workerz: 3\n")
    assert index_main([str(lst), "--cache-dir", str(tmp_path / "i"), "--preset", str(preset)]) == 1
    assert "workerz" in capsys.readouterr().err


def test_search_skips_a_corrupt_cache_with_a_warning(videos, tmp_path, capsys, caplog):
    lst = tmp_path / "two.txt"
    lst.write_text(f"{videos / 'clip0.mp4'}\n{videos / 'clip1.mp4'}\n")
    idx = tmp_path / "i"
    assert index_main([str(lst), "--cache-dir", str(idx), "--sampling", "every=8", "--quiet"]) == 0
    capsys.readouterr()
    victim = next(idx.glob("*.safetensors"))
    victim.write_bytes(victim.read_bytes()[:-50])
    with caplog.at_level("WARNING"):
        assert search_main(["x", "--index", str(idx), "-k", "3"]) == 0
    assert "over 9 frames of 1 videos" in capsys.readouterr().out
    assert "corrupt cache file" in caplog.text
    # a rerun of the index notices the damaged cache, rebuilds it, and the corpus is whole again
    assert index_main([str(lst), "--cache-dir", str(idx), "--sampling", "every=8", "--quiet"]) == 0
    assert "indexed: 1  cached: 1" in capsys.readouterr().out
    assert search_main(["x", "--index", str(idx), "-k", "3"]) == 0
    assert "over 18 frames of 2 videos" in capsys.readouterr().out
