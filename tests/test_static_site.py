"""`gputalks publish pages`: the snapshot index as a static site, its links relative, its
search (Pagefind) working in Chromium from plain files served under a sub-path."""

from __future__ import annotations

import functools
import shutil
import sqlite3
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from bs4 import BeautifulSoup
from click.testing import CliRunner

from gputalks.cli import cli

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
INJECTED = '<img src=x onerror="window.__xss = 1"> <script>window.__xss = 2</script>'


@pytest.fixture(scope="module")
def site(snapshot_db_path, tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("pages")
    db_path = work / "talks.db"
    with sqlite3.connect(snapshot_db_path) as source, sqlite3.connect(db_path) as copy:
        source.backup(copy)
        copy.execute("update talks set description = ? where id = 'gpumode-lecture-012'", [INJECTED])
    out = work / "docs" / "talks"  # a sub-path of a docs site
    out.parent.mkdir()
    result = CliRunner().invoke(cli, ["publish", "pages", "--db", str(db_path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "(150 talks)" in result.output
    return out


def test_every_page_and_every_relative_link_is_there(site):
    talks = list((site / "talks").glob("*.html"))
    assert len(talks) == 150 and (site / "topics" / "attention.html").is_file()
    assert (site / "speakers" / "stephen-jones.html").is_file() and (site / "pagefind").is_dir()
    broken = []
    for page in site.rglob("*.html"):
        for link in BeautifulSoup(page.read_text(), "html.parser").select("a[href], link[href], script[src]"):
            target = link.get("href") or link.get("src")
            if urlsplit(target).scheme or target.startswith("#"):
                continue
            assert not target.startswith("/"), f"{page}: {target} is not relative"
            if not (page.parent / unquote(urlsplit(target).path)).exists():
                broken.append(f"{page.relative_to(site)} -> {target}")
    assert broken == []


def test_scraped_text_is_escaped(site):
    page = (site / "talks" / "gpumode-lecture-012.html").read_text()
    assert "<script>window.__xss" not in page and "onerror=" not in page.replace("&quot;", '"').split("<body")[0]
    assert 'onerror="window' not in page


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed")
def test_search_finds_flash_attention_in_chromium_from_the_files(site):
    from playwright.sync_api import sync_playwright

    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(site.parent.parent))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"])
            page = browser.new_page(viewport={"width": 390, "height": 844})
            port = server.server_address[1]
            page.goto(f"http://127.0.0.1:{port}/docs/talks/search.html?q=flash+attention")
            page.wait_for_selector(".pagefind-ui__result-link", timeout=15000)
            titles = page.locator(".pagefind-ui__result-link").all_inner_texts()
            assert "Flash Attention" in titles
            page.get_by_role("link", name="Flash Attention", exact=True).first.click()
            page.wait_for_url("**/docs/talks/talks/gpumode-lecture-012.html")
            assert page.evaluate("window.__xss") is None
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
