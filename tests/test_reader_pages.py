"""The pages readers meet, through Datasette's in-process client on the snapshot's index:
ranked search, the talk, speaker, series and event pages, feeds, robots and sitemap."""

import asyncio
import sqlite3
import xml.etree.ElementTree as ElementTree
from dataclasses import replace

import feedparser
import pytest
import sqlite_utils
from bs4 import BeautifulSoup

from gputalks.project.settings import default_settings
from gputalks.index.pipeline import RefreshOptions, refresh

from tests.conftest import SNAPSHOT, copy_index
from tests.test_datasette import datasette_for, get

FREECODECAMP = "https://www.youtube.com/watch?v=86FAWCzIe_4"


@pytest.fixture(scope="module")
def ds(snapshot_db_path):
    return datasette_for(snapshot_db_path)


def soup_of(ds, path: str) -> BeautifulSoup:
    response = get(ds, path)
    assert response.status_code == 200, (path, response.status_code)
    return BeautifulSoup(response.text, "html.parser")


def result_titles(ds, query: str) -> list[str]:
    soup = soup_of(ds, f"/search?q={query}")
    return [a.get_text() for a in soup.select(".gt-results .gt-result-title")]


def test_search_ranks_titles_first_and_finds_compound_words(ds):
    titles = result_titles(ds, "flash+attention")
    assert titles[0] == "Flash Attention"
    assert "How FlashAttention 4 Works" in titles and "CUTLASS and Flash ATtention 3" in titles
    assert set(result_titles(ds, "flashattention")[:2]) == {"Flash Attention", "How FlashAttention 4 Works"}
    # speakers are searched, and each result links to the talk's page
    soup = soup_of(ds, "/search?q=Stephen+Jones")
    first = soup.select_one(".gt-results .gt-result-title")
    assert first["href"].startswith("/talks/talks/gtc-") and "Stephen Jones" in soup.select_one(".gt-results li").text


def test_search_talks_ranks_in_its_five_tiers(snapshot_db_path, tmp_path):
    """On the real index, with some talks gone and more than 50 title matches for a word: the
    talks whose title holds every word (shortest title first), then those holding every word
    anywhere, then those holding all but one, then those of the topics and concepts the words
    name, then those holding any word; gone talks never; 50 at most; each result says its tier."""
    from gputalks.search.functions import register

    path = copy_index(snapshot_db_path, tmp_path / "talks.db")
    with sqlite3.connect(path) as db:
        db.execute("update talks set gone_since = '2026-01-01' where id in ('gpumode-lecture-012', "
                   "'gtc-gtcspring21-s31151')")
        db.executemany("insert into talks (id, title, description) values (?, ?, ?)",
                       [(f"extra-{n}", f"CUDA kernel {'x' * (n % 7)} {n}", "kernel" * (n % 3))
                        for n in range(80)])
        db.execute("insert into talks_fts (talks_fts) values ('rebuild')")
    ds = datasette_for(path)
    sql = asyncio.run(ds.get_canned_query("talks", "search_talks", None))["sql"]
    index = sqlite_utils.Database(path)
    register(index.conn)

    def matching(query: str, mode: str) -> set[str]:
        return {row[0] for row in index.execute(
            "select t.id from talks_fts f join talks t on t.rowid = f.rowid where talks_fts match "
            "gputalks_search(?, ?) and t.gone_since is null", [query, mode])}

    for query in ["flash attention", "kernel", "cuda kernel", "Stephen Jones", "memory", "energy usage",
                  "tensor cores", "matmul", "GTC 2024", "zzz", "", '"unbalanced', "talk to each other"]:
        rows = index.execute(sql, {"q": query}).fetchall()
        found = [(row[0], row[1]) for row in rows]
        in_title, every, most, related, some = (matching(query, mode)
                                                for mode in ("title", "every", "most", "related", "some"))
        assert in_title <= every <= some and most <= some and related <= some
        tiers = [0 if talk in in_title else 1 if talk in every else 2 if talk in most else 3 if talk in related else 4
                 for talk, _ in found]
        assert tiers == sorted(tiers) == [row[-1] for row in rows], query
        lengths = [len(title) for (_, title), tier in zip(found, tiers) if tier == 0]
        assert lengths == sorted(lengths), query
        assert len(found) == min(50, len(some)) and len({talk for talk, _ in found}) == len(found), query
        if len(in_title) < 50:
            assert {talk for talk, _ in found} >= in_title, query
    assert len(index.execute(sql, {"q": "kernel"}).fetchall()) == 50
    assert "Flash Attention" not in [row[1] for row in index.execute(sql, {"q": "flash attention"})]


