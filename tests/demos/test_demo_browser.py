"""The demo in a real headless Chromium (Debian's chromium + chromium-driver, driven by Selenium).

It loads the page, plans a layout, edits a box in the table, runs one generation, waits for the video and
saves a screenshot under the test's temp dir.
"""

from __future__ import annotations

import shutil
import socket
import time
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


def test_browser_edit_a_box_and_generate(browser, tmp_path):
    from selenium.common.exceptions import ElementClickInterceptedException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    from demos.app import build_demo, launch
    from demos.config import DemoConfig, DemoGenerationConfig, DemoQAConfig

    cfg = DemoConfig(
        port=_free_port(),
        work_dir=str(tmp_path / "work"),
        generation=DemoGenerationConfig(
            preset="tiny",
            prompt="a red cat on the left of a blue dog",
            overrides=["height=32", "width=32", "frames=9", "steps=2"],
            max_steps=4,
        ),
        qa=DemoQAConfig(synthetic_videos=0),
    )
    demo = build_demo(cfg)
    _, url, _ = launch(demo, cfg, prevent_thread_lock=True)
    try:
        wait = WebDriverWait(browser, 240)
        # a click retried while Gradio's translucent status overlay still covers the button (page load, or a
        # slow event on a loaded machine): "clickable" means displayed and enabled, not uncovered
        clicks = WebDriverWait(browser, 240, ignored_exceptions=(ElementClickInterceptedException,))
        browser.get(url)
        wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, "#gen-plan")))
        clicks.until(lambda d: d.find_element(By.CSS_SELECTOR, "#gen-plan").click() or True)
        # the planner fills the table: two subject rows
        wait.until(lambda d: "blue dog" in d.find_element(By.CSS_SELECTOR, "#gen-boxes").text)
        # edit x1 of the first row (columns: subject, t, x0, y0, x1, y1): the first subject's box ends at 0.3
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
        clicks.until(lambda d: d.find_element(By.CSS_SELECTOR, "#gen-run").click() or True)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#gen-video video[src]"))
        src = browser.find_element(By.CSS_SELECTOR, "#gen-video video[src]").get_attribute("src")
        assert src.startswith(url.rstrip("/"))  # served by the app itself
        shot = tmp_path / "demo-generation.png"
        time.sleep(1)
        browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        # the edited box is the one that was generated with
        layouts = sorted(
            (Path(cfg.work_dir) / "generate").glob("*/layout.json"), key=lambda p: p.stat().st_mtime
        )
        from generation.layout import Layout

        assert layouts and Layout.load(layouts[-1]).subjects[0].keyframes[0][1][2] == pytest.approx(0.3)
    finally:
        demo.close()
