"""What makes a served file a gputalks index to Datasette: its metadata.json (title, canned
queries, facets, labels) for every database that is a gputalks index, so a plain
`datasette talks.db` with gputalks installed serves the reader's pages."""

from __future__ import annotations

import json
import sqlite3
from weakref import WeakKeyDictionary

from gputalks.project.resources import METADATA
from gputalks.search.ranking import canned_queries

# The tables every gputalks index has (index/schema.py).
INDEX_TABLES = ("talks", "talk_changes", "refresh_runs")
# Each Datasette's metadata, keyed by the database names it had when it was made.
METADATA_OF: WeakKeyDictionary = WeakKeyDictionary()


def is_index(path: str | None) -> bool:
    """Whether the file at `path` is a gputalks index (read-only look at its schema)."""
    if not path:
        return False
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            found = conn.execute(f"select count(*) from sqlite_master where type = 'table' and name in "
                                 f"({', '.join('?' * len(INDEX_TABLES))})", INDEX_TABLES).fetchone()[0]
        return found == len(INDEX_TABLES)
    except sqlite3.Error:
        return False


def index_metadata(datasette) -> dict:
    """metadata.json with its `talks` database section under the name of each served index
    (Datasette names a database after its file's stem); empty where none is an index."""
    names = tuple(datasette.databases)
    known = METADATA_OF.get(datasette)
    if known is not None and known[0] == names:
        return known[1]
    indexes = [name for name, db in datasette.databases.items() if not db.is_memory and is_index(db.path)]
    metadata: dict = {}
    if indexes and METADATA.is_file():
        metadata = json.loads(METADATA.read_text(encoding="utf-8"))
        section = metadata.get("databases", {}).pop("talks", {})
        for name, sql in canned_queries().items():  # the search's SQL lives in gputalks/search/
            section.setdefault("queries", {}).setdefault(name, {})["sql"] = sql
        metadata["databases"] = {name: section for name in indexes}
    METADATA_OF[datasette] = (names, metadata)
    return metadata