def test_search_highlights_the_snippet(ds):
    soup = soup_of(ds, "/search?q=energy+usage")
    first = soup.select_one(".gt-results li")
    assert first.select_one(".gt-result-title")["href"] == "/talks/talks/gtc-gtc24-s62419"
    assert {m.get_text() for m in first.select(".gt-excerpt mark")} == {"energy", "usage"}
    assert "also <mark>energy</mark> <mark>usage</mark>" in str(first.select_one(".gt-excerpt"))


@pytest.mark.parametrize("query", ["", "%20%20", "%22", "%22unbalanced", "NEAR(", "AND+OR+NOT", "*", "a%22b%27c"])
def test_any_query_answers_200_with_a_message(ds, query):
    soup = soup_of(ds, f"/search?q={query}")
    assert soup.select_one(".gt-message") or soup.select(".gt-results li")
    for canned in (f"/talks/search_talks?q={query}", f"/talks/search_inside_talks?q={query}&talk="):
        soup = soup_of(ds, canned)
        assert soup.select_one(".gt-message") or soup.select("table.rows-and-columns tbody tr"), canned


def test_empty_canned_search_says_what_to_do(ds):
    soup = soup_of(ds, "/talks/search_talks?q=")
    assert "Type one or more words" in soup.select_one(".gt-message").get_text()
    assert soup.title.get_text() == "Search talks, ranked by relevance · GPU talks"
    assert soup.select_one("textarea") is None  # the SQL is hidden


def test_the_talk_page_has_everything_in_one_page(ds):
    soup = soup_of(ds, "/talks/talks/gpumode-lecture-012")
    assert soup.title.get_text() == "Flash Attention · GPU talks"
    assert soup.select_one("h1").get_text() == "Flash Attention"
    meta = soup.select_one(".gt-meta")
    assert [(a.get_text(), a["href"]) for a in meta.select("a")] == [
        ("Thomas Viehmann", "/talks/speakers/thomas-viehmann"), ("GPU MODE", "/series/GPU%20MODE")]
    assert "#12" in meta.get_text() and "1 h 12" in meta.get_text()
    assert soup.select_one(".gt-video iframe")["src"] == "https://www.youtube-nocookie.com/embed/zEuwuCTEf_0"
    assert [(a.get_text(), a["href"]) for a in soup.select(".gt-links a")] == [
        ("Lecture folder", "https://github.com/gpu-mode/lectures/tree/main/lecture_012"),
        ("README section", "https://github.com/gpu-mode/lectures#lecture-12-flash-attention")]
    assert [a.get_text() for a in soup.select(".gt-topics a")] == ["Attention"]
    provenance = soup.select_one(".gt-provenance").get_text()
    assert "duration from YouTube" in provenance and "title from the gpu-mode/lectures README" in provenance
    assert "field_sources" not in soup.get_text()  # a readable note, not JSON


def test_the_talk_page_links_to_its_raw_row_and_an_unknown_talk_is_a_404(ds, snapshot_db):
    soup = soup_of(ds, "/talks/talks/gpumode-lecture-012")
    json_link = next(a["href"] for a in soup.select(".gt-provenance a") if a.get_text() == "JSON")
    row = get(ds, json_link).json()
    assert row["rows"] == [list(snapshot_db.execute("select * from talks where id = 'gpumode-lecture-012'")
                                .fetchone())]
    missing = get(ds, "/talks/talks/gpumode-lecture-999")
    assert missing.status_code == 404 and "No talk &#39;gpumode-lecture-999&#39;" in missing.text


