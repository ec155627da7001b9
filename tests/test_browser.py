"""The talks page in headless Chromium (Debian's chromium, driven by Playwright)."""

import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .conftest import REPO

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = REPO / "tests" / "artifacts"
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed")]
INJECTED = 'Watch this <img src=x onerror="window.__xss = 1"> <script>window.__xss = 2</script>'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory, snapshot_db_path):
    path = tmp_path_factory.mktemp("served") / "talks.db"
    with sqlite3.connect(snapshot_db_path) as source, sqlite3.connect(path) as copy:
        source.backup(copy)
        copy.execute("update talks set description = ? where id = 'gpumode-lecture-012'", [INJECTED])
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "gputalks.index.cli", "serve", "--db", str(path),
                                "--port", str(port)], cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            httpx.get(base + "/-/versions.json", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    yield base
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(scope="module")
def page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        yield page
        browser.close()


def test_search_the_talks_table(server, page):
    page.goto(server + "/talks/talks")
    assert "150 rows" in page.inner_text("h3")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "talks-page.png"), full_page=True)
    page.fill("#_search", "flash attention")
    page.press("#_search", "Enter")
    page.wait_for_url("**_search=flash+attention**")
    titles = page.locator("td.col-title").all_inner_texts()
    assert "Flash Attention" in titles
    assert page.locator("td.col-duration_s").first.inner_text().count(":") >= 1


def test_injected_description_does_not_execute(server, page):
    page.goto(server + "/talks/talks/gpumode-lecture-012")
    assert "Watch this" in page.inner_text(".gt-description")
    page.goto(server + "/talks/talks?_search=flash&_all_columns=1")
    page.wait_for_timeout(300)
    assert page.evaluate("window.__xss") is None
    assert page.locator("td.col-description img[onerror]").count() == 0
