"""The Dagster UI in a real browser: the webserver on loopback, the asset graph in headless Chromium.

Uses Debian's chromium and chromedriver (`make test` installs them when apt is available); no
browser or driver is downloaded. Screenshots of each group page: tests/artifacts/asset_group_<group>.png.
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

from seem_dagster.defs.assemble import build_defs

pytestmark = pytest.mark.slow  # real servers or pipelines; `make check` skips them

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
LOCATION = "seem_dagster.definitions"  # the code location `-m seem_dagster.definitions` creates


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
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=2200,2600"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    graph = build_defs().resolve_asset_graph()
    groups: dict[str, list[str]] = {}
    for key in graph.get_all_asset_keys():
        groups.setdefault(graph.get(key).group_name, []).append(key.to_user_string())
    missing: dict[str, list[str]] = {}
    try:
        # Each group's lineage page lays its assets out to fit the window (the global page starts
        # with groups folded and keeps its viewport, which made the whole-graph view flaky).
        for group, assets in sorted(groups.items()):
            driver.get(f"{webserver}/locations/__repository__@{LOCATION}/asset-groups/{group}/lineage")
            deadline, left = time.monotonic() + 120, assets
            while time.monotonic() < deadline:
                for button in driver.find_elements(By.XPATH, "//button[normalize-space()='Skip']"):
                    button.click()  # the first visit's newsletter dialog
                nodes = driver.find_element(By.TAG_NAME, "body").text
                left = [a for a in assets if a not in nodes]
                if not left and "Asset checks" in nodes:
                    break
                time.sleep(2)
            time.sleep(1)
            ARTIFACTS.mkdir(exist_ok=True)
            driver.save_screenshot(str(ARTIFACTS / f"asset_group_{group}.png"))
            if left:
                missing[group] = left
    finally:
        driver.quit()
    assert set(groups) == {"ingest", "episodic", "graph", "query", "memory"}
    assert not missing, f"not drawn on their group's lineage page: {missing}"
    assert all((ARTIFACTS / f"asset_group_{g}.png").stat().st_size > 10_000 for g in groups)
