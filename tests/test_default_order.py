"""The talks' default order, newest first, by `newest_first`: never null, never tied, ascending,
so Datasette's next page of it is a search of one index, not a read of the index from its start."""

import asyncio
import re
import sqlite3

import pytest
import sqlite_utils
from bs4 import BeautifulSoup
from datasette.tracer import capture_traces

from gputalks.index.facet_keys import FACET_KEYS
from gputalks.index.order import newest_first
from gputalks.index.schema import ensure_schema


def get(ds, path: str):
    async def inner():
        return await ds.client.get(path)
    return asyncio.run(inner())


def test_newest_first_orders_dates_newest_first_and_the_undated_last():
    """Newest first, as the date and then the id sorted descending: full dates before the month
    and the year alone, the undated last, later lectures first."""
    talks = [(None, "b"), ("2023-12-01", "x"), ("2024", "y"), ("2024-03-18", "z"), ("2024-03-18", "a"),
             (None, "gpumode-lecture-1"), ("2024-03", "m"), ("2019-07-04", "q"), (None, "gpumode-lecture-12"),
             (None, "gpumode-lecture-018"), (None, "youtube-Ab_-9")]
    ordered = sorted(talks, key=lambda talk: newest_first(*talk))
    assert ordered == sorted(talks, key=lambda talk: (talk[0] is not None, talk[0] or "", talk[1]), reverse=True)
    assert ordered[:4] == [("2024-03-18", "z"), ("2024-03-18", "a"), ("2024-03", "m"), ("2024", "y")]
    assert ordered[-5:] == [(None, "youtube-Ab_-9"), (None, "gpumode-lecture-12"), (None, "gpumode-lecture-1"),
                            (None, "gpumode-lecture-018"), (None, "b")]
    assert newest_first("2024-03-18", "gtc-s62400") == "7975-96-81~I5Mz6swuyy~"


def test_every_talk_is_keyed_by_its_date_and_id(snapshot_db):
    rows = list(snapshot_db.query("select id, date, newest_first from talks"))
    assert len(rows) == 150 and all(row["newest_first"] == newest_first(row["date"], row["id"]) for row in rows)
    dated = [row["id"] for row in snapshot_db.query("select id from talks where date is not null order by date desc")]
    assert len(dated) >= 2 and [row["id"] for row in snapshot_db.query(
        "select id from talks order by newest_first limit ?", [len(dated)])] == dated


def test_the_next_page_of_the_default_order_searches_its_index(ds, snapshot_db_path):
    first = get(ds, "/talks/talks.json?_size=20&_col=date").json()
    traces: list = []

    async def traced(path):
        with capture_traces(traces):  # the tracer keys its traces by the asyncio task
            return await ds.client.get(path)
    second = asyncio.run(traced(first["next_url"].split("localhost", 1)[-1]))
    assert second.status_code == 200 and len(second.json()["rows"]) == 20
    page_sql = [t for t in traces if t.get("type") == "sql" and "order by newest_first" in t["sql"]]
    assert page_sql
    conn = sqlite3.connect(snapshot_db_path)
    plan = " ".join(row[3] for row in conn.execute("explain query plan " + page_sql[0]["sql"], page_sql[0]["params"]))
    assert plan.startswith("SEARCH talks USING INDEX idx_talks_newest_first_id (newest_first>?)"), plan


def test_the_date_header_gives_the_newest_then_the_oldest_first(ds, snapshot_db):
    def header(path):
        soup = BeautifulSoup(get(ds, path).text, "html.parser")
        link = soup.select_one("th.col-date a")
        return link.get_text(), link["href"], [td.get_text(strip=True) for td in soup.select("td.col-date")]

    label, oldest_url, dates = header("/talks/talks")
    assert label == "Date\xa0▲" and "_sort_desc=newest_first" in oldest_url
    newest = [row["date"] for row in snapshot_db.query("select date from talks where date is not null order by date desc")]
    assert dates[:len(newest)] == newest
    label, newest_url, dates = header(oldest_url)
    assert label == "Date\xa0▼" and "_sort=newest_first" in newest_url and "_sort_desc" not in newest_url
    assert len(dates) == 50 and not any(dates)  # the undated first, as a date sort puts its nulls
    assert header("/talks/talks?_sort=alphabetical")[1].endswith("_sort=newest_first")


