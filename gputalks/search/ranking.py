"""The ranked searches as SQL (talks.sql, inside.sql beside this file: one definition each),
for the served pages, the canned queries of the same names and `gputalks search`; the reader's
words become FTS5 through search/query.py."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from string import Template
from typing import Any

import sqlite_utils

from gputalks.search.functions import register

HERE = Path(__file__).parent
# What each tier of talks.sql says of a result, and the tier of talks holding only some words.
MATCHES = {0: "all your words", 1: "all your words", 2: "most of your words", 3: "related topic",
           4: "some of your words"}
SOME_WORDS = 4
# The canned queries (metadata.json) whose SQL is these files.
TALKS_QUERY, INSIDE_QUERY = "search_talks", "search_inside_talks"


@cache
def _text(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


def talks_sql(open_mark: str = "[", close_mark: str = "]") -> str:
    """The ranking of talks, its excerpt's matched words between `open_mark` and `close_mark`."""
    return Template(_text("talks.sql")).substitute(open=open_mark, close=close_mark)


def inside_sql() -> str:
    return _text("inside.sql")


def canned_queries() -> dict[str, str]:
    """The SQL of the canned queries these files define, by name."""
    return {TALKS_QUERY: talks_sql(), INSIDE_QUERY: inside_sql()}


def search_talks(db: sqlite_utils.Database, query: str, limit: int = 10) -> list[dict[str, Any]]:
    """Talks for a reader's words, best first, as `/search` ranks them: id, title, speakers,
    series, event, date, duration_s, topics, excerpt."""
    register(db.conn)
    return list(db.query(talks_sql("", ""), {"q": query}))[:limit]


def search_inside(db: sqlite_utils.Database, query: str, limit: int = 10,
                  talk_id: str = "") -> list[dict[str, Any]]:
    """Best chapter and transcript hits: talk, chapter, snippet, deep_link, start_s, kind.

    `talk_id` narrows the search to one talk; empty means every talk."""
    register(db.conn)
    return list(db.query(inside_sql(), {"q": query, "talk": talk_id}))[:limit]
