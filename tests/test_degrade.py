"""Every reader page degrades, never 500s: a query past Datasette's time limit answers a 400 that
says to narrow the list (no SQL, no traceback); a search longer than the stated limit is refused
with the limit at once; a group's counts come from the build, not from counting each request."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest

from gputalks.datasette.errors import past_time_limit
from gputalks.search.query import MAX_QUERY_BYTES, MAX_QUERY_WORDS
from gputalks.site.serve import served_datasette

from tests.test_datasette import get

READER_PAGES = ["/series/GPU%20MODE", "/series/GPU%20MODE.atom", "/event/GTC%202024", "/topic/Triton",
                "/topic/Triton.atom", "/speaker/stephen-jones.atom", "/search?q=how+to+write+a+cuda+kernel",
                "/search.json?q=cuda", "/talks/talks/gpumode-lecture-012", "/talks/speakers/stephen-jones"]


@pytest.fixture
def impatient(snapshot_db_path):
    """The served snapshot, its time limit then set to nothing: every query a page runs is interrupted."""
    ds = served_datasette(snapshot_db_path)
    get(ds, "/talks/talks.json?_size=1")  # Datasette's own start-up queries, with the limit it started with
    ds.sql_time_limit_ms = 0
    return ds


@pytest.mark.parametrize("path", READER_PAGES)
def test_a_page_past_the_time_limit_says_to_narrow_the_list(impatient, path, capsys):
    response = get(impatient, path)
    assert response.status_code == 400, response.text[:300]
    assert "too large to count in time; narrow it" in response.text
    assert "select " not in response.text.lower() and "Traceback" not in capsys.readouterr().err


def test_an_interrupt_while_fts5_opens_its_table_is_a_time_out(snapshot_db_path):
    """SQLite's interrupt can land inside FTS5's constructor, which then says "vtable constructor
    failed", not "interrupted" (a /search past the limit answered 500 on a busy machine)."""
    failures = set()
    for step in range(1, 2000):  # interrupt at each VM step of a fresh connection's first search
        with sqlite3.connect(f"file:{snapshot_db_path}?mode=ro", uri=True) as conn:
            steps = iter(range(step))
            conn.set_progress_handler(lambda: next(steps, None) is None, 1)
            try:
                conn.execute("select rowid from talks_fts where talks_fts match 'cuda'").fetchall()
            except sqlite3.OperationalError as exc:
                failures.add(str(exc))
                # plain "interrupted" Datasette itself raises as QueryInterrupted
                assert exc.args == ("interrupted",) or past_time_limit(exc), exc
    assert "vtable constructor failed: talks_fts" in failures and "interrupted" in failures


@pytest.mark.parametrize("path", ["/search?q=", "/search.json?q="])
def test_a_pasted_page_is_refused_with_the_limit_at_once(ds, path):
    words = " ".join(["what", "is", "the", "difference", "between", "cutlass", "and", "triton"] * 320)
    started = time.perf_counter()
    response = get(ds, path + words.replace(" ", "+"))
    assert time.perf_counter() - started < 0.5
    assert response.status_code == 400
    assert f"at most {MAX_QUERY_WORDS} words and {MAX_QUERY_BYTES} bytes" in response.text
    assert "select" not in response.text.lower()
    fits = get(ds, path + "+".join(["cutlass"] * MAX_QUERY_WORDS))
    assert fits.status_code == 200


def test_group_counts_are_the_builds(ds, snapshot_db_path):
    """The GPU MODE series lists its newest 100 of 120 talks and says 120, read from group_stats;
    a talk the index no longer lists counts nowhere."""
    with sqlite3.connect(snapshot_db_path) as conn:
        stats = conn.execute("select talks, timed, seconds from group_stats where kind = 'series' "
                             "and name = 'GPU MODE'").fetchone()
        live = conn.execute("select count(*), count(duration_s), sum(duration_s) from talks where series = 'GPU MODE' "
                            "and gone_since is null").fetchone()
    assert stats == live and stats[0] == 120
    page = asyncio.run(ds.client.get("/series/GPU%20MODE")).text
    assert "120 talks" in page


@pytest.mark.parametrize("column, value", [("topics", "Triton"), ("speakers", "Stephen Jones"), ("sources", "gtc")])
def test_datasettes_array_filter_takes_the_indexed_path(ds, snapshot_db_path, column, value):
    """`topics__arraycontains=` (what API clients send) finds what it always found, through the
    talk_items range the `_item_` links read, not by opening every talk's JSON."""
    from tests.test_datasette import traced_sql

    path = f"/talks/talks.json?{column}__arraycontains={value.replace(' ', '+')}&_size=max&_shape=objects&_col=id"
    with sqlite3.connect(snapshot_db_path) as conn:
        expected = {row[0] for row in conn.execute(
            f"select id from talks where exists (select 1 from json_each({column}) where value = ?)", [value])}
    found = {row["id"] for row in get(ds, path).json()["rows"]}
    assert found == expected and found
    traced = served_datasette(snapshot_db_path)
    traced._settings["trace_debug"] = True  # Datasette's SQL trace, on the app its client serves
    traced.client.app = traced.app()
    listed = [sql for sql in traced_sql(traced, path) if sql.startswith("select id")]
    assert listed and all("talk_items" in sql for sql in listed)
