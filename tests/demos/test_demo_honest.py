"""The demo, deployable and honest (issue 19, item 5): Gradio's server variables and the Spaces entry point,
side by side without regenerating (counted on the transformer) and labelled on the video, attention maps
that outline the mask's cells, the QA gallery's frames written once (the cause of ERR_CONTENT_LENGTH_MISMATCH),
the seed range, and random weights said on the page."""

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

from demos.app import DemoAddressError, build_demo, launch, server_address  # noqa: E402
from demos.config import MAX_SEED, DemoConfig, DemoGenerationConfig, DemoQAConfig  # noqa: E402
from demos.generation_tab import (  # noqa: E402
    COMPARE_LABELS,
    DemoInputError,
    GenerationService,
    check_seed,
    label_halves,
)
from demos.work import WorkArea  # noqa: E402

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


def test_seed_is_range_checked_with_a_clear_message(gen):
    svc, _ = gen
    assert check_seed(None) == 0 and check_seed(7.0) == 7 and check_seed(MAX_SEED) == MAX_SEED
    for bad in (2**70, -1, 1.5, "x", float("inf")):
        with pytest.raises(DemoInputError, match="seed"):
            svc.settings(steps=2, seed=bad)


def test_the_page_says_when_a_model_has_random_weights(gen, tmp_path):
    from demos.qa_tab import QAService

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
    from generation.attention_maps import AttentionMapStore, mask_outline

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

    from demos.qa_tab import QAService
    from understanding.benchmarks.synthetic import write_needle_benchmark

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

    from demos.app import main
    from vidlab.config import resolve

    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    listed = re.search(r"presets \(--preset NAME, configs/demo/\): (.+)", text).group(1).split(", ")
    assert "tiny" in listed and "default" in listed and "demo-toyworld" not in text
    for name in listed + re.findall(r"vidlab demo --preset (\S+)", text):
        resolve(DemoConfig, name, [])  # each resolves for the demo (a ConfigError would fail here)
    assert "steps=8" not in text and "lam.enabled" not in text  # the demo has no such settings
