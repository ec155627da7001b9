"""The reader's pages in headless Chromium (Debian's chromium, driven by Playwright), at a
desktop width (1400 px) and a phone width (390 px), against the real `gputalks serve`.

Screenshots of each width go to the session's temporary directory; with
GPUTALKS_SCREENSHOTS=docs/screenshots they refresh the ones the README shows."""

import os
import shutil
import sqlite3
from pathlib import Path

import feedparser
import httpx
import pytest

from tests.conftest import gputalks_serve

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed")]
INJECTED = 'Watch this <img src=x onerror="window.__xss = 1"> <script>window.__xss = 2</script>'
WIDTHS = [1400, 390]
VIDEO_STAND_IN = ("<!doctype html><title>video</title><body style='margin:0;display:grid;place-items:center;"
                  "height:100vh;background:#111;color:#ddd;font:20px sans-serif'>&#9654; YouTube player</body>")
# Every kind of page a reader reaches, and every canned query with the parameters it asks for.
PAGES = ["/", "/search?q=flash+attention", "/search?q=", "/talks/talks", "/talks/talks?_search=cuda",
         "/talks/talks/gpumode-lecture-012", "/talks/talks/gtc-gtcspring21-s31151", "/talks/speakers/stephen-jones",
         "/series/GPU%20MODE", "/event/GTC%202024", "/talks", "/talks/talk_changes", "/talks/links",
         "/talks/search_talks?q=flash+attention", "/talks/search_talks?q=", "/talks/talks_by_speaker?speaker=Stephen+Jones",
         "/talks/longest_talks_of_series?series=GPU+MODE", "/talks/talks_added_recently?days=36500",
         "/talks/gpu_mode_lectures_without_video", "/talks/learning_path_hours", "/talks/new_talks",
         "/talks/talk_updates", "/talks/search_inside_talks?q=memory&talk="]


@pytest.fixture(scope="module")
def server(tmp_path_factory, snapshot_db_path):
    path = tmp_path_factory.mktemp("served") / "talks.db"
    with sqlite3.connect(snapshot_db_path) as source, sqlite3.connect(path) as copy:
        source.backup(copy)
        copy.execute("update talks set description = ? where id = 'gpumode-lecture-012'", [INJECTED])
    with gputalks_serve(path) as served:
        yield served.base


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        yield browser
        browser.close()


@pytest.fixture(params=WIDTHS, ids=lambda width: f"{width}px")
def page(browser, request):
    """A page at one width. Nothing leaves 127.0.0.1: the video embed answers an empty page here.
    Any console error or uncaught exception fails the test."""
    context = browser.new_context(viewport={"width": request.param, "height": 900})
    context.route("https://www.youtube-nocookie.com/**", lambda route: route.fulfill(
        status=200, content_type="text/html", body=VIDEO_STAND_IN))
    page = context.new_page()
    errors = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.width = request.param
    yield page
    context.close()
    assert errors == []


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    chosen = os.environ.get("GPUTALKS_SCREENSHOTS")
    return Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")


@pytest.fixture
def screenshot(screenshots):
    def take(page, name: str) -> None:
        screenshots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshots / f"{name}-{page.width}.png"), full_page=page.width < 1000)

    return take


def test_search_from_the_home_page_ranks_titles_first(server, page, screenshot):
    page.goto(server + "/")
    page.fill("#gt-q", "flash attention")
    page.press("#gt-q", "Enter")
    page.wait_for_url("**/search?q=flash+attention")
    titles = page.locator(".gt-results .gt-result-title").all_inner_texts()
    assert titles[0] == "Flash Attention" and "How FlashAttention 4 Works" in titles
    assert page.title() == "flash attention · Search GPU talks"
    screenshot(page, "search")
    page.click("text=Flash Attention")
    page.wait_for_url("**/talks/talks/gpumode-lecture-012")


def test_a_facet_click_filters_the_talks(server, page, snapshot_db, screenshot):
    expected = snapshot_db.execute("select count(*) from talks, json_each(talks.topics) "
                                   "where json_each.value = 'Attention'").fetchone()[0]
    page.goto(server + "/talks/talks")
    assert "150 rows" in page.inner_text("h3")
    if page.width < 577:  # on a phone the facets are one tap away
        assert not page.locator("#facet-topics").is_visible()
        page.click("details.gt-filters > summary")
    page.locator("#facet-topics a", has_text="Attention").first.click()
    page.wait_for_url("**_item_topics=Attention**")
    assert page.inner_text("h3").startswith(f"{expected} rows")
    assert "Flash Attention" in page.locator("td.col-title").all_inner_texts()
    screenshot(page, "talks")