def test_a_gtc_talk_page_has_its_description_and_on_demand_link(ds, snapshot_db):
    soup = soup_of(ds, "/talks/talks/gtc-gtcspring21-s31151")
    assert soup.select_one("h1").get_text() == "How GPU Computing Works"
    assert "Stephen Jones" in soup.select_one(".gt-meta").get_text()
    links = {a.get_text(): a["href"] for a in soup.select(".gt-links a")}
    ondemand = snapshot_db["talks"].get("gtc-gtcspring21-s31151")["ondemand_url"]
    assert links["NVIDIA On-Demand"] == ondemand
    assert soup.select_one(".gt-description .talk-description p")  # rendered Markdown


def test_lecture_75_lists_both_slides(ds, snapshot_db):
    slides = [r["url"] for r in snapshot_db.query(
        "select url from links where talk_id = 'gpumode-lecture-075' and kind = 'slides'")]
    assert len(slides) == 2
    soup = soup_of(ds, "/talks/talks/gpumode-lecture-075")
    assert sorted(a["href"] for a in soup.select(".gt-links a") if a.get_text() == "Slides") == sorted(slides)


def test_speaker_page_lists_their_talks_with_the_total(ds, snapshot_db):
    soup = soup_of(ds, "/talks/speakers/stephen-jones")
    assert soup.select_one("h1").get_text() == "Stephen Jones"
    talks = soup.select(".gt-talk-list li a")
    assert len(talks) == 7 and "How GPU Computing Works" in [a.get_text() for a in talks]
    seconds, timed = snapshot_db.execute(
        "select sum(duration_s), count(duration_s) from talks t join talk_speakers ts on ts.talk_id = t.id "
        "where ts.speaker_id = 'stephen-jones'").fetchone()
    minutes = round(seconds / 60)
    assert timed == 3
    assert f"7 talks, {minutes // 60} h {minutes % 60:02d} min in all (the 3 of 7 with a known length)" in \
        " ".join(soup.get_text().split())
    # look-alike titles are told apart by their event
    assert all("GTC" in li.select_one(".gt-small").get_text() for li in soup.select(".gt-talk-list li"))


def test_speaker_page_links_and_its_raw_row(ds, snapshot_db):
    """The page's links lead somewhere real: each talk's page, the speaker's row as JSON; an
    unknown speaker is a 404 page, not an error."""
    soup = soup_of(ds, "/talks/speakers/stephen-jones")
    first = soup.select_one(".gt-talk-list li a")["href"]
    assert soup_of(ds, first).select_one("h1.gt-title").get_text() == first_title(snapshot_db)
    row = get(ds, soup.select_one(".gt-provenance a")["href"]).json()
    assert row["rows"] == [list(snapshot_db.execute(
        "select * from speakers where id = 'stephen-jones'").fetchone())]
    missing = get(ds, "/talks/speakers/nobody-at-all")
    assert missing.status_code == 404 and "No speaker &#39;nobody-at-all&#39;" in missing.text


def first_title(db) -> str:
    return db.execute("select t.title from talk_speakers ts join talks t on t.id = ts.talk_id "
                      "where ts.speaker_id = 'stephen-jones' order by t.date desc limit 1").fetchone()[0]


def test_a_speaker_profile_links_only_to_the_web(snapshot_db_path, tmp_path):
    path = copy_index(snapshot_db_path, tmp_path / "talks.db")
    with sqlite3.connect(path) as db:
        db.execute("update speakers set profile_url = 'javascript:alert(1)', affiliation = '<b>NVIDIA</b>' "
                   "where id = 'stephen-jones'")
    response = get(datasette_for(path), "/talks/speakers/stephen-jones")
    assert "javascript:" not in response.text and "&lt;b&gt;NVIDIA&lt;/b&gt;" in response.text


