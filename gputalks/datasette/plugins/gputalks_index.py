"""What makes a served file a gputalks index to Datasette: its metadata.json (title, canned
queries, facets, labels) for every database that is a gputalks index, so a plain
`datasette talks.db` with gputalks installed serves the reader's pages; and error pages that
tell a reader what to do.

Installed, this module and the others here are registered by gputalks' entry points
(`[project.entry-points.datasette]`); in a published container, where gputalks itself is
not installed, they are loaded from a plugins directory and the metadata comes from the
`--metadata` file Datasette is given.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from weakref import WeakKeyDictionary

from datasette import Response, hookimpl
from markupsafe import Markup

from gputalks.index.order import SORT_KEYS
from gputalks.search.ranking import canned_queries

# metadata.json beside this folder, when the plugins run from the installed package.
METADATA = Path(__file__).resolve().parents[2] / "metadata.json"
# The tables every gputalks index has (index/schema.py).
INDEX_TABLES = ("talks", "talk_changes", "refresh_runs")
# What the talks sort by (gputalks.index.order), as an error names it.
SORTS = ", ".join(f"{key} ({column})" for column, key in SORT_KEYS.items())
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


@hookimpl
def get_metadata(datasette, key, database, table):
    return index_metadata(datasette)


# The headers Datasette's own answers carry under --cors.
CORS_HEADERS = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Headers": "Authorization",
                "Access-Control-Expose-Headers": "Link"}


def error_answer(request, exception) -> tuple[int, object, str | None, dict] | None:
    """(status, message, title, details) for what a reader asked wrong: a 4xx that says what to do;
    None for a server fault, which Datasette's own handler answers (and logs)."""
    if "fts5: syntax error" in str(getattr(exception, "message", exception)) and "_search" in request.args \
            and not any(c.isalnum() for c in request.args["_search"]):  # quotes alone: Datasette's search is empty
        return 400, "Type a word to search for: the search held none", "Nothing to search for", {}
    status = getattr(exception, "status", None)
    message = getattr(exception, "message", None) or (exception.args[0] if exception.args else "")
    if str(message).startswith("Cannot sort table by"):  # a reader's sort (Datasette says 500): a column with ties
        return 400, f"{message}; " + (
            f"the talks sort by {SORTS}" if request.url_vars.get("table") == "talks"
            else "it sorts by its unique columns") + ", which page without skipping a row", None, {}
    if isinstance(status, int) and 400 <= status < 500:  # Datasette's 4xx errors, as it says them
        if getattr(exception, "message_is_html", False):
            message = Markup(message)
        return status, message, getattr(exception, "title", None), dict(getattr(exception, "error_dict", None) or {})
    if isinstance(exception, (sqlite3.ProgrammingError, sqlite3.Warning)):  # SQL a reader wrote
        return 400, f"Invalid SQL: {exception}", "Invalid SQL", {}
    return None


@hookimpl(tryfirst=True)
def handle_exception(datasette, request, exception):
    """Error pages for a reader's mistakes, as Datasette renders them (its error.html), with
    what to do instead; a server fault is left to Datasette's own handler."""
    answer = error_answer(request, exception)
    if answer is None:
        return None

    async def inner():
        status, message, title, details = answer
        info = {**details, "ok": False, "error": message, "status": status, "title": title}
        headers = dict(CORS_HEADERS) if datasette.cors else {}
        if request.path.split("?")[0].endswith(".json"):
            return Response.json(info, status=status, headers=headers)
        html = await datasette.render_template([f"{status}.html", "error.html"], info, request=request)
        return Response.html(html, status=status, headers=headers)

    return inner
