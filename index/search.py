"""Search inside talks from the command line, with the same SQL as the
`search_inside_talks` canned query in metadata.json (one definition)."""

from __future__ import annotations

import json
from typing import Any

import sqlite_utils
from datasette.utils import escape_fts

from .resources import METADATA

QUERY = "search_inside_talks"


def inside_sql() -> str:
    return json.loads(METADATA.read_text(encoding="utf-8"))["databases"]["talks"]["queries"][QUERY]["sql"]


def search_inside(db: sqlite_utils.Database, query: str, limit: int = 10,
                  talk_id: str = "") -> list[dict[str, Any]]:
    """Best chapter and transcript hits: talk, chapter, snippet, deep_link, start_s, kind.

    `talk_id` narrows the search to one talk; empty means every talk."""
    db.conn.create_function("escape_fts", 1, escape_fts)
    return list(db.query(inside_sql(), {"q": query, "talk": talk_id}))[:limit]
