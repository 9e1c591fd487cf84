"""The demo in a real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium).

It serves `vidlab demo` (the toy-world model, 3 steps), clicks Generate on the fresh page (empty box table),
edits a box, runs the side by side, checks the verdict captions and that both labels on the video are in view,
and saves screenshots under the test's temp dir.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = [
    pytest.mark.slow,  # a real browser: 17 s on an idle machine
    pytest.mark.skipif(
        not (CHROMIUM and DRIVER),
        reason="needs Debian's browser packages: apt-get install chromium chromium-driver",
    ),
]
selenium = pytest.importorskip("selenium")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1800",
        f"--user-data-dir={tmp_path / 'chrome-profile'}",
    ):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_page_load_timeout(120)
    yield driver
    driver.quit()


# What the page shows over each half's label on the side-by-side video: points along each label's text (its
# span in the video's own pixels, from label_spans), mapped through the <video> element's letterboxing.
_LABEL_POINTS_JS = """
const [spans, y] = arguments;
const video = document.querySelector('#gen-video video');
const r = video.getBoundingClientRect();
const scale = Math.min(r.width / video.videoWidth, r.height / video.videoHeight);
const ox = r.left + (r.width - video.videoWidth * scale) / 2;
const oy = r.top + (r.height - video.videoHeight * scale) / 2;
// every visible element of the video's block that is not the video or a box around it (a badge, a button);
// geometry, not elementFromPoint, which skips elements with pointer-events: none
const shown = (el) => {
  const cs = getComputedStyle(el), b = el.getBoundingClientRect();
  return cs.display !== 'none' && cs.visibility !== 'hidden' && parseFloat(cs.opacity) > 0 && b.width > 0 &&
    b.height > 0;
};
const others = [...document.querySelector('#gen-video').querySelectorAll('*')].filter(
  (el) => el !== video && !el.contains(video) && shown(el));
const out = [];
for (const [x0, x1] of spans) {
  for (let k = 0; k <= 8; k++) {
    const px = ox + (x0 + (x1 - x0) * k / 8) * scale, py = oy + y * scale;
    const over = others.filter((el) => {
      const b = el.getBoundingClientRect();
      return b.left <= px && px <= b.right && b.top <= py && py <= b.bottom;
    });
    const hit = document.elementFromPoint(px, py);
    out.push({x: px, y: py, on_video: hit === video && over.length === 0,
              over: over.map((el) => el.outerHTML.slice(0, 100))});
  }
}
return out;
"""


def test_browser_first_click_generates_then_side_by_side_with_captions(browser, tmp_path):
    """The default demo as a newcomer meets it: the prompt filled in, the box table empty. The first click on
    Generate plans, fills the table and shows a video with the detector's verdict under it; an edited box
    reaches the generation; the side by side has a caption under each half and both labels in view."""
    from selenium.common.exceptions import ElementClickInterceptedException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    from vidlab.demos.app import build_demo, demo_config, launch
    from vidlab.generation.layout import Layout

    # `vidlab demo` itself (the trained toy-world Wan, detector included), with 3 steps to keep it short
    cfg = demo_config(
        [
            "--port",
            str(_free_port()),
            f"work_dir={tmp_path / 'work'}",
            "generation.overrides=[steps=3]",
            "qa.synthetic_videos=0",
        ]
    )
    demo = build_demo(cfg)
    _, url, _ = launch(demo, cfg, prevent_thread_lock=True)
    work = Path(cfg.work_dir)
    try:
        wait = WebDriverWait(browser, 240)
        # a click retried while Gradio's translucent status overlay still covers the button (page load, or a
        # slow event on a loaded machine): "clickable" means displayed and enabled, not uncovered
        clicks = WebDriverWait(browser, 240, ignored_exceptions=(ElementClickInterceptedException,))
        browser.get(url)
        wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "#gen-run")))
        assert "blue square" not in browser.find_element(By.CSS_SELECTOR, "#gen-boxes").text  # empty table

        # 1. the first click on Generate: planned, generated, the plan shown, the verdict under the video
        clicks.until(lambda d: d.find_element(By.CSS_SELECTOR, "#gen-run").click() or True)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#gen-video video[src]"))
        src = browser.find_element(By.CSS_SELECTOR, "#gen-video video[src]").get_attribute("src")
        assert src.startswith(url.rstrip("/"))  # served by the app itself
        wait.until(lambda d: "blue square" in d.find_element(By.CSS_SELECTOR, "#gen-boxes").text)
        assert "planner laid out" in browser.find_element(By.CSS_SELECTOR, "#gen-plan-note").text
        single = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#gen-verdict [data-half='single']"))
        assert single[0].get_attribute("data-ok") in ("true", "false")  # a real verdict: the detector ran
        assert "every subject drawn" in single[0].text and "IoU with the boxes" in single[0].text
        browser.save_screenshot(str(tmp_path / "demo-first-click.png"))
        first = sorted((work / "generate").glob("*/layout.json"))
        assert len(first) == 1 and Layout.load(first[0]).phrases == ["red circle", "blue square"]

        # 2. edit x1 of the first row (columns: subject, t, x0, y0, x1, y1): the first box ends at 0.3
        cell = '#gen-boxes [data-testid="cell-0-4"]'
        target = browser.find_element(By.CSS_SELECTOR, cell)
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", target)
        ActionChains(browser).double_click(target).perform()
        editor = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, f"{cell} textarea, {cell} input"))
        editor.send_keys(Keys.CONTROL, "a")
        editor.send_keys("0.3", Keys.ENTER)
        wait.until(
            lambda d: d.find_element(By.CSS_SELECTOR, f"{cell} span[data-editable]").text.strip() == "0.3"
        )

        # 3. side by side: a caption under each half, left to right, and both labels in view
        clicks.until(lambda d: d.find_element(By.CSS_SELECTOR, "#gen-compare").click() or True)
        halves = wait.until(
            lambda d: (
                d.find_elements(
                    By.CSS_SELECTOR, "#gen-verdict [data-half='left'], #gen-verdict [data-half='right']"
                )
                or None
            )
        )
        assert [h.get_attribute("data-half") for h in halves] == ["left", "right"]
        assert halves[0].text.startswith("without Comp-Attn") and halves[1].text.startswith("with Comp-Attn")
        assert all(h.get_attribute("data-ok") in ("true", "false") for h in halves)
        left, right = (h.rect for h in halves)
        assert left["x"] + left["width"] <= right["x"] + 1  # side by side, as the halves are
        wait.until(
            lambda d: d.execute_script(
                "const v = document.querySelector('#gen-video video'); return v && v.videoWidth > 0"
            )
        )
        browser.execute_script(
            "document.querySelector('#gen-video').scrollIntoView({block: 'center'}); "
            "document.querySelector('#gen-video video').pause();"
        )
        from vidlab.demos.generation_tab import COMPARE_LABELS, LABEL_GAP, label_spans

        width = browser.execute_script("return document.querySelector('#gen-video video').videoWidth")
        spans = label_spans((width - LABEL_GAP) // 2, COMPARE_LABELS)
        points = browser.execute_script(_LABEL_POINTS_JS, spans, 10)
        assert all(p["on_video"] for p in points), points  # nothing (no "Video" badge) sits on a label
        browser.save_screenshot(str(tmp_path / "demo-side-by-side.png"))
        # the edited box is the one that was generated with
        layouts = sorted((work / "generate").glob("*/layout.json"), key=lambda p: p.stat().st_mtime)
        assert Layout.load(layouts[-1]).subjects[0].keyframes[0][1][2] == pytest.approx(0.3)
    finally:
        demo.close()