def test_the_talk_page_has_its_video_and_links(server, page, screenshot):
    page.goto(server + "/talks/talks/gpumode-lecture-012")
    assert page.title() == "Flash Attention · GPU talks"
    assert page.inner_text("h1") == "Flash Attention"
    assert "Thomas Viehmann" in page.inner_text(".gt-meta") and "1 h 12" in page.inner_text(".gt-meta")
    video = page.locator(".gt-video iframe")
    assert video.get_attribute("src") == "https://www.youtube-nocookie.com/embed/zEuwuCTEf_0"
    box = video.bounding_box()
    assert box["width"] <= page.width and abs(box["width"] / box["height"] - 16 / 9) < 0.02
    assert page.locator(".gt-links a").all_inner_texts() == ["Lecture folder", "README section"]
    assert "Watch this" in page.inner_text(".gt-description")
    screenshot(page, "talk")
    page.click(".gt-meta a:has-text('Thomas Viehmann')")
    page.wait_for_url("**/talks/speakers/thomas-viehmann")


def test_the_first_result_is_on_the_first_screen(server, page):
    """At 390 px (an 844 px screen) and at 1400 px, the first search result and the first talk of
    the talk list the home page links to are within the first screen; the home page shows the
    readers' way in, not database tables."""
    page.goto(server + "/")
    assert "rows in" not in page.inner_text(".content") and page.locator(".gt-home-topics a").count() >= 10
    page.click("text=all the talks")
    first = page.locator("tbody tr").first.bounding_box()
    assert first["y"] < (844 if page.width < 577 else 1100), first  # at 1400 px the facets come first
    if page.width < 577:  # a card shows only the fields it has
        empty = page.evaluate("""() => [...document.querySelectorAll('tbody td')]
            .filter(td => td.offsetParent !== null && td.innerText.trim() === '').length""")
        assert empty == 0
    page.goto(server + "/search?q=cuda")
    first = page.locator(".gt-results li").first.bounding_box()
    assert first["y"] < 844, first


def test_the_speaker_page_lists_their_talks(server, page, screenshot):
    page.goto(server + "/talks/speakers/stephen-jones")
    assert page.inner_text("h1") == "Stephen Jones"
    assert page.locator(".gt-talk-list li").count() == 7
    screenshot(page, "speaker")


def test_no_page_is_wider_than_the_viewport(server, page):
    too_wide = {}
    for path in PAGES:
        response = page.goto(server + path)
        assert response.status == 200, path
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > page.width:
            too_wide[path] = width
    assert too_wide == {}


def test_card_labels_name_the_values_under_them(server, page):
    """At phone width each row is a card whose cell labels come from CSS; they must name their own column."""
    if page.width > 576:
        pytest.skip("cards are the phone layout")
    for path in ["/talks/talks", "/talks/talks?_sort=id", "/talks/talks?_col=title&_col=duration_s",
                 "/talks/talks?_all_columns=1", "/talks/speakers"]:
        page.goto(server + path)
        headers = [h.strip().rstrip("▲▼ \u00a0") for h in page.locator("table.rows-and-columns thead th").all_inner_texts()]
        labels = page.evaluate("""() => [...document.querySelectorAll('table.rows-and-columns tbody tr:first-child td')]
            .map(td => getComputedStyle(td, '::before').content)""")
        assert labels == [f'"{h}"' for h in headers], path
    page.goto(server + "/talks/talks?series=GPU+MODE&number=12")
    cards = dict(zip(page.evaluate("""() => [...document.querySelectorAll('tbody td')].map(
        td => getComputedStyle(td, '::before').content.replaceAll('"', ''))"""),
        page.locator("tbody td").all_inner_texts()))
    assert cards["Title"] == "Flash Attention" and cards["Duration"] == "1 h 12 min" and cards["Speakers"] == "Thomas Viehmann"


def test_feeds_parse(server):
    feed = feedparser.parse(httpx.get(server + "/talks/new_talks.atom").content)
    assert not feed.bozo and feed.version == "atom10" and len(feed.entries) == 50  # the newest 50 of 150
    updates = feedparser.parse(httpx.get(server + "/talks/talk_updates.atom").content)
    assert not updates.bozo and len(updates.entries) == 50
    for path in ("/topic/CUTLASS%20%2F%20CuTe.atom", "/series/GPU%20MODE.atom", "/speaker/stephen-jones.atom"):
        followed = feedparser.parse(httpx.get(server + path).content)
        assert not followed.bozo and followed.version == "atom10" and followed.entries, path


def test_injected_description_does_not_execute(server, page):
    page.goto(server + "/talks/talks/gpumode-lecture-012")
    assert "Watch this" in page.inner_text(".gt-description")
    page.goto(server + "/talks/talks?_search=flash&_all_columns=1")
    page.wait_for_timeout(300)
    assert page.evaluate("window.__xss") is None
    assert page.locator("img[onerror]").count() == 0
