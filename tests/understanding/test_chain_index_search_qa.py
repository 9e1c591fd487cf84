"""Index a folder, search it, ask a question over what the search found, as a user chains the commands.

``vidlab index`` (a list file naming its videos relative to itself; locally and on Ray) -> ``vidlab search`` ->
``vidlab qa`` on the top hit with the same CLIP and the index's cache, all the installed console script run from a
folder that is neither the checkout nor the data's. The question is answered from the frame index the first
command built: no video is embedded twice.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Three short videos; only ``ball.mp4`` shows a red circle, for its whole length. ``list.txt`` names them
    relative to its own folder."""
    from vidlab.video.synth import Event, render_synthetic

    root = tmp_path_factory.mktemp("corpus") / "data"
    (root / "videos").mkdir(parents=True)
    render_synthetic(root / "videos" / "ball.mp4", 48, fps=8, width=96, height=64, seed=0, num_shapes=0,
                     events=[Event(0, 48, "circle", "red", (0.5, 0.5), 0.5)])  # fmt: skip
    for seed, name in ((1, "blue.mp4"), (2, "green.mp4")):
        colour = name.split(".")[0]
        render_synthetic(root / "videos" / name, 48, fps=8, width=96, height=64, seed=seed, num_shapes=0,
                         events=[Event(0, 48, "square", colour, (0.5, 0.5), 0.5)])  # fmt: skip
    (root / "list.txt").write_text("# the corpus\nvideos/ball.mp4\nvideos/blue.mp4\nvideos/green.mp4\n")
    return root


def _caches(index: Path) -> set[str]:
    return {p.name for p in index.rglob("*.safetensors")}


@pytest.mark.parametrize("backend", ["local", pytest.param("ray", marks=pytest.mark.ray)])
def test_index_then_search_then_qa_over_the_corpus(corpus, tmp_path, vidlab_cli, backend):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    data = Path("..") / ".." / corpus.parent.name / "data"  # typed relative to the working directory
    assert (cwd / data / "list.txt").is_file()
    ray = ["--backend", "ray", "--workers", "1"] if backend == "ray" else []
    res = vidlab_cli(cwd, "index", str(data / "list.txt"), "--cache-dir", "../index", "--sampling", "fps=1",
                     "--quiet", *ray)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert "videos: 3  indexed: 3" in res.stdout
    index = tmp_path / "index"
    built = _caches(index)
    assert len(built) == 3

    res = vidlab_cli(cwd, "search", "a red circle", "--index", "../index", "-k", "3", "--json")
    assert res.returncode == 0, res.stderr[-3000:]
    hits = [json.loads(x) for x in res.stdout.splitlines()]
    assert len(hits) == 3 and all(Path(h["video"]).is_file() for h in hits)
    top = hits[0]["video"]

    answer = tmp_path / "qa.json"
    res = vidlab_cli(
        cwd, "qa", "--video", top, "--question", "What colour is the shape?", "--options", "red", "blue", "green",
        "--policy", "const:A", "--strategy", "clip:4", "--clip-model", "vidlab-tiny", "--cache-dir", "../index",
        "--json", str(answer),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    rec = json.loads(answer.read_text())
    assert rec["clip_model"] == "vidlab-tiny" and len(rec["frames_used"]) == 4
    assert _caches(index) == built  # answered from the index `vidlab index` built: nothing embedded again
