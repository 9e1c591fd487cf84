"""The demo, deployable and honest: Gradio's server variables and the Spaces entry point,
side by side without regenerating (counted on the transformer) and labelled on the video, attention maps
that outline the mask's cells, the QA gallery's frames written once (the cause of ERR_CONTENT_LENGTH_MISMATCH),
the seed range, random weights said on the page, one file for one set of frames (same seed, same video), and
legible attention thumbnails and verdict captions."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gradio")

from vidlab.demos.app import DemoAddressError, build_demo, launch, server_address  # noqa: E402
from vidlab.demos.config import MAX_SEED, DemoConfig, DemoGenerationConfig, DemoQAConfig  # noqa: E402
from vidlab.demos.generation_tab import (  # noqa: E402
    COMPARE_LABELS,
    DemoInputError,
    GenerationService,
    check_seed,
    label_halves,
)
from vidlab.demos.work import WorkArea  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "a red cat on the left of a blue dog"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------- server address
def test_server_address_honours_gradio_variables_and_flags_win():
    env = {"GRADIO_SERVER_NAME": "0.0.0.0", "GRADIO_SERVER_PORT": "7999"}
    assert server_address(DemoConfig(), {}) == ("127.0.0.1", 7860)  # the default stays loopback
    assert server_address(DemoConfig(), env) == ("0.0.0.0", 7999)
    assert server_address(DemoConfig(host="127.0.0.1", port=8080), env) == ("127.0.0.1", 8080)
    assert server_address(DemoConfig(port=0), env) == ("0.0.0.0", 0)
    with pytest.raises(DemoAddressError, match="GRADIO_SERVER_PORT='http'"):
        server_address(DemoConfig(), {"GRADIO_SERVER_PORT": "http"})


def test_launch_listens_on_gradio_server_port(tmp_path, monkeypatch):
    port = _free_port()
    monkeypatch.setenv("GRADIO_SERVER_PORT", str(port))
    monkeypatch.setenv("GRADIO_SERVER_NAME", "127.0.0.1")
    cfg = DemoConfig(
        work_dir=str(tmp_path),
        generation=DemoGenerationConfig(preset="tiny"),
        qa=DemoQAConfig(policy="pixel:red", synthetic_videos=0),
    )
    demo = build_demo(cfg)
    try:
        _, url, _ = launch(demo, cfg, prevent_thread_lock=True)
        assert url.rstrip("/") == f"http://127.0.0.1:{port}"
    finally:
        demo.close()


@pytest.mark.slow
def test_python_app_py_is_a_spaces_entry_point(tmp_path):
    """`python app.py` with only the environment a Space gives (no flags): it serves on $GRADIO_SERVER_PORT."""
    import requests

    port = _free_port()
    env = {
        **os.environ,
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_SERVER_PORT": str(port),
        "VIDLAB_DEMO_PRESET": "tiny",
        "OMP_NUM_THREADS": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "app.py", "qa.synthetic_videos=0", f"work_dir={tmp_path}"],
        cwd=ROOT / "demos",
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        page = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                page = requests.get(f"http://127.0.0.1:{port}/config", timeout=5)
                break
            except requests.ConnectionError:
                time.sleep(1)
        assert page is not None and page.status_code == 200, (
            proc.stdout.read() if proc.poll() is not None else ""
        )
        assert "vidlab" in page.text and "Random weights" in page.text  # the tiny preset, said on the page
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert f"http://127.0.0.1:{port}" in out


# ------------------------------------------------------------------------------------- generation tab
@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    work = WorkArea(tmp_path_factory.mktemp("gen"))
    svc = GenerationService(
        DemoGenerationConfig(preset="tiny", overrides=["height=32", "width=32", "frames=9"], max_steps=6),
        work,
    )
    calls = {"n": 0}

    def count(*_a, **_k):
        calls["n"] += 1

    svc.pipeline().transformer.register_forward_pre_hook(count)
    return svc, calls


def test_side_by_side_reuses_the_comp_attn_video_and_labels_both_halves(gen):
    svc, calls = gen
    lay = svc.plan(PROMPT)
    ui = {"steps": 2, "seed": 3}
    n0 = calls["n"]
    first = svc.generate(PROMPT, lay, **ui)
    per_video = calls["n"] - n0
    assert per_video > 0
    n1 = calls["n"]
    cmp = svc.compare(PROMPT, lay, **ui)
    assert cmp["reused"] and calls["n"] - n1 == per_video  # only the plain video was generated
    np.testing.assert_array_equal(cmp["comp_attn"]["frames"], first["frames"])
    # control: another seed is another request: both halves are generated
    n2 = calls["n"]
    other = svc.compare(PROMPT, lay, steps=2, seed=4)
    assert not other["reused"] and calls["n"] - n2 == 2 * per_video

    both = label_halves(cmp["plain"]["frames"], cmp["comp_attn"]["frames"], COMPARE_LABELS)
    n, h, w, _ = first["frames"].shape
    scale = -(-160 // w)
    band = both.shape[1] - h * scale
    assert band >= 12
    left_band, right_band = both[0, :band, : w * scale], both[0, :band, w * scale + 4 : 2 * w * scale + 4]
    assert (left_band > 128).sum() > 30 and (right_band > 128).sum() > 30  # text drawn in each half
    assert not np.array_equal(left_band, right_band)  # and they say different things
    right = both[:, band : band + h * scale, w * scale + 4 : 2 * w * scale + 4]
    np.testing.assert_array_equal(right[:, ::scale, ::scale], first["frames"])
    from vidlab.video import open_video

    with open_video(cmp["video"]) as r:
        assert (r.num_frames, r.height, r.width) == (n, both.shape[1], both.shape[2])


# The frames of the tiny pipeline's seed-11 clip (32x32, 9 frames, a nearly flat first frame), stacked as one
# lossless PNG: content on which libx264's macroblock-tree rate control reads heap memory it never wrote.
MBTREE_CLIP = Path(__file__).parent / "data" / "x264_mbtree_clip.png"
_WRITE_BOTH = """
import hashlib, json, sys
import numpy as np
from PIL import Image
from vidlab.video import write_video

