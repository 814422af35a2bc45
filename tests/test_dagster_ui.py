"""The Dagster UI in a real browser: the webserver on loopback, the asset graph in headless Chromium.

Uses Debian's chromium and chromedriver (`make test` installs them when apt is available); no
browser or driver is downloaded. The screenshot is kept in tests/artifacts/asset_graph.png.
"""

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from seem_dagster.definitions import build_defs

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def webserver(tmp_path):
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "SEEM_STORE": str(tmp_path / "store"),
           "SEEM_INBOX": str(tmp_path / "inbox")}
    (tmp_path / "home").mkdir()
    log = open(tmp_path / "webserver.log", "w")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port),
         "-m", "seem_dagster.definitions"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"dagster-webserver exited: {(tmp_path / 'webserver.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/server_info", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
        else:
            pytest.fail("dagster-webserver did not answer within 180 s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.mark.skipif(not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)),
                    reason=f"Debian chromium and chromium-driver are not installed ({CHROMIUM}, {CHROMEDRIVER}); "
                           "`make test` installs them with apt-get")
def test_asset_graph_shows_every_asset(webserver):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=2200,1300"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    assets = [key.to_user_string() for key in build_defs().resolve_asset_graph().get_all_asset_keys()]
    try:
        driver.get(f"{webserver}/asset-groups")
        # A first visit shows a newsletter dialog, and the graph starts with its groups folded:
        # unfold them (the UI remembers), then reload so the graph is laid out to fit the window.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for button in driver.find_elements(By.XPATH, "//button[normalize-space()='Skip']"):
                button.click()
            folded = driver.find_elements(By.CSS_SELECTOR, "[aria-label='unfold_more']")
            if folded:
                folded[0].click()
            elif driver.find_elements(By.CSS_SELECTOR, "[aria-label='unfold_less']"):
                break
            time.sleep(1)
        driver.refresh()
        deadline, missing = time.monotonic() + 120, assets
        while time.monotonic() < deadline:
            text = driver.find_element(By.TAG_NAME, "body").text
            missing = [a for a in assets if a not in text]
            if not missing:
                break
            # Nodes outside the view are not rendered: zoom out until the whole graph is in view.
            for zoom_out in driver.find_elements(By.CSS_SELECTOR, "[aria-label='zoom_out']")[:1]:
                zoom_out.click()
            time.sleep(2)
        for zoom_out in driver.find_elements(By.CSS_SELECTOR, "[aria-label='zoom_out']")[:1]:
            zoom_out.click()  # one step more, so the screenshot has a margin around the graph
        time.sleep(2)
        ARTIFACTS.mkdir(exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "asset_graph.png"))
    finally:
        driver.quit()
    assert not missing, f"not on the asset graph: {missing}"
    assert (ARTIFACTS / "asset_graph.png").stat().st_size > 10_000
