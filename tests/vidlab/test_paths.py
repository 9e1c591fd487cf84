"""One cache root: $VIDLAB_CACHE_DIR, else the platform's user cache dir; the old VIDLAB_CACHE warns."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from vidlab import paths


def test_env_root_and_named_folders(monkeypatch, tmp_path):
    monkeypatch.setenv("VIDLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("VIDLAB_CACHE", raising=False)
    assert paths.cache_root() == tmp_path
    assert paths.cache_dir("plans") == tmp_path / "plans"
    from vidlab.clip.frame_index import default_cache_dir

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecation warning on the new variable
        assert default_cache_dir() == tmp_path / "frame_index"


def test_default_is_the_platform_user_cache_dir(monkeypatch):
    import platformdirs

    monkeypatch.delenv("VIDLAB_CACHE_DIR", raising=False)
    assert paths.cache_root() == Path(platformdirs.user_cache_dir("vidlab", appauthor=False))


def test_old_variable_still_works_with_a_deprecation_warning(monkeypatch, tmp_path):
    from vidlab.clip.frame_index import default_cache_dir

    monkeypatch.setenv("VIDLAB_CACHE_DIR", str(tmp_path / "root"))
    monkeypatch.setenv("VIDLAB_CACHE", str(tmp_path / "old"))
    with pytest.warns(DeprecationWarning, match="VIDLAB_CACHE is deprecated: set VIDLAB_CACHE_DIR"):
        assert default_cache_dir() == tmp_path / "old"


def test_packet_index_cache_lives_under_the_one_root(monkeypatch, tmp_path):
    from vidlab.video.probe import _cache_file

    monkeypatch.setenv("VIDLAB_CACHE_DIR", str(tmp_path / "root"))
    monkeypatch.delenv("VIDLAB_VIDEO_INDEX_CACHE", raising=False)
    video = tmp_path / "v.mp4"
    video.write_bytes(b"x" * 10)
    assert _cache_file(video, None).parent == tmp_path / "root" / "video-index"
    import platformdirs

    monkeypatch.delenv("VIDLAB_CACHE_DIR")
    assert (
        _cache_file(video, None).parent
        == Path(platformdirs.user_cache_dir("vidlab", appauthor=False)) / "video-index"
    )