def test_a_prolific_speaker_page_lists_the_newest_50_and_counts_them_all(snapshot_db_path, tmp_path):
    """The count and hours cover every talk, though the list stops at the 50 newest."""
    path = copy_index(snapshot_db_path, tmp_path / "talks.db")
    with sqlite3.connect(path) as db:
        db.executemany("insert into talks (id, title, date, duration_s) values (?, ?, ?, 600)",
                       [(f"extra-{n}", f"Extra talk {n}", f"2030-01-{n % 28 + 1:02d}") for n in range(60)])
        db.executemany("insert into talk_speakers (talk_id, speaker_id, position) values (?, 'stephen-jones', 0)",
                       [(f"extra-{n}",) for n in range(60)])
        seconds = db.execute("select sum(duration_s) from talks t join talk_speakers ts on ts.talk_id = t.id "
                             "where ts.speaker_id = 'stephen-jones'").fetchone()[0]
    soup = soup_of(datasette_for(path), "/talks/speakers/stephen-jones")
    listed = [a.get_text() for a in soup.select(".gt-talk-list li a")]
    assert len(listed) == 50 and all(title.startswith("Extra talk") for title in listed)  # newest first
    minutes = round(seconds / 60)
    assert f"67 talks, {minutes // 60} h {minutes % 60:02d} min in all (the 63 of 67 with a known length)" in \
        " ".join(soup.get_text().split())
    assert "The 50 newest below" in soup.get_text()


@pytest.mark.parametrize("path, crumbs", [
    ("/talks/talks/gpumode-lecture-012", ["/", "/talks", "/talks/talks"]),
    ("/talks/speakers/stephen-jones", ["/", "/talks", "/talks/speakers"]),
    ("/series/GPU%20MODE", ["/"]), ("/search?q=cuda", ["/"]), ("/talks/talks/no-such-talk", ["/"])])
def test_reader_pages_have_the_crumbs_and_the_data_license(ds, path, crumbs):
    """Like Datasette's own pages: the way back up, and whose data this is (metadata.json)."""
    response = get(ds, path)
    soup = BeautifulSoup(response.text, "html.parser")
    assert [a["href"] for a in soup.select(".crumbs a")] == crumbs
    footer = " ".join(soup.select_one("footer").get_text().split())
    assert "Data license: Code: Apache-2.0" in footer and "Data source: gpu-mode/lectures" in footer


def test_series_and_event_pages(ds):
    gpu_mode = soup_of(ds, "/series/GPU%20MODE")
    assert gpu_mode.select_one("h1").get_text() == "GPU MODE"
    assert len(gpu_mode.select(".gt-talk-list li")) == 100  # the newest 100, and all of them counted
    assert "120 talks of this series" in gpu_mode.get_text() and "the 100 newest below" in gpu_mode.get_text()
    gtc = soup_of(ds, "/event/GTC%202024")
    assert len(gtc.select(".gt-talk-list li")) == 11
    assert get(ds, "/series/No%20such%20series").status_code == 404


def test_topics_facet_and_labels_on_the_talks_page(ds):
    soup = soup_of(ds, "/talks/talks")
    assert "Topics" in [h.get_text().strip() for h in soup.select("thead th")]
    facet = soup.select_one('[data-column="topics"]')
    assert facet is not None and "Attention" in facet.get_text()
    years = [li.select_one("a").get_text() for li in soup.select('[data-column="year"] li')
             if li.select_one("a") and li.select_one("a").get_text().isdigit()]
    assert years == sorted(years, reverse=True)  # natural order, newest first
    buckets = [a.get_text() for a in soup.select('[data-column="duration_bucket"] li a')]
    order = ["< 30 min", "30-60 min", "1-2 h", "> 2 h"]
    assert [b for b in order if b in buckets] == [b for b in buckets if b in order]


def test_every_canned_query_has_a_title_and_hides_its_sql(ds):
    queries = get(ds, "/talks.json").json()["queries"]
    assert len(queries) >= 9
    for query in queries:
        assert query["title"] and query["hide_sql"], query["name"]


def test_robots_and_sitemap(ds):
    robots = get(ds, "/robots.txt").text
    assert "Disallow: /*.json" in robots and "Disallow: /talks" not in robots
    sitemap = ElementTree.fromstring(get(ds, "/sitemap.xml").content)
    locations = [e.text for e in sitemap.iter("{http://www.sitemaps.org/schemas/sitemap/0.9}loc")]
    assert any(loc.endswith("/talks/talks/gpumode-lecture-012") for loc in locations)
    assert len([loc for loc in locations if "/talks/talks/" in loc]) == 150