frames = np.asarray(Image.open(sys.argv[1]).convert("RGB")).reshape(9, 32, 32, 3)
out = {}
for name, options in (("default", None), ("mbtree", {"x264-params": "mbtree=1"})):
    path = write_video(frames, f"{sys.argv[2]}/{name}.mp4", fps=8, options=options)
    out[name] = hashlib.sha256(path.read_bytes()).hexdigest()
print(json.dumps(out))
"""


def _digests_under_fill_byte(fill: int, tmp_path: Path) -> dict[str, str]:
    """The sha256 of the clip written by vidlab's writer (and, as the control, with libx264's macroblock tree
    back on) in a process whose fresh heap memory glibc fills with one byte (MALLOC_PERTURB_)."""
    out = tmp_path / f"fill{fill}"
    out.mkdir()
    env = {**os.environ, "MALLOC_PERTURB_": str(fill), "PYTHONPATH": str(ROOT)}
    p = subprocess.run(
        [sys.executable, "-c", _WRITE_BOTH, str(MBTREE_CLIP), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_the_writer_never_depends_on_memory_it_did_not_write(tmp_path):
    """Same seed, same video: the same frames give the same file, whatever bytes the heap held.

    The cause of concurrent /generate requests returning other videos than the same request alone: not the
    generation (its frames are equal) but libx264's macroblock tree, whose output on this clip follows the
    heap's leftover bytes, so two encodes of the same frames differ at random. vidlab's writer turns it off."""
    one, other = _digests_under_fill_byte(1, tmp_path), _digests_under_fill_byte(200, tmp_path)
    if one["mbtree"] == other["mbtree"]:  # the control: without it, the main assertion proves nothing
        pytest.skip(
            "libx264's macroblock tree gave one file under two heap fill bytes here (no glibc MALLOC_PERTURB_, "
            "or a libx264 without the uninitialised read): nothing for the writer's workaround to show"
        )
    assert one["default"] == other["default"]


def test_seed_is_range_checked_with_a_clear_message(gen):
    svc, _ = gen
    assert check_seed(None) == 0 and check_seed(7.0) == 7 and check_seed(MAX_SEED) == MAX_SEED
    for bad in (2**70, -1, 1.5, "x", float("inf")):
        with pytest.raises(DemoInputError, match="seed"):
            svc.settings(steps=2, seed=bad)


def test_the_page_says_when_a_model_has_random_weights(gen, tmp_path):
    from vidlab.demos.qa_tab import QAService

    svc, _ = gen
    assert svc.random_weights and "**Random weights**" in svc.model_note()
    trained = GenerationService(DemoGenerationConfig(preset="toyworld"), WorkArea(tmp_path))  # control
    assert not trained.random_weights and "Random weights" not in trained.model_note()
    work = WorkArea(tmp_path / "qa")
    tiny_qa = QAService(
        DemoQAConfig(policy="hf-tiny:qwen2_5_vl", clip_model="vidlab-tiny", synthetic_videos=0), work
    )
    assert tiny_qa.model_note().count("**Random weights**") == 2
    assert (
        "scripted policy"
        in QAService(DemoQAConfig(policy="pixel:red", synthetic_videos=0), work).model_note()
    )


def test_attention_maps_outline_the_mask_cells():
    from vidlab.generation.attention_maps import AttentionMapStore, mask_outline

    mask = np.zeros((6, 8), dtype=bool)
    mask[1:4, 2:7] = True  # rows 1-3, cols 2-6
    segs = mask_outline(mask)
    xs = [x for s in segs for x, _ in s]
    ys = [y for s in segs for _, y in s]
    assert (min(xs), max(xs), min(ys), max(ys)) == (1.5, 6.5, 0.5, 3.5)  # the cells' edges, not their centres
    assert len(segs) == 2 * (5 + 3)  # one unit edge per boundary cell side: the perimeter of the box
    corners = {p for s in segs for p in s}
    assert {(1.5, 0.5), (6.5, 0.5), (1.5, 3.5), (6.5, 3.5)} <= corners  # no cut corner
    # control: a contour at 0.5 (the old drawing) misses every corner of the same box
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    cs = ax.contour(mask.astype(float), levels=[0.5])
    verts = np.concatenate([p for p in cs.allsegs[0]])
    plt.close(fig)
    assert not any(np.allclose(v, c) for v in verts for c in [(1.5, 0.5), (6.5, 3.5)])
    # and the grid still renders
    import torch

    store = AttentionMapStore(["cat"], (1, 6, 8), masks=mask[None, None])
    store.add(0, torch.rand(1, 1, 48), biased=True)
    (png,) = store.save_png(Path(__file__).parent / ".." / ".." / ".pytest_attn_tmp")
    assert png.read_bytes()[:4] == b"\x89PNG"
    png.unlink()
    png.parent.rmdir()


# --------------------------------------------------------------------------------------------- QA gallery
def test_qa_gallery_frames_are_files_written_once(tmp_path):
    """Gradio re-encodes an array gallery item on every streamed update and rewrites its cache file in place
    (the cause of ERR_CONTENT_LENGTH_MISMATCH); the demo hands it files written once, atomically."""
    import gradio.processing_utils as pu

    from vidlab.demos.qa_tab import QAService
    from vidlab.understanding.benchmarks.synthetic import write_needle_benchmark

    # the cause, shown: the same array saved twice rewrites the same cache file (a new mtime, same path)
    arr = np.random.default_rng(0).integers(0, 255, size=(24, 32, 3), dtype=np.uint8)
    cache = tmp_path / "gradio-cache"
    p1 = pu.save_img_array_to_cache(arr, str(cache))
    st1 = os.stat(p1)
    time.sleep(0.02)
    p2 = pu.save_img_array_to_cache(arr, str(cache))
    assert p1 == p2 and os.stat(p2).st_mtime_ns != st1.st_mtime_ns  # rewritten while it may be served

    work = WorkArea(tmp_path / "work")
    qa = QAService(DemoQAConfig(policy="pixel:red", synthetic_videos=0), work)
    path = write_needle_benchmark(tmp_path / "needles", n=2, num_frames=200)
    row = json.loads(Path(path).read_text().splitlines()[1])
    video = Path(row["video"]) if Path(row["video"]).is_absolute() else Path(path).parent / row["video"]
    seen: dict[str, tuple[int, int, int]] = {}
    states = 0
    for state in qa.run(str(video), row["question"], "\n".join(row["options"])):
        states += 1
        for image, _caption in state["gallery"]:
            assert isinstance(image, str) and work.contains(image)
            st = os.stat(image)
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
            assert seen.setdefault(image, stamp) == stamp  # never rewritten between updates
    assert states >= 3 and len(seen) >= 16
    final = state["final"]
    assert len({Path(p).name.split("_")[1] for p in seen}) == len(set(final["frame_indices"]))


def test_demo_help_names_only_presets_that_exist(capsys):
    import re

    from vidlab.config import resolve
    from vidlab.demos.app import main

    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    listed = re.search(r"presets \(--preset NAME, configs/demo/\): (.+)", text).group(1).split(", ")
    assert "tiny" in listed and "default" in listed and "demo-toyworld" not in text
    for name in listed + re.findall(r"vidlab demo --preset (\S+)", text):
        resolve(DemoConfig, name, [])  # each resolves for the demo (a ConfigError would fail here)
    assert "steps=8" not in text and "lam.enabled" not in text  # the demo has no such settings


# ------------------------------------------------------------------------------ thumbnails and captions
def test_attention_thumbnails_are_legible_tiles():
    """The gallery shows square tiles: the full grid (a row per step) was a sliver there, its title cut. The
    thumbnail is near square, holds at most six steps (LAM-biased ones marked) and its whole title."""
    import torch
    from PIL import Image, ImageDraw

    from vidlab.demos.generation_tab import _font, attention_thumbnail
    from vidlab.generation.attention_maps import AttentionMapStore

    name = "two yellow triangles"
    mask = np.zeros((1, 2, 8, 8), dtype=bool)
    mask[0, :, 2:5, 1:4] = True
    store = AttentionMapStore([name], (2, 8, 8), masks=mask)
    for step in range(12):  # the toy-world preset's 12 steps, 2 latent frames of 8x8 tokens
        store.add(step, torch.rand(1, 1, 128), biased=step < 4)
    thumb = attention_thumbnail(store, 0)
    w, h = thumb.size
    assert 0.6 <= w / h <= 1.7 and w >= 200
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    assert probe.textlength(name, font=_font(18)) < w  # the title is whole
    ink = np.asarray(thumb.convert("L"))[:20] < 128
    assert ink.any(axis=0).sum() > 60  # and drawn
    cyan = (np.asarray(thumb) == (0, 255, 255)).all(axis=-1)
    assert cyan.sum() > 100  # the boxes outlined
    # control: the full grid the thumbnail replaces in the gallery is a sliver (one row per step)
    (png,) = store.save_png(Path(__file__).parent / ".." / ".." / ".pytest_attn_tmp2")
    full = Image.open(png).size
    png.unlink()
    png.parent.rmdir()
    assert full[1] / full[0] > 4


def test_verdict_captions_say_right_and_wrong_loudly():
    from vidlab.demos.generation_tab import verdict_caption, verdict_html

    base = {"presence": True, "presence_colour": True, "swapped": None, "count": None, "iou": 0.31}
    prompt = "a red circle to the left of a <blue> square"
    wrong = verdict_caption(
        "with Comp-Attn", {"prompt": prompt, "verdict": {**base, "relation": False}}, "right"
    )
    assert 'data-ok="false"' in wrong and "\u2717 WRONG" in wrong and "#b91c1c" in wrong
    assert "relation: <b>NO</b>" in wrong and "IoU with the boxes: <b>0.31</b>" in wrong
    assert "&lt;blue&gt;" in wrong and "<blue>" not in wrong  # the prompt is text, not markup
    right = verdict_caption(
        "with Comp-Attn", {"prompt": prompt, "verdict": {**base, "relation": True}}, "left"
    )
    assert 'data-ok="true"' in right and "\u2713 RIGHT" in right and "#b91c1c" not in right
    missing = verdict_caption(
        "with Comp-Attn", {"prompt": prompt, "verdict": {**base, "presence": False}}, "x"
    )
    assert "WRONG" in missing and "every subject drawn: <b>NO</b>" in missing
    unknown = verdict_caption(
        "without Comp-Attn", {"prompt": prompt, "model": "tiny", "verdict": None}, "left"
    )
    assert 'data-ok="none"' in unknown and "no exact detector" in unknown and "WRONG" not in unknown
    both = verdict_html(
        [
            ("without Comp-Attn", {"prompt": prompt, "verdict": None}, "left"),
            ("with", {"verdict": None}, "right"),
        ]
    )
    assert both.index('data-half="left"') < both.index('data-half="right"')