def test_an_index_from_before_newest_first_gets_it_from_the_schema_step(fresh_db_path):
    """An index written with `date_key` (the date, then the id, sorted descending) is given
    `newest_first` and a talk_items keyed by it, before anything reads or writes the talks."""
    conn = sqlite3.connect(fresh_db_path)
    triggers = conn.execute("select name, sql from sqlite_master where type = 'trigger' and sql like '%newest_first%'").fetchall()
    assert len(triggers) == 3
    conn.executescript("".join(f"drop trigger {name};" for name, _ in triggers) + f"""
        drop index idx_talks_newest_first_id;
        drop index idx_talks_series_newest_first_id;
        drop index idx_talks_event_newest_first_id;
        alter table talks drop column newest_first;
        alter table talks add column date_key text;
        update talks set date_key = coalesce(date, '') || ' ' || id;
        create index idx_talks_date_key_id on talks (date_key desc, id);
        drop table {FACET_KEYS['items']};
        create table {FACET_KEYS['items']} (code integer not null, date_key text not null, talk integer not null,
                                            primary key (code, date_key, talk)) without rowid;""")
    for _, sql in triggers:
        conn.execute(sql.replace("newest_first", "date_key"))
    conn.commit()
    conn.close()
    db = sqlite_utils.Database(fresh_db_path)
    ensure_schema(db)
    rows = list(db.query("select id, date, newest_first from talks"))
    assert len(rows) == 150 and all(row["newest_first"] == newest_first(row["date"], row["id"]) for row in rows)
    assert "newest_first" in db.table(FACET_KEYS["items"]).columns_dict
    assert db.execute(f"select count(*) from {FACET_KEYS['items']}").fetchone()[0] >= 150
    assert "idx_talks_date_key_id" not in [index.name for index in db.table("talks").indexes]
    ensure_schema(db)  # and again: nothing to do
    assert db.execute("select count(*) from talks where newest_first is null").fetchone()[0] == 0


@pytest.mark.parametrize("query", ["", "series=GPU+MODE&_sort=longest_first", "_search=kernel&_sort=alphabetical&_facet=level",
                                   "_item_topics=Triton&_sort_desc=alphabetical", "_sort_desc=newest_first",
                                   "_sort_desc=longest_first"])
def test_a_next_page_counts_the_facets_of_the_whole_list(ds, query):
    """Datasette counts a next page's facets over the talks after its cursor; these are the
    list's, the first page's (cached on the served file), and selecting a value starts the list
    again. Every sort key is met, both ways."""
    def facets(page):
        return {name: [(value["value"], value["count"]) for value in facet["results"]]
                for name, facet in page["facet_results"].items()}

    first = get(ds, f"/talks/talks.json?_size=4&{query}").json()
    path, pages = first["next_url"], 0
    while path and pages < 3:
        page = get(ds, path.split("localhost", 1)[-1]).json()
        assert facets(page) == facets(first) and len(facets(first)) >= 7
        toggles = [value["toggle_url"] for facet in page["facet_results"].values() for value in facet["results"]]
        assert toggles and not [url for url in toggles if "_next=" in url]
        path, pages = page["next_url"], pages + 1
    assert pages >= 1


def test_a_topics_talks_are_read_oldest_first_for_the_filters_and_newest_first_for_its_page(snapshot_db):
    """talk_items keeps a code's talks by newest_first descending: a filter's `rowid in (select
    talk ...)` reads them oldest first, the undated in the order the build wrote them (its
    look-up list was twice as slow to build at 100,000 talks read the other way); a topic's
    newest are the same range read backwards, with no sort."""
    code = snapshot_db.execute("select code from talk_facet_values where facet = 'sources' and value = 'github'"
                               ).fetchone()[0]
    read = [row[0] for row in snapshot_db.execute("select talk from talk_items where code = ?", [code])]
    dated = {row[0] for row in snapshot_db.execute("select rowid from talks where date is not null")}
    undated = [talk for talk in read if talk not in dated]
    assert len(undated) >= 50 and undated == sorted(undated)
    newest = "select talk from talk_items where code = ? order by newest_first limit 10"
    assert "USE TEMP B-TREE" not in str(snapshot_db.execute("explain query plan " + newest, [code]).fetchall())
    assert [row[0] for row in snapshot_db.execute(newest, [code])] == [row[0] for row in snapshot_db.execute(
        "select t.rowid from talks t join talk_items i on i.talk = t.rowid where i.code = ? "
        "order by t.newest_first limit 10", [code])]


def test_newest_first_is_by_the_best_known_date_to_its_precision(ds, snapshot_db):
    """A talk known by its year alone (most GTC sessions: the event's year) sorts by that year,
    after that year's dated talks; the list opens with the newest years; a speaker's page and the
    Year facet follow the same dates."""
    first = get(ds, "/talks/talks.json?_size=10&_shape=objects&_col=year&_col=date").json()["rows"]
    years = [row["year"] for row in first]
    assert None not in years and years == sorted(years, reverse=True) and years[0] == 2026
    assert all(len(row["date"]) in (4, 7, 10) for row in first)  # "2026", never a made-up day
    page = BeautifulSoup(get(ds, "/talks/speakers/stephen-jones").text, "html.parser")
    shown = [int(re.search(r"\b(20\d\d)\b", li.get_text()).group(1)) for li in page.select("li") if "GTC" in li.get_text()]
    assert len(shown) == 7 and shown == sorted(shown, reverse=True)
    facet = {r["value"]: r["count"] for r in get(ds, "/talks/talks.json?_size=0&_facet_size=max").json()
             ["facet_results"]["year"]["results"]}
    assert sum(facet.values()) == snapshot_db.execute("select count(*) from talks where year is not null").fetchone()[0]
    assert facet[2021] == snapshot_db.execute("select count(*) from talks where year = 2021").fetchone()[0]