def test_new_talks_feed_has_one_entry_per_talk_of_the_last_run(tmp_path, config):
    """A first run without the freeCodeCamp course, then a run that adds it: the feed holds that talk only."""
    path = tmp_path / "talks.db"
    fewer = dict(config, youtube=dict(config["youtube"], follow=[
        f for f in config["youtube"]["follow"] if f["url"] != FREECODECAMP]))
    for sources in (fewer, config):
        report = refresh(path, replace(default_settings(), sources=sources), RefreshOptions(snapshot=SNAPSHOT))
        assert report.exit_code == 0, report.problems
    with sqlite3.connect(path) as db:
        added = db.execute("select title from talks where id = 'youtube-86FAWCzIe_4'").fetchone()[0]
    ds = datasette_for(path)
    feed = feedparser.parse(get(ds, "/talks/new_talks.atom").content)
    assert not feed.bozo, feed.bozo_exception
    assert feed.version == "atom10"
    assert [entry.title for entry in feed.entries] == [added]
    assert feed.entries[0].link == FREECODECAMP
    updates = feedparser.parse(get(ds, "/talks/talk_updates.atom").content)
    assert not updates.bozo and updates.entries[0].title == f"{added} (new talk)"


def test_a_topic_page_lists_its_talks_and_links_its_feed(ds, snapshot_db):
    """A talk's topic chip opens /topic/<name>: the topic's talks, newest first, counted, with an
    Atom feed of them; the talks are those whose topics hold the name."""
    soup = soup_of(ds, "/talks/talks/gpumode-lecture-012")
    chip = next(a for a in soup.select(".gt-topics a.gt-topic") if a.get_text() == "Attention")
    assert chip["href"] == "/topic/Attention"
    expected = {row[0] for row in snapshot_db.execute(
        "select t.id from talks t, json_each(t.topics) j where j.value = 'Attention' and t.gone_since is null")}
    page = soup_of(ds, chip["href"])
    listed = {a["href"].rsplit("/", 1)[1] for a in page.select(".gt-talk-list li a")}
    assert listed == expected and f"{len(expected)} talks on this topic" in page.get_text()
    feed_link = page.select_one('link[rel="alternate"][type="application/atom+xml"]')["href"]
    feed = feedparser.parse(get(ds, feed_link).content)
    assert not feed.bozo and {e.id.removeprefix("gputalks:talk:") for e in feed.entries} == expected
    slash = soup_of(ds, "/topic/CUTLASS%20%2F%20CuTe")
    assert "talks on this topic" in slash.get_text()
    assert get(ds, "/topic/No%20such%20topic").status_code == 404
    assert get(ds, "/topic/No%20such%20topic.atom").status_code == 404


def test_search_results_link_their_topics(ds):
    soup = soup_of(ds, "/search?q=flash+attention")
    chips = soup.select(".gt-results li")[0].select("a.gt-topic")
    assert chips and all(a["href"].startswith("/topic/") for a in chips)


@pytest.mark.parametrize("query, needs", [("talks_by_speaker", "speaker"), ("learning_path_hours", "path"),
                                          ("longest_talks_of_series", "series")])
def test_a_canned_query_without_its_value_says_what_it_needs(ds, query, needs):
    soup = soup_of(ds, f"/talks/{query}")
    assert f"This query needs {needs}" in soup.select_one(".gt-message").get_text()
    assert get(ds, f"/talks/{query}.json?_shape=array").json() == []


def test_talks_by_speaker_lists_each_talk_once(ds):
    rows = get(ds, "/talks/talks_by_speaker.json?speaker=Jones&_shape=array").json()
    assert len(rows) >= 7 and len({row["id"] for row in rows}) == len(rows)  # Stephen Jones's 7, and any other Jones
    path = get(ds, "/talks/learning_path_hours.json?path=viewing-path&_shape=array").json()
    assert path[-1]["step"] == "(total)" and path[-1]["talks"] > 0
