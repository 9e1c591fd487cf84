"""uniform_indices, fit_within, metadata, timestamps, the on-disk index cache, context management."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from vidlab.video import fit_within, open_video, uniform_indices
from vidlab.video import probe as probe_mod
from vidlab.video.cli import contact_sheet_main, synth_main
from vidlab.video.synth import read_index_code, render_synthetic


@pytest.mark.parametrize("start,end,n", [(0, 99, 16), (10, 17, 8), (0, 5000, 128), (3, 3, 4), (0, 1, 5)])
def test_uniform_indices_is_truncated_linspace(start, end, n):
    got = uniform_indices(start, end, n)
    # VideoBrain's reference: np.linspace(start, end, n, dtype=int), i.e. truncation, not rounding
    assert got.dtype == np.int64 and got.tolist() == np.linspace(start, end, n, dtype=int).tolist()
    u = uniform_indices(start, end, n, unique=True)
    assert u.tolist() == sorted(set(got.tolist()))


def test_uniform_indices_videobrain_initial_view():
    view = uniform_indices(0, 299, 16).tolist()
    assert view[:4] == [0, 19, 39, 59] and view[-1] == 299  # 19.93 -> 19: truncated like the reference
    with pytest.raises(ValueError):
        uniform_indices(0, 10, -1)


def test_fit_within():
    assert fit_within(1280, 720, (640, 360)) == (640, 360)
    assert fit_within(1280, 720, (640, 640)) == (640, 360)
    assert fit_within(720, 1280, (640, 360)) == (202, 360)  # 202.5 rounds half to even
    assert fit_within(100, 50, (640, 360)) == (100, 50)
    assert fit_within(100, 50, None) == (100, 50)


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    return render_synthetic(tmp_path_factory.mktemp("r") / "v.mp4", 48, fps=12, width=64, height=48, gop=12)


@pytest.mark.parametrize("backend", ["pyav", "auto"])
def test_metadata_and_timestamps(video, backend):
    with open_video(video, backend=backend) as r:
        m = r.metadata()
        assert (m["num_frames"], m["width"], m["height"], m["codec"], m["fps"]) == (48, 64, 48, "h264", 12.0)
        assert m["duration"] == pytest.approx(4.0) and len(r) == 48
        np.testing.assert_allclose(r.timestamps([0, 12, 47]), [0, 1, 47 / 12])
        assert json.loads(json.dumps(m)) == m
        assert read_index_code(r.get_frame(30)) == 30


def test_index_cache_is_used_for_long_videos(video, tmp_path, monkeypatch):
    monkeypatch.setenv("VIDLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(probe_mod, "CACHE_MIN_FRAMES", 10)
    a = probe_mod.build_index(video)
    files = list((tmp_path / "video-index").glob("*.npz"))
    assert len(files) == 1
    b = probe_mod.build_index(video)
    assert np.array_equal(a.pts, b.pts) and np.array_equal(a.keyframes, b.keyframes)
    assert (a.time_base, a.fps, a.codec, a.open_gop) == (b.time_base, b.fps, b.codec, b.open_gop)
    # the cache key follows the file's content stamp: a rewritten file is indexed afresh
    render_synthetic(video, 24, fps=12, width=64, height=48, gop=12)
    assert probe_mod.build_index(video).num_frames == 24


def test_cli_synth_then_contact_sheet(tmp_path, capsys):
    out = tmp_path / "demo.mp4"
    rc = synth_main([str(out), "--frames", "30", "--width", "96", "--height", "72", "--gop", "10", "--quiet",
                     "--event", "5:9:square:green"])  # fmt: skip
    assert rc == 0 and out.exists()
    cfg = yaml.safe_load((tmp_path / "demo.config.yaml").read_text())
    assert cfg["frames"] == 30 and cfg["events"][0]["color"] == "green"
    sheet = tmp_path / "sheet.png"
    assert contact_sheet_main([str(out), "--out", str(sheet), "--frames", "8", "--backend", "pyav"]) == 0
    meta = json.loads(sheet.with_suffix(".json").read_text())
    assert meta["backend"] == "pyav" and meta["num_frames"] == 30
    assert [f["index"] for f in meta["frames"]] == uniform_indices(0, 29, 8).tolist()
    assert yaml.safe_load((tmp_path / "sheet.config.yaml").read_text())["frames"] == 8
    from PIL import Image

    assert Image.open(sheet).size[0] > 4 * 96


def test_cli_errors_are_reported_not_raised(tmp_path, capsys):
    assert contact_sheet_main([str(tmp_path / "missing.mp4"), "--out", str(tmp_path / "s.png")]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        synth_main([str(tmp_path / "x.mp4"), "--event", "bad"])
