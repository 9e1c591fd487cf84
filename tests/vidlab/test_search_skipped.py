"""``vidlab search`` over caches that fail their check: every skipped video is one line, printed once, and the
exit status is non-zero (the command no longer reports "0 results over 0 frames of 0 videos" with status 0)."""

import json
import subprocess
import sys

import pytest

from vidlab.clip.cli import index_main, search_main
from vidlab.clip.corpus import Corpus
from vidlab.errors import UserError
from vidlab.video.synth import render_synthetic


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    d = tmp_path_factory.mktemp("skipped")
    vids = []
    for seed in range(3):
        vids.append(d / f"v{seed}.mp4")
        render_synthetic(vids[-1], 48, fps=24, width=96, height=96, seed=seed)
    lst = d / "videos.txt"
    lst.write_text("".join(f"{v}\n" for v in vids))
    return lst


def _index(lst, idx):
    assert index_main([str(lst), "--cache-dir", str(idx), "--sampling", "every=8", "--quiet"]) == 0


def _flip_a_byte(path):
    """A bit flip near the end of the file (the embeddings): the file parses, its checksum does not match."""
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF
    path.write_bytes(bytes(data))


def _caches(idx):
    manifest = json.loads((idx / "manifest.json").read_text())
    return {v["video"]: idx / v["cache_file"] for v in manifest["videos"]}


def test_all_caches_corrupt_fails_with_one_line_per_video(indexed, tmp_path):
    """Through the real command line (a fresh process, as a user runs it): open_clip's tokenizer calls
    logging.basicConfig, which used to print every skip a second time through the root logger."""
    idx = tmp_path / "idx"
    _index(indexed, idx)
    caches = _caches(idx)
    for path in caches.values():
        _flip_a_byte(path)
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from vidlab.cli import main; sys.exit(main(sys.argv[1:]))",
         "search", "a red circle", "--index", str(idx)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stderr  # nothing succeeded (vidlab.outcome)
    assert "0 results" not in proc.stdout and proc.stdout == ""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    for video in caches:
        said = [line for line in lines if video in line]
        assert len(said) == 1, lines  # once each, not again through logging
        assert said[0].startswith("vidlab search: skipping ") and "checksum mismatch" in said[0]
    assert lines[-1].startswith("vidlab search: error: nothing to search: all 3 indexed videos were skipped")
    assert len(lines) == 4, lines  # three skips and the error: no traceback, no duplicate


def test_some_caches_skipped_still_searches_the_rest_and_exits_3(indexed, tmp_path, capsys, caplog):
    idx = tmp_path / "idx"
    _index(indexed, idx)
    capsys.readouterr()
    caches = sorted(_caches(idx).items())
    (bad_video, bad), (gone_video, gone) = caches[0], caches[1]
    bad.write_bytes(bad.read_bytes()[:-50])  # truncated
    gone.unlink()  # deleted
    with caplog.at_level("WARNING"):
        assert search_main(["x", "--index", str(idx), "-k", "3"]) == 3  # finished with some failures
    out = capsys.readouterr()
    assert "3 results for 'x' over 6 frames of 1 videos (2 skipped)" in out.out
    err = out.err.splitlines()
    assert len(err) == 2 and all(line.startswith("vidlab search: skipping ") for line in err)
    assert bad_video in err[0] and "corrupt cache file" in err[0]
    assert gone_video in err[1] and "is missing" in err[1]
    assert "skipping" not in caplog.text  # the command prints them; nothing goes through logging as well
    # --json: the results on stdout, the skips on stderr, the same status
    assert search_main(["x", "--index", str(idx), "-k", "2", "--json"]) == 3
    out = capsys.readouterr()
    assert len([json.loads(line) for line in out.out.splitlines()]) == 2 and len(out.err.splitlines()) == 2
    # reindexing rebuilds both; the corpus is whole again and the status is 0
    assert index_main([str(indexed), "--cache-dir", str(idx), "--sampling", "every=8", "--quiet"]) == 0
    capsys.readouterr()
    assert search_main(["x", "--index", str(idx), "-k", "3"]) == 0
    out = capsys.readouterr()
    assert "over 18 frames of 3 videos\n" in out.out and out.err == ""


def test_corpus_open_lists_skipped_videos_and_logs_each_once_by_default(indexed, tmp_path, caplog):
    idx = tmp_path / "idx"
    _index(indexed, idx)
    video, path = sorted(_caches(idx).items())[2]
    _flip_a_byte(path)
    with caplog.at_level("WARNING"):
        corpus = Corpus.open(idx)
    assert [s.video for s in corpus.skipped] == [video] and len(corpus.indexes) == 2
    assert caplog.text.count(f"skipping {video}") == 1
    caplog.clear()
    with caplog.at_level("WARNING"):
        quiet = Corpus.open(idx, warn=False)
    assert [s.video for s in quiet.skipped] == [video] and caplog.text == ""


def test_an_intact_corpus_still_exits_0(indexed, tmp_path, capsys):
    idx = tmp_path / "idx"
    _index(indexed, idx)
    capsys.readouterr()
    assert search_main(["x", "--index", str(idx), "-k", "3"]) == 0
    assert capsys.readouterr().err == ""
    with pytest.raises(UserError, match="-k must be >= 1"):
        search_main(["x", "--index", str(idx), "-k", "0"])
