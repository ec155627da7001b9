"""Search from the command line with the same SQL as the site: the `search_talks` and
`search_inside_talks` canned queries in metadata.json (one definition each), the reader's
words turned into FTS5 by the plugin's gputalks_query (one ranking)."""

from __future__ import annotations

import json
from typing import Any

import sqlite_utils
from datasette.utils import escape_fts

from .resources import METADATA

INSIDE_QUERY, TALKS_QUERY = "search_inside_talks", "search_talks"


def canned_sql(name: str) -> str:
    return json.loads(METADATA.read_text(encoding="utf-8"))["databases"]["talks"]["queries"][name]["sql"]


def search_talks(db: sqlite_utils.Database, query: str, limit: int = 10) -> list[dict[str, Any]]:
    """Talks for a reader's words, best first, as `/search` ranks them: id, title, speakers,
    series, event, date, duration_s, topics, excerpt."""
    from ..datasette.plugins.gputalks_query import register

    register(db.conn)
    return list(db.query(canned_sql(TALKS_QUERY).replace("'[', ']'", "'', ''"), {"q": query}))[:limit]


def search_inside(db: sqlite_utils.Database, query: str, limit: int = 10,
                  talk_id: str = "") -> list[dict[str, Any]]:
    """Best chapter and transcript hits: talk, chapter, snippet, deep_link, start_s, kind.

    `talk_id` narrows the search to one talk; empty means every talk."""
    db.conn.create_function("escape_fts", 1, escape_fts)
    return list(db.query(canned_sql(INSIDE_QUERY), {"q": query, "talk": talk_id}))[:limit]
